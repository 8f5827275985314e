# Modeled on keras-io examples/generative/real_nvp.py (a normalizing flow: affine coupling
# layers as functional models of two outputs with l2 kernel regularizers, a Model subclass
# whose `call(x, training=True)` runs the flow forwards or backwards by its training flag,
# NumPy masks on the model, a log-likelihood loss, Normalization.adapt and an eager call on
# the data, predict on latent samples); written for tessera. Keras 3 form: the example's
# `train_step`/`test_step` (tf.GradientTape and a `loss_tracker`) become one `compute_loss`
# override with the same loss (the example's tape leaves out the regularizers' losses, so
# does the override), `ops` for tf's math, and the latent's tfp MultivariateNormalDiag (loc
# 0, scale 1) written out: its log density and NumPy's normal draws. In place of sklearn's
# make_moons: the two moons drawn in NumPy (3000 points, noise 0.05); Dense widths 64 (256),
# learning rate 0.001 (0.0001), 12 epochs (300); figures saved.
import math

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops
from tessera.nn import regularizers


def make_moons(n_samples, noise):
    rng = np.random.default_rng(0)
    outer = n_samples // 2
    inner = n_samples - outer
    t_outer = np.linspace(0, np.pi, outer)
    t_inner = np.linspace(0, np.pi, inner)
    points = np.concatenate([
        np.stack([np.cos(t_outer), np.sin(t_outer)], axis=1),
        np.stack([1 - np.cos(t_inner), 1 - np.sin(t_inner) - 0.5], axis=1)])
    points += rng.normal(scale=noise, size=points.shape)
    labels = np.concatenate([np.zeros(outer), np.ones(inner)])
    order = rng.permutation(n_samples)
    return points[order], labels[order]


data = make_moons(3000, noise=0.05)[0].astype("float32")
norm = layers.Normalization()
norm.adapt(data)
normalized_data = norm(data)

output_dim = 64
reg = 0.01


def Coupling(input_shape):
    input = keras.layers.Input(shape=(input_shape,))

    t_layer_1 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(input)
    t_layer_2 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(t_layer_1)
    t_layer_3 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(t_layer_2)
    t_layer_4 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(t_layer_3)
    t_layer_5 = keras.layers.Dense(input_shape, activation="linear",
                                   kernel_regularizer=regularizers.l2(reg))(t_layer_4)

    s_layer_1 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(input)
    s_layer_2 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(s_layer_1)
    s_layer_3 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(s_layer_2)
    s_layer_4 = keras.layers.Dense(output_dim, activation="relu",
                                   kernel_regularizer=regularizers.l2(reg))(s_layer_3)
    s_layer_5 = keras.layers.Dense(input_shape, activation="tanh",
                                   kernel_regularizer=regularizers.l2(reg))(s_layer_4)

    return keras.Model(inputs=input, outputs=[s_layer_5, t_layer_5])


def standard_normal_log_prob(z):
    """log N(z; 0, I) of each row of 2-D points (tfp's MultivariateNormalDiag(0, 1))."""
    return -0.5 * ops.sum(ops.square(z), axis=1) - math.log(2 * math.pi)


class RealNVP(keras.Model):
    def __init__(self, num_coupling_layers):
        super().__init__()

        self.num_coupling_layers = num_coupling_layers
        self.masks = np.array([[0, 1], [1, 0]] * (num_coupling_layers // 2), dtype="float32")
        self.layers_list = [Coupling(2) for i in range(num_coupling_layers)]

    def call(self, x, training=True):
        log_det_inv = 0
        direction = 1
        if training:
            direction = -1
        for i in range(self.num_coupling_layers)[::direction]:
            x_masked = x * self.masks[i]
            reversed_mask = 1 - self.masks[i]
            s, t = self.layers_list[i](x_masked)
            s *= reversed_mask
            t *= reversed_mask
            gate = (direction - 1) / 2
            x = (reversed_mask * (x * ops.exp(direction * s) + direction * t * ops.exp(gate * s))
                 + x_masked)
            log_det_inv += gate * ops.sum(s, axis=1)

        return x, log_det_inv

    def log_loss(self, x):
        y, logdet = self(x)
        log_likelihood = standard_normal_log_prob(y) + logdet
        return -ops.mean(log_likelihood)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return self.log_loss(x)


model = RealNVP(num_coupling_layers=6)

model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001))

history = model.fit(normalized_data, batch_size=256, epochs=12, verbose=2,
                    validation_split=0.2)

plt.figure(figsize=(15, 10))
plt.plot(history.history["loss"])
plt.plot(history.history["val_loss"])
plt.title("model loss")
plt.legend(["train", "validation"], loc="upper right")
plt.ylabel("loss")
plt.xlabel("epoch")
plt.savefig("real_nvp_loss.png")
plt.close()

# From data to latent space (an eager call: training=True, the signature's default).
z, _ = model(normalized_data)

# From latent space to data (predict runs the call with training=False: the inverse flow).
samples = np.random.normal(size=(3000, 2)).astype("float32")
x, _ = model.predict(samples)

# The flow's two directions are inverses of each other.
z = np.asarray(z)
back, _ = model.predict(z, verbose=0)
print("round trip error:", float(np.max(np.abs(back - np.asarray(normalized_data)))))
assert np.allclose(back, np.asarray(normalized_data), atol=1e-3)
print("latent mean, std:", z.mean(axis=0), z.std(axis=0))

f, axes = plt.subplots(2, 2)
f.set_size_inches(20, 15)
normalized = np.asarray(normalized_data)
axes[0, 0].scatter(normalized[:, 0], normalized[:, 1], color="r")
axes[0, 0].set(title="Inference data space X", xlabel="x", ylabel="y")
axes[0, 1].scatter(z[:, 0], z[:, 1], color="r")
axes[0, 1].set(title="Inference latent space Z", xlabel="x", ylabel="y")
axes[1, 0].scatter(samples[:, 0], samples[:, 1], color="g")
axes[1, 0].set(title="Generated latent space Z", xlabel="x", ylabel="y")
axes[1, 1].scatter(x[:, 0], x[:, 1], color="g")
axes[1, 1].set(title="Generated data space X", label="x", ylabel="y")
f.savefig("real_nvp_spaces.png")
plt.close(f)
