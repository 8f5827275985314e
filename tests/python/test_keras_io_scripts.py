"""Keras-style scripts modeled on keras-io's guides and examples (tests/keras_io,
see its README.md) run with tessera.nn in their own process.

RUNS: the scripts that run (the fast ones; addition_rnn, bidirectional_lstm_imdb and
timeseries_classification_transformer take 12-17 s and are left to tests/keras_io/run_all.py).
Every script runs; a script that stops at a gap of tessera.nn is listed in the README's known
gaps, not here.

COMPARED: scripts run under Keras 3 on JAX too (run_all.py --compare, _driver.py) whose
losses must be in line with Keras's (both learn, final losses within 10x)."""

import importlib.util
import os

import pytest

_RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "keras_io",
                       "run_all.py")
_spec = importlib.util.spec_from_file_location("keras_io_run_all", _RUNNER)
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

RUNS = ["3D_image_classification", "antirectifier", "approximating_non_function_mappings",
        "attention_mil_classification", "autoencoder", "captcha_ocr", "cct",
        "classification_with_grn_and_vsn", "customer_lifetime_value", "deep_neural_decision_forests",
        "event_classification_for_payment_card_fraud_detection", "sklearn_metric_callbacks",
        "collaborative_filtering_movielens", "conditional_gan", "conv_lstm",
        "convmixer", "customizing_saving_and_serialization", "cutmix", "ddim", "fixres",
        "learnable_resizer", "edsr", "masked_image_modeling", "mirnet", "nerf",
        "object_detection_using_vision_transformer", "semantic_image_clustering", "dcgan_overriding_train_step", "eanet",
        "movielens_recommendations_transformers", "custom_train_step_in_tensorflow",
        "creating_tfrecords", "debugging_tips",
        "ctc_asr", "ddpm", "active_learning_review_classification", "actor_critic_cartpole",
        "depth_estimation",
        "eeg_bci_ssvepformer", "eeg_signal_classification", "endpoint_layer_pattern", "functional_api",
        "gat_node_classification", "gnn_citations", "gradient_centralization",
        "image_classification_from_scratch",
        "image_classification_with_vision_transformer",
        "imbalanced_classification", "intro_to_keras_for_engineers", "involution", "knowledge_distillation",
        "lstm_character_level_text_generation", "lstm_seq2seq",
        "lstm_vs_cnn_timeseries_classification", "memory_efficient_embeddings", "metric_learning",
        "mixture_of_experts", "mixup", "mlp_image_classification",
        "mnist_convnet", "mobilevit", "multi_label_classification",
        "neural_machine_translation_with_transformer", "ner_transformers",
        "oxford_pets_image_segmentation", "patch_convnet", "perceiver_image_classification",
        "pixelcnn",
        "packaging_keras_models_for_wide_distribution", "pointnet", "pointnet_segmentation",
        "real_nvp", "speaker_recognition_using_cnn",
        "pretrained_word_embeddings", "reproducibility_recipes", "sequential_model", "serialization_and_saving",
        "siamese_contrastive", "stft",
        "structured_data_classification_from_scratch",
        "structured_data_classification_with_feature_space", "subclassing_conv_layers",
        "subclassing_layers_models", "super_resolution_sub_pixel", "supervised_contrastive_learning", "swin_transformers", "tabtransformer",
        "text_classification_from_scratch", "text_classification_with_switch_transformer",
        "text_classification_with_transformer",
        "text_generation_with_miniature_gpt", "timeseries_anomaly_detection",
        "timeseries_classification_from_scratch", "timeseries_traffic_forecasting",
        "timeseries_weather_forecasting", "token_learner", "trainer_pattern", "transformer_asr",
        "training_with_built_in_methods", "transfer_learning", "understanding_masking_and_padding",
        "vae", "vivit", "vq_vae", "wgan_gp", "wide_deep_cross_networks", "working_with_rnns",
        "zero_dce",
        "writing_your_own_callbacks"]


def test_every_script_is_listed():
    listed = set(RUNS) | set(run_all.STOPS) | {"addition_rnn", "bidirectional_lstm_imdb",
                                               "timeseries_classification_transformer"}
    assert set(run_all.scripts()) == listed
    assert not set(RUNS) & set(run_all.STOPS)
    assert FULL_EPOCHS <= set(RUNS)


def test_scripts_stop_with_their_documented_errors():
    """A script that meets a gap tessera refuses by name stops with that error, at once
    (run_all.STOPS; empty while every script runs)."""
    for name in sorted(run_all.STOPS):
        ok, took, err, out = run_all.run_one(name, timeout=120)
        assert run_all.as_documented(name, ok, err)[0], (
            f"{name} should stop with {run_all.STOPS[name]!r}; "
            + ("it ran through" if ok else f"it stopped with {err}") + f"\n{out[-3000:]}")


def test_a_documented_stop_is_told_from_a_failure(monkeypatch):
    monkeypatch.setitem(run_all.STOPS, "some_script", "NotImplementedError: [fit] x")
    assert run_all.as_documented("some_script", False, "NotImplementedError: [fit] x is not")[0]
    assert not run_all.as_documented("some_script", True, "")[0]             # ran through
    assert not run_all.as_documented("some_script", False, "ValueError: y")[0]
    assert run_all.as_documented("other_script", True, "") == (True, "ran   ")
    assert not run_all.as_documented("other_script", False, "ValueError: y")[0]


# Scripts whose own checks read their later epochs (a history of each epoch plotted,
# learning asserted over the fit, a callback acting at the second epoch): they run all
# their epochs here too.
FULL_EPOCHS = {"creating_tfrecords", "ctc_asr", "custom_train_step_in_tensorflow",
               "dcgan_overriding_train_step", "image_classification_from_scratch",
               "metric_learning", "movielens_recommendations_transformers", "patch_convnet",
               "sklearn_metric_callbacks", "stft"}


@pytest.mark.parametrize("name", RUNS)
def test_script_runs(name):
    # One tessera thread each: pytest's workers already run a script per core (118 s
    # for the 101 scripts at -n 2 against 143 s at two threads each, quiet machine);
    # `run_all.py` runs them at two. Each fit runs one epoch (_capped.py): whether a
    # script runs is decided there, its later epochs cost CI a third of its time
    # (stft 12.8 -> 4.2 CPU s) and their learning is what `run_all.py --compare` checks.
    ok, took, err, out = run_all.run_one(name, timeout=120, threads=1,
                                         max_epochs=None if name in FULL_EPOCHS else 1)
    assert ok, f"{name} failed after {took:.1f} s: {err}\n{out[-3000:]}"


# Compared with Keras 3 on JAX (same script, imports turned back, same seeds and data):
# the cheapest, to keep the comparison's machinery tested; `python tests/keras_io/run_all.py
# --compare` compares them all (each Keras run pays its import and XLA compilations, 10-40 s
# here), and the test_nn_keras_io_*.py files compare what each script found with Keras.
COMPARED = ["endpoint_layer_pattern"]


@pytest.mark.parametrize("name", COMPARED)
def test_script_in_line_with_keras(name):
    if importlib.util.find_spec("keras") is None:  # Keras runs in the driver's process
        pytest.skip("Keras 3 (the oracle, scripts/install-deps) is not installed")
    t, _ = run_all.run_driven(name, "tessera", timeout=120)
    k, _ = run_all.run_driven(name, "keras", timeout=300)
    why = run_all.in_line(k, t)
    print(f"\n{name}: keras {run_all._cell(run_all.summary(k))}; "
          f"tessera {run_all._cell(run_all.summary(t))}")
    assert not why, f"{name} is not in line with Keras: {why}"


def test_in_line_can_fail():
    def rec(before, after, final, acc=None, error=None):
        epoch = {"loss": final, **({"accuracy": acc} if acc is not None else {})}
        return {"error": error, "evaluates": [],
                "fits": [{"batch_losses": [before], "epochs": [epoch],
                          "probe_before": before, "probe_after": after}]}

    good = rec(2.3, 1.9, 2.0, 0.4)
    assert run_all.in_line(good, rec(2.3, 1.8, 1.9, 0.45)) == ""
    assert "did not learn" in run_all.in_line(good, rec(2.3, 2.4, 2.0, 0.4))
    assert "10x" in run_all.in_line(good, rec(250.0, 24.0, 25.0, 0.4))
    assert "accuracies differ" in run_all.in_line(good, rec(2.3, 1.8, 1.9, 0.9))
    assert "tessera failed" in run_all.in_line(good, rec(2.3, 1.8, 1.9, error="ValueError: x"))
    no_fit = {"error": None, "fits": [], "evaluates": []}
    assert run_all.in_line(good, no_fit) == "no fit with losses to compare"
    assert run_all.in_line(no_fit, no_fit) == ""  # a guide that trains nothing: both ran
    assert "keras failed" in run_all.in_line(dict(no_fit, error="AssertionError"), no_fit)


def test_keras_source_changes_only_the_imports():
    spec = importlib.util.spec_from_file_location(
        "keras_io_driver", os.path.join(os.path.dirname(_RUNNER), "_driver.py"))
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    text = ("import numpy as np\nimport tessera.nn as keras\nfrom tessera.nn import layers, ops\n"
            "x = keras.layers.Dense(2)  # tessera.nn stays in comments\n")
    assert driver.keras_source(text) == (
        "import numpy as np\nimport keras\nfrom keras import layers, ops\n"
        "x = keras.layers.Dense(2)  # tessera.nn stays in comments\n")
    # gradient_centralization's `from tensorflow.keras.optimizers import RMSprop`, in its form
    assert driver.keras_source("from tessera.nn.optimizers import RMSprop\n") == \
        "from keras.optimizers import RMSprop\n"


def test_capped_fit_runs_at_most_its_epochs():
    import numpy as np
    import tessera.nn as nn
    spec = importlib.util.spec_from_file_location(
        "keras_io_capped", os.path.join(os.path.dirname(_RUNNER), "_capped.py"))
    capped = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(capped)
    fit = capped.capped_fit(nn.Model.fit, 1)
    model = nn.Sequential([nn.Input(shape=(3,)), nn.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((8, 3), np.float32), np.zeros((8, 1), np.float32)
    assert len(fit(model, x, y, epochs=5, verbose=0).history["loss"]) == 1
    assert len(fit(model, x, y, 4, 5, 0).history["loss"]) == 1            # positional epochs
    history = fit(model, x, y, epochs=5, initial_epoch=2, verbose=0)      # epochs 2 only
    assert len(history.history["loss"]) == 1 and history.epoch == [2]
    assert len(fit(model, x, y, epochs=1, verbose=0).history["loss"]) == 1
