# Tensor parallelism under `tessera run -n N` (N = 2 or 4): tp_copy and
# tp_reduce on a group against central differences of the replicated loss;
# ColumnParallelDense -> RowParallelDense against the same MLP of plain Dense
# layers on one process (computed here by every rank, with no collective):
# initial slices bitwise, forward, gradients of each slice, SGD and Adam
# training with fit, uneven splits (7 hidden units), whole weights from
# get_weights and save/load into a one-member model; one all-reduce per
# RowParallelDense forward and one per ColumnParallelDense backward, counted
# in the trace; errors. On the meshes tensor=N and, with 4, data=2 x tensor=2.
# Prints "ok" on every rank.
import csv
import io
import os
import tempfile

import numpy as np

import tessera
import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
assert N in (2, 4), N


def split(n, t):
    base, extra = divmod(n, t)
    ext = [base + (1 if k < extra else 0) for k in range(t)]
    return [(sum(ext[:k]), sum(ext[: k + 1])) for k in range(t)]


def central_difference(f, x, eps=1e-6):
    """d f / d x by central differences (f is called on every rank alike)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


def check_primitives(tp):
    me, t = tp.rank, tp.size
    rng = np.random.default_rng(7)
    x = rng.standard_normal(3)
    c = rng.standard_normal(4)
    ws = [rng.standard_normal((4, 3)) for _ in range(t)]
    w = ws[me]

    # Eager: tp_copy is x, tp_reduce the sum over the group.
    np.testing.assert_array_equal(dist.tp_copy(x, group=tp), x)
    np.testing.assert_allclose(dist.tp_reduce(w @ x, group=tp), sum(v @ x for v in ws))

    @tessera.jit
    def loss(x, w):
        # The replicated loss of a layer split in t slices: the same on every member.
        return np.sum(c * dist.tp_reduce(w @ dist.tp_copy(x, group=tp), group=tp))

    whole = float(np.sum(c * sum(v @ x for v in ws)))
    assert abs(float(loss(x, w)) - whole) < 1e-12, (float(loss(x, w)), whole)
    dx, dw = tessera.grad(loss, argnums=(0, 1))(x, w)
    # The gradient of the replicated loss in x: sum over members of w_k^T c.
    np.testing.assert_allclose(dx, central_difference(lambda v: float(loss(v, w)), x), rtol=1e-6)
    np.testing.assert_allclose(dx, sum(v.T @ c for v in ws), rtol=1e-12)
    # In this member's w (the others' held fixed): one member at a time.
    for owner in range(t):

        def f(v, owner=owner):
            return float(loss(x, v if me == owner else w))

        fd = central_difference(f, w)
        if me == owner:
            np.testing.assert_allclose(dw, fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dw, np.outer(c, x), rtol=1e-12)


def mlp(layers, dtype, seed=11):
    model = nn.Sequential(layers, input_shape=(6,), seed=seed, dtype=dtype)
    model.compile(optim.SGD(1.0), "mse")
    return model


def data(rows=16):
    rng = np.random.default_rng(3)
    return rng.standard_normal((rows, 6)), rng.standard_normal((rows, 3))


def plain(hidden, dtype):
    return mlp([nn.Dense(hidden, activation="relu"), nn.Dense(3)], dtype)


def split_mlp(hidden, tp, dtype):
    return mlp([nn.ColumnParallelDense(hidden, activation="relu", group=tp),
                nn.RowParallelDense(3, group=tp)], dtype)


def check_mlp(tp, hidden, dtype="float64"):
    me, t = tp.rank, tp.size
    lo, hi = split(hidden, t)[me]
    ref, par = plain(hidden, dtype), split_mlp(hidden, tp, dtype)
    (k1, b1, k2, b2) = ref.get_weights()
    col, row = par.layers
    # Initial weights: this member's slices of the one-process draw, bitwise.
    assert col._values["kernel"].shape == (6, hi - lo)
    assert np.array_equal(col._values["kernel"], k1[:, lo:hi])
    assert np.array_equal(col._values["bias"], b1[lo:hi])
    assert np.array_equal(row._values["kernel"], k2[lo:hi])
    assert np.array_equal(row._values["bias"], b2)
    for a, b in zip(par.get_weights(), ref.get_weights()):
        assert a.shape == b.shape and np.array_equal(a, b)
    # Forward.
    x, y = data()
    np.testing.assert_allclose(par.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(par.evaluate(x, y, verbose=0), ref.evaluate(x, y, verbose=0),
                               rtol=1e-12)
    # Gradients: one SGD step of learning rate 1 on the whole batch moves
    # each weight by minus its gradient.
    before_ref, before_par = ref.get_weights(), [np.array(v) for v in par.weights.values()]
    ref.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0, data_parallel=False)
    par.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0, data_parallel=False)
    g_ref = [a - b for a, b in zip(before_ref, ref.get_weights())]
    g_par = [a - b for a, b in zip(before_par, par.weights.values())]
    want = [g_ref[0][:, lo:hi], g_ref[1][lo:hi], g_ref[2][lo:hi], g_ref[3]]
    for got, exp in zip(g_par, want):
        assert got.shape == exp.shape, (got.shape, exp.shape)
        np.testing.assert_allclose(got, exp, rtol=1e-9, atol=1e-12)


def check_training(tp, hidden):
    # float32, Adam then SGD with momentum, 100 steps each (25 epochs of 4
    # batches): the loss within 1e-5 relative of the one-process model's.
    x, y = data(64)
    for opt in (lambda: optim.Adam(1e-2), lambda: optim.SGD(0.05, momentum=0.9)):
        ref, par = plain(hidden, "float32"), split_mlp(hidden, tp, "float32")
        ref.compile(opt(), "mse")
        par.compile(opt(), "mse")
        h_ref = ref.fit(x, y, batch_size=16, epochs=25, shuffle=False, verbose=0,
                        data_parallel=False).history["loss"]
        h_par = par.fit(x, y, batch_size=16, epochs=25, shuffle=False, verbose=0,
                        data_parallel=False).history["loss"]
        assert h_ref[-1] < h_ref[0], h_ref
        np.testing.assert_allclose(h_par, h_ref, rtol=1e-5)
        for a, b in zip(par.get_weights(), ref.get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def check_gather_and_whole_input(tp):
    # ColumnParallelDense(gather_output=True) and RowParallelDense with a
    # whole input, each next to plain Dense layers.
    x, y = data()
    ref = mlp([nn.Dense(5, activation="tanh"), nn.Dense(3, activation="softmax")], "float64")
    par = mlp([nn.ColumnParallelDense(5, activation="tanh", group=tp),
               nn.RowParallelDense(3, activation="softmax", group=tp)], "float64")
    np.testing.assert_allclose(par.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-12)
    y5 = np.random.default_rng(5).standard_normal((len(x), 5))  # 5 outputs: uneven on 2 and 4
    ref = mlp([nn.Dense(4), nn.Dense(5, activation="softmax")], "float64")
    par = mlp([nn.Dense(4), nn.ColumnParallelDense(5, activation="softmax", group=tp,
                                                   gather_output=True)], "float64")
    np.testing.assert_allclose(par.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-12)
    for m in (ref, par):
        m.fit(x, y5, batch_size=16, epochs=2, shuffle=False, verbose=0, data_parallel=False)
    for a, b in zip(par.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    ref = mlp([nn.Dense(7), nn.Dense(3)], "float64")
    par = mlp([nn.Dense(7), nn.RowParallelDense(3, group=tp, input_is_parallel=False)],
              "float64")
    for m in (ref, par):
        m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, data_parallel=False)
    for a, b in zip(par.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def check_from_dense(tp):
    ref = plain(7, "float64")
    d1, d2 = ref.layers
    col = nn.ColumnParallelDense.from_dense(d1, tp)
    row = nn.RowParallelDense.from_dense(d2, tp)
    lo, hi = split(7, tp.size)[tp.rank]
    assert col.name == d1.name and col.units == 7 and col.activation == "relu"
    assert np.array_equal(col._values["kernel"], d1.get_weights()[0][:, lo:hi])
    assert np.array_equal(row._values["kernel"], d2.get_weights()[0][lo:hi])
    for a, b in zip(col.get_weights() + row.get_weights(), d1.get_weights() + d2.get_weights()):
        assert np.array_equal(a, b)
    par = mlp([col, row], "float64")
    x, _ = data()
    np.testing.assert_allclose(par.predict(x, verbose=0), ref.predict(x, verbose=0), rtol=1e-12)


def check_save(tp):
    # Saved under t > 1: whole weights; loaded where the layers have no
    # group (one member) it is the one-process model.
    x, _ = data()
    par = split_mlp(7, tp, "float64")
    out = par.predict(x, verbose=0)
    folder = tempfile.mkdtemp(prefix=f"tp-save-{R}-")
    path = os.path.join(folder, "model.tsm")
    par.save(path)
    one = nn.load_model(path)
    assert one.layers[0].group is None and one.layers[0]._values["kernel"].shape == (6, 7)
    np.testing.assert_allclose(one.predict(x, verbose=0), out, rtol=1e-12)
    # And back into a split model: each member keeps its slice.
    again = split_mlp(7, tp, "float64")
    again.set_weights([w * 2.0 for w in one.get_weights()])
    lo, hi = split(7, tp.size)[tp.rank]
    assert np.array_equal(again.layers[0]._values["kernel"], 2.0 * one.get_weights()[0][:, lo:hi])
    again.load_weights(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), out)
    # With Adam's state: 2 epochs split, saved with the training state; 2
    # more on a one-member model from the file, or on a split model resumed
    # from it, are the one-process model's epochs 3 and 4.
    x, y = data(32)
    ref = plain(7, "float64")
    ref.compile(optim.Adam(1e-2), "mse")
    fit = dict(batch_size=8, shuffle=False, verbose=0, data_parallel=False)
    h_ref = ref.fit(x, y, epochs=4, **fit).history["loss"]
    par = split_mlp(7, tp, "float64")
    par.compile(optim.Adam(1e-2), "mse")
    par.fit(x, y, epochs=2, **fit)
    ck = os.path.join(folder, "ck.tsm")
    par.save_checkpoint(ck)
    one = nn.load_model(ck)
    np.testing.assert_allclose(one.fit(x, y, epochs=2, **fit).history["loss"], h_ref[2:],
                               rtol=1e-9)
    back = split_mlp(7, tp, "float64")
    back.compile(optim.Adam(1e-2), "mse")
    h_back = back.fit(x, y, epochs=4, resume_from=ck, **fit).history["loss"]
    np.testing.assert_allclose(h_back[-2:], h_ref[2:], rtol=1e-9)
    # ModelCheckpoint: locality 0 writes, every locality takes part in the
    # gathers (else locality 0 would wait for them).
    shared = dist.broadcast(np.frombuffer(folder.encode().ljust(200), dtype=np.uint8))
    shared = bytes(np.asarray(shared, dtype=np.uint8)).decode().strip()
    for only_weights in (False, True):
        name = os.path.join(shared, f"cb-{only_weights}.tsm")
        par = split_mlp(7, tp, "float64")
        par.compile(optim.Adam(1e-2), "mse")
        cb = nn.callbacks.ModelCheckpoint(name, save_weights_only=only_weights,
                                          save_best_only=True, monitor="loss")
        par.fit(x, y, epochs=2, callbacks=[cb], **fit)
        dist.barrier()
        whole = par.get_weights()
        if only_weights:
            one = plain(7, "float64")
            one.load_weights(name)
        else:
            one = nn.load_model(name)
        for a, b in zip(one.get_weights(), whole):
            assert np.array_equal(a, b)


def counted(tp, fn):
    """Calls of each primitive in fn(), from the trace's counters."""
    with tessera.trace(tempfile.mkdtemp(prefix=f"tp-trace-{R}-")) as t:
        fn()
    counts = {}
    for r in csv.DictReader(io.StringIO(t.csv())):
        if int(r["locality"]) == R:
            counts[r["name"]] = counts.get(r["name"], 0) + int(r["evaluations"])
    return counts


def check_counts(tp):
    x, y = data()
    par = split_mlp(7, tp, "float32")
    par.predict(x, verbose=0)
    fwd = counted(tp, lambda: par.predict(x, batch_size=len(x), verbose=0))
    assert fwd.get("tp_reduce", 0) == 1 and fwd.get("all_reduce", 0) == 0, fwd
    assert fwd.get("tp_copy", 0) == 1, fwd
    # A training step: forward, the RowParallelDense's tp_reduce; backward,
    # nothing, since the pair's input is the model's input, whose gradient
    # is not computed (so tp_copy's rule does not run).
    step = counted(tp, lambda: par.fit(x, y, batch_size=len(x), epochs=1, verbose=0,
                                       data_parallel=False))
    assert step.get("tp_reduce", 0) == 1 and step.get("all_reduce", 0) == 0, step
    # After a Dense the pair's input needs its gradient: tp_copy's rule, one
    # all-reduce backward.
    deeper = mlp([nn.Dense(5), nn.ColumnParallelDense(7, activation="relu", group=tp),
                  nn.RowParallelDense(3, group=tp)], "float32")
    step = counted(tp, lambda: deeper.fit(x, y, batch_size=len(x), epochs=1, verbose=0,
                                          data_parallel=False))
    assert step.get("tp_reduce", 0) == 1 and step.get("all_reduce", 0) == 1, step
    assert step.get("tp_copy", 0) == 1, step


def expect(error, text, fn):
    try:
        fn()
    except error as e:
        assert text in str(e), str(e)
    else:
        raise AssertionError(f"no {error.__name__}: {text}")


def check_errors(tp):
    expect(TypeError, "[ColumnParallelDense] argument 'group' must be a "
           "tessera.distributed.Group (mesh.group(\"tensor\")) or None, got int 5",
           lambda: nn.ColumnParallelDense(4, group=5))
    expect(TypeError, "[RowParallelDense] argument 'group' must be a tessera.distributed.Group",
           lambda: nn.RowParallelDense(4, group="tensor"))
    expect(ValueError, f"[ColumnParallelDense] units 1 cannot be split over the {tp.size} "
           f"members of group tensor (ranks {', '.join(map(str, tp.members))}): each member "
           "needs at least one (layer 'c')",
           lambda: nn.ColumnParallelDense(1, group=tp, name="c"))
    expect(ValueError, "[ColumnParallelDense] activation 'softmax' needs every output feature",
           lambda: nn.ColumnParallelDense(8, activation="softmax", group=tp))
    expect(ValueError, "[RowParallelDense] kernel_regularizer OrthogonalRegularizer is not "
           "supported on a tensor-parallel layer (only L1, L2 and L1L2",
           lambda: nn.RowParallelDense(8, group=tp, kernel_regularizer="orthogonal_regularizer"))
    expect(TypeError, "[ColumnParallelDense.from_dense] expects a tessera.nn.Dense, got Conv1D",
           lambda: nn.ColumnParallelDense.from_dense(nn.Conv1D(2, 3), tp))
    expect(ValueError, "[RowParallelDense] 1 input features cannot be split",
           lambda: mlp([nn.Dense(1), nn.RowParallelDense(3, group=tp, input_is_parallel=False)],
                       "float64"))
    expect(TypeError, "[tp_copy] argument 'group' must be a group",
           lambda: dist.tp_copy(np.ones(2), group="tensor"))
    expect(TypeError, "[tp_reduce] argument 'x' must be a numeric array",
           lambda: dist.tp_reduce(np.ones(2, dtype=bool), group=tp))


meshes = [dict(tensor=N)] + ([dict(data=2, tensor=2)] if N == 4 else [])
for shape in meshes:
    mesh = dist.Mesh(**shape)
    tp = mesh.group("tensor")
    # On a one-member group (the data axis of tensor=N) both are the identity.
    v = np.arange(3.0) + R
    one = mesh.group("pipeline")
    np.testing.assert_array_equal(dist.tp_reduce(v, group=one), v)
    np.testing.assert_array_equal(dist.tp_copy(v, group=one), v)
    check_primitives(tp)
    for hidden in (8, 7):  # even, and uneven: 7 on 2 or 4 members
        check_mlp(tp, hidden)
    check_training(tp, 7)
    check_gather_and_whole_input(tp)
    check_from_dense(tp)
    check_save(tp)
    check_counts(tp)
    check_errors(tp)
dist.barrier()
print("ok")
