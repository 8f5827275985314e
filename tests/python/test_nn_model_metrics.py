"""model.metrics, metrics_names and the metrics across train_on_batch /
test_on_batch calls, against Keras 3 on JAX (the oracle): the same model,
weights and data give the same Metric objects' names, classes and values."""

import numpy as np
import pytest

import tessera.nn as nn


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    return x, y


def _classifier(k, weights=None, metrics=("accuracy",)):
    m = k.Sequential([k.Input((4,)), k.layers.Dense(3, activation="relu"),
                      k.layers.Dense(2, activation="softmax")])
    if weights is not None:
        m.set_weights(weights)
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy",
              metrics=None if metrics is None else list(metrics))
    return m


def _state(m):
    """What a script reads of model.metrics."""
    out = {"names": m.metrics_names, "classes": [type(t).__name__ for t in m.metrics]}
    if m.metrics:
        out["loss"] = float(m.metrics[0].result())
    if len(m.metrics) > 1:
        c = m.metrics[1]
        out["inner"] = [s.name for s in c.metrics]
        try:
            c.result()
        except ValueError:
            out["result"] = "not built"
            return out
        out["result"] = {key: float(v) for key, v in c.result().items()}
    return out


def _run_fit(k, weights):
    x, y = _data()
    m = _classifier(k)
    seen = {"uncompiled": k.Sequential([k.layers.Dense(2)]).metrics_names,
            "compiled": _state(_classifier(k)),
            "no_metrics": _classifier(k, metrics=None).metrics_names}
    m = _classifier(k, weights, metrics=("accuracy",
                                         k.metrics.SparseCategoricalAccuracy(name="acc2")))
    h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False,
              validation_data=(x[:10], y[:10]))
    seen["fit"] = _state(m)  # the validation's values, as Keras's evaluate left them
    seen["history"] = {key: float(v[-1]) for key, v in h.history.items()}
    seen["count"] = float(m.metrics[0].count.numpy() if hasattr(m.metrics[0].count, "numpy")
                          else m.metrics[0].count.value)
    m.reset_metrics()
    seen["reset"] = _state(m)
    return seen


def _round(tree):
    if isinstance(tree, dict):
        return {k: _round(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_round(v) for v in tree]
    return round(tree, 5) if isinstance(tree, float) else tree


def _assert_close(got, want, path="", rel=2e-5):
    """got and want equal in structure (keys, lengths, names), their floats
    to rel (float32 sums in another order differ in the last digits, which
    rounding both to 5 places can turn into a difference)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (path, got, want)
        for key in want:
            _assert_close(got[key], want[key], f"{path}.{key}", rel)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (path, got, want)
        for n, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{path}[{n}]", rel)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=rel, abs=1e-6), (path, got, want)
    else:
        assert got == want, (path, got, want)


def test_model_metrics_after_compile_and_fit_as_keras(keras):
    weights = [w.numpy() if hasattr(w, "numpy") else np.asarray(w)
               for w in _classifier(keras).get_weights()]
    _assert_close(_run_fit(nn, weights), _run_fit(keras, weights))


def _run_batches(k, weights):
    x, y = _data()
    m = _classifier(k, weights)
    out = {"first": m.train_on_batch(x, y)}
    # Keras 3 resets the metrics at each call: the second call's values are
    # the second batch's alone
    out["second"] = m.train_on_batch(x[:8], y[:8], return_dict=True)
    out["tracker"] = _state(m)
    out["count"] = float(np.asarray(m.metrics[0].count.value if not hasattr(
        m.metrics[0].count, "numpy") else m.metrics[0].count.numpy()))
    out["test"] = m.test_on_batch(x[8:20], y[8:20])
    out["after_test"] = _state(m)
    out["evaluate"] = m.evaluate(x, y, verbose=0)
    return out


def test_metrics_across_train_on_batch_as_keras(keras):
    weights = [np.asarray(w) for w in _classifier(keras).get_weights()]
    got, want = _run_batches(nn, weights), _run_batches(keras, weights)
    assert got["count"] == want["count"] == 8.0
    _assert_close(got, want)


def _multi(k, weights):
    """Outputs named so that Keras's sorted order differs from compile's."""
    i = k.Input((4,))
    z = k.layers.Dense(2, name="z")(i)
    a = k.layers.Dense(1, name="a")(i)
    m = k.Model(i, [z, a])
    m.set_weights(weights)
    m.compile(k.optimizers.SGD(0.01), ["mse", "mse"], metrics=[["mae"], ["mse"]],
              loss_weights=[0.5, 2.0])
    x, _ = _data()
    ys = [x[:, :2], x[:, :1]]
    w = np.linspace(0.5, 1.5, len(x)).astype("float32")
    out = {"names_before": m.metrics_names,
           "evaluate": _round(m.evaluate(x, ys, sample_weight=w, verbose=0))}
    out["names"] = m.metrics_names  # each output's loss tracker, once built
    d = m.test_on_batch(x, ys, return_dict=True)
    out["dict"] = _round({key: float(v) for key, v in d.items()})
    out["compile_result"] = {key: float(v) for key, v in m.metrics[1].result().items()}
    out["trackers"] = [round(float(t.result()), 5) for t in m.metrics[2:]]
    h = m.fit(x, ys, batch_size=8, epochs=1, shuffle=False, verbose=0)
    out["history"] = {key: round(float(v[-1]), 5) for key, v in h.history.items()}
    return out


def test_multi_output_order_as_keras(keras):
    i = keras.Input((4,))
    ref = keras.Model(i, [keras.layers.Dense(2)(i), keras.layers.Dense(1)(i)])
    weights = [np.asarray(w) for w in ref.get_weights()]
    got, want = _multi(nn, weights), _multi(keras, weights)
    assert got["names"] == ["loss", "compile_metrics", "z_loss", "a_loss"]
    _assert_close(got, want)


def test_compile_metrics_update_and_errors():
    m = _classifier(nn)
    c = m.metrics[1]
    c.update_state(np.array([0, 1]), np.array([[0.9, 0.1], [0.8, 0.2]], "float32"))
    assert c.result() == {"accuracy": pytest.approx(0.5)}
    c.reset_state()
    assert float(c.result()["accuracy"]) == 0.0
    with pytest.raises(NotImplementedError, match="CompileMetrics"):
        c.get_config()
    i = nn.Input((4,))
    two = nn.Model(i, [nn.layers.Dense(2)(i), nn.layers.Dense(1)(i)])
    two.compile("sgd", ["mse", "mse"], metrics=[["mae"], ["mse"]])
    with pytest.raises(ValueError, match=r"CompileMetrics.update_state\] the model has 2"):
        two.metrics[1].update_state(np.zeros((2, 2)), np.zeros((2, 2)))


def _weighted(k, weights, tmp_path):
    x, y = _data()
    w = np.linspace(0, 1, len(x)).astype("float32")
    out = {}
    for name, kwargs in (("both", {"metrics": ["accuracy"], "weighted_metrics": ["accuracy"]}),
                         ("weighted", {"weighted_metrics": ["accuracy",
                                                            "sparse_categorical_crossentropy"]})):
        m = k.Sequential([k.Input((4,)), k.layers.Dense(3, activation="relu"),
                          k.layers.Dense(2, activation="softmax")])
        m.set_weights(weights)
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", **kwargs)
        h = m.fit(x, y, sample_weight=w, batch_size=8, epochs=1, shuffle=False, verbose=0)
        out[name] = {"history": {key: round(float(v[-1]), 5) for key, v in h.history.items()},
                     "dict": _round(m.evaluate(x, y, sample_weight=w, verbose=0,
                                               return_dict=True)),
                     "list": _round(m.evaluate(x, y, sample_weight=w, verbose=0))}
        if name == "both":
            path = str(tmp_path / f"{k.__name__}.keras")
            m.save(path)
            loaded = k.saving.load_model(path)
            out["loaded"] = _round(loaded.evaluate(x, y, sample_weight=w, verbose=0,
                                                   return_dict=True))
    return out


def test_weighted_metrics_as_keras(keras, tmp_path):
    """Keras weights compile's weighted_metrics by sample_weight, not its
    metrics; a name taken by a plain metric gets "weighted_" before it."""
    weights = [np.asarray(w) for w in _classifier(keras).get_weights()]
    got, want = _weighted(nn, weights, tmp_path), _weighted(keras, weights, tmp_path)
    assert "weighted_accuracy" in got["both"]["dict"]
    _assert_close(got, want)


def _dict_single(k, weights):
    """One output named through dicts: inputs, outputs, labels, losses and
    metrics all keyed by name (keras-io's structured-data style)."""
    a, b = k.Input((5,), name="num"), k.Input((3,), name="more")
    h = k.layers.Dense(4, activation="relu")(k.layers.concatenate([a, b]))
    m = k.Model({"num": a, "more": b}, {"cls": k.layers.Dense(3, activation="softmax",
                                                              name="cls")(h)})
    m.set_weights(weights)
    m.compile(k.optimizers.SGD(0.1), {"cls": "sparse_categorical_crossentropy"},
              metrics={"cls": ["accuracy"]})
    rng = np.random.default_rng(4)
    x = {"num": rng.random((24, 5), np.float32), "more": rng.random((24, 3), np.float32)}
    y = {"cls": rng.integers(0, 3, 24)}
    h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
              validation_data=(x, y))
    return {"history": {key: [float(v) for v in vs] for key, vs in h.history.items()},
            "evaluate": {key: float(v) for key, v in
                         m.evaluate(x, y, verbose=0, return_dict=True).items()},
            "predict": sorted(m.predict(x, verbose=0))}


def test_one_output_named_by_dicts_as_keras(keras):
    a, b = keras.Input((5,)), keras.Input((3,))
    ref = keras.Model([a, b], keras.layers.Dense(3)(keras.layers.Dense(4)(
        keras.layers.concatenate([a, b]))))
    weights = [np.asarray(w) for w in ref.get_weights()]
    _assert_close(_dict_single(nn, weights), _dict_single(keras, weights))
