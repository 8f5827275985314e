# Modeled on keras-io guides/custom_train_step_in_tensorflow.py; written for tessera. The guide's
# train_step/test_step overrides are TensorFlow's: here keras.GradientTape (tessera.nn's) for
# tf.GradientTape, ops.shape/concatenate/ones/zeros for tf.shape/concat/ones/zeros, a
# `tessera.data.Dataset` for tf.data. In place of MNIST: 512 images of 28x28 with a bright bar
# at a random height (the GAN's "real" images); the regression data are random as in the guide,
# with y a fixed linear function of x so that the models can learn (y random there). 1,000
# samples as the guide; GAN filters / 4 (16 and 32), latent 32 (128), 8 batches (100).
import numpy as np
import tessera.data
import tessera.nn as keras
from tessera.nn import layers, ops

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
w_true = rng.normal(0, 0.3, (32, 1))


def regression_data():
    x = np.random.random((1000, 32))
    return x, x @ w_true + 0.05 * np.random.random((1000, 1))


# A first simple example: compute_loss, the optimizer, the compiled metrics.
class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with keras.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


inputs = keras.Input(shape=(32,))
outputs = keras.layers.Dense(1)(inputs)
model = CustomModel(inputs, outputs)
model.compile(optimizer="adam", loss="mse", metrics=["mae"])
x, y = regression_data()
history = model.fit(x, y, epochs=3)
print(history.history)
assert sorted(history.history) == ["loss", "mae"], sorted(history.history)
assert history.history["loss"][-1] < history.history["loss"][0]


# Going lower-level: the model's own loss tracker and metric, listed in `metrics`.
class CustomModel(keras.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
        self.loss_fn = keras.losses.MeanSquaredError()

    def train_step(self, data):
        x, y = data
        with keras.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.loss_fn(y, y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        self.loss_tracker.update_state(loss)
        self.mae_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.mae_metric]


inputs = keras.Input(shape=(32,))
outputs = keras.layers.Dense(1)(inputs)
model = CustomModel(inputs, outputs)
model.compile(optimizer="adam")
x, y = regression_data()
history = model.fit(x, y, epochs=5)
print(history.history)
assert history.history["loss"][-1] < history.history["loss"][0]


# Supporting sample_weight and class_weight.
class CustomModel(keras.Model):
    def train_step(self, data):
        if len(data) == 3:
            x, y, sample_weight = data
        else:
            sample_weight = None
            x, y = data
        with keras.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply(gradients, trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred, sample_weight=sample_weight)
        return {m.name: m.result() for m in self.metrics}


inputs = keras.Input(shape=(32,))
outputs = keras.layers.Dense(1)(inputs)
model = CustomModel(inputs, outputs)
model.compile(optimizer="adam", loss="mse", metrics=["mae"])
x, y = regression_data()
sw = np.random.random((1000, 1))
history = model.fit(x, y, sample_weight=sw, epochs=3)
print(history.history)
assert history.history["loss"][-1] < history.history["loss"][0]


# Providing your own evaluation step.
class CustomModel(keras.Model):
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


inputs = keras.Input(shape=(32,))
outputs = keras.layers.Dense(1)(inputs)
model = CustomModel(inputs, outputs)
model.compile(loss="mse", metrics=["mae"])
x, y = regression_data()
result = model.evaluate(x, y)
print("evaluate", result)
# The MAE is the predictions' over all samples; the loss tracker (a Mean updated with each
# batch's loss, unweighted) is the mean of the 32 batches' MSE (the last one of 8 samples).
pred = model.predict(x, verbose=0)
batch_mse = [np.mean((pred[i:i + 32] - y[i:i + 32]) ** 2) for i in range(0, 1000, 32)]
np.testing.assert_allclose(result, [np.mean(batch_mse), np.mean(np.abs(pred - y))], rtol=1e-4)

# Wrapping up: an end-to-end GAN example.
discriminator = keras.Sequential(
    [
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(32, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.GlobalMaxPooling2D(),
        layers.Dense(1),
    ],
    name="discriminator",
)
latent_dim = 32
generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        layers.Dense(7 * 7 * 32),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Reshape((7, 7, 32)),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(1, (7, 7), padding="same", activation="sigmoid"),
    ],
    name="generator",
)


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.seed_generator = keras.random.SeedGenerator(1337)

    @property
    def metrics(self):
        return [self.d_loss_tracker, self.g_loss_tracker]

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, real_images):
        if isinstance(real_images, tuple):
            real_images = real_images[0]
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        generated_images = self.generator(random_latent_vectors)
        combined_images = ops.concatenate([generated_images, real_images], axis=0)
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))],
                                 axis=0)
        # Random noise on the labels, the guide's "important trick".
        labels += 0.05 * keras.random.uniform(ops.shape(labels), seed=self.seed_generator)
        with keras.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply(grads, self.discriminator.trainable_weights)

        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        misleading_labels = ops.zeros((batch_size, 1))
        with keras.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply(grads, self.generator.trainable_weights)

        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}


batch_size = 64
all_digits = rng.integers(0, 64, (512, 28, 28), dtype=np.uint8)
rows = rng.integers(4, 22, 512)
all_digits[np.arange(512)[:, None], rows[:, None] + np.arange(3)] = 255
all_digits = all_digits.astype("float32") / 255.0
all_digits = np.reshape(all_digits, (-1, 28, 28, 1))
dataset = tessera.data.Dataset.from_tensor_slices(all_digits)
dataset = dataset.shuffle(buffer_size=1024).batch(batch_size)

gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
)
d_before = [w.copy() for w in discriminator.get_weights()]
g_before = [w.copy() for w in generator.get_weights()]
history = gan.fit(dataset.take(8), epochs=1)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
assert sorted(history.history) == ["d_loss", "g_loss"], sorted(history.history)
assert any(not np.array_equal(a, b) for a, b in zip(d_before, discriminator.get_weights()))
assert any(not np.array_equal(a, b) for a, b in zip(g_before, generator.get_weights()))
