"""ReversibleEmbedding (issue 30, item 4) against Keras 3.15 on JAX (the
oracle): one layer called forward on ids and back (reverse=True) on hidden
states, tied and untied weights, the logit soft cap and mask_zero; the same
weights (set_weights) give the same logits, a few SGD steps the same weights;
paths, names, config, save and load, eager calls; the errors."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402
from test_nn_layers_more import _both, _names_and_config, _train_same, _x  # noqa: E402

RNG = np.random.default_rng(44)
CASES = {"tied": {}, "untied": {"tie_weights": False},
         "soft_cap_mask_zero": {"logit_soft_cap": 2.0, "mask_zero": True}}


def _language_model(**kw):
    """build(lib): ids (5,) -> embedding -> Dense -> the same embedding reversed."""
    def build(lib):
        L = lib.layers if lib is keras else lib
        ids = lib.Input((5,), dtype="int32")
        emb = L.ReversibleEmbedding(11, 4, **kw)
        return lib.Model(ids, emb(L.Dense(4)(emb(ids)), reverse=True))
    return build


def _ids(n=3):
    ids = RNG.integers(1, 11, size=(n, 5)).astype(np.int32)
    ids[0, 3:] = 0  # padding, masked with mask_zero
    return ids


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_match_keras(case):
    t, k = _both(_language_model(**CASES[case]), scale=0.8)
    x = _ids()
    got = t.predict(x, verbose=0)
    assert got.shape == (3, 5, 11)
    np.testing.assert_allclose(got, np.asarray(k(x)), rtol=1e-5, atol=2e-6)
    assert t.outputs[0]._keras_mask is None  # Keras: no mask on the projection


@pytest.mark.parametrize("case", sorted(CASES))
def test_sgd_steps_match_keras(case):
    t, k = _both(_language_model(**CASES[case]), scale=0.5)
    x = _ids(4)
    _train_same(t, k, x, _x(4, 5, 11), steps=3, lr=0.1)


def test_paths_names_config_and_saved_model(tmp_path):
    keras.backend.clear_session()
    nn.utils.clear_session()
    t = _language_model(tie_weights=False, logit_soft_cap=3.0)(nn)
    keras.backend.clear_session()
    k = _language_model(tie_weights=False, logit_soft_cap=3.0)(keras)
    assert [(w.path, tuple(w.shape)) for w in t.weights] == \
        [(w.path, tuple(w.shape)) for w in k.weights]
    t_layer, k_layer = t.layers[1], k.layers[1]
    again = _names_and_config(t_layer, k_layer)
    assert (again.tie_weights, again.logit_soft_cap) == (False, 3.0)
    for key in ("input_dim", "output_dim", "tie_weights", "logit_soft_cap"):
        assert t_layer.get_config()[key] == k_layer.get_config()[key]
    path = str(tmp_path / "lm.keras")
    t.save(path)
    x = _ids()
    np.testing.assert_array_equal(nn.load_model(path).predict(x, verbose=0),
                                  t.predict(x, verbose=0))


def test_eager_calls_match_numpy():
    layer = nn.ReversibleEmbedding(7, 3, logit_soft_cap=1.5)
    ids = np.array([[1, 2, 6]], np.int32)
    h = np.asarray(layer(ids))
    table = layer.get_weights()[0]
    np.testing.assert_allclose(h, table[ids], rtol=1e-6)
    x = _x(2, 3)
    np.testing.assert_allclose(np.asarray(layer(x, reverse=True)),
                               np.tanh(x @ table.T / 1.5) * 1.5, rtol=1e-5, atol=1e-6)


def test_errors_name_the_layer_and_the_values():
    with pytest.raises(ValueError, match=r"\[ReversibleEmbedding\] logit_soft_cap must be None "
                                         r"or a positive number, got -1"):
        nn.ReversibleEmbedding(5, 3, logit_soft_cap=-1)
    with pytest.raises(ValueError, match=r"\[ReversibleEmbedding\] reverse_dtype other than the "
                                         r"layer's dtype \('float32'\) is not supported, got "
                                         r"'float64'"):
        nn.ReversibleEmbedding(5, 3, reverse_dtype="float64")
    layer = nn.ReversibleEmbedding(5, 3)
    with pytest.raises(ValueError, match=r"\[ReversibleEmbedding\] reverse=True takes inputs "
                                         r"\(\.\.\., output_dim=3\), got \(None, 4, 2\)"):
        layer(nn.Input((4, 2)), reverse=True)
    with pytest.raises(TypeError, match=r"\[ReversibleEmbedding\] reverse must be True or "
                                        r"False, got 1"):
        layer(nn.Input((4, 3)), reverse=1)
