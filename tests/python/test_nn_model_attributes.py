"""Model and optimizer attributes Keras scripts read, against Keras 3 on JAX (the
oracle): trainable_variables, optimizer.iterations, optimizer.learning_rate after a
LearningRateScheduler or ReduceLROnPlateau (and set by a user's callback),
model.compiled and model.loss."""

import numpy as np

import tessera.nn as nn


def _run(k):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    m = k.Sequential([k.Input((5,)), k.layers.Dense(4, activation="relu"),
                      k.layers.BatchNormalization(), k.layers.Dense(2, activation="softmax")])
    out = {"compiled_before": m.compiled}
    m.compile("adam", "sparse_categorical_crossentropy")
    seen = []

    class Spy(k.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(round(float(self.model.optimizer.learning_rate), 8))

    class SetRate(k.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 3:
                self.model.optimizer.learning_rate = 0.01

    m.fit(x, y, batch_size=16, epochs=3, verbose=0,
          callbacks=[k.callbacks.LearningRateScheduler(lambda e, lr: lr * 0.5), Spy()])
    out["scheduled"] = seen[:]
    out["iterations"] = int(m.optimizer.iterations)
    seen.clear()
    m.fit(x, y, batch_size=32, epochs=5, verbose=0, callbacks=[SetRate(), Spy()])
    out["after"] = seen[:]
    out["iterations_2"] = int(m.optimizer.iterations)
    out["compiled"] = m.compiled
    out["loss"] = m.loss
    out["variables"] = (len(m.trainable_variables), len(m.non_trainable_variables),
                        len(m.layers[1].trainable_variables),
                        len(m.layers[1].non_trainable_variables))
    return out


def test_model_attributes_as_keras(keras):
    assert _run(nn) == _run(keras)


def test_summary_arguments():
    """Keras's summary arguments: expand_nested lists the layers inside a nested
    model and a user's layer, show_trainable a Y/N column, layer_range a slice
    by names (a bad one is an error naming the layers), positions the widths."""
    import pytest

    L = nn.layers

    class Block(L.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.a, self.b = L.Dense(4, name="block_a"), L.Dense(4, name="block_b")

        def call(self, x):
            return self.b(self.a(x))

    inner = nn.Sequential([nn.Input((4,)), L.Dense(4, name="inner_a")], name="inner")
    i = nn.Input((3,))
    o = L.Dense(1, name="last", trainable=False)(inner(Block(name="block")(L.Dense(4)(i))))
    m = nn.Model(i, o)
    lines = []
    m.summary(expand_nested=True, show_trainable=True, print_fn=lines.append)
    text = "\n".join(lines)
    for name in ("└ block_a (Dense)", "└ block_b (Dense)", "└ inner_a (Dense)"):
        assert name in text
    assert "Trainable" in lines[2]
    last = next(line for line in lines if line.startswith("last (Dense)"))
    assert last.split()[-1] == "N"
    lines.clear()
    m.summary(layer_range=("block", "inner"), print_fn=lines.append)
    rows = [line.split()[0] for line in lines[3:] if line and line[0].isalpha()]
    assert rows[:2] == ["block", "inner"] and "last" not in rows
    with pytest.raises(ValueError, match=r"\[summary\] layer_range must be two of the model's "
                                         r"layer names .* got \('block', 'nope'\)"):
        m.summary(layer_range=("block", "nope"))
    lines.clear()
    m.summary(positions=[0.5, 0.8, 1.0], line_length=60, print_fn=lines.append)
    assert len(lines[1]) == 60


def test_dict_inputs_as_keras(keras, tmp_path):
    """Model({"x1": a, "x2": b}, ...) takes data dicts by those keys (or by the
    Inputs' names, as Keras also does), keeps them through save/load and
    clone_model, and gives Keras's values for the same weights."""
    outs = []
    rng = np.random.default_rng(3)
    d = {"x1": rng.normal(size=(6, 3)).astype("float32"),
         "x2": rng.normal(size=(6, 2)).astype("float32")}
    w = [rng.normal(size=(5, 1)).astype("float32"), np.zeros(1, "float32")]
    for k in (nn, keras):
        a, b = k.Input((3,), name="a"), k.Input((2,), name="b")
        m = k.Model({"x1": a, "x2": b}, k.layers.Dense(1)(k.layers.Concatenate()([a, b])))
        m.set_weights(w)
        outs.append(m.predict(d, verbose=0))
        outs.append(m.predict({"a": d["x1"], "b": d["x2"]}, verbose=0))
    np.testing.assert_allclose(outs[0], outs[2], rtol=1e-6)
    np.testing.assert_allclose(outs[1], outs[2], rtol=1e-6)
    assert sorted(m.input) == ["x1", "x2"]
    a, b = nn.Input((3,), name="a"), nn.Input((2,), name="b")
    ours = nn.Model({"x1": a, "x2": b}, nn.layers.Dense(1)(nn.layers.Concatenate()([a, b])))
    ours.save(tmp_path / "m.keras")
    again = nn.models.load_model(tmp_path / "m.keras")
    np.testing.assert_array_equal(again.predict(d, verbose=0), ours.predict(d, verbose=0))
    np.testing.assert_array_equal(nn.models.clone_model(ours).predict(d, verbose=0).shape, (6, 1))
    import pytest
    with pytest.raises(ValueError, match=r"keyed \['x1', 'x2'\] \(missing \['a', 'b'\]"):
        ours.predict({"x1": d["x1"]}, verbose=0)


def test_on_batch_methods_as_keras(keras):
    """train_on_batch (one update; the batch's loss and metrics, afresh at each
    call as Keras 3), test_on_batch, predict_on_batch: Keras's values for the
    same weights and batches."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(16, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    w = [rng.normal(size=(4, 2)).astype("float32"), np.zeros(2, "float32")]
    got = []
    for k in (nn, keras):
        m = k.Sequential([k.Input((4,)), k.layers.Dense(2, activation="softmax")])
        m.set_weights(w)
        m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
        r = [m.train_on_batch(x[:8], y[:8]), m.train_on_batch(x[8:], y[8:], return_dict=True),
             m.test_on_batch(x, y), m.predict_on_batch(x[:3])]
        got.append(r)
    (a1, a2, a3, a4), (b1, b2, b3, b4) = got
    np.testing.assert_allclose(a1, b1, rtol=1e-5)
    assert set(a2) == set(b2)
    np.testing.assert_allclose([a2[k] for k in sorted(a2)], [b2[k] for k in sorted(b2)],
                               rtol=1e-5)
    np.testing.assert_allclose(a3[0], b3[0], rtol=1e-5)  # the loss (Keras's metrics order
    np.testing.assert_allclose(a4, b4, rtol=1e-5)        # is its compile_metrics')


def test_generator_input_as_keras(keras):
    """fit/evaluate/predict on a Python generator of batches, steps_per_epoch
    (steps) batches an epoch from it, as Keras reads one: the same weights and
    losses as Keras's on the same batches; a generator of scalars is an error
    that says what a batch is."""
    import pytest

    rng = np.random.default_rng(7)
    xs = rng.normal(size=(12, 8, 3)).astype("float32")
    ys = xs.sum(axis=2, keepdims=True)[:, :, :1] * 0.5
    w = [rng.normal(size=(3, 1)).astype("float32"), np.zeros(1, "float32")]

    def batches():
        i = 0
        while True:
            yield xs[i % 12], ys[i % 12]
            i += 1

    results = []
    for k in (nn, keras):
        m = k.Sequential([k.Input((3,)), k.layers.Dense(1)])
        m.set_weights(w)
        m.compile(k.optimizers.SGD(0.05), "mse")
        h = m.fit(batches(), steps_per_epoch=4, epochs=3, verbose=0)
        results.append((h.history["loss"], m.get_weights(),
                        m.evaluate((b for b in [(xs[0], ys[0]), (xs[1], ys[1])]), verbose=0),
                        m.predict(((b,) for b in xs[:2]), verbose=0)))
    (l1, w1, e1, p1), (l2, w2, e2, p2) = results
    np.testing.assert_allclose(l1, l2, rtol=1e-5)
    for a, b in zip(w1, w2):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e1, e2, rtol=1e-5)
    np.testing.assert_allclose(p1, p2, rtol=1e-5)
    m = nn.Sequential([nn.Input((3,)), nn.layers.Dense(1)])
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match=r"\[fit\] batch 0 of the generator is a scalar"):
        m.fit((i for i in range(3)), verbose=0)
    with pytest.raises(ValueError, match=r"\[fit\] x is the generator, which yields no"):
        m.fit((i for i in []), verbose=0)


def test_freezing_a_nested_model_as_keras(keras):
    """keras-io's transfer-learning recipe: `base.trainable = False` freezes every
    layer of the nested base (its BatchNormalization in inference mode), and
    `True` thaws them: Keras's trainable counts, losses and moving statistics."""
    rng = np.random.default_rng(0)
    x = rng.normal(2.0, 3.0, size=(16, 6, 6, 2)).astype("float32")
    y = (rng.random(16) > 0.5).astype("float32")
    got = []
    for k in (nn, keras):
        L = k.layers
        base = k.Sequential([k.Input((6, 6, 2)), L.Conv2D(3, 3, kernel_initializer="ones"),
                             L.BatchNormalization(), L.GlobalAveragePooling2D()], name="base")
        base.trainable = False
        inputs = k.Input((6, 6, 2))
        model = k.Model(inputs, L.Dense(1, kernel_initializer="ones")(base(inputs, training=False)))
        model.compile(k.optimizers.SGD(1e-3), k.losses.BinaryCrossentropy(from_logits=True))
        r = [len(model.trainable_weights), all(not la.trainable for la in base.layers)]
        r.append(model.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"])
        base.trainable = True
        model.compile(k.optimizers.SGD(1e-5), k.losses.BinaryCrossentropy(from_logits=True))
        r.append(len(model.trainable_weights))
        r.append(model.fit(x, y, batch_size=8, shuffle=False, verbose=0).history["loss"])
        r.append(base.layers[1].get_weights()[2])
        got.append(r)
    (a0, a1, a2, a3, a4, a5), (b0, b1, b2, b3, b4, b5) = got
    assert (a0, a1, a3) == (b0, b1, b3) == (2, True, 6)
    np.testing.assert_allclose(a2, b2, rtol=1e-4)
    np.testing.assert_allclose(a4, b4, rtol=1e-4)
    np.testing.assert_allclose(a5, b5, rtol=1e-4)
