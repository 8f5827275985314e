"""What Keras users' scripts do (issue 30), against Keras 3 on JAX with the
same weights: a user's layer called on arrays runs eagerly (assign_add in
call), fit with no trainable weights, a string Input into TextVectorization,
a layer called on a constant in a traced call (positional embedding), and the
states of recurrent layers (initial_state=, stateful=True, user cells,
stacked cells, Bidirectional over them)."""

import numpy as np
import pytest

import tessera.nn as tn


def _both(keras):
    return (keras, tn)


def _compare(keras, build, inputs, atol=1e-5):
    """build(lib) -> Model; Keras's weights set on tessera's; outputs compared."""
    outs = []
    for lib in _both(keras):
        m = build(lib)
        if lib is keras:
            w = m.get_weights()
        else:
            m.set_weights(w)
        # Keras: the model called eagerly (its predict would compile for seconds)
        r = m(inputs, training=False) if lib is keras else m.predict(inputs, verbose=0)
        outs.append([np.asarray(a) for a in r] if isinstance(r, (list, tuple)) else
                    [np.asarray(r)])
    assert len(outs[0]) == len(outs[1])
    for a, b in zip(*outs):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, atol=atol)


# ------------------------------------------------------------ eager user layers
def test_user_layer_on_arrays_runs_eagerly_and_assigns(keras):
    results = []
    for lib in _both(keras):
        class ComputeSum(lib.layers.Layer):
            def __init__(self, d):
                super().__init__()
                self.total = self.add_weight(initializer="zeros", shape=(d,), trainable=False)

            def call(self, inputs):
                self.total.assign_add(lib.ops.sum(inputs, axis=0))
                return self.total

        s = ComputeSum(2)
        x = np.arange(6, dtype=np.float32).reshape(3, 2)
        results.append([np.asarray(s(x)).copy(), np.asarray(s(x)).copy(),
                        len(s.non_trainable_weights), len(s.trainable_weights)])
    k, t = results
    np.testing.assert_allclose(t[0], k[0])
    np.testing.assert_allclose(t[1], k[1])
    assert t[2:] == k[2:] == [1, 0]


def test_user_layer_losses_on_arrays_as_keras(keras):
    counts = []
    for lib in _both(keras):
        class Reg(lib.layers.Layer):
            def call(self, x):
                self.add_loss(0.5 * lib.ops.sum(x))
                return x

        class Outer(lib.layers.Layer):
            def __init__(self):
                super().__init__()
                self.reg = Reg()
                self.dense = lib.layers.Dense(2, kernel_regularizer=lib.regularizers.l2(0.1))

            def call(self, x):
                return self.dense(self.reg(x))

        o = Outer()
        o(np.ones((1, 3), np.float32))
        o(np.ones((1, 3), np.float32))
        w = o.dense.get_weights()[0]
        counts.append((len(o.losses), float(np.asarray(o.losses[0])),
                       float(np.asarray(o.losses[1])), float(0.1 * np.sum(w ** 2))))
    assert counts[0][0] == counts[1][0] == 2
    assert counts[1][1] == pytest.approx(counts[0][1])
    assert counts[1][2] == pytest.approx(counts[1][3], rel=1e-5)  # l2 of its own kernel


def test_fit_without_trainable_weights_matches_keras(keras):
    x = np.random.default_rng(0).random((8, 3)).astype(np.float32)
    y = np.random.default_rng(1).random((8, 3)).astype(np.float32)
    losses = []
    for lib in _both(keras):
        class Act(lib.layers.Layer):
            def call(self, inputs):
                self.add_loss(0.01 * lib.ops.mean(inputs))
                return inputs

        i = lib.Input((3,))
        m = lib.Model(i, Act()(i))
        m.compile(optimizer="adam", loss="mse")
        losses.append(m.fit(x, y, batch_size=8, epochs=2, verbose=0).history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_position_embedding_on_a_constant_matches_keras(keras):
    def build(lib):
        class TokPos(lib.layers.Layer):
            def __init__(self):
                super().__init__()
                self.tok = lib.layers.Embedding(50, 4)
                self.pos = lib.layers.Embedding(6, 4)

            def call(self, x):
                positions = lib.ops.arange(start=0, stop=lib.ops.shape(x)[-1], step=1)
                return self.tok(x) + self.pos(positions)

        i = lib.Input((6,), dtype="int32")
        return lib.Model(i, TokPos()(i))

    x = np.random.default_rng(0).integers(0, 50, (3, 6)).astype(np.int32)
    _compare(keras, build, x)
    # and the position table trains (fit changes it)
    m = build(tn)
    before = [w.copy() for w in m.get_weights()]
    m.compile("sgd", "mse")
    m.fit(x, np.ones((3, 6, 4), np.float32), verbose=0)
    assert all(np.abs(a - b).max() > 0 for a, b in zip(before, m.get_weights()))


def test_string_input_into_text_vectorization():
    texts = np.array(["the cat sat", "a dog ran far", "the dog", "cat"])
    vec = tn.layers.TextVectorization(max_tokens=20, output_sequence_length=5)
    vec.adapt(texts)
    i = tn.Input(shape=(1,), dtype="string")
    ids = vec(i)
    h = tn.layers.GlobalAveragePooling1D()(tn.layers.Embedding(20, 3)(ids))
    m = tn.Model(i, tn.layers.Dense(1, activation="sigmoid")(h))
    inner = tn.Model(ids, m.outputs[0])  # the same layers on the ids
    np.testing.assert_allclose(m.predict(texts[:, None], verbose=0),
                               inner.predict(vec(texts[:, None]), verbose=0), rtol=1e-6)
    m.compile("adam", "binary_crossentropy")
    assert np.isfinite(m.evaluate(texts[:, None], np.array([0, 1, 1, 0]), verbose=0))
    with pytest.raises(TypeError, match=r"\[Dense\].*(string|symbolic)"):
        tn.layers.Dense(2)(tn.Input(shape=(1,), dtype="string"))


# ------------------------------------------------------------ recurrent states
@pytest.mark.parametrize("name", ["LSTM", "GRU", "SimpleRNN"])
def test_initial_state_and_return_state_match_keras(keras, name):
    rng = np.random.default_rng(0)
    n = 2 if name == "LSTM" else 1
    data = [rng.random((3, 4, 2)).astype(np.float32)] + \
        [rng.random((3, 5)).astype(np.float32) for _ in range(n)]

    def build(lib):
        xi = lib.Input((4, 2))
        si = [lib.Input((5,)) for _ in range(n)]
        layer = getattr(lib.layers, name)(5, return_sequences=True, return_state=True)
        return lib.Model([xi] + si, layer(xi, initial_state=si))

    _compare(keras, build, data)


def test_stateful_lstm_on_arrays_matches_keras(keras):
    x = np.random.default_rng(0).random((2, 3, 4)).astype(np.float32)
    runs = []
    for lib in _both(keras):
        layer = lib.layers.LSTM(3, stateful=True)
        first = np.asarray(layer(x))
        if lib is keras:
            w = layer.get_weights()
        else:
            layer.set_weights(w)
            layer.reset_states()
            first = np.asarray(layer(x))
        second = np.asarray(layer(x))
        layer.reset_states()
        third = np.asarray(layer(x))
        runs.append((first, second, third))
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, atol=1e-6)
    assert np.abs(runs[1][0] - runs[1][1]).max() > 1e-4  # the state carried over
    layer = tn.layers.LSTM(3, stateful=True)
    layer(x)
    with pytest.raises(ValueError, match=r"\[LSTM\].*stateful.*batch size.*2.*got 1"):
        layer(x[:1])
    with pytest.raises(ValueError, match=r"\[LSTM\].*stateful=True needs a fixed batch size.*"
                                         r"batch_shape.*got sequences of shape \(None, 3, 4\)"):
        tn.layers.LSTM(3, stateful=True)(tn.Input((3, 4)))


def _user_cell(lib):
    class MinimalCell(lib.layers.Layer):
        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units = units
            self.state_size = [units, units]

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
            self.recurrent_kernel = self.add_weight(shape=(self.units, self.units),
                                                    initializer="orthogonal", name="rk")

        def call(self, inputs, states):
            h, c = states
            out = lib.ops.tanh(lib.ops.matmul(inputs, self.kernel) +
                               lib.ops.matmul(h, self.recurrent_kernel))
            return out, [out, c + out]

        def get_config(self):
            return {"units": self.units}

    if lib is not tn:
        MinimalCell = lib.saving.register_keras_serializable(package="t_usage")(MinimalCell)
    return MinimalCell


CASES = {
    "user_cell": lambda lib, h: lib.layers.RNN(_user_cell(lib)(4))(h),
    "user_cell_states_backwards": lambda lib, h: lib.layers.RNN(
        _user_cell(lib)(4), return_sequences=True, return_state=True, go_backwards=True)(h),
    "user_cell_masked": lambda lib, h: lib.layers.RNN(_user_cell(lib)(4))(
        lib.layers.Masking()(h)),
    "stacked_cells": lambda lib, h: lib.layers.RNN(lib.layers.StackedRNNCells(
        [lib.layers.LSTMCell(4), lib.layers.GRUCell(3), lib.layers.SimpleRNNCell(2)]),
        return_sequences=True)(h),
    "bidirectional_user_cell": lambda lib, h: lib.layers.Bidirectional(
        lib.layers.RNN(_user_cell(lib)(4), return_sequences=True))(h),
    "bidirectional_stacked": lambda lib, h: lib.layers.Bidirectional(
        lib.layers.RNN([lib.layers.LSTMCell(4), lib.layers.GRUCell(3)]), merge_mode="sum")(h),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rnn_cells_match_keras(keras, case):
    x = np.random.default_rng(0).random((3, 5, 2)).astype(np.float32)
    x[1, 3:] = 0  # masked steps for the Masking case

    def build(lib):
        xi = lib.Input((5, 2))
        return lib.Model(xi, CASES[case](lib, xi))

    _compare(keras, build, x)


@pytest.mark.parametrize("case", sorted(CASES))
def test_rnn_cells_save_and_load(tmp_path, case):
    """A model holding RNN(cell) saves and loads (cells, lists of them,
    StackedRNNCells; a user's cell through custom_objects), the same outputs
    and weight paths; it could not be saved before."""
    x = np.random.default_rng(2).random((3, 5, 2)).astype(np.float32)
    xi = tn.Input((5, 2))
    model = tn.Model(xi, CASES[case](tn, xi))
    path = str(tmp_path / "rnn.keras")
    model.save(path)
    cell = _user_cell(tn)
    loaded = tn.models.load_model(path, custom_objects={"MinimalCell": cell})
    for a, b in zip(tn.tree.flatten(loaded.predict(x, verbose=0)),
                    tn.tree.flatten(model.predict(x, verbose=0)), strict=True):
        np.testing.assert_array_equal(a, b)
    if "user" not in case:  # (the user's cell's get_config leaves its name out, as in Keras)
        assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    again = tn.models.model_from_json(model.to_json(), custom_objects={"MinimalCell": cell})
    assert [w.shape for w in again.weights] == [w.shape for w in model.weights]


def test_rnn_user_cell_initial_state_and_training(keras):
    rng = np.random.default_rng(1)
    data = [rng.random((4, 3, 2)).astype(np.float32), rng.random((4, 4)).astype(np.float32),
            rng.random((4, 4)).astype(np.float32)]
    y = rng.random((4, 4)).astype(np.float32)
    losses = []
    for lib in _both(keras):
        xi, hi, ci = lib.Input((3, 2)), lib.Input((4,)), lib.Input((4,))
        m = lib.Model([xi, hi, ci], lib.layers.RNN(_user_cell(lib)(4))(xi, initial_state=[hi, ci]))
        if lib is keras:
            w = m.get_weights()
        else:
            m.set_weights(w)
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse")
        losses.append(m.fit(data, y, batch_size=4, epochs=3, verbose=0).history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


def test_rnn_bad_cells_and_states_are_named_errors():
    with pytest.raises(TypeError, match=r"\[RNN\] cell must be.*state_size.*got Dense"):
        tn.layers.RNN(tn.layers.Dense(3))
    xi = tn.Input((3, 2))
    with pytest.raises(ValueError, match=r"\[LSTM\].*has 2 states, got initial_state with 1"):
        tn.layers.LSTM(4)(xi, initial_state=[tn.Input((4,))])
    with pytest.raises(ValueError, match=r"\[GRU\].*initial state 0 must have shape \(batch, 4\)"):
        tn.layers.GRU(4)(xi, initial_state=[tn.Input((5,))])


def _flat(r):
    out = []
    for a in (r if isinstance(r, (list, tuple)) else [r]):
        out += _flat(a) if isinstance(a, (list, tuple)) else [a]
    return out


def _stacked_with_states(lib, xi, st):
    h, g, s = st[:2], st[2], st[3]
    r = lib.layers.RNN([lib.layers.LSTMCell(4), lib.layers.GRUCell(3),
                        lib.layers.SimpleRNNCell(2)], return_sequences=True,
                       return_state=True)(xi, initial_state=[h, g, s])
    # Keras's nesting: one entry per cell, a list for the LSTM cell's [h, c]
    assert len(r) == 4 and isinstance(r[1], list) and len(r[1]) == 2
    return _flat(r)


def _bidirectional_with_states(lib, xi, st):
    return list(lib.layers.Bidirectional(lib.layers.LSTM(4, return_sequences=True,
                                                         return_state=True))(
        xi, initial_state=st))


def _bidirectional_stacked_with_states(lib, xi, st):
    fw, bw = [st[:2], st[2]], [st[3:5], st[5]]
    r = lib.layers.Bidirectional(lib.layers.RNN([lib.layers.LSTMCell(4), lib.layers.GRUCell(3)],
                                                return_state=True), merge_mode=None)(
        xi, initial_state=fw + bw)
    assert [isinstance(a, list) for a in r] == [False, False, True, False, True, False]
    return _flat(r)


STATE_CASES = {
    "stacked": (_stacked_with_states, (4, 4, 3, 2)),
    "bidirectional": (_bidirectional_with_states, (4, 4, 4, 4)),
    "bidirectional_stacked": (_bidirectional_stacked_with_states, (4, 4, 3, 4, 4, 3)),
}


@pytest.mark.parametrize("case", sorted(STATE_CASES))
def test_initial_state_of_stacks_and_bidirectional_match_keras(keras, case):
    """initial_state= and return_state of RNN(stacked cells) (one entry per
    cell) and Bidirectional (forward states, then backward), Keras's weights."""
    make, sizes = STATE_CASES[case]
    rng = np.random.default_rng(2)
    data = [rng.random((3, 5, 2)).astype(np.float32)] + \
        [rng.normal(size=(3, d)).astype(np.float32) for d in sizes]

    def build(lib):
        xi, st = lib.Input((5, 2)), [lib.Input((d,)) for d in sizes]
        return lib.Model([xi] + st, make(lib, xi, st))

    _compare(keras, build, data)


@pytest.mark.parametrize("case", ["stacked", "bidirectional"])
def test_initial_state_of_stacks_and_bidirectional_train_as_keras(keras, case):
    """The gradients through the given states: a few SGD steps give Keras's
    losses (same initial weights), the states being inputs of the model."""
    make, sizes = STATE_CASES[case]
    rng = np.random.default_rng(3)
    data = [rng.random((4, 5, 2)).astype(np.float32)] + \
        [rng.normal(size=(4, d)).astype(np.float32) for d in sizes]
    y = rng.normal(size=(4, 1)).astype(np.float32)
    losses = []
    for lib in _both(keras):
        xi, st = lib.Input((5, 2)), [lib.Input((d,)) for d in sizes]
        outs = make(lib, xi, st)
        pooled = lib.layers.GlobalAveragePooling1D()(outs[0])
        h = lib.layers.Concatenate()([pooled] + outs[1:])
        m = lib.Model([xi] + st, lib.layers.Dense(1)(h))
        if lib is keras:
            w = m.get_weights()
        else:
            m.set_weights(w)
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse")
        losses.append(m.fit(data, y, batch_size=4, epochs=3, verbose=0).history["loss"])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    assert losses[1][-1] < losses[1][0]


def test_stacked_and_bidirectional_state_errors_are_named():
    xi = tn.Input((3, 2))
    cells = [tn.layers.LSTMCell(4), tn.layers.GRUCell(3)]
    with pytest.raises(ValueError, match=r"\[RNN\].*stacks 2 cells.*one entry per cell.*got 1"):
        tn.layers.RNN(cells)(xi, initial_state=[tn.Input((4,))])
    with pytest.raises(ValueError, match=r"\[RNN\].*cell 0 has 2 states.*entry 0 with 1"):
        tn.layers.RNN(cells)(xi, initial_state=[tn.Input((4,)), tn.Input((3,))])
    with pytest.raises(ValueError, match=r"\[RNN\].*initial state 2 must have shape \(batch, 3\)"):
        tn.layers.RNN(cells)(xi, initial_state=[[tn.Input((4,)), tn.Input((4,))],
                                                 tn.Input((5,))])
    with pytest.raises(ValueError, match=r"\[Bidirectional\].*has 4 states, got initial_state "
                                         r"with 2"):
        tn.layers.Bidirectional(tn.layers.LSTM(4))(xi, initial_state=[tn.Input((4,))] * 2)



def _stateful_model(lib):
    """Embedding -> stateful GRU (sequences) -> stateful LSTM -> Dense, batch of 2."""
    x = lib.Input(batch_shape=(2, 3), dtype="int32")
    h = lib.layers.Embedding(7, 4)(x)
    h = lib.layers.GRU(3, stateful=True, return_sequences=True)(h)
    h = lib.layers.LSTM(5, stateful=True)(h)
    return lib.Model(x, lib.layers.Dense(2)(h))


def test_stateful_model_predict_carries_states_as_keras(keras):
    """predict over several batches carries the states from batch to batch,
    as Keras does when the model is called batch after batch (Keras 3 on JAX
    keeps its states out of its compiled predict: its eager calls are the
    oracle); reset_states() starts again from zeros; a second predict goes on."""
    d = np.random.default_rng(4).integers(0, 7, size=(6, 3)).astype(np.int32)
    km = _stateful_model(keras)
    tm = _stateful_model(tn)
    tm.set_weights(km.get_weights())

    def keras_run():
        return np.concatenate([np.asarray(km(d[i:i + 2])) for i in range(0, 6, 2)])

    first, second = keras_run(), keras_run()
    for layer in km.layers:
        if getattr(layer, "stateful", False):
            layer.reset_states()
    third = keras_run()
    np.testing.assert_allclose(tm.predict(d, verbose=0), first, atol=1e-5)
    np.testing.assert_allclose(tm.predict(d, batch_size=2, verbose=0), second, atol=1e-5)
    for layer in tm.layers:
        if getattr(layer, "stateful", False):
            layer.reset_states()
    np.testing.assert_allclose(tm.predict(d, verbose=0), third, atol=1e-5)
    assert np.abs(first - second).max() > 1e-3  # the states were carried
    # called on arrays, as Keras's eager call: the states go on from there
    np.testing.assert_allclose(np.asarray(tm(d[:2])), np.asarray(km(d[:2])), atol=1e-5)


def test_stateful_model_refusals_are_named():
    d = np.zeros((6, 3, 4), np.float32)
    x = tn.Input(batch_shape=(2, 3, 4))
    m = tn.Model(x, tn.layers.Dense(1)(tn.layers.LSTM(3, stateful=True, name="s")(x)))
    m.compile("sgd", "mse")
    with pytest.raises(ValueError, match=r"\[fit\] layer 's' is stateful.*predict.*"
                                         r"stateful=False.*test_nn_keras_usage.py"):
        m.fit(d, np.zeros((6, 1)), batch_size=2, verbose=0)
    with pytest.raises(ValueError, match=r"\[evaluate\] layer 's' is stateful"):
        m.evaluate(d, np.zeros((6, 1)), batch_size=2, verbose=0)
    with pytest.raises(ValueError, match=r"\[predict\] layer 's' is stateful with batch size 2.*"
                                         r"got batch_size=None and 5 samples"):
        m.predict(d[:5], verbose=0)
    with pytest.raises(ValueError, match=r"\[predict\].*got batch_size=3"):
        m.predict(d, batch_size=3, verbose=0)
    lines = []
    m.summary(print_fn=lines.append)
    assert any(l.startswith("s (LSTM)") and "(None, 3)" in l and "[" not in l for l in lines)
    with pytest.raises(ValueError, match=r"\[Bidirectional\].*stateful"):
        tn.layers.Bidirectional(tn.layers.LSTM(3, stateful=True))
    with pytest.raises(ValueError, match=r"\[LSTM\].*initial_state= with stateful=True"):
        tn.layers.LSTM(3, stateful=True)(x, initial_state=[tn.Input((3,))] * 2)


def test_stateful_sequential_and_saved_model_carry_states(tmp_path):
    """Sequential([Input(batch_shape=...), stateful LSTM, ...]) keeps the batch
    size; a saved stateful model loads with it and predicts as the original,
    batch after batch (checked against the layer called on arrays)."""
    d = np.random.default_rng(5).random((4, 3, 4)).astype(np.float32)
    m = tn.Sequential([tn.Input(batch_shape=(2, 3, 4)), tn.layers.LSTM(3, stateful=True,
                                                                        return_sequences=True)])
    got = m.predict(d, verbose=0)
    lstm = tn.layers.LSTM(3, stateful=True, return_sequences=True)
    lstm(d[:2])
    lstm.set_weights(m.get_weights())
    lstm.reset_states()
    want = np.concatenate([np.asarray(lstm(d[:2])), np.asarray(lstm(d[2:]))])
    np.testing.assert_allclose(got, want, atol=1e-6)
    m.save(tmp_path / "s.keras")
    back = tn.models.load_model(tmp_path / "s.keras")
    assert back.layers[0].stateful
    m.layers[0].reset_states()
    np.testing.assert_allclose(back.predict(d, verbose=0), m.predict(d, verbose=0), atol=1e-6)
