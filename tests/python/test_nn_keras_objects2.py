"""Issue 30, the rest of Keras's object model, each run under Keras 3 (JAX backend) and
tessera.nn and compared: a BatchNormalization read in inference mode after its training-mode
call in the same GradientTape's loss, and the optimizers' variables (`optimizer.variables`,
`iterations`, `learning_rate`: names, paths, shapes, order, values after training, and copying
them between optimizers with `assign`)."""

import numpy as np
import pytest

import tessera.nn as tn


# ------------------------------------------------------------------ BatchNormalization


def _bn_model(lib):
    return lib.Sequential([lib.Input((4,)), lib.layers.Dense(5, use_bias=False),
                           lib.layers.BatchNormalization(momentum=0.6),
                           lib.layers.Activation("tanh"), lib.layers.Dense(1)],
                          name="discriminator")


class _TrainThenRead(tn.Model):
    """A tape step calling the model in training mode, then (without `training`) in
    inference mode: the second call reads the moving statistics the first moved."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def train_step(self, data):
        x = data
        with tn.GradientTape() as tape:
            loss = tn.ops.mean(tn.ops.square(self.inner(x, training=True)))
            loss = loss + tn.ops.mean(self.inner(x * 2.0))
        grads = tape.gradient(loss, self.inner.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.inner.trainable_weights))
        return {"loss": loss}


def _keras_train_then_read(keras, weights, batches, lr):
    """Keras on JAX: one stateless call in training mode, then one in inference mode on the
    moving statistics it returned, inside one differentiated loss (as Keras's StatelessScope
    reads an assigned variable)."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    m = _bn_model(keras)
    m.set_weights(weights)
    opt = keras.optimizers.SGD(lr)
    opt.build(m.trainable_variables)
    tv = [v.value for v in m.trainable_variables]
    nv = [v.value for v in m.non_trainable_variables]
    ov = [v.value for v in opt.variables]
    losses = []
    for x in batches:
        def loss_fn(tv_, nv_):
            y1, nv2 = m.stateless_call(tv_, nv_, x, training=True)
            y2, _ = m.stateless_call(tv_, nv2, x * 2.0, training=False)
            return jnp.mean(jnp.square(y1)) + jnp.mean(y2), nv2

        (loss, nv), grads = jax.value_and_grad(loss_fn, has_aux=True)(tv, nv)
        tv, ov = opt.stateless_apply(ov, grads, tv)
        losses.append(float(loss))
    return losses, [np.asarray(v) for v in tv + nv]


def test_batch_norm_read_in_inference_after_its_training_call_as_keras(keras):
    rng = np.random.default_rng(5)
    x = rng.normal(0.5, 1.5, (16, 4)).astype("float32")
    km = _bn_model(keras)
    weights = [np.asarray(w) for w in km.get_weights()]
    batches = [x[:8], x[8:]] * 2
    k_losses, k_weights = _keras_train_then_read(keras, weights, batches, 0.1)
    inner = _bn_model(tn)
    inner.set_weights(weights)
    model = _TrainThenRead(inner)
    model.compile(tn.optimizers.SGD(0.1))
    seen = []
    cb = tn.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs["loss"]))
    model.fit(x, batch_size=8, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
    np.testing.assert_allclose(seen, k_losses, rtol=1e-5, atol=1e-6)
    got = [np.asarray(v) for v in inner.trainable_weights + inner.non_trainable_weights]
    assert len(got) == len(k_weights)
    for a, b in zip(got, k_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # the inference call's gradient reaches the weights through the moved statistics, as
    # JAX differentiates them: without that term the first step's loss would still agree
    # but the weights would not (checked above); and the statistics did move
    assert not np.allclose(np.asarray(inner.layers[1].moving_mean), 0.0)
