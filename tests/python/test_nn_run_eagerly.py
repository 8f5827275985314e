"""compile(..., run_eagerly=True) (and model.run_eagerly = True): fit, evaluate and
predict run the user's train_step, test_step and predict_step on each batch's values
(model/eager.py). Printed values, float() and counters in a step are checked against
Keras 3 on JAX (stateless_call and jax.grad on the same weights and batches); the
weights after training against the same model's traced run (the update is the same
program) and against Keras's own run_eagerly fit."""

import re

import numpy as np
import pytest

import tessera.nn as tn

FEATURES, CLASSES, SAMPLES, BATCH = 6, 3, 28, 8  # (a ragged last batch of 4)
BATCHES = -(-SAMPLES // BATCH)


def _data(seed=5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype("float32")
    y = rng.integers(0, CLASSES, SAMPLES)
    return x, y


def _dense(lib, model_class=None):
    inp = lib.Input((FEATURES,))
    h = lib.layers.Dense(5, activation="tanh")(inp)
    out = lib.layers.Dense(CLASSES, activation="softmax")(h)
    return (model_class or lib.Model)(inp, out)


def _conv_bn(lib, model_class=None):
    inp = lib.Input((FEATURES,))
    h = lib.layers.Reshape((FEATURES, 1))(inp)
    h = lib.layers.Conv1D(4, 3, activation="relu")(h)
    h = lib.layers.BatchNormalization()(h)
    h = lib.layers.Flatten()(h)
    out = lib.layers.Dense(CLASSES, activation="softmax")(h)
    return (model_class or lib.Model)(inp, out)


class _Recording(tn.Model):
    """A TensorFlow-style train_step that counts its calls and reads real values."""

    def train_step(self, data):
        self.counter += 1
        x, y = data
        with tn.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        if self.run_eagerly:
            self.seen.append((float(loss), float(tn.ops.max(grads[0]))))
            assert loss.item() == float(loss) and loss.numpy().shape == ()
            assert np.asarray(grads[0]).shape == tuple(grads[0].shape)
            assert bool(loss > 0) and isinstance(grads[1].tolist(), list)
            print("loss: %.6f" % loss, f"max grad: {tn.ops.max(grads[0]):.6f}")
            print(loss)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        for m in self.metrics:
            if m.name == "loss":
                m.update_state(loss)
            else:
                m.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


def _compiled(model, eager, **kw):
    model.compile(optimizer=tn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"], run_eagerly=eager, **kw)
    return model


def _recording(build, eager):
    tn.utils.set_random_seed(7)
    model = _compiled(build(tn, _Recording), eager)
    model.counter, model.seen = 0, []
    return model


def test_step_prints_values_and_counts_batches(keras, capsys):
    """Each batch's loss and gradient as Keras on JAX computes them on the same weights
    (stateless_call, jax.grad), printed as numbers; the counter counts the batches."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle

    model = _recording(_dense, True)
    w0 = model.get_weights()
    x, y = _data()
    hist = model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    assert model.counter == 2 * BATCHES
    out = capsys.readouterr().out.splitlines()
    shown = [l for l in out if l.startswith("tessera.Tensor(")]
    assert len(shown) == 2 * BATCHES
    assert all(re.fullmatch(r"tessera\.Tensor\(\d+\.\d+, shape=\(\), dtype=float32\)", l)
               for l in shown), shown[:2]
    lines = [l for l in out if l.startswith("loss: ")]
    assert len(lines) == 2 * BATCHES
    printed = [tuple(float(v) for v in re.findall(r"-?\d+\.\d+", l)) for l in lines]

    ref = _dense(keras)
    ref.set_weights(w0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    tv = [v.value for v in ref.trainable_variables]
    expect, epoch_losses = [], []
    for _ in range(2):
        total = 0.0
        for b in range(0, SAMPLES, BATCH):
            xb, yb = x[b:b + BATCH], y[b:b + BATCH]

            def loss_of(w):
                pred, _ = ref.stateless_call(w, [], xb, training=True)
                return loss_fn(yb, pred)

            value, grads = jax.value_and_grad(loss_of)(tv)
            expect.append((float(value), float(np.max(grads[0]))))
            total += float(value) * len(xb)
            tv = [w - 0.1 * g for w, g in zip(tv, grads)]
        epoch_losses.append(total / SAMPLES)
    np.testing.assert_allclose(np.array(model.seen), np.array(expect), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(printed), np.array(expect), atol=2e-6)
    # (the step's loss metric is a mean of the batches' losses, unweighted)
    np.testing.assert_allclose(hist.history["loss"][0], np.mean([e[0] for e in expect[:BATCHES]]),
                               rtol=1e-5)
    for a, b in zip(model.get_weights(), tv):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("build", [_dense, _conv_bn], ids=["dense", "conv_bn"])
def test_custom_step_weights_as_traced(build):
    """The same train_step eager and traced: the same logs, the same weights (BatchNorm's
    moving statistics included) after 2 epochs, in float32, within 1e-6."""
    x, y = _data()
    runs = []
    for eager in (False, True):
        model = _recording(build, eager)
        hist = model.fit(x, y, epochs=2, batch_size=BATCH, verbose=0)
        runs.append((hist.history, model.get_weights(), model.counter))
    (h0, w0, c0), (h1, w1, c1) = runs
    # the losses the step read (BatchNormalization on the batch's statistics, as the step's
    # forward) are those its loss metric averaged
    for epoch in range(2):
        read = [loss for loss, _ in model.seen[epoch * BATCHES:(epoch + 1) * BATCHES]]
        np.testing.assert_allclose(np.mean(read), h1["loss"][epoch], rtol=1e-6)
    assert c0 == 1 and c1 == 2 * BATCHES  # traced once; eager: once a batch
    assert sorted(h0) == sorted(h1) == ["loss", "sparse_categorical_accuracy"]
    for k in h0:
        np.testing.assert_allclose(h1[k], h0[k], rtol=1e-6)
    assert len(w0) == len(w1)
    for a, b in zip(w0, w1):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)


@pytest.mark.parametrize("build", [_dense, _conv_bn], ids=["dense", "conv_bn"])
def test_default_step_as_traced_and_attribute(build):
    """The default train_step with model.run_eagerly = True set as an attribute (and
    jit_compile=False accepted): logs and weights as the traced run's."""
    x, y = _data()
    out = []
    for eager in (False, True):
        tn.utils.set_random_seed(3)
        model = _compiled(build(tn), None, jit_compile=False)
        assert model.run_eagerly is False
        model.run_eagerly = eager
        hist = model.fit(x, y, epochs=2, batch_size=BATCH, validation_split=0.25, verbose=0)
        out.append((hist.history, model.get_weights()))
    assert sorted(out[0][0]) == sorted(out[1][0])
    for k in out[0][0]:
        np.testing.assert_allclose(out[1][0][k], out[0][0][k], rtol=1e-6)
    for a, b in zip(out[0][1], out[1][1]):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)


def test_default_step_as_keras_run_eagerly(keras):
    """fit with run_eagerly=True in Keras 3 on JAX and in tessera, from the same weights
    on the same batches (SGD, no shuffle): the same epoch losses and weights."""
    x, y = _data()
    model = _compiled(_dense(tn), True)
    w0 = model.get_weights()
    hist = model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    ref = _dense(keras)
    ref.set_weights(w0)
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                metrics=["sparse_categorical_accuracy"], run_eagerly=True)
    khist = ref.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    for k in ("loss", "sparse_categorical_accuracy"):
        np.testing.assert_allclose(hist.history[k], khist.history[k], rtol=2e-5, atol=1e-6)
    for a, b in zip(model.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


class _Evaluating(tn.Model):
    def test_step(self, data):
        self.counter += 1
        x, y = data
        y_pred = self(x, training=False)
        loss = self.compute_loss(y=y, y_pred=y_pred)
        if self.run_eagerly:
            self.seen.append(float(loss))
        for m in self.metrics:
            if m.name == "loss":
                m.update_state(loss)
            else:
                m.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def predict_step(self, data):
        self.counter += 1
        out = self(data, training=False)
        if self.run_eagerly:
            self.seen.append(float(tn.ops.sum(out)))
        return {"probs": out, "top": tn.ops.argmax(out, axis=-1)}


def test_evaluate_and_predict_run_their_steps_eagerly():
    """evaluate's test_step and predict's predict_step run once a batch on its values:
    the values they read are NumPy's of predict's outputs; the results are the traced
    runs'."""
    x, y = _data()
    results = {}
    for eager in (False, True):
        tn.utils.set_random_seed(11)
        model = _compiled(_dense(tn, _Evaluating), eager)
        model.counter, model.seen = 0, []
        ev = model.evaluate(x, y, batch_size=BATCH, verbose=0, return_dict=True)
        counted = model.counter
        model.counter = 0
        pred = model.predict(x, batch_size=BATCH, verbose=0)
        results[eager] = (ev, pred, counted, model.counter, list(model.seen))
    (ev0, p0, c0, d0, _), (ev1, p1, c1, d1, seen) = results[False], results[True]
    assert (c0, d0) == (1, 1) and (c1, d1) == (BATCHES, BATCHES)
    assert ev0.keys() == ev1.keys()
    for k in ev0:
        np.testing.assert_allclose(ev1[k], ev0[k], rtol=1e-6)
    np.testing.assert_allclose(p1["probs"], p0["probs"], rtol=1e-6)
    np.testing.assert_array_equal(p1["top"], p0["top"])
    probs = p0["probs"]
    losses = [float(np.mean(-np.log(probs[b:b + BATCH][np.arange(len(y[b:b + BATCH])),
                                                        y[b:b + BATCH]])))
              for b in range(0, SAMPLES, BATCH)]
    sums = [float(np.sum(probs[b:b + BATCH])) for b in range(0, SAMPLES, BATCH)]
    np.testing.assert_allclose(seen, losses + sums, rtol=1e-5)


def test_second_order_step_prints_and_trains_as_traced():
    """debugging_tips' step (a tape inside a tape) run eagerly: its gradients and their
    gradients have values, and the weights end as the traced run's."""

    class SecondOrder(tn.Model):
        def train_step(self, data):
            x, y = data
            ws = self.trainable_variables
            with tn.GradientTape() as tape2:
                with tn.GradientTape() as tape1:
                    loss = self.compute_loss(y=y, y_pred=self(x, training=True))
                dl = tape1.gradient(loss, ws)
            d2 = tape2.gradient(dl, ws)
            if self.run_eagerly:
                self.seen.append([float(tn.ops.mean(g)) for g in dl + d2])
            self.optimizer.apply_gradients(zip([0.5 * a + 0.5 * b for a, b in zip(d2, dl)], ws))
            for m in self.metrics:
                if m.name == "loss":
                    m.update_state(loss)
            return {m.name: m.result() for m in self.metrics}

    x, y = _data()
    weights = []
    for eager in (False, True):
        tn.utils.set_random_seed(2)
        model = _compiled(_dense(tn, SecondOrder), eager)
        model.seen = []
        model.fit(x, y, epochs=2, batch_size=BATCH, verbose=0)
        weights.append(model.get_weights())
    assert len(model.seen) == 2 * BATCHES
    assert all(np.isfinite(v) for row in model.seen for v in row)
    assert any(abs(v) > 1e-6 for v in model.seen[0][4:])  # a second-order term, not zeros
    for a, b in zip(*weights):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)


def test_symbolic_value_outside_run_eagerly_names_the_mode():
    x, y = _data()
    model = _recording(_dense, False)
    model.run_eagerly = False

    class Reads(_Recording):
        def train_step(self, data):
            float(self.compute_loss(y=data[1], y_pred=self(data[0], training=True)))

    model = _compiled(_dense(tn, Reads), False)
    with pytest.raises(TypeError, match=r"run_eagerly=True.*converted at .*test_nn_run_eagerly"):
        model.fit(x, y, epochs=1, batch_size=BATCH, verbose=0)


def test_run_eagerly_refuses_distributed_options():
    x, y = _data()
    model = _recording(_dense, True)
    with pytest.raises(NotImplementedError, match=r"\[fit\] deterministic= .*run_eagerly"):
        model.fit(x, y, epochs=1, batch_size=BATCH, verbose=0, deterministic=True)


def test_jit_compile_flag_as_keras(keras):
    """model.jit_compile as Keras resolves it (its "auto" is True on JAX, False with
    run_eagerly; True with run_eagerly warns and turns it off)."""
    cases = [{}, {"run_eagerly": True}, {"jit_compile": False},
             {"jit_compile": "auto", "run_eagerly": False}]
    for kw in cases:
        ours, ref = _dense(tn), _dense(keras)
        ours.compile(optimizer="sgd", loss="mse", **kw)
        ref.compile(optimizer="sgd", loss="mse", **kw)
        assert (ours.jit_compile, ours.run_eagerly) == (ref.jit_compile, ref.run_eagerly), kw
    ours = _dense(tn)
    with pytest.warns(UserWarning, match="jit_compile"):
        ours.compile(optimizer="sgd", loss="mse", run_eagerly=True, jit_compile=True)
    assert (ours.jit_compile, ours.run_eagerly) == (False, True)


def test_gan_step_under_run_eagerly_warns_and_trains_traced():
    """A step training sub-models with their own tapes stays traced: said by a warning."""

    class Gan(tn.Model):
        def __init__(self):
            super().__init__()
            self.net = tn.Sequential([tn.Input((FEATURES,)), tn.layers.Dense(1)])
            self.tracker = tn.metrics.Mean(name="loss")

        @property
        def metrics(self):
            return [self.tracker]

        def train_step(self, data):
            x, y = data
            with tn.GradientTape() as tape:
                loss = tn.ops.mean(tn.ops.square(self.net(x) - y[:, None]))
            grads = tape.gradient(loss, self.net.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.net.trainable_weights))
            self.tracker.update_state(loss)
            return {"loss": self.tracker.result()}

    x, y = _data()
    model = Gan()
    model.compile(optimizer=tn.optimizers.SGD(0.01), run_eagerly=True)
    with pytest.warns(UserWarning, match=r"run_eagerly=True: Gan.train_step .* traces once"):
        hist = model.fit(x, y.astype("float32"), epochs=1, batch_size=BATCH, verbose=0)
    assert np.isfinite(hist.history["loss"][0])


def test_value_after_apply_reading_weights_is_refused():
    """After optimizer.apply, values of tensors made before it (the loss, the predictions)
    are read; one computed from a layer or a weight after it (Keras reads the updated
    weights, tessera's step updates at its end) is refused by name, not given old values."""

    class After(_Recording):
        def train_step(self, data):
            x, y = data
            with tn.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.seen.append((float(loss), float(tn.ops.mean(y_pred))))
            for read in (lambda: tn.ops.sum(self.layers[-1](self.layers[-2].output)),
                         lambda: tn.ops.sum(self.layers[-1].kernel)):
                with pytest.raises(NotImplementedError,
                                   match=r"\[run_eagerly\] a value computed after the step's "
                                         r"optimizer.apply .*compute it before apply"):
                    float(read())
                self.counter += 1
            for m in self.metrics:
                if m.name == "loss":
                    m.update_state(loss)
            return {m.name: m.result() for m in self.metrics}

    x, y = _data()
    model = _compiled(_dense(tn, After), True)
    model.counter, model.seen = 0, []
    model.fit(x, y, epochs=1, batch_size=BATCH, verbose=0)
    assert model.counter == 2 * BATCHES and len(model.seen) == BATCHES


class _Weighted(_Recording):
    def train_step(self, data):
        self.counter += 1
        x, y, sw = data
        with tn.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sw)
        grads = tape.gradient(loss, self.trainable_variables)
        if self.run_eagerly:
            self.seen.append((float(loss), float(tn.ops.sum(sw))))
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        for m in self.metrics:
            if m.name == "loss":
                m.update_state(loss)
        return {m.name: m.result() for m in self.metrics}


def test_sample_weights_and_datasets_eagerly():
    """Sample weights reach the eager step (their values read), and a batched Dataset
    trains as the same arrays do; both as the traced run."""
    import tessera.data as td  # noqa: PLC0415 - the Dataset form of the same batches

    x, y = _data()
    sw = np.linspace(0.5, 1.5, SAMPLES).astype("float32")
    runs = []
    for eager, as_dataset in ((False, False), (True, False), (True, True)):
        model = _recording(lambda lib, cls: _dense(lib, _Weighted), eager)
        data = td.Dataset.from_tensor_slices((x, y, sw)).batch(BATCH) if as_dataset else None
        if as_dataset:
            hist = model.fit(data, epochs=2, verbose=0)
        else:
            hist = model.fit(x, y, sample_weight=sw, epochs=2, batch_size=BATCH, shuffle=False,
                             verbose=0)
        runs.append((hist.history["loss"], model.get_weights(), model.seen))
    sums = [float(np.sum(sw[b:b + BATCH])) for b in range(0, SAMPLES, BATCH)] * 2
    for losses, weights, seen in runs[1:]:
        np.testing.assert_allclose([s for _, s in seen], sums, rtol=1e-6)
        np.testing.assert_allclose(losses, runs[0][0], rtol=1e-6)
        for a, b in zip(weights, runs[0][1]):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_py_dataset_of_varying_batches_eagerly():
    """A PyDataset whose batches differ in size: the eager step reads each batch's loss,
    whose mean over the epoch is the loss logged."""

    class Batches(tn.utils.PyDataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            rng = np.random.default_rng(i)
            n = 4 + 4 * i
            return (rng.normal(size=(n, FEATURES)).astype("float32"),
                    rng.integers(0, CLASSES, n))

    model = _recording(_dense, True)
    hist = model.fit(Batches(), epochs=2, verbose=0)
    assert model.counter == 6
    for epoch in range(2):
        read = [loss for loss, _ in model.seen[3 * epoch:3 * epoch + 3]]
        np.testing.assert_allclose(np.mean(read), hist.history["loss"][epoch], rtol=1e-6)
