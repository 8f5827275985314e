"""Issue 30's patch_convnet gap (tessera learned faster than Keras under the driver): a
whole run of the script's model, schedule and optimizer from the same initial weights and
batches gives Keras 3's (JAX) losses step by step, through the warmup, the cosine and the
epochs' boundaries; what remained was each framework's own draw (tests/keras_io/README.md,
"patch_convnet's gap")."""

import importlib.util
import os
import types

import numpy as np

import tessera.nn as tn

_DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keras_io",
                       "_driver.py")
_spec = importlib.util.spec_from_file_location("keras_io_driver", _DRIVER)
driver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(driver)

RNG = np.random.default_rng(30)


def _patch_convnet(lib, dims=8, classes=4):
    """patch_convnet's parts, shrunk: a convolutional stem, a trunk block (LayerNormalization,
    convolutions, a squeeze-excite) with its residual, and the attention pooling of a class
    token (a Variable made in __init__, repeated by the symbolic batch size) with the
    attention's and the MLP's dropout, all called without training= by the model's call."""
    ops, layers = lib.ops, lib.layers

    class SqueezeExcite(layers.Layer):
        def build(self, input_shape):
            self.squeeze = layers.GlobalAveragePooling2D(keepdims=True)
            self.reduction = layers.Dense(input_shape[-1] // 2, activation="relu",
                                          use_bias=False)
            self.excite = layers.Dense(input_shape[-1], activation="sigmoid", use_bias=False)

        def call(self, x):
            return x * self.excite(self.reduction(self.squeeze(x)))

    class AttentionPooling(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.cls = lib.Variable(ops.zeros((1, 1, dims)))

        def build(self, input_shape):
            self.attention = layers.MultiHeadAttention(num_heads=1, key_dim=dims, dropout=0.2)
            self.norm1 = layers.LayerNormalization(epsilon=1e-6)
            self.norm2 = layers.LayerNormalization(epsilon=1e-6)
            self.mlp = lib.Sequential([layers.Dense(dims, activation=ops.gelu),
                                       layers.Dropout(0.2), layers.Dense(dims)])
            self.dense = layers.Dense(classes)

        def call(self, x):
            token = ops.repeat(self.cls, repeats=ops.shape(x)[0], axis=0)
            x = self.norm1(ops.concatenate([token, x], axis=1))
            x, scores = self.attention(query=x[:, 0:1], key=x, value=x,
                                       return_attention_scores=True)
            token = self.norm2(ops.squeeze(token + x, axis=1))
            return self.dense(token + self.mlp(token)), scores

    class Net(lib.Model):
        def __init__(self):
            super().__init__()
            self.rescale = layers.Rescaling(1 / 255.0)
            self.stem = layers.Conv2D(dims, 3, strides=2, padding="same", activation=ops.gelu)
            self.block = lib.Sequential([
                layers.LayerNormalization(epsilon=1e-6),
                layers.Conv2D(dims, 1, activation=ops.gelu),
                layers.Conv2D(dims, 3, padding="same", activation=ops.gelu),
                SqueezeExcite(),
                layers.Conv2D(dims, 1)])
            self.flat = layers.Reshape((-1, dims))
            self.pool = AttentionPooling()

        def call(self, images, training=False):
            x = self.stem(self.rescale(images))
            x = self.flat(x + self.block(x))
            return self.pool(x)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return super().compute_loss(x, y, y_pred[0], sample_weight, training=training)

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            return super().compute_metrics(x, y, y_pred[0], sample_weight)

    class WarmUpCosine(lib.optimizers.schedules.LearningRateSchedule):
        def __init__(self, lr_start, lr_max, warmup_steps, total_steps):
            super().__init__()
            self.lr_start, self.lr_max = lr_start, lr_max
            self.warmup_steps, self.total_steps = warmup_steps, total_steps

        def __call__(self, step):
            step = ops.cast(step, "float32")
            cos = ops.cos(np.pi * (step - self.warmup_steps)
                          / float(self.total_steps - self.warmup_steps))
            lr = 0.5 * self.lr_max * (1 + cos)
            slope = (self.lr_max - self.lr_start) / self.warmup_steps
            lr = ops.where(step < self.warmup_steps, slope * step + self.lr_start, lr)
            return ops.where(step > self.total_steps, 0.0, lr)

    return Net(), WarmUpCosine


def _step_losses(running):
    """The batch logs' running means of each epoch turned back into each step's loss."""
    return [running[0]] + [(i + 1) * running[i] - i * running[i - 1]
                           for i in range(1, len(running))]


def test_whole_run_from_the_same_weights(keras):
    """3 epochs of 6 steps (a warmup of 3, then the cosine to 0 at step 18), AdamW with a
    weight decay large enough to show on which variables it acts: the same loss at every
    step, the same epoch logs and the same weights after, as Keras."""
    x = RNG.uniform(0, 255, (48, 16, 16, 3)).astype("float32")
    y = RNG.integers(0, 4, (48, 1)).astype("uint8")
    x[np.arange(48), 2:6, 2 + 3 * y[:, 0]] = 255  # the class as a bright bar's column
    runs = []
    weights = None
    for lib in (tn, keras):
        model, schedule = _patch_convnet(lib)
        model(x[:2])
        if weights is None:
            weights = model.get_weights()  # tessera's own draw, given to Keras's model
        else:
            assert [w.shape for w in weights] == [np.shape(w) for w in model.get_weights()]
            model.set_weights(weights)
        model.compile(
            optimizer=lib.optimizers.AdamW(schedule(1e-5, 5e-3, 3, 18), weight_decay=0.05),
            loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[lib.metrics.SparseCategoricalAccuracy(name="accuracy")])
        seen = []

        class Record(lib.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                seen.append(float(logs["loss"]))

        h = model.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                      callbacks=[Record()])
        steps = [s for e in range(3) for s in _step_losses(seen[6 * e:6 * e + 6])]
        runs.append((steps, h.history, model.get_weights(),
                     int(np.asarray(model.optimizer.iterations))))
    (ts, th, tw, ti), (ks, kh, kw, ki) = runs
    assert len(ts) == len(ks) == 18 and ti == ki == 18
    np.testing.assert_allclose(ts, ks, rtol=1e-4, atol=1e-5)
    assert sorted(th) == sorted(kh)
    for k in kh:
        np.testing.assert_allclose(th[k], kh[k], rtol=1e-4, atol=1e-5)
    for a, b in zip(tw, kw):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-3, atol=1e-4)
    # the run moved the weights (a test of a run that trains nothing would pass vacuously)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(tw, weights)) > 1e-3


def test_driver_reseeds_the_script():
    """run_all.py --seed N (KERAS_IO_SEED): the script's set_random_seed(its seed) seeds the
    framework with N, the seed distributions of tests/keras_io/README.md were drawn so."""
    seen = []
    fake = types.SimpleNamespace(utils=types.SimpleNamespace(set_random_seed=seen.append))
    driver.reseed(fake, None)
    fake.utils.set_random_seed(42)
    driver.reseed(fake, "7")
    fake.utils.set_random_seed(42)
    assert seen == [42, 7]
