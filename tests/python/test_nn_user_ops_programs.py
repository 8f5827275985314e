"""Issue 30: Keras 3 user programs written with keras.ops (tests/python/user_ops_programs.py)
run under Keras 3 on JAX and under tessera.nn with only the import changed: the same
initial weights and data give the same predictions, the same losses over a few fit steps,
and tessera's saved-and-loaded model predicts what it predicted before saving."""

import numpy as np
import pytest
import user_ops_programs as progs

import tessera.nn as tn

DETERMINISTIC = ["rms_norm", "rotary_embedding", "swiglu_geglu", "causal_attention",
                 "focal_loss", "dice_loss", "contrastive_siamese", "label_smoothing",
                 "fbeta_metric", "custom_regularizer", "custom_constraint", "window_mask",
                 "top_k_sort", "segment_pool", "cumsum_positions", "squeeze_excite",
                 "patch_extraction", "learnable_temperature", "build_and_output_shape",
                 "nested_layers"]


def _compiled(lib, program):
    opt = {"sgd": lib.optimizers.SGD, "adam": lib.optimizers.Adam}[program.optimizer]
    program.model.compile(opt(program.lr), loss=program.loss, metrics=program.metrics)
    return program.model


def _run(lib, name, weights=None):
    program = getattr(progs, name)(lib)
    if weights is not None:
        program.model.set_weights(weights)
    weights = program.model.get_weights()
    before = np.asarray(program.model.predict(program.x, batch_size=8, verbose=0))
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
