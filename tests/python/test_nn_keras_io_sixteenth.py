"""Keras features met by the keras-io scripts of issue 30's sixteenth pass (tests/keras_io:
semantic_image_clustering, masked_image_modeling, nerf, ...), against Keras 3 on JAX with the
same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(16)


# ------------------------------------- semantic_image_clustering: Concatenate(axis=0) (SCAN)
def _batch_joined(lib):
    inputs = lib.layers.Input((4,))
    a = lib.layers.Dense(3)(inputs)
    b = lib.layers.Dense(3)(inputs)
    joined = lib.layers.Concatenate(axis=0)([a, b])
    return lib.Model(inputs, lib.layers.Dense(2)(joined))


def test_concatenate_along_the_batch_axis(keras):
    tm, km = _batch_joined(tn), _batch_joined(keras)
    assert tuple(tm.output.shape) == tuple(km.output.shape) == (None, 2)
    _same_weights(tm, km)
    x = RNG.normal(size=(5, 4)).astype("float32")
    want = np.asarray(km(x))
    assert want.shape == (10, 2)
    np.testing.assert_allclose(np.asarray(tm(x)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tm.predict(x, verbose=0), want, rtol=1e-5, atol=1e-5)


def test_concatenate_along_the_batch_axis_in_a_subclassed_call_trains(keras):
    """Two views of a batch joined in call (made there, as SCAN's), a loss over the doubled
    batch in compute_loss: the same weights after two steps as Keras's."""

    def make(lib):
        class Views(lib.Model):
            def __init__(self):
                super().__init__()
                self.dense = lib.layers.Dense(3, kernel_initializer="ones")

            def call(self, x):
                return self.dense(lib.layers.Concatenate(axis=0)([x, x * 2.0]))

            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                             training=True):
                return lib.ops.mean(lib.ops.square(y_pred - 1.0)) * lib.ops.cast(
                    lib.ops.shape(y_pred)[0] // lib.ops.shape(x)[0], "float32")

        m = Views()
        m.compile(optimizer=lib.optimizers.SGD(0.05))
        return m

    x = RNG.normal(size=(8, 4)).astype("float32")
    tm, km = make(tn), make(keras)
    th = tm.fit(x, batch_size=4, epochs=1, verbose=0, shuffle=False).history["loss"]
    kh = km.fit(x, batch_size=4, epochs=1, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(th, kh, rtol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)


def test_concatenate_batch_axis_needs_equal_samples():
    a, b = tn.layers.Input((3,)), tn.layers.Input((4,))
    with pytest.raises(ValueError, match=r"\[Concatenate\] .* differ on axes other than the "
                                         r"batch axis 0"):
        tn.layers.Concatenate(axis=0)([a, b])


# ------------------------- masked_image_modeling: a Sequential of random layers called on arrays
def _window_of(y, x):
    """(top, left) of y's window in x, or None."""
    h, w = y.shape[1:3]
    for t in range(x.shape[1] - h + 1):
        for s in range(x.shape[2] - w + 1):
            if np.allclose(y, x[:, t:t + h, s:s + w]):
                return t, s
    return None


@pytest.mark.parametrize("lib_name", ["keras", "tessera"])
def test_sequential_of_random_layers_augments_when_given_no_training(keras, lib_name):
    """Keras's image layers default to training=True: a Sequential of them called on arrays
    crops at random, while its Dropout stays off; training=False leaves the images. The same
    under both (their draws differ)."""
    lib = keras if lib_name == "keras" else tn
    x = RNG.uniform(0, 1, (2, 12, 12, 3)).astype("float32")
    crop = lib.Sequential([lib.layers.RandomCrop(8, 8), lib.layers.Dropout(0.5)])
    corners = set()
    for _ in range(6):
        y = np.asarray(crop(x))
        assert y.shape == (2, 8, 8, 3)
        corner = _window_of(y, x)  # a window of the images: no dropout's zeros or scaling
        assert corner is not None
        corners.add(corner)
    assert len(corners) > 1  # drawn anew at each call
    np.testing.assert_array_equal(np.asarray(crop(x, training=False)), x)
    flip = lib.Sequential([lib.Sequential([lib.layers.RandomFlip("horizontal")])])
    ys = [np.asarray(flip(x)) for _ in range(8)]
    assert all(np.allclose(y[i], x[i]) or np.allclose(y[i], x[i, :, ::-1]) for y in ys
               for i in range(2))
    assert any(not np.allclose(y, x) for y in ys)


def test_sequential_without_random_layers_runs_as_one_program():
    """(no random image layer: inference as before, Dropout off)"""
    x = RNG.uniform(0, 1, (3, 5)).astype("float32")
    m = tn.Sequential([tn.layers.Dropout(0.9), tn.layers.Rescaling(2.0)])
    np.testing.assert_allclose(np.asarray(m(x)), 2 * x, rtol=1e-6)


# ---------------- masked_image_modeling: fit on a PyDataset of inputs alone, compute_loss on
# values computed from the outputs
def _mae_like(lib):
    class Masked(lib.Model):
        def __init__(self):
            super().__init__()
            self.encode = lib.layers.Dense(6, kernel_initializer="ones")
            self.decode = lib.layers.Dense(6, kernel_initializer=lib.initializers.Constant(0.1))

        def call(self, x, training=False):
            patches = lib.ops.reshape(x, (-1, 3, 2))
            out = lib.ops.reshape(self.decode(self.encode(x)), (-1, 3, 2))
            index = lib.ops.convert_to_tensor(np.array([[2], [0]], "int32"))
            taken = lib.ops.take_along_axis(patches, index[None, ...] + 0 * lib.ops.cast(
                patches[:, :2, :1], "int32"), axis=1)
            made = lib.ops.take_along_axis(out, index[None, ...] + 0 * lib.ops.cast(
                out[:, :2, :1], "int32"), axis=1)
            return taken, made

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            taken, made = y_pred
            return super().compute_loss(x=x, y=taken, y_pred=made, sample_weight=sample_weight,
                                        training=training)

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            taken, made = y_pred
            return super().compute_metrics(x, taken, made, sample_weight)

    class Images(lib.utils.PyDataset):
        def __init__(self, x):
            super().__init__()
            self.x = x

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return self.x[i * 4:(i + 1) * 4]

    m = Masked()
    m.compile(optimizer=lib.optimizers.SGD(0.01), loss="mse", metrics=["mae"])
    return m, Images


def test_fit_on_a_pydataset_of_inputs_alone_with_compute_loss_of_computed_values(keras):
    x = RNG.normal(size=(12, 6)).astype("float32")
    logs = []
    models = []
    for lib in (tn, keras):
        m, Images = _mae_like(lib)
        h = m.fit(Images(x), epochs=2, verbose=0, shuffle=False).history
        logs.append(h)
        models.append(m)
    (th, kh), (tm, km) = logs, models
    assert sorted(th) == sorted(kh) == ["loss", "mae"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-5)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)
    tr = tm.evaluate(x, verbose=0, return_dict=True)
    kr = km.evaluate(x, verbose=0, return_dict=True)
    for k in kr:
        np.testing.assert_allclose(tr[k], kr[k], rtol=1e-5)


def test_compute_loss_of_values_of_another_shape_still_refused():
    class Bad(tn.Model):
        def __init__(self):
            super().__init__()
            self.d = tn.layers.Dense(4)

        def call(self, x):
            h = self.d(x)
            return h, h * 2.0

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            a, b = y_pred
            return super().compute_loss(x=x, y=a[:, :2], y_pred=b[:, :2])

    m = Bad()
    m.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match=r"\[compute_loss\] y_pred has 1 values for a model "
                                         r"of 2 outputs"):
        m.fit(RNG.normal(size=(4, 3)).astype("float32"), epochs=1, verbose=0)


# ------------------------ nerf: a PyDataset of ((inputs, inputs), labels) for an unbuilt model;
# symbolic values of an unknown batch joined with ones of a fixed batch
BATCH = 4


def _renderer(lib):
    class Render(lib.Model):
        def __init__(self):
            super().__init__()
            self.mlp = lib.layers.Dense(2, kernel_initializer=lib.initializers.Constant(0.2))

        def compile(self, optimizer, loss_fn):
            super().compile(optimizer=optimizer)
            self.loss_fn = loss_fn
            self.loss_tracker = lib.metrics.Mean(name="loss")
            self.psnr_metric = lib.metrics.Mean(name="psnr")

        def call(self, rays):
            points, t = rays
            pred = lib.ops.reshape(self.mlp(points), (BATCH, 3, 2))
            delta = t[..., 1:] - t[..., :-1]
            delta = lib.ops.concatenate([delta, lib.ops.broadcast_to([1e3], (BATCH, 1))],
                                        axis=-1)
            weights = 1.0 - lib.ops.exp(-lib.ops.relu(pred[..., 0]) * delta)
            return lib.ops.sum(weights[..., None] * lib.ops.sigmoid(pred[..., 1:]), axis=-2)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return self.loss_fn(y, y_pred)

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            self.loss_tracker.update_state(self.loss_fn(y, y_pred))
            self.psnr_metric.update_state(lib.ops.psnr(y, y_pred, max_val=1.0))
            return {"loss": self.loss_tracker.result(), "psnr": self.psnr_metric.result()}

        @property
        def metrics(self):
            return [self.loss_tracker, self.psnr_metric]

    class Rays(lib.utils.PyDataset):
        def __init__(self, points, t, y):
            super().__init__()
            self.points, self.t, self.y = points, t, y

        def __len__(self):
            return 2

        def __getitem__(self, i):
            s = slice(i * BATCH, (i + 1) * BATCH)
            return (self.points[s], self.t[s]), self.y[s]

    m = Render()
    m.compile(optimizer=lib.optimizers.Adam(0.01), loss_fn=lib.losses.MeanSquaredError())
    return m, Rays


def test_fit_an_unbuilt_model_on_a_pydataset_of_input_tuples(keras):
    points = RNG.normal(size=(8, 3, 5)).astype("float32")
    t = np.sort(RNG.uniform(0, 1, (8, 3)), axis=-1).astype("float32")
    y = RNG.uniform(0, 1, (8, 1)).astype("float32")
    hs, ms = [], []
    for lib in (tn, keras):
        m, Rays = _renderer(lib)
        hs.append(m.fit(Rays(points, t, y), epochs=2, verbose=0, shuffle=False).history)
        ms.append(m)
    th, kh = hs
    assert sorted(th) == sorted(kh) == ["loss", "psnr"]
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-4)
    for a, b in zip(ms[0].get_weights(), ms[1].get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)


def test_symbolic_unknown_batch_against_a_fixed_one(keras):
    """Keras's symbolic shapes: concatenate keeps the unknown batch, elementwise operations
    take the fixed one."""
    for lib in (tn, keras):
        x = lib.Input((3,))
        ones = np.ones((5, 1), "float32")
        assert tuple(lib.ops.concatenate([x, ones], axis=-1).shape) == (None, 4)
        assert tuple(lib.ops.concatenate([x, np.ones((5, 3), "float32")], axis=0).shape) == \
            (None, 3)
        assert tuple(lib.ops.add(lib.Input((2, 3)), np.ones((5, 2, 3), "float32")).shape) == \
            (5, 2, 3)
    x = tn.Input((3,))
    m = tn.Model(x, tn.ops.concatenate([x, np.full((5, 1), 7.0, "float32")], axis=-1))
    a = RNG.normal(size=(5, 3)).astype("float32")
    np.testing.assert_allclose(m.predict(a, verbose=0),
                               np.concatenate([a, np.full((5, 1), 7.0)], axis=-1), rtol=1e-6)


def test_symbolic_fixed_batch_mismatch_still_refused():
    x = tn.Input((3,))
    with pytest.raises(ValueError, match=r"symbolic operation concatenate"):
        tn.ops.concatenate([x, np.ones((5, 1), "float32"), np.ones((6, 1), "float32")], axis=-1)


def test_psnr_unknown_batch(keras):
    a = RNG.uniform(0, 1, (4, 3)).astype("float32")
    b = RNG.uniform(0, 1, (4, 3)).astype("float32")
    np.testing.assert_allclose(float(tn.ops.psnr(a, b, 1.0)),
                               float(keras.ops.psnr(a, b, 1.0)), rtol=1e-5)
    for lib in (tn, keras):  # labels of an unknown batch against a rendering of a fixed one
        x = lib.Input((3,))
        assert tuple(lib.ops.psnr(x, lib.ops.reshape(x, (4, 3)), 1.0).shape) == ()
    with pytest.raises(ValueError, match=r"\[ops.psnr\] x1 and x2 must have the same shape"):
        tn.ops.psnr(tn.Input((3,)), tn.Input((4,)), 1.0)
