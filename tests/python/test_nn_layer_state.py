"""Non-trainable weights assigned inside a layer's call (a count of calls, a moving average
kept by hand, several assignments in one call), against Keras 3 on JAX with the same
weights and data: fit (several epochs), evaluate, predict, the one-batch methods and the
model called on arrays keep the new values as Keras's stateless steps do; trainable
weights assigned in call keep theirs; saving keeps the values."""

import numpy as np
import pytest

from keras_check import close

import tessera.nn as tnn


def _layers(lib):
    ops = lib.ops

    class Counter(lib.layers.Layer):  # counts the calls (each step's, each batch's)
        def build(self, shape):
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                         name="count")

        def call(self, x):
            self.count.assign_add(1.0)
            return x

    class MovingAverage(lib.layers.Layer):  # a mean of the inputs kept by hand in training
        def build(self, shape):
            self.ma = self.add_weight(shape=(shape[-1],), initializer="zeros",
                                      trainable=False, name="ma")

        def call(self, x, training=False):
            if training:
                self.ma.assign(0.9 * self.ma + 0.1 * ops.mean(x, axis=0))
            return x - self.ma  # (read back: the value just assigned)

    class Twice(lib.layers.Layer):  # three assignments in one call, read between them
        def build(self, shape):
            self.t = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                     name="t")

        def call(self, x):
            self.t.assign_add(ops.mean(ops.abs(x)))
            y = x * self.t
            self.t.assign_sub(0.75 * self.t)
            self.t.assign(self.t + 0.5)
            return y + self.t

    return Counter, MovingAverage, Twice


def _model(lib, steps_per_execution=1):
    Counter, MovingAverage, Twice = _layers(lib)
    inp = lib.Input((3,))
    h = MovingAverage(name="ma")(Counter(name="counter")(inp))
    h = Twice(name="twice")(lib.layers.Dense(4, name="d1")(h))
    model = lib.Model(inp, lib.layers.Dense(1, name="d2")(h))
    model.compile(optimizer=lib.optimizers.SGD(0.01), loss="mse", metrics=["mae"],
                  steps_per_execution=steps_per_execution)
    return model


def _data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20, 3)).astype("float32") + 1.0
    return x, x.sum(axis=1, keepdims=True) * 0.5


def _pair(keras, steps_per_execution=1):
    keras.utils.set_random_seed(0)  # (Keras's initial weights, which tessera's take)
    k, t = _model(keras, steps_per_execution), _model(tnn, steps_per_execution)
    t.set_weights(k.get_weights())
    return k, t


def _same_weights(k, t, tol=2e-5):
    kw, tw = k.get_weights(), t.get_weights()
    assert len(kw) == len(tw)
    for a, b in zip(kw, tw):
        close(b, a, tol)


def _state(model):
    return [float(model.get_layer("counter").count.numpy()),
            np.asarray(model.get_layer("ma").ma.numpy()),
            float(model.get_layer("twice").t.numpy())]


def _same_state(k, t, tol=2e-5):
    ks, ts = _state(k), _state(t)
    assert ts[0] == ks[0]
    close(ts[1], ks[1], tol)
    close(ts[2], ks[2], tol)


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_fit_keeps_the_assigned_weights_as_keras(keras, steps_per_execution):
    x, y = _data()
    k, t = _pair(keras, steps_per_execution)
    hk = k.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    ht = t.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    close(ht.history["mae"], hk.history["mae"], 1e-4)
    assert _state(t)[0] == 9.0  # 3 epochs of 3 batches: one call each
    _same_state(k, t)
    _same_weights(k, t)
    # evaluate (training=False: the moving average stays, the counts go on)
    close(t.evaluate(x, y, batch_size=8, verbose=0), k.evaluate(x, y, batch_size=8, verbose=0),
          1e-4)
    _same_state(k, t)
    # predict, the model called on arrays, in training mode too
    close(t.predict(x, batch_size=8, verbose=0), k.predict(x, batch_size=8, verbose=0), 1e-4)
    _same_state(k, t)
    close(t(x[:5]), k(x[:5]), 1e-4)
    close(t(x[:5], training=True), k(x[:5], training=True), 1e-4)
    _same_state(k, t)
    assert _state(t)[0] == 9.0 + 3 + 3 + 2


def test_one_batch_methods_keep_the_assigned_weights_as_keras(keras):
    x, y = _data()
    k, t = _pair(keras)
    for name, args in (("train_on_batch", (x[:6], y[:6])), ("test_on_batch", (x[6:12], y[6:12])),
                       ("predict_on_batch", (x[12:],)), ("train_on_batch", (x[:8], y[:8]))):
        close(getattr(t, name)(*args), getattr(k, name)(*args), 1e-4)
        _same_state(k, t)
    _same_weights(k, t)
    assert _state(t)[0] == 4.0


def test_the_program_cache_and_a_second_fit_go_on_from_the_kept_values(keras):
    # several fits, evaluates and predicts reuse their compiled programs: each starts from
    # the values the one before kept
    x, y = _data()
    k, t = _pair(keras)
    for _ in range(2):
        for m in (k, t):
            m.fit(x, y, batch_size=5, epochs=2, shuffle=False, verbose=0)
            m.evaluate(x, y, batch_size=7, verbose=0)
            m.predict(x, batch_size=6, verbose=0)
        _same_state(k, t, 1e-4)
    _same_weights(k, t, 1e-4)
    assert _state(t)[0] == 2 * (8 + 3 + 4)


def test_a_shared_layer_reads_what_its_first_call_assigned(keras):
    # a layer called twice in one model: Keras's second call reads the first's value
    results = []
    for lib in (keras, tnn):
        Counter, _, Twice = _layers(lib)
        c, tw = Counter(name="counter"), Twice(name="twice")
        inp = lib.Input((3,))
        out = lib.layers.Dense(1, name="d")(tw(c(tw(c(inp)))))
        model = lib.Model(inp, out)
        model.compile(optimizer="sgd", loss="mse")
        results.append((model, c, tw))
    (k, kc, ktw), (t, tc, ttw) = results
    t.set_weights(k.get_weights())
    x, y = _data()
    hk = k.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    ht = t.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    assert float(tc.count.numpy()) == float(kc.count.numpy()) == 8.0
    close(ttw.t.numpy(), ktw.t.numpy(), 1e-5)
    close(t.predict(x, verbose=0), k.predict(x, verbose=0), 1e-4)
    assert float(tc.count.numpy()) == float(kc.count.numpy()) == 10.0


def test_a_weight_returned_after_its_assignment_is_the_new_value(keras):
    results = []
    for lib in (keras, tnn):
        class Total(lib.layers.Layer):
            def build(self, shape):
                self.total = self.add_weight(shape=(shape[-1],), initializer="zeros",
                                             trainable=False, name="total")

            def call(self, x):
                self.total.assign_add(lib.ops.sum(x, axis=0))
                return x + self.total

        inp = lib.Input((2,))
        layer = Total()
        model = lib.Model(inp, layer(inp))
        x = np.arange(8, dtype=np.float32).reshape(4, 2)
        results.append((model.predict(x, batch_size=2, verbose=0), layer.total.numpy()))
    close(results[1][0], results[0][0])
    close(results[1][1], results[0][1])


def test_a_trainable_weight_assigned_in_call_keeps_its_value(keras):
    # Keras's JAX step drops what a call assigns to trainable variables (they train on)
    results = []
    for lib in (keras, tnn):
        class Shift(lib.layers.Layer):
            def build(self, shape):
                self.b = self.add_weight(shape=(shape[-1],), initializer="ones", name="b")

            def call(self, x):
                self.b.assign(self.b * 2.0)
                return x + self.b

        inp = lib.Input((3,))
        model = lib.Model(inp, lib.layers.Dense(1)(Shift()(inp)))
        model.compile(optimizer="sgd", loss="mse")
        results.append(model)
    k, t = results
    t.set_weights(k.get_weights())
    x, y = _data()
    hk = k.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    ht = t.fit(x, y, batch_size=10, epochs=2, shuffle=False, verbose=0)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    _same_weights(k, t, 1e-4)


def test_saved_and_loaded_models_keep_the_values(keras, tmp_path):
    x, y = _data()
    k, t = _pair(keras)
    for m in (k, t):
        m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    Counter, MovingAverage, Twice = _layers(tnn)
    path = str(tmp_path / "state.keras")
    t.save(path)
    back = tnn.models.load_model(path, custom_objects={
        "Counter": Counter, "MovingAverage": MovingAverage, "Twice": Twice})
    _same_state(k, back)
    _same_weights(k, back)
    back.compile(optimizer=tnn.optimizers.SGD(0.01), loss="mse", metrics=["mae"])
    k.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", metrics=["mae"])
    hk = k.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    hb = back.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    close(hb.history["loss"], hk.history["loss"], 1e-4)
    _same_state(k, back)


def test_refusals_name_the_layer_and_the_line():
    x, y = _data()
    t = _model(tnn)
    with pytest.raises(ValueError, match=r"\[fit\] layer 'counter' assigns its non-trainable "
                                         r"weight 'count'.*deterministic=True.*"
                                         r"test_nn_layer_state.py:\d+"):
        t.fit(x, y, batch_size=8, epochs=1, verbose=0, deterministic=True)

    outside = tnn.Variable(np.zeros(3, np.float32), trainable=False, name="outside")

    class Leaky(tnn.layers.Layer):
        def call(self, x):
            outside.assign(tnn.ops.mean(x, axis=0))
            return x

    inp = tnn.Input((3,))
    with pytest.raises(TypeError, match=r"\[Variable.assign\] outside: a symbolic value can be "
                                        r"assigned only to a layer's weight.*"
                                        r"test_nn_layer_state.py:\d+"):
        tnn.Model(inp, Leaky()(inp))


@pytest.mark.parametrize("run_eagerly", [False, True])
def test_nested_layers_and_a_subclassed_model_keep_their_counts(keras, run_eagerly):
    # a layer's call calling a layer that counts, inside a subclassed model that counts too
    counts = []
    for lib in (keras, tnn):
        Counter, _, _ = _layers(lib)

        class Outer(lib.layers.Layer):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.c, self.d = Counter(), lib.layers.Dense(2)

            def build(self, shape):
                self.n = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                         name="n")

            def call(self, x):
                self.n.assign_add(2.0)
                return self.d(self.c(x)) + 0.1 * self.n

        class Sub(lib.Model):
            def __init__(self):
                super().__init__()
                self.d, self.o = lib.layers.Dense(1), Outer()
                self.k = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                         name="k")

            def call(self, x):
                self.k.assign_add(3.0)
                return self.d(self.o(x)) + 0.01 * self.k

        x, y = _data()
        m = Sub()
        m(x[:2])  # built (a Keras eager call: it counts too)
        m.compile(optimizer="sgd", loss="mse", run_eagerly=run_eagerly)
        counts.append(m)
    k, t = counts
    t.set_weights(k.get_weights())
    hk = k.fit(x, y, batch_size=5, epochs=2, shuffle=False, verbose=0)
    ht = t.fit(x, y, batch_size=5, epochs=2, shuffle=False, verbose=0)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    close(t.evaluate(x, y, batch_size=10, verbose=0), k.evaluate(x, y, batch_size=10, verbose=0),
          1e-4)
    for m in (k, t):
        assert [float(m.k.numpy()), float(m.o.n.numpy()), float(m.o.c.count.numpy())] == \
            [3.0 * 11, 2.0 * 11, 11.0]  # the eager call, 8 steps of fit, 2 of evaluate
    _same_weights(k, t, 1e-4)


def test_a_gradient_tape_train_step_refuses_an_assigning_layer_by_name():
    # that step's program would drop the new value: refused rather than different
    Counter, _, _ = _layers(tnn)

    class Step(tnn.Model):
        def __init__(self):
            super().__init__()
            self.net = tnn.Sequential([tnn.Input((3,)), Counter(name="counter"),
                                       tnn.layers.Dense(1)])

        def compile(self, optimizer):
            super().compile()
            self.opt = optimizer

        def train_step(self, data):
            x, y = data
            with tnn.GradientTape() as tape:
                loss = tnn.ops.mean(tnn.ops.square(self.net(x) - y))
            grads = tape.gradient(loss, self.net.trainable_weights)
            self.opt.apply_gradients(zip(grads, self.net.trainable_weights))
            return {"loss": loss}

    x, y = _data()
    m = Step()
    m.compile(tnn.optimizers.SGD(0.01))
    with pytest.raises(ValueError, match=r"\[Counter\] layer 'counter' assigns the non-trainable "
                                         r"weight \S*counter/count in its call.*GradientTape.*"
                                         r"test_nn_layer_state.py:\d+"):
        m.fit(x, y, batch_size=10, epochs=1, verbose=0)


def _seen_layer(lib):
    ops = lib.ops

    class Seen(lib.layers.Layer):
        def build(self, shape):
            self.n = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                     name="n", dtype="int32")
            self.peak = self.add_weight(shape=(shape[-1],), initializer="zeros",
                                        trainable=False, name="peak")

        def call(self, x, training=False):
            self.n.assign_add(1)
            if training:
                self.peak.assign(0.5 * self.peak + 0.5 * ops.max(x, axis=0))
            return x + self.peak

    return Seen


def test_with_batch_normalization_sample_weights_validation_and_an_int_count(keras):
    # the kept values follow BatchNormalization's moving statistics among the step's outputs
    models = []
    for lib in (keras, tnn):
        Seen = _seen_layer(lib)
        inp = lib.Input((3,))
        h = lib.layers.BatchNormalization(name="bn")(lib.layers.Dense(4, name="d1")(inp))
        seen = Seen(name="seen")
        model = lib.Model(inp, lib.layers.Dense(1, name="d2")(seen(h)))
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
        models.append((model, seen))
    (k, ks), (t, ts) = models
    t.set_weights(k.get_weights())
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 3)).astype("float32")
    y = rng.normal(size=(30, 1)).astype("float32")
    sw = rng.random(30).astype("float32")
    kw = dict(sample_weight=sw, batch_size=8, epochs=2, shuffle=False, verbose=0,
              validation_data=(x[:10], y[:10]))
    hk, ht = k.fit(x, y, **kw), t.fit(x, y, **kw)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    close(ht.history["mae"], hk.history["mae"], 1e-4)
    # (BatchNormalization's moving means, near 0, differ by ~1e-5 from Keras's already)
    close(ht.history["val_loss"], hk.history["val_loss"], 1e-3)
    # fit's steps, validation's batches
    assert int(ts.n.numpy()) == int(ks.n.numpy()) == 2 * 4 + 2 * 2
    assert np.asarray(ts.n.numpy()).dtype == np.int32
    close(ts.peak.numpy(), ks.peak.numpy(), 1e-5)


def test_a_stateful_lstm_fits_in_keras_as_its_stateless_copy_does_in_tessera(keras):
    # Keras 3 on JAX does not carry a stateful layer's states in fit (its compiled step
    # drops their assignments); tessera refuses such a fit by name, and the copy built with
    # stateful=False that the error proposes trains as Keras's stateful model does
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4, 3)).astype("float32")
    y = rng.normal(size=(8, 1)).astype("float32")

    def build(lib, stateful):
        inp = lib.Input(batch_shape=(2, 4, 3))
        lstm = lib.layers.LSTM(5, stateful=stateful, name="s")
        model = lib.Model(inp, lib.layers.Dense(1)(lstm(inp)))
        model.compile(optimizer="sgd", loss="mse")
        return model, lstm

    keras.utils.set_random_seed(0)
    k, klstm = build(keras, True)
    t, _ = build(tnn, False)
    t.set_weights(k.get_weights())
    hk = k.fit(x, y, batch_size=2, epochs=3, shuffle=False, verbose=0)
    ht = t.fit(x, y, batch_size=2, epochs=3, shuffle=False, verbose=0)
    close(ht.history["loss"], hk.history["loss"], 1e-4)
    _same_weights(k, t, 1e-4)
    assert all(not np.asarray(s).any() for s in klstm.states)  # Keras's states stayed zeros
    ts, _ = build(tnn, True)
    with pytest.raises(ValueError, match=r"\[fit\] layer 's' is stateful.*stateful=False"):
        ts.fit(x, y, batch_size=2, epochs=1, verbose=0)


def _sequence_average(lib):
    ops = lib.ops

    class SequenceAverage(lib.layers.Layer):  # a moving mean over samples and steps
        def build(self, shape):
            self.ma = self.add_weight(shape=(shape[-1],), initializer="zeros",
                                      trainable=False, name="ma")

        def call(self, x, training=False):
            if training:
                self.ma.assign(0.8 * self.ma + 0.2 * ops.mean(x, axis=(0, 1)))
            return x - self.ma

    return SequenceAverage


def test_inputs_of_several_lengths_keep_the_values_through_each_program(keras):
    # Input(shape=(None, 2)): one program per length met, each giving the new values
    models = []
    for lib in (keras, tnn):
        Counter, _, _ = _layers(lib)
        inp = lib.Input((None, 2))
        h = _sequence_average(lib)(name="ma")(Counter(name="counter")(inp))
        out = lib.layers.Dense(1)(lib.layers.GlobalAveragePooling1D()(h))
        model = lib.Model(inp, out)
        model.compile(optimizer="sgd", loss="mse")
        models.append(model)
    k, t = models
    t.set_weights(k.get_weights())
    rng = np.random.default_rng(2)
    short, long = (rng.normal(size=(6, n, 2)).astype("float32") for n in (3, 5))
    y = np.ones((6, 1), "float32")
    for m in (k, t):
        m.fit(short, y, batch_size=3, epochs=1, shuffle=False, verbose=0)
        m.fit(long, y, batch_size=3, epochs=1, shuffle=False, verbose=0)
    close(t.predict(short, batch_size=2, verbose=0), k.predict(short, batch_size=2, verbose=0),
          1e-4)
    close(t.evaluate(long, y, batch_size=6, verbose=0), k.evaluate(long, y, batch_size=6,
                                                                   verbose=0), 1e-4)
    close(t.predict(long, batch_size=3, verbose=0), k.predict(long, batch_size=3, verbose=0),
          1e-4)
    for m in (k, t):
        assert float(m.get_layer("counter").count.numpy()) == 2 + 2 + 3 + 1 + 2
    close(t.get_layer("ma").ma.numpy(), k.get_layer("ma").ma.numpy(), 1e-5)


def test_a_predict_step_override_keeps_the_values(keras):
    # (Keras's JAX predict_step takes the state too, so a predict_step(data) override is
    # checked against the model's own predict: the same outputs, the same counts)
    class WithStep(tnn.Model):
        def predict_step(self, data):
            return {"y": self(data)}

    Counter, MovingAverage, Twice = _layers(tnn)

    def build(cls):
        inp = tnn.Input((3,))
        h = Twice(name="twice")(MovingAverage(name="ma")(Counter(name="counter")(inp)))
        return cls(inp, tnn.layers.Dense(1, name="d")(h))

    plain, stepped = build(tnn.Model), build(WithStep)
    stepped.set_weights(plain.get_weights())
    x, _ = _data()
    for _ in range(2):
        want = plain.predict(x, batch_size=6, verbose=0)
        got = stepped.predict(x, batch_size=6, verbose=0)["y"]
        close(got, want, 1e-5)
        close(_state(stepped)[2], _state(plain)[2], 1e-6)
    assert _state(stepped)[0] == _state(plain)[0] == 8.0
