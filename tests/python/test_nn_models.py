"""Functional, Sequential and subclassed models; fit's options; callbacks;
saving, loading and resuming; errors on bad models and data."""

import csv

import numpy as np
import pytest

import tessera
from tessera import nn


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(96, 6)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return x, y


def _mlp_layers():
    return [nn.Dense(8, activation="relu"), nn.Dense(3, activation="softmax")]


def test_functional_chain_equals_sequential(data):
    x, y = data
    seq = nn.Sequential(_mlp_layers(), input_shape=(6,), seed=5)
    a, b = _mlp_layers()
    inp = nn.Input((6,))
    fun = nn.Model(inp, b(a(inp)), seed=5)
    for w1, w2 in zip(seq.get_weights(), fun.get_weights()):
        np.testing.assert_array_equal(w1, w2)
    for m in (seq, fun):
        m.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    h1 = seq.fit(x, y, batch_size=16, epochs=2, verbose=0)
    h2 = fun.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert h1.history["loss"] == h2.history["loss"]
    for w1, w2 in zip(seq.get_weights(), fun.get_weights()):
        np.testing.assert_array_equal(w1, w2)


def test_residuals_shared_layers_and_several_inputs_and_outputs(data):
    x, y = data
    rng = np.random.default_rng(0)
    side = rng.normal(size=(len(x), 4)).astype(np.float32)
    i1, i2 = nn.Input((6,), name="main"), nn.Input((4,), name="side")
    shared = nn.Dense(8, activation="tanh", name="shared")
    h = nn.Dense(8, activation="relu")(i1)
    h = nn.Add()([h, shared(h)])            # residual
    h = shared(h)                           # the same weights again
    z = nn.Concatenate()([h, nn.Dense(8)(i2)])
    cls = nn.Dense(3, activation="softmax", name="cls")(z)
    reg = nn.Dense(1, name="reg")(z * 0.5 + np.tanh(z))
    model = nn.Model([i1, i2], [cls, reg])
    assert [l.name for l in model.layers].count("shared") == 1
    model.compile("adam", {"cls": "sparse_categorical_crossentropy", "reg": "mse"},
                  loss_weights=[1.0, 0.5], metrics={"cls": ["accuracy"], "reg": ["mae"]})
    target = x[:, :1] * 2
    h = model.fit([x, side], [y, target], batch_size=16, epochs=3, verbose=0)
    assert set(h.history) >= {"loss", "cls_accuracy", "reg_mae"}
    assert h.history["loss"][-1] < h.history["loss"][0]
    p_cls, p_reg = model.predict([x, side])
    assert p_cls.shape == (96, 3) and p_reg.shape == (96, 1)
    # the loss is the weighted sum of the outputs' losses
    loss = model.evaluate({"main": x, "side": side}, {"cls": y, "reg": target}, batch_size=96,
                          verbose=0)[0]
    ce = -np.mean(np.log(np.clip(p_cls[np.arange(96), y], 1e-7, 1)))
    np.testing.assert_allclose(loss, ce + 0.5 * np.mean((p_reg - target) ** 2), rtol=1e-4)


class _Scale(nn.Layer):
    def __init__(self, init=1.0, **kwargs):
        super().__init__(**kwargs)
        self.init = init

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer=nn.initializers.Constant(
            self.init), name="scale")

    def call(self, x):
        return x * self.w


class _Net(nn.Model):
    def __init__(self, units=8):
        super().__init__()
        self.units = units
        self.hidden = nn.Dense(units, activation="relu")
        self.scale = _Scale(2.0)
        self.out = nn.Dense(3)
        self.drop = nn.Dropout(0.5)

    def call(self, x, training=False):
        h = self.scale(self.hidden(x))
        if training:
            h = self.drop(h)
        return self.out(h + np.tanh(h))

    def get_config(self):
        return {"units": self.units}


def test_subclassed_model_and_custom_layer(data):
    x, y = data
    model = _Net()
    model.compile("adam", nn.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    h = model.fit(x, y, batch_size=16, epochs=4, verbose=0)
    assert h.history["loss"][-1] < h.history["loss"][0]
    names = [l.name for l in model.layers]
    assert any(n.startswith("scale") for n in names) and len(model.get_weights()) == 5
    # inference: no dropout, the same as NumPy on the weights
    w1, b1, s, w2, b2 = model.get_weights()
    hh = np.maximum(x @ w1 + b1, 0) * s
    np.testing.assert_allclose(model.predict(x), (hh + np.tanh(hh)) @ w2 + b2, rtol=1e-5,
                               atol=1e-6)
    # training used dropout (the branch of call taken with training=True)
    assert "dropout" in model.train_code


def test_a_model_used_as_a_layer(data):
    x, y = data
    inner_in = nn.Input((6,))
    encoder = nn.Model(inner_in, nn.Dense(4, activation="relu")(inner_in))
    inp = nn.Input((6,))
    outer = nn.Model(inp, nn.Dense(3, activation="softmax")(encoder(inp)))
    assert len(outer.get_weights()) == 4
    outer.compile("adam", "sparse_categorical_crossentropy")
    outer.fit(x, y, epochs=1, verbose=0)
    np.testing.assert_array_equal(encoder.get_weights()[0], outer.get_weights()[0])


def test_user_loss_and_metric_functions(data):
    x, _ = data
    target = x[:, :2] * 3

    def my_mse(y_true, y_pred):
        return np.mean(np.square(y_true - y_pred), axis=-1)

    def max_error(y_true, y_pred):
        return np.max(np.abs(y_true - y_pred), axis=-1)

    m1 = nn.Sequential([nn.Dense(2)], input_shape=(6,), seed=1)
    m2 = nn.Sequential([nn.Dense(2)], input_shape=(6,), seed=1)
    m1.compile("sgd", my_mse, metrics=[max_error])
    m2.compile("sgd", "mse")
    h1 = m1.fit(x, target, batch_size=32, epochs=2, shuffle=False, verbose=0)
    h2 = m2.fit(x, target, batch_size=32, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=1e-5)
    loss, me = m1.evaluate(x, target, verbose=0)
    p = m1.predict(x)
    np.testing.assert_allclose(me, np.mean(np.max(np.abs(target - p), axis=-1)), rtol=1e-5)


def test_callbacks_early_stopping_checkpoint_csv_and_hooks(data, tmp_path):
    x, y = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile(tessera.optim.SGD(0.0), "sparse_categorical_crossentropy")
    calls = []
    hook = nn.callbacks.LambdaCallback(
        on_epoch_end=lambda e, logs: calls.append(("epoch", e, sorted(logs))),
        on_batch_end=lambda b, logs: calls.append(("batch", b)))
    # the learning rate is 0: the loss never improves, so EarlyStopping stops
    # after patience + 1 epochs
    stop = nn.callbacks.EarlyStopping(monitor="loss", patience=2)
    log = tmp_path / "log.csv"
    h = model.fit(x, y, batch_size=48, epochs=20, verbose=0,
                  callbacks=[stop, nn.callbacks.CSVLogger(log), hook])
    assert h.epoch == [0, 1, 2] and stop.stopped_epoch == 2
    assert [c for c in calls if c[0] == "batch"][:2] == [("batch", 0), ("batch", 1)]
    assert ("epoch", 0, ["loss"]) in calls  # Keras's logs: no other keys
    rows = list(csv.reader(open(log)))
    assert rows[0] == ["epoch", "loss"] and [r[0] for r in rows[1:]] == ["0", "1", "2"]
    np.testing.assert_allclose([float(r[1]) for r in rows[1:]], h.history["loss"])


def test_model_checkpoint_keeps_the_best(data, tmp_path):
    x, y = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile("adam", "sparse_categorical_crossentropy")
    seen = {}
    record = nn.callbacks.LambdaCallback(
        on_epoch_end=lambda e, logs: seen.__setitem__(e, (logs["val_loss"],
                                                          model.get_weights())))
    path = tmp_path / "best.tsm"
    model.fit(x, y, batch_size=16, epochs=5, verbose=0, validation_data=(x[:20], y[:20]),
              callbacks=[nn.callbacks.ModelCheckpoint(path, save_best_only=True), record])
    best = min(seen, key=lambda e: seen[e][0])
    loaded = nn.load_model(path)
    for a, b in zip(loaded.get_weights(), seen[best][1]):
        np.testing.assert_array_equal(a, b)


def test_lr_scheduler_and_reduce_on_plateau(data):
    x, y = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile(tessera.optim.SGD(0.1), "sparse_categorical_crossentropy")
    before = model.get_weights()
    model.fit(x, y, epochs=1, verbose=0,
              callbacks=[nn.callbacks.LearningRateScheduler(lambda epoch, lr: 0.0)])
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    model.compile(tessera.optim.SGD(0.0), "sparse_categorical_crossentropy")
    model._lr_override = None
    rlr = nn.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_lr=0.0)
    model.compile(tessera.optim.SGD(1e-9), "sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=4, verbose=0, callbacks=[rlr])
    assert h.history["learning_rate"][0] == pytest.approx(1e-9)
    assert h.history["learning_rate"][-1] < 1e-9


def test_validation_split_weights_initial_epoch_and_steps(data):
    x, y = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile("adam", "sparse_categorical_crossentropy")
    h = model.fit(x, y, batch_size=8, epochs=3, initial_epoch=1, steps_per_epoch=2,
                  validation_split=0.25, verbose=0)
    assert h.epoch == [1, 2] and model._iteration == 4
    # the validation part is the last 25% of the samples, not shuffled
    np.testing.assert_allclose(h.history["val_loss"][-1],
                               model.evaluate(x[72:], y[72:], verbose=0), rtol=1e-6)
    # sample weights: Keras's mean of weighted per-sample losses
    w = np.linspace(0, 2, len(x))
    p = model.predict(x)
    per = -np.log(np.clip(p[np.arange(len(x)), y], 1e-7, 1 - 1e-7))
    np.testing.assert_allclose(model.evaluate(x, y, sample_weight=w, batch_size=96, verbose=0),
                               np.mean(per * w), rtol=1e-5)
    # class weights are sample weights by label
    cw = {0: 1.0, 1: 3.0, 2: 0.5}
    m1 = nn.Sequential(_mlp_layers(), input_shape=(6,), seed=2)
    m2 = nn.Sequential(_mlp_layers(), input_shape=(6,), seed=2)
    for m in (m1, m2):
        m.compile("sgd", "sparse_categorical_crossentropy")
    m1.fit(x, y, class_weight=cw, epochs=1, verbose=0)
    m2.fit(x, y, sample_weight=np.array([cw[int(v)] for v in y]), epochs=1, verbose=0)
    for a, b in zip(m1.get_weights(), m2.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_fit_on_a_dataset_equals_fit_on_arrays(data):
    x, y = data
    m1 = nn.Sequential(_mlp_layers(), input_shape=(6,), seed=4)
    m2 = nn.Sequential(_mlp_layers(), input_shape=(6,), seed=4)
    for m in (m1, m2):
        m.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    h1 = m1.fit(x, y, batch_size=16, epochs=2, seed=9, verbose=0)
    ds = tessera.data.Dataset.from_tensor_slices((x, y)).shuffle(seed=9).batch(16).prefetch(2)
    h2 = m2.fit(ds, epochs=2, seed=9, verbose=0)
    assert h1.history["loss"] == h2.history["loss"]
    for a, b in zip(m1.get_weights(), m2.get_weights()):
        np.testing.assert_array_equal(a, b)
    bad = tessera.data.Dataset.from_tensor_slices((x, y + (np.arange(96) == 50) * 7)).batch(16)
    with pytest.raises(ValueError, match=r"\[50\] \(sample 50\) holds the label 7"):
        m2.fit(bad, epochs=1, verbose=0)


def _all_layers_model():
    inp = nn.Input((8, 6))
    h = nn.Conv1D(4, 3, padding="same", activation="relu")(inp)
    h = nn.BatchNormalization()(h)
    h = nn.LayerNormalization()(h)
    h = nn.LSTM(5, return_sequences=True)(h)
    h = nn.GRU(5, return_sequences=True)(h)
    h = nn.SimpleRNN(5, return_sequences=True)(h)
    a = nn.MultiHeadAttention(2, 3)(h, h, use_causal_mask=True)
    h = nn.Add()([h, a])
    h = nn.Dropout(0.1)(h)
    g = nn.GlobalAveragePooling1D()(h)
    f = nn.Flatten()(nn.MaxPool1D(2)(h))
    out = nn.Dense(3, activation="softmax")(nn.Concatenate()([g, f]))
    return nn.Model(inp, out, seed=3)


def test_save_and_load_every_layer_and_continue_training(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 8, 6)).astype(np.float32)
    y = rng.integers(0, 3, size=32)
    model = _all_layers_model()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = tmp_path / "m.tsm"
    model.save(path)
    loaded = nn.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert [l.kind for l in loaded.layers] == [l.kind for l in model.layers]
    h1 = model.fit(x, y, batch_size=8, epochs=1, verbose=0, seed=1)
    h2 = loaded.fit(x, y, batch_size=8, epochs=1, verbose=0, seed=1)
    assert h1.history["loss"] == h2.history["loss"]
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    # Sequential and subclassed models too
    seq = nn.Sequential([nn.Embedding(10, 4), nn.Reshape((12,)), nn.Dense(2)],
                        input_shape=(3,))
    seq.save(tmp_path / "s.tsm")
    ids = rng.integers(0, 10, size=(5, 3))
    np.testing.assert_array_equal(nn.load_model(tmp_path / "s.tsm").predict(ids),
                                  seq.predict(ids))
    net = _Net()
    net.build((6,))
    net.save(tmp_path / "n.tsm")
    with pytest.raises(ValueError, match="custom_objects"):
        nn.load_model(tmp_path / "n.tsm")
    back = nn.load_model(tmp_path / "n.tsm", custom_objects={"_Net": _Net, "_Scale": _Scale})
    xx = rng.normal(size=(4, 6)).astype(np.float32)
    np.testing.assert_array_equal(back.predict(xx), net.predict(xx))


def test_a_checkpoint_of_another_model_loads_nothing(tmp_path):
    a = nn.Sequential([nn.Dense(4), nn.Dense(2)], input_shape=(3,))
    b = nn.Sequential([nn.Dense(5), nn.Dense(2)], input_shape=(3,))
    a.save_weights(tmp_path / "a.tsw")
    before = b.get_weights()
    with pytest.raises(ValueError, match=r"l0_kernel \(dense\w*/kernel\) has shape \(3, 4\).*"
                                         r"expects \(3, 5\).*nothing was loaded"):
        b.load_weights(tmp_path / "a.tsw")
    for x, y in zip(before, b.get_weights()):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("stop_at", [(1, 0), (2, 3)])  # (epoch, batch): boundary, mid-epoch
def test_resume_is_bitwise_in_deterministic_mode(data, tmp_path, stop_at):
    x, y = data

    def make():
        m = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dropout(0.3),
                           nn.Dense(3, activation="softmax")], input_shape=(6,), seed=7)
        m.compile(tessera.optim.Adam(tessera.optim.CosineDecay(1e-2, 40)),
                  "sparse_categorical_crossentropy", metrics=["accuracy"])
        return m

    full = make()
    hf = full.fit(x, y, batch_size=16, epochs=4, deterministic=True, seed=3, verbose=0)

    class Kill(nn.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if (self._epoch, batch) == stop_at:
                raise KeyboardInterrupt

        def on_epoch_begin(self, epoch, logs=None):
            self._epoch = epoch

    ckpt = tmp_path / "state.tsm"
    part = make()
    with pytest.raises(KeyboardInterrupt):
        part.fit(x, y, batch_size=16, epochs=4, deterministic=True, seed=3, verbose=0,
                 callbacks=[nn.callbacks.ModelCheckpoint(ckpt, save_training_state=True,
                                                         save_freq=1), Kill()])
    resumed = make()
    hr = resumed.fit(x, y, batch_size=16, epochs=4, deterministic=True, seed=3, verbose=0,
                     resume_from=ckpt)
    for a, b in zip(full.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert hr.history["loss"][-1] == hf.history["loss"][-1]
    assert resumed._iteration == full._iteration


def test_bad_models_and_data_are_reported_before_training(data):
    x, y = data
    with pytest.raises(TypeError, match=r"\[Dense\] unexpected keyword argument 'unit'; did you "
                                        r"mean 'units'\?"):
        nn.Dense(unit=3)
    with pytest.raises(TypeError, match=r"\[LSTM\] the Keras argument 'kernel_constraint' is not "
                                        r"supported"):
        nn.LSTM(3, kernel_constraint="max_norm")
    with pytest.raises(ValueError, match=r"unknown activation 'rleu'; did you mean 'relu'"):
        nn.Dense(3, activation="rleu")
    inp = nn.Input((4, 5))
    with pytest.raises(ValueError, match=r"\[LSTM\] expects inputs of shape \(batch, timesteps, "
                                         r"features\).*test_nn_models.py"):
        nn.LSTM(3)(nn.Flatten()(inp))
    with pytest.raises(ValueError, match=r"\[multiply\].*symbolic operation multiply on shapes"):
        nn.Dense(3)(inp) * nn.Dense(4)(inp)
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"y\[5\] \(sample 5\) holds the label 3, outside the "
                                         r"model's 3 classes"):
        model.fit(x, np.where(np.arange(len(y)) == 5, 3, y), verbose=0)
    with pytest.raises(ValueError, match=r"x and y have different numbers of samples: 96 and 95"):
        model.fit(x, y[:95], verbose=0)
    xi = x.copy()
    xi[17, 2] = np.inf
    with pytest.raises(ValueError, match=r"x\[17\] \(sample 17\) holds a NaN or infinite"):
        model.fit(xi, y, verbose=0)
    with pytest.raises(ValueError, match=r"has samples of shape \(5,\), but the model expects "
                                         r"\(6,\)"):
        model.predict(x[:, :5])
    with pytest.raises(ValueError, match=r"\[Model\] the outputs depend on an Input"):
        nn.Model(nn.Input((6,)), nn.Dense(2)(nn.Input((6,))))


def test_metrics_in_fit_and_evaluate_are_exact_over_batches(data):
    x, y = data
    model = nn.Sequential([nn.Dense(3, activation="softmax")], input_shape=(6,), seed=1)
    model.compile("adam", "sparse_categorical_crossentropy",
                  metrics=["accuracy", nn.metrics.SparseTopKCategoricalAccuracy(k=2)])
    model.fit(x, y, batch_size=10, epochs=1, verbose=0)
    loss, acc, top2 = model.evaluate(x, y, batch_size=7, verbose=0)
    p = model.predict(x)
    np.testing.assert_allclose(acc, np.mean(np.argmax(p, 1) == y))
    np.testing.assert_allclose(top2, np.mean([y[i] in np.argsort(-p[i])[:2]
                                              for i in range(len(y))]))
    yb = (y > 0).astype(np.float32)
    binary = nn.Sequential([nn.Dense(1, activation="sigmoid")], input_shape=(6,), seed=1)
    binary.compile("adam", "binary_crossentropy", metrics=["auc", "precision", "recall"])
    h = binary.fit(x, yb, batch_size=10, epochs=1, verbose=0)
    assert {"auc", "precision", "recall"} <= set(h.history)
    _, auc, prec, rec = binary.evaluate(x, yb, batch_size=9, verbose=0)
    q = binary.predict(x)[:, 0]
    pred = q > 0.5
    np.testing.assert_allclose(prec, np.sum(pred & (yb > 0)) / max(1, np.sum(pred)), rtol=1e-6)
    np.testing.assert_allclose(rec, np.sum(pred & (yb > 0)) / np.sum(yb > 0), rtol=1e-6)
    # AUC from 200 thresholds is close to the exact ROC AUC
    pos, neg = q[yb > 0], q[yb == 0]
    exact = np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :])
    assert abs(auc - exact) < 0.02


def test_crafted_files_raise_value_error(tmp_path):
    import hashlib
    import json
    import struct

    model = nn.Sequential([nn.Dense(2)], input_shape=(3,))

    def write(header, data=b""):
        text = json.dumps(header).encode() if not isinstance(header, bytes) else header
        body = b"TSRWGHT1" + struct.pack("<Q", len(text)) + text + data
        path = tmp_path / "crafted.tsm"
        path.write_bytes(body + hashlib.sha256(body).digest())
        return path

    cases = [
        [1, 2, 3],                                                     # not an object
        {"format": "tessera-weights", "version": 1, "tensors": 5},
        {"format": "tessera-weights", "version": 1, "tensors": [7]},
        {"format": "tessera-weights", "version": 1, "tensors": [
            {"name": "l0_kernel", "dtype": "float32", "shape": [2 ** 39] * 4, "offset": 0,
             "nbytes": 4}]},                                           # overflowing size
        {"format": "tessera-weights", "version": 1, "tensors": [
            {"name": "l0_kernel", "dtype": "float32", "shape": [-1], "offset": 0, "nbytes": 4}]},
        {"format": "tessera-weights", "version": 1, "tensors": [
            {"name": "l0_kernel", "dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]},
        {"format": "tessera-weights", "version": 1, "tensors": [], "model": {"kind": 3}},
        {"format": "tessera-weights", "version": 1, "tensors": [],
         "model": {"kind": "Functional", "layers": [], "nodes": [{"op": "item", "node": 9}]}},
        {"format": "tessera-weights", "version": 1, "tensors": [],
         "model": {"kind": "Sequential", "layers": [{"class": "Dense", "config": 5}]}},
        b"[" * 100000,                                                 # deep nesting
    ]
    for header in cases:
        path = write(header)
        for load in (model.load_weights, nn.load_model):
            with pytest.raises(ValueError):
                load(path)


def test_a_killed_save_leaves_no_temporary_behind(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    code = ("import numpy as np, sys\n"
            "from tessera.nn import saving\n"
            "big = {f'w{i}': np.ones((1 << 20,), np.float32) for i in range(64)}\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            "    saving.save_file(sys.argv[1], big, {}, 'save_weights')\n")
    path = tmp_path / "w.tsw"
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                            env=dict(__import__("os").environ))
    proc.stdout.readline()
    deadline = time.time() + 30
    while not any(p.name.startswith(".tessera-weights-") for p in tmp_path.iterdir()):
        assert time.time() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    model = nn.Sequential([nn.Dense(2)], input_shape=(3,))
    model.save_weights(tmp_path / "other.tsw")
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".tessera")]
    assert leftovers == []


def test_array_methods_on_symbolic_tensors_match_numpy():
    x = np.random.default_rng(2).normal(size=(4, 2, 3)).astype(np.float32)
    i = nn.Input((2, 3))
    outs = [i.reshape(-1, 6), i.reshape((-1, 3, 2)), i.transpose(0, 2, 1), i.sum(axis=-1),
            i.mean(axis=1, keepdims=True), i.max(axis=2), np.swapaxes(i, 1, 2)[:, 1:, :]]
    got = nn.Model(i, outs, dtype="float32").predict(x)
    want = [x.reshape(-1, 6), x.reshape((-1, 3, 2)), x.transpose(0, 2, 1), x.sum(axis=-1),
            x.mean(axis=1, keepdims=True), x.max(axis=2), np.swapaxes(x, 1, 2)[:, 1:, :]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_dataset_without_labels_is_refused_by_fit(data):
    x, _ = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"\[fit\] the dataset has no labels"):
        model.fit(tessera.data.Dataset.from_tensor_slices(x).batch(8), verbose=0)


def test_callbacks_of_evaluate_predict_and_validation_as_keras(data):
    """Keras calls on_test_* from evaluate and fit's validation, on_predict_*
    from predict, and gives every hook a dict of logs (never None)."""
    x, y = data
    model = nn.Sequential(_mlp_layers(), input_shape=(6,))
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    calls = []

    class Record(nn.callbacks.Callback):
        pass

    rec = Record()
    for hook in nn.callbacks.LambdaCallback._HOOKS:
        if "batch" in hook or hook.endswith("epoch_begin") or hook.endswith("epoch_end"):
            setattr(rec, hook, lambda i, logs=None, _h=hook: calls.append((_h, i, logs)))
        else:
            setattr(rec, hook, lambda logs=None, _h=hook: calls.append((_h, None, logs)))
    h = model.fit(x, y, batch_size=48, epochs=2, verbose=0, validation_data=(x[:50], y[:50]),
                  callbacks=[rec])
    assert all(isinstance(logs, dict) for _, _, logs in calls), calls
    hooks = [c[0] for c in calls]
    assert hooks[0] == "on_train_begin" and hooks[-1] == "on_train_end"
    # validation at each epoch's end: test hooks between the last batch and on_epoch_end,
    # the 50 samples in fit's batches of 48 (2 batches, as Keras)
    first_end = hooks.index("on_epoch_end")
    assert hooks[first_end - 6:first_end] == ["on_test_begin"] + [
        "on_test_batch_begin", "on_test_batch_end"] * 2 + ["on_test_end"], hooks
    assert hooks.count("on_test_begin") == 2 and hooks.count("on_test_end") == 2
    assert set(h.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    test_end = [c[2] for c in calls if c[0] == "on_test_end"]
    assert test_end[-1]["loss"] == pytest.approx(h.history["val_loss"][-1])

    calls.clear()
    res = model.evaluate(x, y, batch_size=40, verbose=0, callbacks=[rec], return_dict=True)
    hooks = [c[0] for c in calls]
    n = -(-len(x) // 40)
    assert hooks == ["on_test_begin"] + ["on_test_batch_begin", "on_test_batch_end"] * n + \
        ["on_test_end"]
    assert calls[-1][2] == res and calls[-2][2] == res  # the last batch's running logs
    assert rec.params == {"verbose": 0, "epochs": 1, "steps": None}

    calls.clear()
    out = model.predict(x, batch_size=40, verbose=0, callbacks=[rec])
    hooks = [c[0] for c in calls]
    assert hooks == ["on_predict_begin"] + ["on_predict_batch_begin",
                                            "on_predict_batch_end"] * n + ["on_predict_end"]
    got = np.concatenate([c[2]["outputs"] for c in calls if c[0] == "on_predict_batch_end"])
    np.testing.assert_array_equal(got, out)


def test_lambda_callback_takes_keras_hooks():
    seen = []
    cb = nn.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(b),
                                     on_test_begin=lambda logs: seen.append("test"))
    cb.on_train_batch_end(3, {})
    cb.on_test_begin({})
    assert seen == [3, "test"]
    with pytest.raises(TypeError, match=r"\[LambdaCallback\] 'on_tset_begin' is not a callback"):
        nn.callbacks.LambdaCallback(on_tset_begin=print)


def test_pooling_names_and_summary_as_keras(capsys):
    model = nn.Sequential([nn.Conv2D(4, 3), nn.MaxPooling2D(2), nn.AveragePooling2D(1),
                           nn.Flatten(), nn.Dense(2)], input_shape=(8, 8, 1))
    names = [layer.name for layer in model.layers]
    assert any(n.startswith("max_pooling2d") for n in names), names
    assert any(n.startswith("average_pooling2d") for n in names), names
    assert nn.MaxPool2D is nn.MaxPooling2D and nn.AvgPool1D is nn.AveragePooling1D
    model.summary()
    out = capsys.readouterr().out
    params = model.count_params()  # 456 bytes: Keras prints bytes below 1 KB
    assert params * 4 < 1024 and f"Total params: {params:,} ({params * 4:.2f} B)" in out, out
    big = nn.Sequential([nn.Dense(300)], input_shape=(10,))
    big.summary()
    assert f"Total params: 3,300 ({3300 * 4 / 1024:.2f} KB)" in capsys.readouterr().out
    assert "(MaxPooling2D)" in out
    unbuilt = nn.Sequential([nn.Dense(3, name="d1"), nn.Dense(2, name="d2")])
    unbuilt.summary()  # Keras prints an unbuilt Sequential too
    out = capsys.readouterr().out
    assert "d1 (Dense)" in out and "0 (unbuilt)" in out and "Total params: 0 (0.00 B)" in out


def test_sequential_add_builds_as_keras():
    """Keras: Sequential().add(Input(...)) then add(layer) builds the model at
    each add; the layers already built keep their weights, and the weights
    equal those of the same model made at once."""
    m = nn.Sequential(seed=3)
    m.add(nn.Input(shape=(4,)))
    m.add(nn.Dense(3, name="sa"))
    assert m.built and [w.shape for w in m.get_weights()] == [(4, 3), (3,)]
    first = m.get_weights()
    m.add(nn.Dense(2, name="sb"))
    got = m.get_weights()
    np.testing.assert_array_equal(got[0], first[0])
    once = nn.Sequential([nn.Input(shape=(4,)), nn.Dense(3), nn.Dense(2)], seed=3)
    for a, b in zip(got, once.get_weights()):
        np.testing.assert_array_equal(a, b)
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(m.predict(x, verbose=0), once.predict(x, verbose=0))
    assert m.pop().name == "sb" and m.built and m.predict(x, verbose=0).shape == (2, 3)
    with pytest.raises(ValueError, match=r"\[Sequential.add\] Conv2D '.*' cannot follow"):
        m.add(nn.Conv2D(2, 3))
    assert [layer.name for layer in m.layers] == ["sa"] and m.built
    with pytest.raises(ValueError, match=r"an Input can only come first"):
        m.add(nn.Input(shape=(3,)))


def test_model_inputs_outputs_and_layer_output_as_keras(tmp_path):
    # Keras: model.inputs/outputs (lists), model.input/output, layer.output of the first call,
    # which feature extraction builds a model from.
    base = nn.Sequential([nn.Input(shape=(5,)), nn.Dense(4, name="d1"), nn.Dense(2, name="d2")])
    assert base.inputs == [base.input] and base.outputs == [base.output]
    assert base.input.shape == (None, 5) and base.output.shape == (None, 2)
    assert base.get_layer("d1").output.shape == (None, 4)
    feats = nn.Model(base.inputs, [layer.output for layer in base.layers])
    x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    h1, h2 = feats.predict(x, verbose=0)
    (k1, b1), (k2, b2) = base.get_layer("d1").get_weights(), base.get_layer("d2").get_weights()
    np.testing.assert_allclose(h1, x @ k1 + b1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h2, (x @ k1 + b1) @ k2 + b2, rtol=1e-5, atol=1e-6)
    with pytest.raises(AttributeError, match="not built"):
        nn.Sequential([nn.Dense(2)]).inputs  # noqa: B018


def test_dict_outputs_name_the_outputs_as_keras(tmp_path):
    # Keras: Model(inputs, {"a": ..., "b": ...}) takes losses and targets by the dict's
    # keys and predict returns a dict with those keys.
    inp = nn.Input(shape=(3,))
    h = nn.Dense(4, activation="relu", name="hidden")(inp)
    model = nn.Model(inp, {"score": nn.Dense(1, name="s")(h), "cls": nn.Dense(2, name="c")(h)})
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 3)).astype(np.float32)
    ys = {"score": rng.normal(size=(16, 1)).astype(np.float32), "cls": rng.integers(0, 2, 16)}
    model.compile("sgd", loss={"score": "mse", "cls": nn.losses.SparseCategoricalCrossentropy(
        from_logits=True)}, loss_weights={"score": 1.0, "cls": 0.5})
    model.fit(x, ys, epochs=1, batch_size=8, verbose=0)
    out = model.predict(x, verbose=0)
    assert isinstance(out, dict) and list(out) == ["score", "cls"]
    kh, bh = model.get_layer("hidden").get_weights()
    ks, bs = model.get_layer("s").get_weights()
    hid = np.maximum(x @ kh + bh, 0)
    np.testing.assert_allclose(out["score"], hid @ ks + bs, rtol=1e-5, atol=1e-5)
    assert isinstance(model.output, dict) and set(model.output) == {"score", "cls"}
    path = str(tmp_path / "m.keras")
    model.save(path)
    again = nn.models.load_model(path).predict(x, verbose=0)
    assert list(again) == ["score", "cls"]
    np.testing.assert_allclose(again["cls"], out["cls"], rtol=1e-6)
    with pytest.raises(ValueError, match=r"names outputs \['bogus'\]"):
        model.compile("sgd", loss={"bogus": "mse"})


def test_sequential_keeps_a_variable_length_input_and_its_dtype():
    # Keras: Sequential.add(Input(shape=(None,))) keeps the variable-length axis (a leading
    # None of one sample's shape is not the batch axis) and the Input's dtype.
    seq = nn.Sequential()
    seq.add(nn.Input(shape=(None,), dtype="int32"))
    seq.add(nn.layers.Embedding(50, 4))
    seq.add(nn.layers.GlobalAveragePooling1D())
    assert seq.input.shape == (None, None) and seq.input.dtype == "int32"
    assert seq.output.shape == (None, 4)
    seq2 = nn.Sequential([nn.Input(shape=(None,)), nn.layers.Embedding(50, 4),
                          nn.layers.GlobalAveragePooling1D()])
    assert seq2.input.shape == (None, None)
    table = seq.get_weights()[0]
    for length in (3, 7):
        ids = np.random.default_rng(length).integers(0, 50, (2, length))
        np.testing.assert_allclose(seq.predict(ids, verbose=0), table[ids].mean(axis=1),
                                   rtol=1e-5, atol=1e-6)
