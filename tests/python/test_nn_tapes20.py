"""A traced train_step that takes more than one GradientTape gradient (keras-io's
debugging_tips: the gradient of the first tape's gradients in an outer tape, a
second-order term) and computes with its gradients before applying them (scaled,
L2-normalized, combined). fit writes each gradient into the step's program as grad of
its target's computation in the weights, a grad of a grad for the outer tape's. The
steps are compared with the same function of the same weights in Keras 3 on JAX
(stateless_call, jax.grad of jax.grad), and the second-order term with finite
differences of the first-order gradient."""

import numpy as np
import pytest

import tessera.nn as tn

FEATURES, CLASSES, SAMPLES, BATCH = 5, 3, 24, 8


def _net(lib, activation="tanh"):
    inp = lib.Input((FEATURES,))
    h = lib.layers.Dense(4, activation=activation)(inp)
    out = lib.layers.Dense(CLASSES, activation="softmax")(h)
    return inp, out


def _l2_normalize(w):  # debugging_tips' tf.math.l2_normalize of a whole gradient
    return w / tn.ops.sqrt(tn.ops.maximum(tn.ops.sum(tn.ops.square(w)), 1e-12))


def _combine(kind, first, second, normalize):
    if kind == "mix":  # debugging_tips' first step: 0.5 d2 + 0.5 dl
        return [0.5 * a + 0.5 * b for a, b in zip(second, first)]
    if kind == "normalized":  # its last: both L2-normalized, 0.2 d2 + 0.8 dl
        return [0.2 * normalize(a) + 0.8 * normalize(b) for a, b in zip(second, first)]
    if kind == "second":  # the second-order term alone
        return list(second)
    return [b * 2.0 - 1.0 * b for b in first]  # "scaled": the loss's gradient, computed with


class _SecondOrder(tn.Model):
    kind = "mix"

    def train_step(self, data):
        inputs, targets = data
        weights = self.trainable_variables
        with tn.GradientTape() as tape2:
            with tn.GradientTape() as tape1:
                y_pred = self(inputs, training=True)
                loss = self.compute_loss(y=targets, y_pred=y_pred)
            dl_dw = tape1.gradient(loss, weights)
        d2l_dw2 = tape2.gradient(dl_dw, weights)
        grads = _combine(self.kind, dl_dw, d2l_dw2, _l2_normalize)
        self.optimizer.apply_gradients(zip(grads, weights))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(targets, y_pred)
        return {m.name: m.result() for m in self.metrics}


def _data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(SAMPLES, FEATURES)).astype("float32")
    y = rng.integers(0, CLASSES, SAMPLES)
    return x, y


def _optimizer(lib, name):
    return lib.optimizers.SGD(0.1) if name == "sgd" else lib.optimizers.Adam(0.01)


def _tessera_run(kind, opt, epochs=2, activation="tanh"):
    inp, out = _net(tn, activation)
    model = _SecondOrder(inp, out)
    model.kind = kind
    model.compile(optimizer=_optimizer(tn, opt), loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"])
    w0 = model.get_weights()
    x, y = _data()
    hist = model.fit(x, y, epochs=epochs, batch_size=BATCH, shuffle=False, verbose=0)
    return w0, hist.history, model.get_weights()


def _keras_run(keras, w0, kind, opt, epochs=2, activation="tanh"):
    """The same steps in Keras on JAX: the loss of a stateless_call, its gradient by
    jax.grad and the gradient of the sum of that gradient's entries by jax.grad again."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    inp, out = _net(keras, activation)
    model = keras.Model(inp, out)
    model.set_weights(w0)
    optimizer = _optimizer(keras, opt)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    tv = [v.value for v in model.trainable_variables]
    ov = [v.value for v in optimizer.variables]
    x, y = _data()

    def normalize(w):
        return w / jnp.sqrt(jnp.maximum(jnp.sum(jnp.square(w)), 1e-12))

    losses = []
    for _ in range(epochs):
        total = 0.0
        for b in range(0, SAMPLES, BATCH):
            xb, yb = x[b:b + BATCH], y[b:b + BATCH]

            def loss_of(w):
                pred, _ = model.stateless_call(w, [], xb, training=True)
                return loss_fn(yb, pred)

            first = jax.grad(loss_of)(tv)
            second = jax.grad(lambda w: sum(jnp.sum(g) for g in jax.grad(loss_of)(w)))(tv)
            grads = _combine(kind, first, second, normalize)
            total += float(loss_of(tv)) * len(xb)
            tv, ov = optimizer.stateless_apply(ov, grads, tv)
        losses.append(total / SAMPLES)
    return losses, [np.asarray(v) for v in tv]


@pytest.mark.parametrize("kind,opt,activation", [
    ("mix", "sgd", "tanh"), ("normalized", "sgd", "tanh"), ("mix", "adam", "tanh"),
    ("scaled", "adam", "tanh"), ("mix", "sgd", "relu"), ("normalized", "sgd", "relu")])
def test_second_order_step_as_jax(keras, kind, opt, activation):
    w0, hist, tw = _tessera_run(kind, opt, activation=activation)
    losses, kw = _keras_run(keras, w0, kind, opt, activation=activation)
    assert sorted(hist) == ["loss", "sparse_categorical_accuracy"]
    np.testing.assert_allclose(hist["loss"], losses, rtol=2e-5, atol=1e-6)
    for a, b in zip(tw, kw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert not all(np.allclose(a, b) for a, b in zip(tw, w0))  # it trained


def _gradient64(w, x, y):
    """The first-order gradient of the model's mean cross-entropy in NumPy float64, by
    hand (tanh layer, softmax, cross-entropy): independent of both frameworks."""
    h = np.tanh(x @ w[0] + w[1])
    z = h @ w[2] + w[3]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dz = (p - np.eye(CLASSES)[y]) / len(x)
    da = (dz @ w[2].T) * (1.0 - h * h)
    return [x.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0)]


def test_second_order_term_by_finite_differences():
    """One step applying d2 = grad(sum of grad(loss)) alone with SGD at rate 1: w0 - w1
    is d2, whose product with a direction u is the derivative of sum(grad(loss)) along u,
    taken by central differences of the first-order gradient (float64)."""
    inp, out = _net(tn)
    model = _SecondOrder(inp, out)
    model.kind = "second"
    model.compile(optimizer=tn.optimizers.SGD(1.0), loss="sparse_categorical_crossentropy")
    w0 = model.get_weights()
    x, y = _data()
    x, y = x[:BATCH], y[:BATCH]
    model.fit(x, y, epochs=1, batch_size=BATCH, shuffle=False, verbose=0)
    d2 = [a - b for a, b in zip(w0, model.get_weights())]
    w = [a.astype(np.float64) for a in w0]
    x64 = x.astype(np.float64)

    def sum_of_gradient(w_):
        return sum(float(np.sum(g)) for g in _gradient64(w_, x64, y))

    rng = np.random.default_rng(7)
    eps = 1e-5
    for _ in range(4):
        u = [rng.normal(size=a.shape) for a in w0]
        fd = (sum_of_gradient([a + eps * b for a, b in zip(w, u)]) -
              sum_of_gradient([a - eps * b for a, b in zip(w, u)])) / (2 * eps)
        along = sum(float(np.sum(a * b)) for a, b in zip(d2, u))
        assert abs(along - fd) <= 2e-3 * max(1.0, abs(fd)), (along, fd)


class _Persistent(tn.Model):
    """Two gradients of one persistent tape: the loss's and an L2 term's, summed."""

    def train_step(self, data):
        inputs, targets = data
        weights = self.trainable_variables
        with tn.GradientTape(persistent=True) as tape:
            y_pred = self(inputs, training=True)
            loss = self.compute_loss(y=targets, y_pred=y_pred)
            l2 = 0.01 * tn.ops.sum(tn.ops.square(weights[0]))
        g_loss = tape.gradient(loss, weights)
        g_l2 = tape.gradient(l2, weights)
        self.optimizer.apply_gradients(zip([a + b for a, b in zip(g_loss, g_l2)], weights))
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self):
        return [self.loss_tracker]


def test_persistent_tape_two_gradients_as_jax(keras):
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    inp, out = _net(tn)
    model = _Persistent(inp, out)
    model.loss_tracker = tn.metrics.Mean(name="loss")
    model.compile(optimizer=tn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    w0 = model.get_weights()
    x, y = _data()
    model.fit(x, y, epochs=1, batch_size=BATCH, shuffle=False, verbose=0)

    kin, kout = _net(keras)
    km = keras.Model(kin, kout)
    km.set_weights(w0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    tv = [jnp.asarray(a) for a in w0]
    for b in range(0, SAMPLES, BATCH):
        def loss_of(w, xb=x[b:b + BATCH], yb=y[b:b + BATCH]):
            return loss_fn(yb, km.stateless_call(w, [], xb)[0]) + \
                0.01 * jnp.sum(jnp.square(w[0]))
        tv = [w - 0.1 * g for w, g in zip(tv, jax.grad(loss_of)(tv))]
    for a, b in zip(model.get_weights(), tv):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)


class _TwiceNonPersistent(_SecondOrder):
    def train_step(self, data):
        inputs, targets = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=targets, y_pred=self(inputs, training=True))
        tape.gradient(loss, self.trainable_variables)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {}


class _WrongShape(_SecondOrder):
    def train_step(self, data):
        inputs, targets = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=targets, y_pred=self(inputs, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        grads = [tn.ops.sum(g) for g in grads]
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {}


@pytest.mark.parametrize("cls,error,match", [
    (_TwiceNonPersistent, RuntimeError, "A non-persistent GradientTape can only be used"),
    (_WrongShape, ValueError, r"\[Optimizer.apply_gradients\] the gradient given for .* has "
                              r"shape \(\)"),
])
def test_gradient_errors(cls, error, match):
    inp, out = _net(tn)
    model = cls(inp, out)
    model.compile(optimizer=tn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    x, y = _data()
    with pytest.raises(error, match=match):
        model.fit(x, y, epochs=1, batch_size=BATCH, verbose=0)


class _Halved(tn.Model):
    """A subclassed model (its own call) whose step applies half its loss's gradient."""

    def __init__(self):
        super().__init__()
        self.hidden = tn.layers.Dense(4, activation="tanh")
        self.out = tn.layers.Dense(1)
        self.tracker = tn.metrics.Mean(name="loss")

    def call(self, x):
        return self.out(self.hidden(x))

    def train_step(self, data):
        x, y = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=y, y_pred=self(x, training=True))
        grads = [g * 0.5 for g in tape.gradient(loss, self.trainable_weights)]
        self.optimizer.apply(grads, self.trainable_weights)
        self.tracker.update_state(loss)
        return {"loss": self.tracker.result()}


def test_scaled_gradients_of_a_subclassed_model_as_keras(keras):
    """Half the gradient at rate 0.1 is Keras's own fit at rate 0.05 (its train_step)."""
    x, _ = _data()
    y = np.sin(x[:, :1]).astype("float32")
    model = _Halved()
    model.compile(optimizer=tn.optimizers.SGD(0.1), loss="mse")
    model(x[:1])
    w0 = model.get_weights()
    hist = model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    km = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(4, activation="tanh"),
                           keras.layers.Dense(1)])
    km.set_weights(w0)
    km.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    khist = km.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    np.testing.assert_allclose(hist.history["loss"], khist.history["loss"], rtol=1e-5)
    for a, b in zip(model.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# ------------------------------------------------- a train_step on data of its own shape

PAIR_CLASSES, PAIR_FEATURES = 4, 6


def _pair_batches(n=3, seed=5):
    """metric_learning's batches: one (2, classes, features) array of anchors and
    positives each, no labels (the pairs' classes are their positions)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(PAIR_CLASSES, PAIR_FEATURES))
    return [(centres[None] + 0.5 * rng.normal(size=(2, PAIR_CLASSES, PAIR_FEATURES)))
            .astype("float32") for _ in range(n)]


class _Pairs(tn.utils.PyDataset):
    def __init__(self, batches):
        super().__init__()
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batches[index]


def _embedder(lib):
    inp = lib.Input((PAIR_FEATURES,))
    h = lib.layers.Dense(5, activation="relu")(inp)
    out = lib.ops.normalize(lib.layers.Dense(3)(h), axis=-1)
    return inp, out


class _Embedding(tn.Model):
    """metric_learning's EmbeddingModel: a functional model whose train_step slices the
    batch into anchors and positives and embeds each with self(...)."""

    def train_step(self, data):
        anchors, positives = data[0], data[1]
        with tn.GradientTape() as tape:
            a = self(anchors, training=True)
            p = self(positives, training=True)
            similarities = tn.ops.einsum("ae,pe->ap", a, p) / 0.2
            labels = tn.ops.arange(PAIR_CLASSES)
            loss = self.compiled_loss(labels, similarities)
        grads = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.tracker.update_state(loss)
        return {"loss": self.tracker.result()}


def test_train_step_on_data_not_shaped_as_the_inputs_as_jax(keras):
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    batches = _pair_batches()
    inp, out = _embedder(tn)
    model = _Embedding(inp, out)
    model.tracker = tn.metrics.Mean(name="loss")
    model.compile(optimizer=tn.optimizers.Adam(0.01),
                  loss=tn.losses.SparseCategoricalCrossentropy(from_logits=True))
    w0 = model.get_weights()
    hist = model.fit(_Pairs(batches), epochs=2, verbose=0)

    kin, kout = _embedder(keras)
    km = keras.Model(kin, kout)
    km.set_weights(w0)
    opt = keras.optimizers.Adam(0.01)
    opt.build(km.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    tv = [v.value for v in km.trainable_variables]
    ov = [v.value for v in opt.variables]
    losses = []
    for _ in range(2):
        per = []
        for b in batches:
            def loss_of(w, b=b):
                a = km.stateless_call(w, [], b[0])[0]
                p = km.stateless_call(w, [], b[1])[0]
                return loss_fn(jnp.arange(PAIR_CLASSES), jnp.einsum("ae,pe->ap", a, p) / 0.2)
            value, grads = jax.value_and_grad(loss_of)(tv)
            tv, ov = opt.stateless_apply(ov, grads, tv)
            per.append(float(value))
        losses.append(float(np.mean(per)))
    np.testing.assert_allclose(hist.history["loss"], losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(model.get_weights(), tv):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)
    # the model still predicts on its own inputs after such a fit
    x = batches[0][0]
    np.testing.assert_allclose(model.predict(x, verbose=0),
                               np.asarray(km.stateless_call(tv, [], x)[0]), rtol=1e-4,
                               atol=1e-6)


class _Plain(_SecondOrder):
    def train_step(self, data):
        inputs, targets = data
        with tn.GradientTape() as tape:
            loss = self.compute_loss(y=targets, y_pred=self(inputs, training=True))
        grads = tape.gradient(loss, self.trainable_variables)
        if self.kind == "scaled":  # computed with: the gradient written again in the weights
            grads = [2.0 * g - g for g in grads]
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        return {}


def test_a_gradient_written_again_draws_the_loss_dropout():
    """A computed gradient's loss, written again as a function of the weights, draws the
    dropout masks of the step's loss (TensorFlow's tape records the one forward pass): the
    same update as the loss's gradient applied as it is (fit's value_and_grad)."""
    x, y = _data()
    weights = []
    for kind in ("plain", "scaled"):
        inp = tn.Input((FEATURES,))
        h = tn.layers.Dropout(0.5)(tn.layers.Dense(16, activation="tanh")(inp))
        model = _Plain(inp, tn.layers.Dense(CLASSES, activation="softmax")(h))
        model.kind = kind
        model.compile(optimizer=tn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        if weights:
            model.set_weights(weights[0][0])
        w0 = model.get_weights()
        model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0, seed=3)
        weights.append((w0, model.get_weights()))
    for a, b in zip(weights[0][1], weights[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
