"""Keras-style scripts modeled on keras-io's guides and examples (tests/keras_io,
see its README.md) run with tessera.nn in their own process.

RUNS: the scripts that run (the fast ones; addition_rnn and bidirectional_lstm_imdb
take 12-15 s and are left to tests/keras_io/run_all.py). GAPS: the scripts that stop
at a known gap, with the error they stop at; when one of them runs, this test fails
and says so: move it to RUNS and take its entry out of the README's gaps."""

import importlib.util
import os

import pytest

_RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "keras_io",
                       "run_all.py")
_spec = importlib.util.spec_from_file_location("keras_io_run_all", _RUNNER)
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

RUNS = ["antirectifier", "endpoint_layer_pattern", "functional_api", "imbalanced_classification", "mnist_convnet",
        "sequential_model", "serialization_and_saving", "timeseries_classification_from_scratch",
        "training_with_built_in_methods", "writing_your_own_callbacks"]

GAPS = {
    "subclassing_layers_models": "a symbolic value can be assigned only in a metric's",
    "text_classification_from_scratch": "[Input] unknown dtype 'string'",
    "text_classification_with_transformer": "on arrays (no symbolic tensor) while a layer's call",
    "working_with_rnns": "unexpected keyword argument 'initial_state'",
}


def test_every_script_is_listed():
    listed = set(RUNS) | set(GAPS) | {"addition_rnn", "bidirectional_lstm_imdb"}
    assert set(run_all.scripts()) == listed


@pytest.mark.parametrize("name", RUNS)
def test_script_runs(name):
    ok, took, err, out = run_all.run_one(name, timeout=120)
    assert ok, f"{name} failed after {took:.1f} s: {err}\n{out[-3000:]}"


@pytest.mark.parametrize("name", sorted(GAPS))
def test_known_gap_still_stops_there(name):
    ok, took, err, out = run_all.run_one(name, timeout=120)
    assert not ok, (f"{name} now runs: move it to RUNS in {os.path.basename(__file__)} and take "
                    "it out of the gaps in tests/keras_io/README.md")
    assert GAPS[name] in err, f"{name} now stops elsewhere: {err}"
