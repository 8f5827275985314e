"""Large NumPy constants used inside a tessera.nn model (issue 30): a custom
layer's call that reads a 512x512 float32 table, an int64 index vector and a
bool mask through keras.ops. The same layer runs under Keras 3 on JAX (the
oracle, same weights) and under NumPy; the model saves and loads, trains as
Keras's does (the constants get no gradient and do not change), and its
program text no longer carries the constants' values (they are bound once,
nn/program_constants.py)."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402
from tessera.nn import program_constants  # noqa: E402

import keras  # noqa: E402 - the oracle

N, K = 512, 300


def _constants(seed):
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((N, N)).astype("float32") / np.float32(np.sqrt(N))
    index = rng.permutation(N)[:K].astype("int64")
    mask = rng.random(K) < 0.7
    return table, index, mask


def _layer_class(base, ops):
    """The same custom layer for Keras and tessera: `ops` is keras.ops or
    tessera.nn.ops."""

    class TableLayer(base):
        def __init__(self, seed=0, **kwargs):
            super().__init__(**kwargs)
            self.seed = seed
            self.table, self.index, self.mask = _constants(seed)

        def build(self, input_shape):
            self.scale = self.add_weight(shape=(K,), initializer="random_normal", name="scale")

        def call(self, x):
            h = ops.matmul(x, ops.convert_to_tensor(self.table))
            h = ops.take(h, ops.convert_to_tensor(self.index), axis=1)
            h = ops.where(ops.convert_to_tensor(self.mask), h, ops.zeros_like(h))
            return ops.tanh(h) * self.scale

        def get_config(self):
            return {**super().get_config(), "seed": self.seed}

    return TableLayer


TLayer = _layer_class(tnn.Layer, tops)
KLayer = _layer_class(keras.layers.Layer, keras.ops)


def _pair(seed=3):
    t_in = tnn.Input((N,))
    tm = tnn.Model(t_in, tnn.layers.Dense(4)(TLayer(seed)(t_in)))
    k_in = keras.Input((N,))
    km = keras.Model(k_in, keras.layers.Dense(4)(KLayer(seed)(k_in)))
    tm.set_weights(km.get_weights())
    return tm, km


def _x(rows=6, seed=1):
    return np.random.default_rng(seed).standard_normal((rows, N)).astype("float32")


def _numpy_forward(x, weights, seed):
    table, index, mask = _constants(seed)
    scale, kernel, bias = weights
    h = (x @ table)[:, index]
    h = np.where(mask, h, 0).astype("float32")
    return (np.tanh(h) * scale) @ kernel + bias


def _close(got, want, tol=2e-5):
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


def test_predict_matches_keras_and_numpy():
    tm, km = _pair()
    x = _x()
    got = tm.predict(x, verbose=0)
    _close(got, km.predict(x, verbose=0))
    _close(got, _numpy_forward(x, tm.get_weights(), 3))
    _close(np.asarray(tm(x)), np.asarray(km(x)))


def test_program_text_holds_names_not_values():
    tm, _ = _pair()
    tm.predict(_x(), verbose=0)
    progs = [p for p in tm._programs.values() if isinstance(p, program_constants.BoundProgram)]
    assert progs, "the predict program binds its constants"
    p = progs[0]
    # the 512x512 table written out would be megabytes; a few names are not
    assert len(p.text) < 20_000, len(p.text)
    dtypes = sorted(str(c.dtype) for c in p.constants)
    assert dtypes == ["bool", "float32", "int64"]
    table, index, mask = _constants(3)
    by_dtype = {str(c.dtype): c for c in p.constants}
    np.testing.assert_array_equal(by_dtype["float32"], table)
    np.testing.assert_array_equal(by_dtype["int64"], index)
    np.testing.assert_array_equal(by_dtype["bool"], mask)
    assert not any(c.flags.writeable for c in p.constants)


def test_exact_int64_and_bool_constants_against_numpy():
    big = (np.int64(1) << 52) + np.arange(100, dtype="int64") * 3  # beyond float64's steps
    flags = np.arange(100) % 3 == 0

    class Shift(tnn.Layer):
        def call(self, inputs):
            a, b = inputs
            return [tops.add(a, tops.convert_to_tensor(big)),
                    tops.logical_or(b, tops.convert_to_tensor(flags))]

    ia, ib = tnn.Input((100,), dtype="int64"), tnn.Input((100,), dtype="bool")
    model = tnn.Model([ia, ib], Shift()([ia, ib]))
    a = np.random.default_rng(2).integers(-1000, 1000, (5, 100)).astype("int64")
    b = np.random.default_rng(3).random((5, 100)) < 0.2
    got_a, got_b = model.predict([a, b], verbose=0)
    assert got_a.dtype == np.int64 and got_b.dtype == np.bool_
    np.testing.assert_array_equal(got_a, a + big)
    np.testing.assert_array_equal(got_b, b | flags)


def test_later_writes_to_the_users_array_do_not_change_the_model():
    table = np.ones((16, 16), dtype="float32")

    class Mul(tnn.Layer):
        def call(self, x):
            return tops.matmul(x, tops.convert_to_tensor(table))

    inp = tnn.Input((16,))
    model = tnn.Model(inp, Mul()(inp))
    x = _x(3)[:, :16]
    first = model.predict(x, verbose=0)
    table[:] = 5.0  # as with a literal: the values when the program was written
    np.testing.assert_array_equal(model.predict(x, verbose=0), first)
    np.testing.assert_allclose(first, x @ np.ones((16, 16), "float32"), rtol=1e-5, atol=1e-5)
    # a model written after the write reads the new values (a literal would)
    inp2 = tnn.Input((16,))
    later = tnn.Model(inp2, Mul()(inp2))
    np.testing.assert_allclose(later.predict(x, verbose=0), x @ table, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model.predict(x, verbose=0), first)


def test_fit_matches_keras_and_leaves_constants_alone():
    tm, km = _pair(seed=5)
    x = _x(16, seed=4)
    y = np.random.default_rng(5).standard_normal((16, 4)).astype("float32")
    for m in (tm, km):
        m.compile(optimizer=keras.optimizers.SGD(0.1) if m is km else tnn.optimizers.SGD(0.1),
                  loss="mse")
    before = [np.array(w) for w in tm.get_weights()]
    th = tm.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    kh = km.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-4)
    for got, want, old in zip(tm.get_weights(), km.get_weights(), before):
        assert not np.array_equal(got, old)  # every weight trained
        _close(got, want, tol=1e-4)
    table, index, mask = _constants(5)
    layer = [lay for lay in tm.layers if isinstance(lay, TLayer)][0]
    np.testing.assert_array_equal(layer.table, table)
    np.testing.assert_array_equal(layer.index, index)
    _close(tm.predict(x, verbose=0), km.predict(x, verbose=0), tol=1e-4)


def test_save_and_load(tmp_path):
    tm, km = _pair(seed=7)
    x = _x(4, seed=8)
    path = os.fspath(tmp_path / "const.keras")
    tm.save(path)
    loaded = tnn.load_model(path, custom_objects={"TableLayer": TLayer})
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), tm.predict(x, verbose=0))
    _close(loaded.predict(x, verbose=0), km.predict(x, verbose=0))


def test_small_constants_stay_literals():
    small = np.arange(program_constants.INLINE_LIMIT, dtype="float32")

    class Add(tnn.Layer):
        def call(self, x):
            return x + tops.convert_to_tensor(small)

    inp = tnn.Input((small.size,))
    model = tnn.Model(inp, Add()(inp))
    x = _x(2)[:, :small.size]
    np.testing.assert_array_equal(model.predict(x, verbose=0), x + small)
    assert not any(isinstance(p, program_constants.BoundProgram)
                   for p in model._programs.values())


@pytest.mark.parametrize("text", [
    "define(f, a, b, block(a + b))\nf\n",
    "define(g, x, block(x))\ndefine(f, a, block(g(a) * 2))\nf\n",
])
def test_compile_program_without_constants_is_the_plain_program(text):
    p = program_constants.compile_program(text, "<test>")
    assert not isinstance(p, program_constants.BoundProgram)


def test_a_custom_loss_with_a_large_constant_trains_as_keras():
    weights = np.linspace(0.5, 2.0, 100, dtype="float32").reshape(1, 100)  # bound, not inlined

    def make_loss(ops):
        def weighted_mse(y_true, y_pred):
            return ops.mean(ops.square(y_true - y_pred) * ops.convert_to_tensor(weights),
                            axis=-1)
        return weighted_mse

    x = np.random.default_rng(9).standard_normal((16, 8)).astype("float32")
    y = np.random.default_rng(10).standard_normal((16, 100)).astype("float32")
    k_in = keras.Input((8,))
    km = keras.Model(k_in, keras.layers.Dense(100)(k_in))
    t_in = tnn.Input((8,))
    tm = tnn.Model(t_in, tnn.layers.Dense(100)(t_in))
    tm.set_weights(km.get_weights())
    km.compile(optimizer=keras.optimizers.SGD(0.05), loss=make_loss(keras.ops))
    tm.compile(optimizer=tnn.optimizers.SGD(0.05), loss=make_loss(tops))
    kh = km.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    th = tm.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-5)
    for got, want in zip(tm.get_weights(), km.get_weights()):
        _close(got, want, tol=1e-5)
    np.testing.assert_allclose(tm.evaluate(x, y, verbose=0), km.evaluate(x, y, verbose=0),
                               rtol=1e-5)


def test_deterministic_fit_with_a_large_constant():
    tm, km = _pair(seed=11)
    x = _x(16, seed=12)
    y = np.random.default_rng(13).standard_normal((16, 4)).astype("float32")
    tm.compile(optimizer=tnn.optimizers.SGD(0.1), loss="mse")
    km.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    th = tm.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, deterministic=True)
    kh = km.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-4)
    for got, want in zip(tm.get_weights(), km.get_weights()):
        _close(got, want, tol=1e-4)


def test_a_lambda_program_binds_and_other_forms_get_literal_constants():
    value = np.arange(100, dtype="int64").reshape(10, 10) * 7
    name = program_constants.constant_name(value)
    assert name == program_constants.constant_name(value)  # one name per array
    lam = program_constants.compile_program(f"lambda(a, b, a + b * {name})", "<test>")
    assert isinstance(lam, program_constants.BoundProgram)
    one = np.ones((10, 10), dtype="int64")
    np.testing.assert_array_equal(lam.run([one, 2 * one]), one + 2 * value)
    p = program_constants.compile_program(f"define(f, a, a + {name})\nf\n", "<test>")
    assert not isinstance(p, program_constants.BoundProgram)
    got = p.run([np.ones((10, 10), dtype="int64")])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, value + 1)


def test_a_bound_program_runs_with_consume():
    value = np.arange(200, dtype="float32")
    name = program_constants.constant_name(value)
    p = program_constants.compile_program(f"define(f, a, block({name} * a))\nf\n", "<test>")
    assert isinstance(p, program_constants.BoundProgram)
    args = [np.float32(2.0)]
    np.testing.assert_array_equal(p.run(args, consume=True), value * 2)
    assert args == []  # handed over, as _core.Program.run(consume=True) does
    np.testing.assert_array_equal(p.run([np.float32(3.0)]), value * 3)


def test_a_functional_graphs_own_constant_saves_loads_and_trains(tmp_path):
    table = np.random.default_rng(14).standard_normal((32, 16)).astype("float32")
    inp = tnn.Input((32,))
    model = tnn.Model(inp, tnn.layers.Dense(3)(np.tanh(inp @ table)))
    x = _x(4, seed=15)[:, :32]
    kernel, bias = model.get_weights()
    want = np.tanh(x @ table) @ kernel + bias
    _close(model.predict(x, verbose=0), want)
    path = os.fspath(tmp_path / "graph_const.keras")
    model.save(path)
    loaded = tnn.load_model(path)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    loaded.compile(optimizer=tnn.optimizers.SGD(0.1), loss="mse")
    loaded.fit(x, np.zeros((4, 3), "float32"), epochs=1, verbose=0)
    assert not np.array_equal(loaded.get_weights()[0], kernel)
    kernel, bias = loaded.get_weights()
    _close(loaded.predict(x, verbose=0), np.tanh(x @ table) @ kernel + bias)



def test_a_custom_metric_with_a_large_constant_in_evaluate():
    weights = np.linspace(0.5, 2.0, 100, dtype="float32")

    class WeightedAbs(tnn.metrics.Metric):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.total = self.add_variable(shape=(), initializer="zeros", name="total")

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.total.assign_add(tops.sum(tops.abs(y_true - y_pred) *
                                           tops.convert_to_tensor(weights)))

        def result(self):
            return self.total

    inp = tnn.Input((100,))
    model = tnn.Model(inp, tnn.layers.Dense(100)(inp))
    model.compile(optimizer="sgd", loss="mse", metrics=[WeightedAbs()])
    x = np.random.default_rng(18).standard_normal((12, 100)).astype("float32")
    y = np.random.default_rng(19).standard_normal((12, 100)).astype("float32")
    logs = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
    want = np.sum(np.abs(y - model.predict(x, verbose=0)) * weights)
    np.testing.assert_allclose(logs["weighted_abs"], want, rtol=1e-5)


def test_a_constant_named_again_is_held_until_its_next_program_takes_it():
    """A text naming a constant that only a program held (the name reused for
    the same array) still compiles when that program is dropped before the
    text is compiled (keras_io gnn_citations met this when imports were slow)."""
    import gc

    from tessera.nn import program_constants as pc

    table = np.arange(200.0).reshape(10, 20)
    name = pc.constant_name(table)
    held = pc._constant(name)  # a program takes it (the table then holds it weakly)
    assert pc.constant_name(table) == name  # the same array, the same values: the same name
    del held
    gc.collect()  # the program holding it is gone before the new text is compiled
    np.testing.assert_array_equal(pc._constant(name), table)
