"""Keras features met by the keras-io scripts of issue 30's ninth pass (tests/keras_io:
pixelcnn, vivit, 3D_image_classification, mixup, captcha_ocr, vq_vae), against Keras 3 on JAX
with the same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn

RNG = np.random.default_rng(0)


def _same_weights(tm, km, scale=0.3):
    """Keras's model and tessera's given the same random weights (in Keras's order)."""
    rng = np.random.default_rng(1)
    ws = [(rng.normal(size=np.shape(w)) * scale).astype(np.asarray(w).dtype)
          for w in km.get_weights()]
    km.set_weights(ws)
    tm.set_weights(ws)


def _close_weights(tm, km, tol=2e-4):
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=tol, atol=tol)


# ------------------------------------------------------------ pixelcnn: kernel.assign in call
def _pixel_model(lib):
    class PixelConv(lib.layers.Layer):
        def __init__(self, mask_type, **kwargs):
            super().__init__()
            self.mask_type = mask_type
            self.conv = lib.layers.Conv2D(**kwargs)

        def build(self, input_shape):
            self.conv.build(input_shape)
            k = self.conv.kernel.shape
            self.mask = np.zeros(k)
            self.mask[: k[0] // 2, ...] = 1.0
            self.mask[k[0] // 2, : k[1] // 2, ...] = 1.0
            if self.mask_type == "B":
                self.mask[k[0] // 2, k[1] // 2, ...] = 1.0

        def call(self, inputs):
            self.conv.kernel.assign(self.conv.kernel * self.mask)
            return self.conv(inputs)

    inp = lib.Input((6, 6, 1))
    x = PixelConv("A", filters=3, kernel_size=3, padding="same", activation="relu")(inp)
    x = PixelConv("B", filters=2, kernel_size=3, padding="same", activation="relu")(x)
    return lib.Model(inp, lib.layers.Conv2D(1, 1, activation="sigmoid")(x))


def test_kernel_assigned_in_call_reads_as_assigned_and_trains_as_keras(keras):
    """PixelCNN's `self.conv.kernel.assign(self.conv.kernel * self.mask)` in call (refused
    by name before): the rest of the call reads the masked kernel, the gradient reaches
    the kernel through the mask, and the kernel itself is not overwritten, as Keras's
    JAX step; predictions and the weights after two SGD steps are Keras's."""
    tm, km = _pixel_model(tn), _pixel_model(keras)
    _same_weights(tm, km)
    x = (RNG.random((8, 6, 6, 1)) > 0.5).astype("float32")
    np.testing.assert_allclose(tm.predict(x, verbose=0), km.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-5)
    before = tm.get_weights()
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.5), loss="binary_crossentropy")
        m.fit(x, x, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert not np.allclose(before[0], tm.get_weights()[0])  # trained: the test can fail
    _close_weights(tm, km)
    # the masked entries of a stored kernel stay as set (Keras's step keeps them too)
    assert np.any(tm.get_weights()[0][2:, :, :, :] != 0)


def test_trainable_assign_of_other_shape_is_a_value_error():
    """A weight assigned a value of another shape inside call: ValueError naming both."""

    class Bad(tn.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(3, 2), name="w")

        def call(self, x):
            self.w.assign(self.w[:2])
            return x

    inp = tn.Input((3,))
    with pytest.raises(ValueError, match=r"\[Variable.assign\] .*w has shape \(3, 2\), got a "
                                         r"value of shape \(2, 2\)"):
        tn.Model(inp, Bad()(inp))


# ------------------------------------------------------------ labels one axis short
def test_image_labels_without_channel_axis_as_keras(keras):
    """pixelcnn's fit(x=data, y=data) with (n, 6, 6) images for a (n, 6, 6, 1) sigmoid output
    (refused before): Keras squeezes the output to the labels' rank; the loss and one SGD
    step are Keras's."""
    def model(lib):
        inp = lib.Input((6, 6, 1))
        return lib.Model(inp, lib.layers.Conv2D(1, 3, padding="same", activation="sigmoid")(inp))

    tm, km = model(tn), model(keras)
    _same_weights(tm, km)
    x = (RNG.random((8, 6, 6)) > 0.5).astype("float32")
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.3), loss="binary_crossentropy")
    np.testing.assert_allclose(tm.evaluate(x, x, verbose=0), km.evaluate(x, x, verbose=0),
                               rtol=1e-5)
    for m in (tm, km):
        m.fit(x, x, batch_size=8, epochs=1, verbose=0)
    _close_weights(tm, km)


# ------------------------------------------------------------ captcha_ocr: CTC endpoint
BLANK = 5


def _ctc_model(lib):
    ops = lib.ops

    class CTCLayer(lib.layers.Layer):
        def call(self, y_true, y_pred):
            n = ops.shape(y_true)[0]
            input_length = ops.shape(y_pred)[1] * ops.ones((n,), dtype="int32")
            label_length = ops.shape(y_true)[1] * ops.ones((n,), dtype="int32")
            loss = ops.ctc_loss(ops.cast(y_true, "int32"), ops.log(y_pred + 1e-7),
                                label_length, input_length, mask_index=BLANK)
            self.add_loss(ops.expand_dims(loss, 1))
            return y_pred

    image = lib.Input((12, 4), name="image")
    labels = lib.Input((None,), name="label")
    x = lib.layers.Dense(6, activation="softmax", name="dense2")(image)
    model = lib.Model([image, labels], CTCLayer(name="ctc")(labels, x))
    model.compile(optimizer=lib.optimizers.SGD(0.05))
    return model


def _ctc_batches(lib, length):
    class Batches(lib.utils.PyDataset):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(length)
            self.x = rng.normal(size=(8, 12, 4)).astype("float32")
            self.y = rng.integers(0, BLANK, (8, length)).astype("float32")

        def __len__(self):
            return 2

        def __getitem__(self, i):
            return {"image": self.x[4 * i:4 * i + 4], "label": self.y[4 * i:4 * i + 4]}

    return Batches()


def test_ctc_endpoint_on_labels_of_unknown_length_as_keras(keras):
    """captcha_ocr's endpoint layer: ops.ctc_loss on an Input((None,)) of labels added with
    add_loss, fed by a PyDataset of {"image", "label"} dicts without labels (refused
    before: the labels' length unknown, a dict batch, a batch of x alone); evaluate on two
    label lengths and one epoch of SGD are Keras's."""
    tm, km = _ctc_model(tn), _ctc_model(keras)
    _same_weights(tm, km)
    for length in (3, 4):
        np.testing.assert_allclose(tm.evaluate(_ctc_batches(tn, length), verbose=0),
                                   km.evaluate(_ctc_batches(keras, length), verbose=0),
                                   rtol=1e-4)
    tm.fit(_ctc_batches(tn, 3), epochs=1, shuffle=False, verbose=0)
    km.fit(_ctc_batches(keras, 3), epochs=1, shuffle=False, verbose=0)
    _close_weights(tm, km)


def test_input_read_near_the_outputs_is_listed_by_depth_as_keras(keras):
    """captcha_ocr's model of two Inputs, the labels read only by the last layer: Keras lists
    its InputLayer by depth (just before the Dense feeding the CTC layer), not first; so
    do `model.layers` and summary() now (they listed every InputLayer first)."""
    tm, km = _ctc_model(tn), _ctc_model(keras)
    assert [l.name for l in tm.layers] == [l.name for l in km.layers]

    def late(lib):  # the second Input read by the last layer only
        x, y = lib.Input((4,), name="x"), lib.Input((2,), name="y")
        h = lib.layers.Dense(2, name="d2")(lib.layers.Dense(3, name="d1")(x))
        return lib.Model([x, y], lib.layers.Add(name="add")([y, h]))

    names = [l.name for l in late(tn).layers]
    assert names == [l.name for l in late(keras).layers]
    assert names.index("y") > names.index("d1")  # (the test can fail: not listed first)

    def two(lib):  # Inputs at the same depth: in the order the graph meets them
        a, b = lib.Input((3,), name="a"), lib.Input((3,), name="b")
        return lib.Model([a, b], lib.layers.Dense(1, name="d")(
            lib.layers.Concatenate(name="c")([b, a])))

    assert [l.name for l in two(tn).layers] == [l.name for l in two(keras).layers]


def test_ctc_loss_values_with_unknown_label_length_as_keras(keras):
    """ops.ctc_loss inside a model whose labels' length is unknown when it is built: the
    per-sample losses of each length met are Keras's."""
    def model(lib):
        y = lib.Input((None,), dtype="int32")
        p = lib.Input((7, 5))
        out = lib.layers.Lambda(lambda a: lib.ops.ctc_loss(
            a[0], a[1], lib.ops.shape(a[0])[1] * lib.ops.ones((lib.ops.shape(a[0])[0],),
                                                            dtype="int32"),
            7 * lib.ops.ones((lib.ops.shape(a[0])[0],), dtype="int32"), mask_index=0))([y, p])
        return lib.Model([y, p], out)

    tm, km = model(tn), model(keras)
    for s in (2, 3):
        y = RNG.integers(1, 5, (3, s)).astype("int32")
        p = RNG.normal(size=(3, 7, 5)).astype("float32")
        np.testing.assert_allclose(tm.predict([y, p], verbose=0), km.predict([y, p], verbose=0),
                                   rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------ vq_vae: losses in a train_step
def _quantizer(lib):
    ops = lib.ops

    class VectorQuantizer(lib.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.embeddings = lib.Variable(
                initializer=lib.initializers.RandomUniform()(shape=(3, 4), dtype="float32"),
                trainable=True, name="embeddings_vqvae")

        def call(self, x):
            flat = ops.reshape(x, [-1, 3])
            d = (ops.sum(flat ** 2, axis=1, keepdims=True) + ops.sum(self.embeddings ** 2, axis=0)
                 - 2 * ops.matmul(flat, self.embeddings))
            q = ops.matmul(ops.one_hot(ops.argmin(d, axis=1), 4), ops.transpose(self.embeddings))
            q = ops.reshape(q, ops.shape(x))
            self.add_loss(0.25 * ops.mean((ops.stop_gradient(q) - x) ** 2)
                          + ops.mean((q - ops.stop_gradient(x)) ** 2))
            return x + ops.stop_gradient(q - x)

    inp = lib.Input((5,))
    h = lib.layers.Reshape((5, 1))(inp)
    h = lib.layers.Dense(3, name="enc")(h)
    h = VectorQuantizer(name="vq")(h)
    out = lib.layers.Reshape((5,))(lib.layers.Dense(1, name="dec")(h))
    return lib.Model(inp, out)


def test_losses_of_a_symbolic_call_in_a_train_step_as_keras(keras):
    """vq_vae's trainer: `sum(self.vqvae.losses)` read after `self.vqvae(x)` inside the tape
    (it reached the trace's stand-in inputs before); two SGD steps of the reconstruction
    loss plus the quantizer's added loss (stop_gradient, straight-through) are those of
    Keras's stateless JAX step."""
    import jax

    ops = tn.ops
    tm, km = _quantizer(tn), _quantizer(keras)
    _same_weights(tm, km, 0.5)
    x = RNG.normal(size=(6, 5)).astype("float32")

    class Trainer(tn.Model):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def train_step(self, data):
            with tn.GradientTape() as tape:
                rec = self.inner(data)
                total = ops.mean((data - rec) ** 2) + sum(self.inner.losses)
            grads = tape.gradient(total, self.inner.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.inner.trainable_variables))
            return {"loss": total}

    before = tm.get_weights()
    trainer = Trainer(tm)
    trainer.compile(optimizer=tn.optimizers.SGD(0.2))
    trainer.fit(x, batch_size=6, epochs=2, shuffle=False, verbose=0)

    opt = keras.optimizers.SGD(0.2)
    tv = [v.value for v in km.trainable_variables]
    opt.build(km.trainable_variables)
    ov = [v.value for v in opt.variables]

    def loss_fn(tv):
        rec, _, losses = km.stateless_call(tv, [], x, return_losses=True)
        return jax.numpy.mean((x - rec) ** 2) + sum(losses)

    for _ in range(2):
        grads = jax.grad(loss_fn)(tv)
        tv, ov = opt.stateless_apply(ov, grads, tv)
    for v, val in zip(km.trainable_variables, tv):
        v.assign(val)
    # every weight trained, the codebook too (through the codebook loss)
    assert all(not np.allclose(a, b) for a, b in zip(before, tm.get_weights()))
    _close_weights(tm, km)


# ------------------------------------------------------------ mixup: keras.random.gamma
def test_random_gamma_draws_have_gammas_moments():
    """mixup's Beta draws from keras.random.gamma: the sample mean and variance of the
    gamma(alpha) draws are alpha's, for a small and a large alpha."""
    tn.utils.set_random_seed(3)
    for alpha in (0.2, 3.0):
        g = np.asarray(tn.random.gamma(shape=[20000], alpha=alpha))
        assert g.min() >= 0
        assert abs(g.mean() - alpha) < 0.05 * max(alpha, 1)
        assert abs(g.var() - alpha) < 0.1 * max(alpha, 1)
