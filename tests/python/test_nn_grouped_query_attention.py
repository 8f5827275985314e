"""GroupQueryAttention (issue 30, item 4) against Keras 3.15 on JAX (the
oracle): the same model in both with the same weights (set_weights), outputs
and returned scores compared for grouped, multi-query and plain heads, the
gate, the sliding window, causal and explicit masks, and the inputs' own
masks; a few SGD steps; weight paths, names and the config; the fused
primitive used when only the causal mask applies (k and v repeated first),
equal to the composed path with gradients; constraints; the errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402
from tessera.nn.layers import multi_head_attention as mha_module  # noqa: E402
from test_nn_attention_fused import _grads, _program_calls_attention  # noqa: E402
from test_nn_layers_more import _both, _names_and_config, _train_same, _x  # noqa: E402

ARGS = {"head_dim": 3, "num_query_heads": 4, "num_key_value_heads": 2}


def _gqa(lib, **kw):
    L = lib.layers if lib is keras else lib
    return L.GroupQueryAttention(**{**ARGS, **kw})


def _cross(layer_kw=None, call_kw=None, with_key=False, tq=6, tv=5):
    """build(lib): query (tq, 8), value (tv, 8) (and key (tv, 7)) -> the layer."""
    def build(lib):
        q, v = lib.Input((tq, 8)), lib.Input((tv, 8))
        ins = [q, v]
        extra = {}
        if with_key:
            extra["key"] = lib.Input((tv, 7))
            ins.append(extra["key"])
        out = _gqa(lib, **(layer_kw or {}))(q, v, **extra, **(call_kw or {}))
        return lib.Model(ins, out)
    return build


def _inputs(n=3, tq=6, tv=5, with_key=False):
    return [_x(n, tq, 8), _x(n, tv, 8)] + ([_x(n, tv, 7)] if with_key else [])


CASES = {
    "grouped": ({}, {}),
    "multi_query": ({"num_key_value_heads": 1}, {}),
    "as_many_kv_heads": ({"num_key_value_heads": 4}, {}),
    "gate": ({"use_gate": True}, {}),
    "no_bias": ({"use_bias": False, "use_gate": True}, {}),
    "causal": ({}, {"use_causal_mask": True}),
    "window": ({"sliding_window": 2}, {}),
    "causal_window": ({"sliding_window": 3}, {"use_causal_mask": True}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("with_key", [False, True], ids=["kv", "key"])
def test_outputs_match_keras(case, with_key):
    layer_kw, call_kw = CASES[case]
    t, k = _both(_cross(layer_kw, call_kw, with_key), scale=0.5)
    x = _inputs(with_key=with_key)
    got = t.predict(x, verbose=0)
    assert got.shape == (3, 6, 8)
    np.testing.assert_allclose(got, np.asarray(k(x)), rtol=1e-5, atol=2e-6)


def test_self_attention_scores_and_masks_match_keras():
    def build(lib):
        q = lib.Input((6, 8))
        mask = lib.Input((6, 6), dtype="bool")
        out, scores = _gqa(lib, use_gate=True, sliding_window=4)(
            q, q, attention_mask=mask, use_causal_mask=True, return_attention_scores=True)
        return lib.Model([q, mask], [out, scores])

    t, k = _both(build, scale=0.5)
    mask = RNG_MASK.random((3, 6, 6)) < 0.7
    mask[:, :, 0] = True  # every query keeps a key (the causal band holds key 0)
    x = [_x(3, 6, 8), mask]
    got, want = t.predict(x, verbose=0), k(x)
    assert got[1].shape == (3, 4, 6, 6)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=2e-6)


RNG_MASK = np.random.default_rng(7)


@pytest.mark.parametrize("scores", [False, True], ids=["output", "scores"])
def test_padding_masks_of_the_inputs_match_keras(scores):
    """The inputs' own masks (Embedding mask_zero) become the query and value
    masks, as in Keras; a key padding mask given as attention_mask (batch, 1, Tv)."""
    def build(lib):
        L = lib.layers if lib is keras else lib
        ids = lib.Input((6,), dtype="int32")
        pad = lib.Input((1, 6), dtype="bool")
        x = L.Embedding(10, 8, mask_zero=True)(ids)
        out = _gqa(lib)(x, x, attention_mask=pad, return_attention_scores=scores)
        return lib.Model([ids, pad], list(out) if scores else out)

    t, k = _both(build, scale=0.5)
    ids = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]], np.int32)
    pad = np.ones((2, 1, 6), bool)
    pad[1, 0, 4:] = False
    x = [ids, pad]
    got, want = t.predict(x, verbose=0), k(x)
    for a, b in zip(got if scores else [got], want if scores else [want]):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("case", ["grouped_gate_causal", "window_no_bias"])
def test_sgd_steps_match_keras(case):
    if case == "grouped_gate_causal":
        build = _cross({"use_gate": True}, {"use_causal_mask": True}, tq=5, tv=5)
    else:
        build = _cross({"sliding_window": 2, "use_bias": False, "num_key_value_heads": 1},
                       with_key=True, tq=5, tv=5)
    t, k = _both(build, scale=0.4)
    x = _inputs(n=4, tq=5, tv=5, with_key=case != "grouped_gate_causal")
    y = _x(4, 5, 8)
    _train_same(t, k, x, y, steps=3, lr=0.1)


def test_weight_paths_names_and_config_match_keras():
    def paths(lib):
        keras.backend.clear_session()
        nn.utils.clear_session()
        model = _cross({"use_gate": True}, with_key=True)(lib)
        layer = model.layers[-1]
        return layer, [(w.path, tuple(w.shape)) for w in model.weights]

    t_layer, ours = paths(nn)
    k_layer, theirs = paths(keras)
    assert ours == theirs
    assert t_layer.name == k_layer.name == "grouped_query_attention"
    again = _names_and_config(t_layer, k_layer)
    config = t_layer.get_config()
    for key in ("head_dim", "num_query_heads", "num_key_value_heads", "use_gate"):
        assert config[key] == k_layer.get_config()[key]
    assert (again.num_key_value_heads, again.use_gate) == (2, True)


def test_saved_model_loads_with_the_same_outputs(tmp_path):
    model = _cross({"use_gate": True, "sliding_window": 3}, {"use_causal_mask": True})(nn)
    path = str(tmp_path / "gqa.keras")
    model.save(path)
    x = _inputs()
    np.testing.assert_array_equal(nn.load_model(path).predict(x, verbose=0),
                                  model.predict(x, verbose=0))


@pytest.fixture
def composed():
    yield lambda on: setattr(mha_module, "FUSED", not on)
    mha_module.FUSED = True


def test_fused_path_repeats_keys_and_equals_the_composed_one(composed):
    def model():
        q = nn.Input((6, 8))
        return nn.Model(q, _gqa(nn, use_gate=True)(q, q, use_causal_mask=True), dtype="float64")

    x = np.random.default_rng(3).normal(size=(3, 6, 8))
    r = np.random.default_rng(4).normal(size=(3, 6, 8))
    assert _program_calls_attention(model(), x.astype(np.float32))
    results = []
    for ref in (False, True):
        composed(ref)
        m = model()
        if not results:
            w = [np.random.default_rng(5).normal(size=a.shape) * 0.5 for a in m.get_weights()]
        m.set_weights(w)
        results.append((m.predict(x, verbose=0), _grads(m, x, r)))
    (out, grads), (ref_out, ref_grads) = results
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    for g, e in zip(grads, ref_grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-13)
    assert all(np.abs(g).max() > 0 for g in grads)
    q = nn.Input((6, 8))
    windowed = nn.Model(q, _gqa(nn, sliding_window=2)(q, q, use_causal_mask=True))
    assert not _program_calls_attention(windowed, x.astype(np.float32))


def test_kernel_and_bias_constraints_apply_to_every_projection():
    def model(**kw):
        return _cross({"use_gate": True, **kw})(nn)

    free, constrained = model(), model(kernel_constraint="non_neg", bias_constraint="non_neg")
    w = [np.random.default_rng(6).normal(size=a.shape).astype(np.float32) * 0.5
         for a in free.get_weights()]
    x, y = _inputs(n=4), _x(4, 6, 8)
    for m in (free, constrained):
        m.set_weights(w)
        m.compile(nn.optimizers.SGD(0.1), "mse")
        m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    after = free.get_weights()
    assert any((a < 0).any() for a in after)
    for a, b in zip(after, constrained.get_weights()):
        np.testing.assert_allclose(b, np.maximum(a, 0), rtol=1e-6, atol=1e-7)


def test_errors_name_the_layer_and_the_values():
    with pytest.raises(ValueError, match=r"\[GroupQueryAttention\] num_query_heads must be "
                                         r"divisible by num_key_value_heads, got "
                                         r"num_query_heads=4 and num_key_value_heads=3"):
        nn.GroupQueryAttention(3, 4, 3)
    with pytest.raises(ValueError, match=r"\[GroupQueryAttention\] sliding_window must be a "
                                         r"positive int, got 0"):
        nn.GroupQueryAttention(3, 4, 2, sliding_window=0)
    with pytest.raises(ValueError, match=r"\[GroupQueryAttention\] num_key_value_heads must be "
                                         r"a positive int, got 0"):
        nn.GroupQueryAttention(3, 4, 0)
    with pytest.raises(ValueError, match=r"dropout is not supported with flash_attention=True"):
        nn.GroupQueryAttention(3, 4, 2, dropout=0.1, flash_attention=True)
    with pytest.raises(TypeError, match=r"\[GroupQueryAttention\] the Keras argument "
                                        r"'activity_regularizer' is not supported"):
        nn.GroupQueryAttention(3, 4, 2, activity_regularizer="l2")
    with pytest.raises(TypeError, match=r"\[GroupQueryAttention\] unexpected keyword argument "
                                        r"'num_heads'"):
        nn.GroupQueryAttention(3, 4, 2, num_heads=4)
    with pytest.raises(TypeError, match=r"\[GroupQueryAttention\] unexpected keyword argument "
                                        r"'attention_axes' \(a MultiHeadAttention argument"):
        nn.GroupQueryAttention(3, 4, 2, attention_axes=(1,))
    q, v = nn.Input((6, 8)), nn.Input((5, 7))
    with pytest.raises(ValueError, match=r"\[GroupQueryAttention\] query and value must have "
                                         r"the same last dimension, got query \(None, 6, 8\) "
                                         r"and value \(None, 5, 7\)"):
        nn.GroupQueryAttention(3, 4, 2)(q, v)
    with pytest.raises(ValueError, match=r"return_attention_scores=True is not supported with "
                                         r"flash_attention=True"):
        nn.GroupQueryAttention(3, 4, 2, flash_attention=True)(q, q, return_attention_scores=True)
