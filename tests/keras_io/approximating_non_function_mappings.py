# Modeled on keras-io examples/keras_recipes/approximating_non_function_mappings.py (mixture
# density networks, written for Keras 3 there with keras_core); written for tessera. Its
# loss builds TensorFlow Probability's Mixture of MultivariateNormalDiag components (TensorFlow
# only, as the guide says): here the same negative log-likelihood written with ops
# (log-softmax of the mixture logits, each component's diagonal normal log-density,
# logsumexp). The same noisy spirals, 10 of 300 points (1,000 there); 5 epochs for the MLP and
# 20 for the MDN (300 there, with the same EarlyStopping and ReduceLROnPlateau); figures
# saved by the Agg backend.
import math
import random

import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import callbacks
from tessera.nn import layers
from tessera.nn import ops


def normalize(x):
    return (x - np.min(x)) / (np.max(x) - np.min(x))


def create_noisy_spiral(n, max_jitter=0.2, size_range=[5, 10]):
    R_X = random.choice(range(size_range[0], size_range[1], 10))
    R_Y = random.choice(range(size_range[0], size_range[1], 10))
    X_0 = random.random() * 100 - 50
    Y_0 = random.random() * 100 - 50

    randomized_jitter = lambda: random.uniform(-max_jitter / 2, max_jitter / 2)
    x = lambda _t: _t / 360.0 * math.cos(_t / 90.0 * math.pi) * R_X + X_0
    y = lambda _t: _t / 360.0 * math.sin(_t / 90.0 * math.pi) * R_Y + Y_0

    out = np.zeros([n, 2])

    for i in range(n):
        t = 360.0 / n * i
        out[i, 0] = x(t) + randomized_jitter()
        out[i, 1] = y(t) + randomized_jitter()
    out = out.astype("float32")
    return (normalize(out[:, 0]) * 10) - 5, (normalize(out[:, 1]) * 10) - 5


xs = []
ys = []

for _ in range(10):
    x, y = create_noisy_spiral(300)
    xs.append(x)
    ys.append(y)

x = np.concatenate(xs, axis=0)
y = np.concatenate(ys, axis=0)
x = np.expand_dims(x, axis=1)

plt.scatter(x, y)
plt.show()

N_HIDDEN = 128

model = keras.Sequential(
    [
        layers.Dense(N_HIDDEN, activation="relu"),
        layers.Dense(N_HIDDEN, activation="relu"),
        layers.Dense(1),
    ]
)
model.compile(optimizer="adam", loss="mse")
model.fit(
    x,
    y,
    epochs=5,
    batch_size=128,
    validation_split=0.15,
    callbacks=[callbacks.EarlyStopping(monitor="val_loss", patience=5)],
)
y_pred = model.predict(x)
plt.scatter(x, y)
plt.scatter(x, y_pred)
plt.show()


def elu_plus_one_plus_epsilon(x):
    return keras.activations.elu(x) + 1 + keras.backend.epsilon()


class MixtureDensityOutput(layers.Layer):
    def __init__(self, output_dimension, num_mixtures, **kwargs):
        super().__init__(**kwargs)
        self.output_dim = output_dimension
        self.num_mix = num_mixtures
        self.mdn_mus = layers.Dense(
            self.num_mix * self.output_dim, name="mdn_mus"
        )  # mix*output vals, no activation
        self.mdn_sigmas = layers.Dense(
            self.num_mix * self.output_dim,
            activation=elu_plus_one_plus_epsilon,
            name="mdn_sigmas",
        )  # mix*output vals exp activation
        self.mdn_pi = layers.Dense(self.num_mix, name="mdn_pi")  # mix vals, logits

    def build(self, input_shape):
        self.mdn_mus.build(input_shape)
        self.mdn_sigmas.build(input_shape)
        self.mdn_pi.build(input_shape)
        super().build(input_shape)

    @property
    def trainable_weights(self):
        return (
            self.mdn_mus.trainable_weights
            + self.mdn_sigmas.trainable_weights
            + self.mdn_pi.trainable_weights
        )

    @property
    def non_trainable_weights(self):
        return (
            self.mdn_mus.non_trainable_weights
            + self.mdn_sigmas.non_trainable_weights
            + self.mdn_pi.non_trainable_weights
        )

    def call(self, x, mask=None):
        return layers.concatenate(
            [self.mdn_mus(x), self.mdn_sigmas(x), self.mdn_pi(x)], name="mdn_outputs"
        )


OUTPUT_DIMS = 1
N_MIXES = 20

mdn_network = keras.Sequential(
    [
        layers.Dense(N_HIDDEN, activation="relu"),
        layers.Dense(N_HIDDEN, activation="relu"),
        MixtureDensityOutput(OUTPUT_DIMS, N_MIXES),
    ]
)


def get_mixture_loss_func(output_dim, num_mixes):
    def mdn_loss_func(y_true, y_pred):
        # Reshape inputs in case this is used in a TimeDistribued layer
        y_pred = ops.reshape(y_pred, [-1, (2 * num_mixes * output_dim) + num_mixes])
        y_true = ops.reshape(y_true, [-1, output_dim])
        # Split the inputs into paramaters
        out_mu, out_sigma, out_pi = ops.split(
            y_pred, [num_mixes * output_dim, 2 * num_mixes * output_dim], axis=-1
        )
        # The mixture's log-density: logsumexp over the components of
        # log pi_k + log N(y | mu_k, diag(sigma_k^2)) (tfd.Mixture.log_prob).
        mus = ops.reshape(out_mu, [-1, num_mixes, output_dim])
        sigs = ops.reshape(out_sigma, [-1, num_mixes, output_dim])
        z = (ops.expand_dims(y_true, 1) - mus) / sigs
        component_log_prob = ops.sum(
            -0.5 * ops.square(z) - ops.log(sigs) - 0.5 * math.log(2 * math.pi), axis=-1
        )
        log_pi = ops.log_softmax(out_pi, axis=-1)
        loss = ops.logsumexp(log_pi + component_log_prob, axis=-1)
        loss = ops.negative(loss)
        loss = ops.mean(loss)
        return loss

    return mdn_loss_func


mdn_network.compile(loss=get_mixture_loss_func(OUTPUT_DIMS, N_MIXES), optimizer="adam")

mdn_network.fit(
    x,
    y,
    epochs=20,
    batch_size=128,
    validation_split=0.15,
    callbacks=[
        callbacks.EarlyStopping(monitor="loss", patience=10, restore_best_weights=True),
        callbacks.ReduceLROnPlateau(monitor="loss", patience=5),
    ],
)

y_pred_mixture = mdn_network.predict(x)
print(y_pred_mixture.shape)


def split_mixture_params(params, output_dim, num_mixes):
    mus = params[: num_mixes * output_dim]
    sigs = params[num_mixes * output_dim : 2 * num_mixes * output_dim]
    pi_logits = params[-num_mixes:]
    return mus, sigs, pi_logits


def softmax(w, t=1.0):
    e = np.array(w) / t  # adjust temperature
    e -= e.max()  # subtract max to protect from exploding exp values.
    e = np.exp(e)
    dist = e / np.sum(e)
    return dist


def sample_from_categorical(dist):
    r = np.random.rand(1)  # uniform random number in [0,1]
    accumulate = 0
    for i in range(0, dist.size):
        accumulate += dist[i]
        if accumulate >= r:
            return i
    print("Error sampling categorical model.")
    return -1


def sample_from_output(params, output_dim, num_mixes, temp=1.0, sigma_temp=1.0):
    mus, sigs, pi_logits = split_mixture_params(params, output_dim, num_mixes)
    pis = softmax(pi_logits, t=temp)
    m = sample_from_categorical(pis)
    mus_vector = mus[m * output_dim : (m + 1) * output_dim]
    sig_vector = sigs[m * output_dim : (m + 1) * output_dim]
    scale_matrix = np.identity(output_dim) * sig_vector  # scale matrix from diag
    cov_matrix = np.matmul(scale_matrix, scale_matrix.T)  # cov is scale squared.
    cov_matrix = cov_matrix * sigma_temp  # adjust for sigma temperature
    sample = np.random.multivariate_normal(mus_vector, cov_matrix, 1)
    return sample


y_samples = np.apply_along_axis(sample_from_output, 1, y_pred_mixture, 1, N_MIXES, temp=1.0)
print(y_samples.shape)

fig, axs = plt.subplots(1, 3)
fig.set_figheight(3)
fig.set_figwidth(12)
axs[0].set_title("Ground Truth")
axs[0].scatter(x, y, alpha=0.05, color="blue")
axs[1].set_title("Normal Model prediction")
axs[1].scatter(x, y_pred, alpha=0.05, color="red")
axs[2].scatter(x, y_samples[:, :, 0], color="green", alpha=0.05,
               label="Mixture Density Network prediction")
axs[2].set_title("Mixture Density Network prediction")
plt.show()
