"""AUC(multi_label=True), num_labels and label_weights as Keras 3 computes them: standalone
(update_state on arrays, several updates, sample weights) and as a compiled model's metric
(evaluate, fit's logs), against Keras on JAX; the refusals Keras makes and the ones tessera
adds for shapes it cannot count."""

import numpy as np
import pytest

import tessera.nn as tn
from keras_check import close

KINDS = [
    dict(multi_label=True),
    dict(multi_label=True, num_labels=5),
    dict(multi_label=True, label_weights=[1, 2, 0, 1, 3]),
    dict(label_weights=[1, 2, 0, 1, 3]),
    dict(multi_label=True, curve="PR"),
    dict(multi_label=True, curve="PR", label_weights=[0, 0, 1, 1, 1]),
    dict(multi_label=True, thresholds=[0.1, 0.35, 0.8]),
    dict(multi_label=True, summation_method="minoring"),
    dict(multi_label=True, curve="PR", summation_method="majoring"),
    dict(multi_label=True, from_logits=True),
    dict(multi_label=True, num_thresholds=7, label_weights=[3, 1, 1, 1, 1]),
]


def _data(seed=0, n=64, labels=5):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, labels)) > 0.5).astype("float32")
    p = rng.random((n, labels)).astype("float32")
    w = rng.random(n).astype("float32")
    return y, p, w


@pytest.mark.parametrize("kw", KINDS, ids=[str(k) for k in KINDS])
@pytest.mark.parametrize("weighted", [False, True])
def test_standalone_auc_as_keras(keras, kw, weighted):
    y, p, w = _data()
    if kw.get("from_logits"):
        p = (p - 0.5) * 6.0
    sw = w if weighted else None
    k, t = keras.metrics.AUC(**kw), tn.metrics.AUC(**kw)
    for m in (k, t):
        m.update_state(y, p, sample_weight=sw)
        m.update_state(y[:10], p[:10])
    close(t.result(), float(k.result()), 1e-6)
    t.reset_state()
    k.reset_state()
    t.update_state(y[20:], p[20:])
    k.update_state(y[20:], p[20:])
    close(t.result(), float(k.result()), 1e-6)


def test_labels_differ_from_the_flattened_auc(keras):
    # a case where the per-label mean and the flattened count disagree, so the test
    # above cannot pass by computing the single-label AUC
    y, p, _ = _data(1)
    p[:, 0] = y[:, 0] * 0.9 + 0.05  # label 0 perfectly ranked, offset from the others
    one, many = tn.metrics.AUC(), tn.metrics.AUC(multi_label=True)
    one.update_state(y, p)
    many.update_state(y, p)
    assert abs(float(one.result()) - float(many.result())) > 1e-3
    k = keras.metrics.AUC(multi_label=True)
    k.update_state(y, p)
    close(many.result(), float(k.result()), 1e-6)


def _model(lib, seed=3):
    inp = lib.Input((6,))
    h = lib.layers.Dense(8, activation="relu")(inp)
    out = lib.layers.Dense(4, activation="sigmoid")(h)
    model = lib.Model(inp, out)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32")
                       for w in model.get_weights()])
    return model


@pytest.mark.parametrize("kw", [dict(multi_label=True), dict(multi_label=True, curve="PR",
                                                             label_weights=[1, 0, 2, 1]),
                                dict(label_weights=[1, 0, 2, 1])],
                         ids=["roc", "pr_weighted", "flat_weighted"])
def test_compiled_metric_as_keras(keras, kw):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(96, 6)).astype("float32")
    y = (rng.random((96, 4)) > 0.5).astype("float32")
    sw = rng.random(96).astype("float32")
    logs = {}
    for name, lib in (("k", keras), ("t", tn)):
        model = _model(lib)
        model.compile(optimizer=lib.optimizers.SGD(0.05), loss="binary_crossentropy",
                      metrics=[lib.metrics.AUC(name="auc", **kw)])
        ev = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
        ev_w = model.evaluate(x, y, sample_weight=sw, batch_size=32, verbose=0,
                              return_dict=True)
        hist = model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
        logs[name] = (ev["auc"], ev_w["auc"], hist.history["auc"])
    for got, want in zip(logs["t"], logs["k"]):
        close(got, want, 2e-5)


def test_refusals():
    with pytest.raises(ValueError, match="num_labels is needed only when multi_label"):
        tn.metrics.AUC(num_labels=3)
    with pytest.raises(ValueError, match="label_weights must be a 1-D list of non-negative"):
        tn.metrics.AUC(multi_label=True, label_weights=[1, -1])
    with pytest.raises(ValueError, match="label_weights has 2 entries but num_labels is 3"):
        tn.metrics.AUC(multi_label=True, num_labels=3, label_weights=[1, 1])
    y, p, _ = _data()
    m = tn.metrics.AUC(multi_label=True, num_labels=4)
    with pytest.raises(ValueError, match=r"num_labels=4\) got outputs of 5 labels.*test_nn_auc"):
        m.update_state(y, p)
    m = tn.metrics.AUC(multi_label=True)
    with pytest.raises(ValueError, match=r"needs outputs of shape \(batch, labels\)"):
        m.update_state(y.reshape(64, 5, 1), p.reshape(64, 5, 1))
    m = tn.metrics.AUC(label_weights=[1, 2])
    with pytest.raises(ValueError, match="label_weights has 2 entries but the outputs have 5"):
        m.update_state(y, p)


def test_config_round_trip(keras):
    m = tn.metrics.AUC(multi_label=True, num_labels=3, label_weights=[1, 2, 3], name="a")
    config = m.get_config()
    again = tn.metrics.AUC.from_config(config)
    assert again.multi_label and again.num_labels == 3
    assert list(again.label_weights) == [1.0, 2.0, 3.0]
    k = keras.metrics.AUC(multi_label=True, num_labels=3, label_weights=[1, 2, 3], name="a")
    kc = k.get_config()
    for key in ("multi_label", "num_labels", "num_thresholds", "curve", "summation_method"):
        assert config[key] == kc[key], key
    close(config["label_weights"], kc["label_weights"])
