"""A subclassed Model's compute_loss, compute_metrics, train_step and test_step
overrides traced into fit's and evaluate's compiled steps (Keras 3's semantics), against Keras 3
on JAX with the same weights and batches: a distiller calling its teacher (whose
weights join the model's and train, as Keras's), super().compute_loss with
compile's loss, the regularizers and sample weights, training=False in evaluate;
keras-io's "customizing fit" train_step/test_step (GradientTape form) against
Keras's own fit/evaluate; a VAE's train_step against the same losses in Keras's
compute_loss; a compute_metrics override with super() against Keras's; and what
stays refused, by name (unsupported step forms)."""

import numpy as np
import pytest

import tessera.nn as tn


def _data(n=24, d=6, classes=3, seed=0):
    r = np.random.RandomState(seed)
    x = r.randn(n, d).astype("float32")
    y = (np.argmax(x[:, :classes], axis=1)).astype("int64")
    return x, y


def _distiller_class(lib):
    class Distiller(lib.Model):
        def __init__(self, student, teacher):
            super().__init__()
            self.teacher = teacher
            self.student = student

        def compile(self, optimizer, metrics, student_loss_fn, distillation_loss_fn, alpha=0.1,
                    temperature=3):
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn = student_loss_fn
            self.distillation_loss_fn = distillation_loss_fn
            self.alpha, self.temperature = alpha, temperature

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         allow_empty=False):
            teacher_pred = self.teacher(x, training=False)
            student_loss = self.student_loss_fn(y, y_pred)
            distillation_loss = self.distillation_loss_fn(
                lib.ops.softmax(teacher_pred / self.temperature, axis=1),
                lib.ops.softmax(y_pred / self.temperature, axis=1)) * self.temperature ** 2
            return self.alpha * student_loss + (1 - self.alpha) * distillation_loss

        def call(self, x):
            return self.student(x)

    return Distiller


def _run_distiller(lib, weights, freeze_teacher):
    L = lib.layers
    teacher = lib.Sequential([lib.Input(shape=(6,)), L.Dense(8, activation="relu"), L.Dense(3)])
    student = lib.Sequential([lib.Input(shape=(6,)), L.Dense(3)])
    if weights is not None:
        teacher.set_weights(weights[0])
        student.set_weights(weights[1])
    teacher.trainable = not freeze_teacher
    d = _distiller_class(lib)(student, teacher)
    d.compile(optimizer=lib.optimizers.SGD(0.1),
              metrics=[lib.metrics.SparseCategoricalAccuracy()],
              student_loss_fn=lib.losses.SparseCategoricalCrossentropy(from_logits=True),
              distillation_loss_fn=lib.losses.KLDivergence(), alpha=0.1, temperature=10)
    x, y = _data()
    h = d.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    ev = d.evaluate(x, y, verbose=0, return_dict=True)
    return (h.history, ev, [np.asarray(w) for w in teacher.get_weights()],
            [np.asarray(w) for w in student.get_weights()])


def _distiller_weights(lib):
    L = lib.layers
    t0 = lib.Sequential([lib.Input(shape=(6,)), L.Dense(8, activation="relu"), L.Dense(3)])
    s0 = lib.Sequential([lib.Input(shape=(6,)), L.Dense(3)])
    return ([np.asarray(a) for a in t0.get_weights()], [np.asarray(a) for a in s0.get_weights()])


def test_distiller_with_a_frozen_teacher_leaves_it():
    weights = _distiller_weights(tn)
    h, _, teacher, student = _run_distiller(tn, weights, True)
    for a, b in zip(teacher, weights[0]):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(student[0], weights[1][0])
    assert h["loss"][-1] < h["loss"][0]


@pytest.mark.parametrize("freeze_teacher", [False])
def test_distiller_compute_loss_as_keras(keras, freeze_teacher):
    weights = _distiller_weights(tn)
    k = _run_distiller(keras, weights, freeze_teacher)
    t = _run_distiller(tn, weights, freeze_teacher)
    assert sorted(t[0]) == sorted(k[0]) == ["loss", "sparse_categorical_accuracy"]
    for key in k[0]:
        np.testing.assert_allclose(t[0][key], k[0][key], rtol=2e-4, atol=1e-5)
    assert sorted(t[1]) == sorted(k[1])
    for key in k[1]:
        np.testing.assert_allclose(t[1][key], k[1][key], rtol=2e-4, atol=1e-5)
    for a, b in zip(k[2] + k[3], t[2] + t[3]):  # the teacher trains unless frozen (Keras)
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    changed = not np.allclose(k[2][0], weights[0][0])
    assert changed == (not freeze_teacher)


def _run_super(lib, w, training_arg, weights_only=False):
    L = lib.layers

    class Reg(lib.Model):
        def __init__(self):
            super().__init__()
            self.d1 = L.Dense(4, activation="tanh", kernel_regularizer=lib.regularizers.L2(0.01))
            self.d2 = L.Dense(2)

        def call(self, x):
            return self.d2(self.d1(x))

        if training_arg:
            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                             training=True):
                base = super().compute_loss(x=x, y=y, y_pred=y_pred,
                                            sample_weight=sample_weight, training=training)
                extra = 0.05 * lib.ops.mean(lib.ops.square(y_pred))
                return base + (extra if training else 3.0 * extra)
        else:
            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
                return super().compute_loss(x, y, y_pred, sample_weight) * 2.0

    m = Reg()
    m(np.zeros((1, 6), "float32"))  # built (Keras's build() leaves a subclass's layers unbuilt)
    if weights_only:
        return [np.asarray(a) for a in m.get_weights()]
    if w is not None:
        m.set_weights(w)
    m.compile(optimizer=lib.optimizers.SGD(0.05), loss="mse")
    r = np.random.RandomState(1)
    x = r.randn(16, 6).astype("float32")
    y = r.randn(16, 2).astype("float32")
    sw = r.uniform(0.5, 2.0, 16).astype("float32")
    h = m.fit(x, y, sample_weight=sw, epochs=2, batch_size=4, shuffle=False, verbose=0)
    ev = m.evaluate(x, y, verbose=0)
    return m.get_weights(), h.history["loss"], ev


@pytest.mark.parametrize("training_arg", [True, False])
def test_super_compute_loss_with_regularizer_weights_and_training(keras, training_arg):
    w0 = _run_super(tn, None, training_arg, weights_only=True)
    kw, kh, kev = _run_super(keras, w0, training_arg)
    tw, th, tev = _run_super(tn, w0, training_arg)
    np.testing.assert_allclose(th, kh, rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(tev, kev, rtol=2e-4, atol=1e-6)
    for a, b in zip(kw, tw):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


def _plain(lib, body):
    class M(lib.Model):
        def __init__(self):
            super().__init__()
            self.d = lib.layers.Dense(2)

        def call(self, x):
            return self.d(x)

    M.compute_loss = body
    m = M()
    m.build((None, 6))
    m.compile(optimizer="sgd", loss="mse")
    return m


def test_compute_loss_must_return_a_scalar():
    x = np.zeros((4, 6), "float32")
    y = np.zeros((4, 2), "float32")
    m = _plain(tn, lambda self, x=None, y=None, y_pred=None, sample_weight=None:
               tn.ops.square(y_pred - y))
    with pytest.raises(ValueError, match=r"\[compute_loss\] .*shape \(None, 2\).*scalar"):
        m.fit(x, y, verbose=0)
    m = _plain(tn, lambda self, x=None, y=None, y_pred=None, sample_weight=None: 1.5)
    with pytest.raises(TypeError, match=r"\[compute_loss\] .*got float"):
        m.fit(x, y, verbose=0)


def test_compute_loss_on_arrays_is_the_compiled_loss(keras):
    r = np.random.RandomState(2)
    y, p = r.randn(5, 2).astype("float32"), r.randn(5, 2).astype("float32")
    got = []
    for lib in (keras, tn):
        m = lib.Sequential([lib.Input(shape=(3,)), lib.layers.Dense(2)])
        m.compile(optimizer="sgd", loss="mae")
        got.append(float(np.asarray(m.compute_loss(y=y, y_pred=p))))
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6)


def test_compute_loss_refused_when_the_batch_is_split():
    x = np.zeros((8, 6), "float32")
    y = np.zeros((8, 2), "float32")
    m = _plain(tn, lambda self, x=None, y=None, y_pred=None, sample_weight=None:
               tn.ops.mean(tn.ops.square(y_pred - y)))
    with pytest.raises(NotImplementedError, match=r"\[fit\] M overrides compute_loss.*"
                                                  r"deterministic"):
        m.fit(x, y, verbose=0, deterministic=True)


def test_predict_step_traced_beside_compute_loss():
    # (predict_step against Keras: test_nn_predict_step.py)
    m = _plain(tn, tn.Model.compute_loss)
    type(m).predict_step = lambda self, data: -self(data)
    x = np.random.RandomState(3).randn(4, 6).astype("float32")
    np.testing.assert_allclose(m.predict(x, verbose=0), -np.asarray(m(x)), rtol=1e-6)


def _metrics_run(lib, w, weights_only=False):
    class CM(lib.Model):
        def __init__(self):
            super().__init__()
            self.d = lib.layers.Dense(2)
            self.extra = lib.metrics.Mean(name="pred_mean")

        def call(self, x):
            return self.d(x)

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            results = super().compute_metrics(x, y, y_pred, sample_weight)
            self.extra.update_state(lib.ops.mean(y_pred))
            results["pred_mean"] = self.extra.result()
            return results

    m = CM()
    m(np.zeros((1, 4), "float32"))
    if weights_only:
        return [np.asarray(a) for a in m.get_weights()]
    if w is not None:
        m.set_weights(w)
    m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
    r = np.random.RandomState(6)
    x, y = r.randn(24, 4).astype("float32"), r.randn(24, 2).astype("float32")
    h = m.fit(x, y, epochs=2, batch_size=6, shuffle=False, verbose=0)
    ev = m.evaluate(x, y, batch_size=6, verbose=0, return_dict=True)
    return m.get_weights(), h.history, ev


def test_compute_metrics_override_as_keras(keras):
    w0 = _metrics_run(tn, None, weights_only=True)
    kw, kh, kev = _metrics_run(keras, w0)
    tw, th, tev = _metrics_run(tn, w0)
    assert sorted(th) == sorted(kh) == ["loss", "mae", "pred_mean"]
    for key in kh:
        np.testing.assert_allclose(th[key], kh[key], rtol=2e-4, atol=1e-6)
    assert sorted(tev) == sorted(kev)
    for key in kev:
        np.testing.assert_allclose(tev[key], kev[key], rtol=2e-4, atol=1e-6)
    for a, b in zip(kw, tw):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------ train_step / test_step
def _guide_class(lib, tape):
    """keras-io's "Customizing what happens in fit()" first model, with the
    GradientTape of its TensorFlow version (tessera.nn.GradientTape)."""
    class CustomModel(lib.Model):
        def train_step(self, data):
            x, y = data
            with tape() as t:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            trainable_vars = self.trainable_variables
            gradients = t.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    return CustomModel


def _guide_run(lib, cls, w, callbacks=None, verbose=0, weights_only=False):
    inputs = lib.Input(shape=(5,))
    h = lib.layers.Dense(4, activation="tanh")(inputs)
    outputs = lib.layers.Dense(1)(h)
    m = cls(inputs, outputs)
    if weights_only:
        return [np.asarray(a) for a in m.get_weights()]
    if w is not None:
        m.set_weights(w)
    m.compile(optimizer=lib.optimizers.Adam(0.01), loss="mse", metrics=["mae"])
    r = np.random.RandomState(3)
    x = r.randn(32, 5).astype("float32")
    y = (x[:, :1] * 2 - x[:, 1:2]).astype("float32")
    hist = m.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=verbose,
                 callbacks=callbacks)
    ev = m.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    return m.get_weights(), hist.history, ev


def test_guide_train_step_and_test_step_as_keras_fit(keras):
    w0 = _guide_run(tn, tn.Model, None, weights_only=True)
    kw, kh, kev = _guide_run(keras, keras.Model, w0)  # Keras's own train and test steps
    tw, th, tev = _guide_run(tn, _guide_class(tn, tn.GradientTape), w0)
    assert sorted(th) == sorted(kh) == ["loss", "mae"]
    for key in kh:
        np.testing.assert_allclose(th[key], kh[key], rtol=2e-4, atol=1e-6)
    assert sorted(tev) == sorted(kev)
    for key in kev:
        np.testing.assert_allclose(tev[key], kev[key], rtol=2e-4, atol=1e-6)
    for a, b in zip(kw, tw):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


def test_train_step_runs_with_callbacks_history_and_progbar(capsys):
    seen = []

    class Record(tn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(("batch", batch, sorted(logs)))

        def on_epoch_end(self, epoch, logs=None):
            seen.append(("epoch", epoch, sorted(logs)))

    _, hist, _ = _guide_run(tn, _guide_class(tn, tn.GradientTape), None, [Record()], verbose=1)
    assert seen[0] == ("batch", 0, ["loss", "mae"])
    assert ("epoch", 2, ["loss", "mae"]) in seen
    assert len([s for s in seen if s[0] == "batch"]) == 12
    assert len(hist["loss"]) == 3 and hist["loss"][-1] < hist["loss"][0]
    out = capsys.readouterr().out
    assert "Epoch 3/3" in out and "mae" in out


def _vae_parts(lib):
    L = lib.layers
    ei = lib.Input(shape=(6, 6, 1))
    x = L.Dense(8, activation="relu")(L.Flatten()(ei))
    encoder = lib.Model(ei, [L.Dense(2, name="z_mean")(x), L.Dense(2, name="z_log_var")(x)])
    li = lib.Input(shape=(2,))
    out = L.Reshape((6, 6, 1))(L.Dense(36, activation="sigmoid")(li))
    return encoder, lib.Model(li, out)


def _vae_losses(lib, data, encoder, decoder):
    ops = lib.ops
    z_mean, z_log_var = encoder(data)
    reconstruction = decoder(z_mean)  # (no sampling noise: the frameworks' draws differ)
    reconstruction_loss = ops.mean(ops.sum(
        lib.losses.binary_crossentropy(data, reconstruction), axis=(1, 2)))
    kl = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
    kl_loss = ops.mean(ops.sum(kl, axis=1))
    return reconstruction_loss + kl_loss, reconstruction_loss, kl_loss


def _vae_run(lib, weights):
    encoder, decoder = _vae_parts(lib)
    if weights is not None:
        encoder.set_weights(weights[0])
        decoder.set_weights(weights[1])

    class VAE(lib.Model):
        def __init__(self, encoder, decoder, **kwargs):
            super().__init__(**kwargs)
            self.encoder, self.decoder = encoder, decoder
            self.total_loss_tracker = lib.metrics.Mean(name="loss")
            self.reconstruction_loss_tracker = lib.metrics.Mean(name="reconstruction_loss")
            self.kl_loss_tracker = lib.metrics.Mean(name="kl_loss")

        @property
        def metrics(self):
            return [self.total_loss_tracker, self.reconstruction_loss_tracker,
                    self.kl_loss_tracker]

        def _track(self, total, rec, kl):
            self.total_loss_tracker.update_state(total)
            self.reconstruction_loss_tracker.update_state(rec)
            self.kl_loss_tracker.update_state(kl)

        if lib is tn:  # keras-io's VAE: a train_step with a tape
            def train_step(self, data):
                with tn.GradientTape() as tape:
                    total, rec, kl = _vae_losses(lib, data, self.encoder, self.decoder)
                grads = tape.gradient(total, self.trainable_weights)
                self.optimizer.apply_gradients(zip(grads, self.trainable_weights))
                self._track(total, rec, kl)
                return {m.name: m.result() for m in self.metrics}
        else:  # the same step in Keras on JAX: compute_loss (its train_step is JAX's)
            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                             training=True):
                total, rec, kl = _vae_losses(lib, x, self.encoder, self.decoder)
                self._track(total, rec, kl)
                return total

        def call(self, x):
            return self.decoder(self.encoder(x)[0])

    vae = VAE(encoder, decoder)
    vae.compile(optimizer=lib.optimizers.Adam(0.01))
    data = (np.random.RandomState(4).rand(24, 6, 6, 1) < 0.3).astype("float32")
    hist = vae.fit(data, epochs=2, batch_size=8, shuffle=False, verbose=0)
    return hist.history, encoder.get_weights() + decoder.get_weights()


def test_vae_train_step_as_keras(keras):
    e, d = _vae_parts(tn)
    weights = (e.get_weights(), d.get_weights())
    kh, kw = _vae_run(keras, weights)
    th, tw = _vae_run(tn, weights)
    assert sorted(th) == sorted(kh) == ["kl_loss", "loss", "reconstruction_loss"]
    for key in kh:
        np.testing.assert_allclose(th[key], kh[key], rtol=2e-4, atol=1e-5)
    for a, b in zip(kw, tw):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=1e-5)


def _step_model(train_step):
    class M(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(1)
            self.tracker = tn.metrics.Mean(name="loss")

        def call(self, x):
            return self.d(x)

    M.train_step = train_step
    m = M()
    m.compile(optimizer="sgd", loss="mse")
    return m


def _fit_error(train_step, err, match):
    m = _step_model(train_step)
    x = np.zeros((8, 3), "float32")
    with pytest.raises(err, match=match):
        m.fit(x, np.zeros((8, 1), "float32"), verbose=0)


def test_train_step_forms_not_supported_are_named():
    def no_tape(self, data):
        x, y = data
        self.tracker.update_state(tn.ops.mean(self(x)))
        return {"loss": self.tracker.result()}

    _fit_error(no_tape, NotImplementedError, r"\[fit\] M.train_step computes no gradient")

    def tensor_log(self, data):
        x, y = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x))
        self.optimizer.apply(tape.gradient(loss, self.trainable_weights),
                             self.trainable_weights)
        return {"loss": loss}

    _fit_error(tensor_log, NotImplementedError, r"\[train_step\] M.train_step returns 'loss': "
                                                r"KerasTensor.*keras.metrics.Mean")

    def no_apply(self, data):
        x, y = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x))
        tape.gradient(loss, self.trainable_weights)
        return {"loss": self.tracker.result()}

    _fit_error(no_apply, NotImplementedError, r"never calls self.optimizer.apply")


def test_gradient_tape_outside_a_traced_step_raises():
    with pytest.raises(RuntimeError, match=r"\[GradientTape.gradient\] works inside a Model's "
                                           r"train_step.*value_and_grad"):
        with tn.GradientTape() as tape:
            pass
        tape.gradient(np.float32(1.0), [])


def test_train_step_of_some_weights_trains_only_those():
    def student_only(self, data):
        x, y = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x))
        ws = self.d.trainable_weights[:1]  # the kernel, not the bias
        self.optimizer.apply(tape.gradient(loss, ws), ws)
        self.tracker.update_state(loss)
        return {"loss": self.tracker.result()}

    m = _step_model(student_only)
    r = np.random.RandomState(5)
    x, y = r.randn(8, 3).astype("float32"), r.randn(8, 1).astype("float32")
    m(x[:1])
    k0, b0 = [np.array(w) for w in m.get_weights()]
    m.fit(x, y, epochs=2, verbose=0)
    k1, b1 = m.get_weights()
    assert not np.allclose(k1, k0)
    np.testing.assert_array_equal(b1, b0)
    assert len(m.trainable_weights) == 2  # (only during fit's step)
