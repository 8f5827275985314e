"""tessera.nn.parallel on one process: a one-member tensor group (or none)
is the plain Dense model, bit for bit; the layers' checks; save and load.
The multi-rank cases are tests/distributed/tp_dense.py."""

import numpy as np
import pytest

import tessera.distributed as dist
from tessera import nn, optim


def _mlp(first, second, seed=3):
    model = nn.Sequential([first, second], input_shape=(5,), seed=seed, dtype="float64")
    model.compile(optim.Adam(1e-2), "mse")
    return model


def _data():
    rng = np.random.default_rng(1)
    return rng.standard_normal((24, 5)), rng.standard_normal((24, 2))


@pytest.mark.parametrize("group", ["none", "mesh"])
def test_one_member_is_dense_bitwise(group):
    g = None if group == "none" else dist.Mesh(tensor=1).group("tensor")
    x, y = _data()
    ref = _mlp(nn.Dense(6, activation="relu"), nn.Dense(2))
    par = _mlp(nn.ColumnParallelDense(6, activation="relu", group=g),
               nn.RowParallelDense(2, group=g))
    for a, b in zip(par.get_weights(), ref.get_weights()):
        assert np.array_equal(a, b)
    h_ref = ref.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"]
    h_par = par.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"]
    assert h_par == h_ref
    assert np.array_equal(par.predict(x, verbose=0), ref.predict(x, verbose=0))


def test_gather_output_and_whole_input_on_one_member():
    g = dist.Mesh(tensor=1).group("tensor")
    x, _ = _data()
    ref = _mlp(nn.Dense(4), nn.Dense(2, activation="softmax"))
    par = _mlp(nn.RowParallelDense(4, group=g, input_is_parallel=False),
               nn.ColumnParallelDense(2, activation="softmax", group=g, gather_output=True))
    assert np.array_equal(par.predict(x, verbose=0), ref.predict(x, verbose=0))


def test_save_load_and_config(tmp_path):
    x, y = _data()
    par = _mlp(nn.ColumnParallelDense(6, activation="relu", name="up"),
               nn.RowParallelDense(2, name="down"))
    par.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert "group" not in par.layers[0].get_config()
    assert par.layers[0].get_config()["units"] == 6
    path = tmp_path / "m.tsm"
    par.save(path)
    back = nn.load_model(path)
    assert type(back.layers[0]) is nn.ColumnParallelDense and back.layers[0].name == "up"
    assert np.array_equal(back.predict(x, verbose=0), par.predict(x, verbose=0))


def test_from_dense_keeps_weights():
    ref = _mlp(nn.Dense(6, activation="tanh"), nn.Dense(2))
    col = nn.ColumnParallelDense.from_dense(ref.layers[0], None)
    row = nn.RowParallelDense.from_dense(ref.layers[1], None)
    assert (col.units, col.activation, col.name) == (6, "tanh", ref.layers[0].name)
    for a, b in zip(col.get_weights() + row.get_weights(), ref.get_weights()):
        assert np.array_equal(a, b)
    x, _ = _data()
    par = _mlp(col, row)
    assert np.array_equal(par.predict(x, verbose=0), ref.predict(x, verbose=0))


def test_errors():
    with pytest.raises(TypeError, match=r"\[ColumnParallelDense\] argument 'group' must be a "
                       r"tessera.distributed.Group .* got int 3 \(layer 'c'\)"):
        nn.ColumnParallelDense(4, group=3, name="c")
    with pytest.raises(TypeError, match=r"\[RowParallelDense\] argument 'group' .* got str"):
        nn.RowParallelDense(4, group="tensor")
    with pytest.raises(ValueError, match=r"\[ColumnParallelDense\] units must be a positive int"):
        nn.ColumnParallelDense(0)
    # L1, L2, L1L2 are sums over the elements (summed over the group's
    # slices); a function of whole rows or columns is refused
    assert nn.ColumnParallelDense(4, bias_regularizer="l2").bias_regularizer.l2 == 0.01
    with pytest.raises(ValueError, match=r"\[ColumnParallelDense\] bias_regularizer "
                       "OrthogonalRegularizer is not supported on a tensor-parallel layer"):
        nn.ColumnParallelDense(4, bias_regularizer="orthogonal_regularizer")
    with pytest.raises(TypeError, match=r"\[RowParallelDense.from_dense\] expects a "
                       r"tessera.nn.Dense, got ColumnParallelDense"):
        nn.RowParallelDense.from_dense(nn.ColumnParallelDense(3), None)
    with pytest.raises(ValueError, match=r"\[ColumnParallelDense\] kernel_regularizer "
                       r"OrthogonalRegularizer is not supported .* \(layer 'd'\)"):
        nn.ColumnParallelDense.from_dense(
            nn.Dense(3, kernel_regularizer="orthogonal_regularizer", name="d"), None)
    made = nn.ColumnParallelDense.from_dense(nn.Dense(3, kernel_regularizer="l1", name="d"), None)
    assert made.kernel_regularizer.l1 == 0.01
    with pytest.raises(TypeError, match=r"\[tp_reduce\] argument 'group' must be a group"):
        dist.tp_reduce(np.ones(2), group=1.5)
