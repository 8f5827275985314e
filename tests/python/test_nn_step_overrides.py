"""A subclassed Model's compute_loss override traced into fit's and evaluate's
compiled steps (Keras 3's semantics), against Keras 3 on JAX with the same
weights and batches: a distiller calling its teacher (whose weights join the
model's and train, as Keras's), super().compute_loss with compile's loss, the
regularizers and sample weights, training=False in evaluate; and the hooks
still refused by name (train_step, test_step, predict_step, compute_metrics)."""

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


@pytest.mark.parametrize("freeze_teacher", [False, True])
def test_distiller_compute_loss_as_keras(keras, freeze_teacher):
    L = keras.layers
    t0 = keras.Sequential([keras.Input(shape=(6,)), L.Dense(8, activation="relu"), L.Dense(3)])
    s0 = keras.Sequential([keras.Input(shape=(6,)), L.Dense(3)])
    weights = (t0.get_weights(), s0.get_weights())
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


def _run_super(lib, w, training_arg):
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
    w0, _, _ = _run_super(keras, None, training_arg)  # (drawn by Keras, then trained)
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


@pytest.mark.parametrize("hook,call", [("train_step", "fit"), ("test_step", "evaluate"),
                                       ("predict_step", "predict"),
                                       ("compute_metrics", "fit")])
def test_other_step_hooks_refused_by_name(hook, call):
    m = _plain(tn, tn.Model.compute_loss)
    setattr(type(m), hook, lambda self, *a, **k: {})
    x = np.zeros((4, 6), "float32")
    y = np.zeros((4, 2), "float32")
    with pytest.raises(NotImplementedError, match=rf"\[{call}\] M overrides Keras's "
                                                  rf"Model.{hook}.*test_nn_step_overrides.py"):
        if call == "predict":
            m.predict(x, verbose=0)
        else:
            getattr(m, call)(x, y, verbose=0)
