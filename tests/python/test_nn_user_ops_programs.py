"""Issue 30: Keras 3 user programs written with keras.ops (tests/python/user_ops_programs.py)
run under Keras 3 on JAX and under tessera.nn with only the import changed: the same
initial weights and data give the same predictions, the same losses over a few fit steps,
and tessera's saved-and-loaded model predicts what it predicted before saving."""

import numpy as np
import pytest
import user_ops_programs as progs

import tessera.nn as tn
from tessera.nn import output_nesting

DETERMINISTIC = ["rms_norm", "rotary_embedding", "swiglu_geglu", "causal_attention",
                 "focal_loss", "dice_loss", "contrastive_siamese", "label_smoothing",
                 "fbeta_metric", "custom_regularizer", "custom_constraint", "window_mask",
                 "top_k_sort", "segment_pool", "cumsum_positions", "squeeze_excite",
                 "patch_extraction", "learnable_temperature", "build_and_output_shape",
                 "nested_layers", "vae_sampling", "gumbel_softmax", "compute_loss_override"]


def _compiled(lib, program):
    opt = {"sgd": lib.optimizers.SGD, "adam": lib.optimizers.Adam}[program.optimizer]
    program.model.compile(opt(program.lr), loss=program.loss, metrics=program.metrics)
    return program.model


def _run(lib, name, weights=None):
    program = getattr(progs, name)(lib)
    if weights is None and program.adjust is not None:
        weights = program.adjust(program.model.get_weights())
    if weights is not None:
        program.model.set_weights(weights)
    weights = program.model.get_weights()
    before = np.asarray(program.model.predict(program.x, batch_size=8, verbose=0))
    first = program.x[:3] if not isinstance(program.x, list) else [a[:3] for a in program.x]
    eager = np.asarray(program.model(first))  # a call on arrays, as predict computes
    np.testing.assert_allclose(eager, before[:3], rtol=1e-5, atol=1e-6)
    model = _compiled(lib, program)
    history = model.fit(program.x, program.y, batch_size=8, epochs=2, shuffle=False,
                        verbose=0).history
    after = np.asarray(model.predict(program.x, batch_size=8, verbose=0))
    return program, weights, before, history, after


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_program_runs_as_keras(keras, tmp_path, name):
    _, weights, k_before, k_hist, k_after = _run(keras, name)
    program, _, t_before, t_hist, t_after = _run(tn, name, weights)
    np.testing.assert_allclose(t_before, k_before, rtol=1e-5, atol=1e-5)
    assert sorted(t_hist) == sorted(k_hist)
    for key in k_hist:
        np.testing.assert_allclose(t_hist[key], k_hist[key], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(t_after, k_after, rtol=1e-4, atol=1e-5)
    assert np.abs(k_after - k_before).max() > 1e-4  # fit changed the weights: can fail
    path = str(tmp_path / f"{name}.keras")
    program.model.save(path)
    loaded = tn.saving.load_model(path, custom_objects=program.custom_objects)
    np.testing.assert_allclose(loaded.predict(program.x, batch_size=8, verbose=0), t_after,
                               rtol=1e-6, atol=1e-6)


def _random_layer(lib, name, cls, **kwargs):
    return getattr(progs, name)(lib).custom_objects[cls](**kwargs)


def test_random_layers_sample_as_keras(keras):
    """keras.random with a SeedGenerator inside call, eagerly: the VAE's sampling layer and
    a Gumbel-softmax draw from the same distributions as Keras's (the draws themselves
    differ: moments compared), and each call draws anew."""
    rng = np.random.default_rng(3)
    mean = np.repeat(rng.normal(size=(1, 3)), 4000, 0).astype("float32")
    log_var = np.repeat(rng.normal(size=(1, 3)), 4000, 0).astype("float32")
    logits = np.repeat(rng.normal(size=(1, 4)), 4000, 0).astype("float32")
    std = np.exp(log_var[0] / 2)
    for lib in (keras, tn):
        sampling = _random_layer(lib, "vae_sampling", "Sampling")
        a, b = (np.asarray(sampling([mean, log_var])) for _ in range(2))
        assert not np.allclose(a, b)  # the generator advances
        np.testing.assert_allclose(a.mean(0), mean[0], atol=0.1 * std.max())
        np.testing.assert_allclose(a.std(0), std, rtol=0.08)
        gumbel = _random_layer(lib, "gumbel_softmax", "GumbelSoftmax", temperature=0.1)
        g = np.asarray(gumbel(logits, training=True))
        np.testing.assert_allclose(g.sum(-1), 1.0, rtol=1e-5)
        # the argmax of logits + Gumbel noise is a draw from softmax(logits)
        freq = np.bincount(g.argmax(-1), minlength=4) / len(g)
        want = np.exp(logits[0]) / np.exp(logits[0]).sum()
        np.testing.assert_allclose(freq, want, atol=0.03)
        hard = np.asarray(gumbel(logits, training=False))
        np.testing.assert_array_equal(hard, np.eye(4)[np.argmax(logits, -1)])


def _pair_layer(lib):
    class Gate(lib.layers.Layer):
        def call(self, inputs, scale=None):
            a, b = inputs["a"], inputs["b"]
            return a * lib.ops.sigmoid(b) + scale

    return Gate


def test_saved_user_layer_is_called_with_its_arguments_structure(tmp_path):
    """A user layer called with a list (keras-io's Sampling()([z_mean, z_log_var])), a dict
    or a tensor keyword is called the same way by load_model (it got the tensors as
    positional arguments); a file whose call entry does not name each input once is
    refused by name."""
    Gate = _pair_layer(tn)
    a, b, c = tn.Input((3,)), tn.Input((3,)), tn.Input((3,))
    model = tn.Model([a, b, c], Gate()({"a": a, "b": b}, scale=c))
    x = [progs._data((4, 3), s) for s in range(3)]
    want = x[0] / (1 + np.exp(-x[1])) + x[2]
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-5)
    path = str(tmp_path / "gate.keras")
    model.save(path)
    loaded = tn.saving.load_model(path, custom_objects={"Gate": Gate})
    np.testing.assert_allclose(loaded.predict(x, verbose=0), want, rtol=1e-5)
    ctx = type("Ctx", (), {"error": staticmethod(ValueError)})
    ins = ["x0", "x1"]
    assert output_nesting.call_arguments({"call": {"args": [[1, 0]], "kwargs": {}}}, ins,
                                         ctx) == ([["x1", "x0"]], {})
    for bad in ([[0, 0]], [[0]], [[0, 1, 2]], [["0", 1]], [{"x": 0, "y": 1}]):
        with pytest.raises(ValueError, match="a layer call's arguments"):
            output_nesting.call_arguments({"call": {"args": bad, "kwargs": {}}}, ins, ctx)
