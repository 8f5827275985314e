# softmax, log_softmax, the losses (categorical, sparse categorical and
# binary cross-entropy, mean squared error) and accuracy on a batch tiled by
# rows, under `tessera run -n N`: values and gradients of small classifiers
# (x tiled by rows, x @ w with w plain or replicated, bias_add, softmax or
# log_softmax, a loss) against the single-process value and gradient of the
# same computation on the whole batch, which every rank computes itself from
# the same seeded inputs. The loss is the loss of the whole batch, the same on
# every rank; x's gradient is tiled like x, w's and b's are whole on every
# rank. Targets tiled like the predictions or plain; rows even, uneven with
# empty tiles, and out of locality order (tiling_cases.py). Then the errors:
# targets tiled unlike the predictions, a softmax or a loss across tiles, a
# label out of range on one locality (every locality fails with its message).
# Prints "ok".
import numpy as np

import tessera
import tessera.distributed as td
from tessera import _core

import tiling_cases  # tests/distributed/tiling_cases.py
from tiling_cases import program, tile_of

r, n = td.rank(), td.size()
ROWS, FEATURES, CLASSES = 7, 5, 3


def rows_of(a, tiling, sizes):
    """a tiled by rows: 'rows' when even (the same kind on one locality as on
    N), else by spans."""
    spans = tiling_cases.spans_along(a.shape, 0, sizes, n)
    return _core.TiledArray(tile_of(a, spans[r]), a.shape, spans, "rows" if tiling == "even" else "user")


def columns_of(a, k):
    """a tiled by columns, split the k-th way of tiling_cases.splits."""
    tiling, sizes = tiling_cases.splits(a.shape[1], n)[k]
    spans = tiling_cases.spans_along(a.shape, 1, sizes, n)
    return _core.TiledArray(tile_of(a, spans[r]), a.shape, spans, "columns" if tiling == "even" else "user")


def replicated(a):
    return _core.TiledArray(a, a.shape, [[(0, e) for e in a.shape]] * n, "replicated")


def same_everywhere(a, label):
    every = td.all_gather(np.atleast_1d(np.asarray(a, dtype=np.float64)).reshape(1, -1))
    assert (every == every[0]).all(), (label, every)


def check(got, want, what, args, argnums, rtol=1e-12):
    if not argnums:
        got, want = (got, []), (want, [])
    (value, grads), (want_value, want_grads) = got, want
    np.testing.assert_allclose(value, want_value, rtol=rtol, atol=rtol, err_msg=what + ": value")
    assert np.asarray(value).dtype == np.asarray(want_value).dtype, (what, value, want_value)
    same_everywhere(value, what + ": value on every rank")
    for k, (g, w) in enumerate(zip(grads, want_grads)):
        arg, label = args[argnums[k]], f"{what}: gradient {k}"
        if isinstance(arg, _core.TiledArray):
            assert isinstance(g, _core.TiledArray), (label, g)
            assert g.spans == arg.spans and g.shape == arg.shape and g.tiling == arg.tiling, (label, g, arg)
            np.testing.assert_allclose(g.tile, tile_of(w, arg.spans[r]), rtol=100 * rtol, atol=rtol, err_msg=label)
            if arg.tiling == "replicated":
                same_everywhere(g.tile, label)
        else:
            assert not isinstance(g, _core.TiledArray), (label, g)
            np.testing.assert_allclose(g, w, rtol=100 * rtol, atol=rtol, err_msg=label)
            same_everywhere(g, label)


rng = np.random.default_rng(17)
X = rng.normal(size=(ROWS, FEATURES))
W = rng.normal(size=(FEATURES, CLASSES))
B = rng.normal(size=CLASSES)
V = rng.normal(size=FEATURES)
V1 = rng.normal(size=(FEATURES, 1))
LABELS = rng.integers(0, CLASSES, size=ROWS)
ONE_HOT = np.eye(CLASSES)[LABELS]
SOFT = rng.dirichlet(np.ones(CLASSES), size=ROWS)          # soft targets, rows summing to 1
TARGETS = rng.normal(size=(ROWS, CLASSES))
BITS = (rng.random(ROWS) > 0.5).astype(np.float64)
Q = rng.normal(size=(ROWS, CLASSES))
row_splits = tiling_cases.splits(ROWS, n)

# An argument is a plain value or (how, array): how is "rows" (tiled by rows
# like x), "columns" or "replicated"; the whole program gets the array itself.
rows = lambda a: ("rows", a)
cols = lambda a: ("columns", a)
rep = lambda a: ("replicated", a)
CLASSIFIER = "bias_add(x @ w, b)"
cases = [
    ("sparse crossentropy of logits, labels tiled", "x, w, b, y",
     f"sparse_categorical_crossentropy(y, {CLASSIFIER}, from_logits=true)", [0, 1, 2],
     [rows(X), W, B, rows(LABELS)]),
    ("sparse crossentropy of softmax, plain (N, 1) labels, replicated w", "x, w, b, y",
     f"sparse_categorical_crossentropy(y, softmax({CLASSIFIER}))", [0, 1, 2],
     [rows(X), rep(W), B, LABELS.reshape(-1, 1)]),
    ("categorical crossentropy of softmax, one-hot tiled", "x, w, b, y",
     f"categorical_crossentropy(y, softmax({CLASSIFIER}))", [0, 1, 2], [rows(X), W, B, rows(ONE_HOT)]),
    ("categorical crossentropy of logits, soft targets plain", "x, w, b, y",
     f"categorical_crossentropy(y, {CLASSIFIER}, from_logits=true)", [0, 1, 2], [rows(X), W, B, SOFT]),
    ("-mean(sum(y * log_softmax))", "x, w, b, y", f"-mean(sum(y * log_softmax({CLASSIFIER}), axis=1))",
     [0, 1, 2], [rows(X), W, B, rows(ONE_HOT)]),
    ("softmax and log_softmax along axis 1", "x, w, q",
     "sum(softmax(x @ w, axis=1) * q) + sum(log_softmax(tanh(x @ w)) * q)", [0, 1], [rows(X), W, Q]),
    ("mean squared error, targets tiled", "x, w, t", "mean_squared_error(t, tanh(x @ w))", [0, 1],
     [rows(X), W, rows(TARGETS)]),
    ("binary crossentropy of sigmoid (N,)", "x, v, t", "binary_crossentropy(t, sigmoid(x @ v))", [0, 1],
     [rows(X), V, rows(BITS)]),
    ("binary crossentropy of logits (N, 1), plain (N,) targets", "x, v, t",
     "binary_crossentropy(t, x @ v, from_logits=true)", [0, 1], [rows(X), V1, BITS]),
    ("mean squared error (N, 1) against tiled (N,)", "x, v, t", "mean_squared_error(t, x @ v)", [0, 1],
     [rows(X), V1, rows(BITS)]),
    # Losses that average elements take any tiling.
    ("mean squared error and binary crossentropy by columns", "x, t",
     "mean_squared_error(t, tanh(x * 2.0)) + binary_crossentropy(sigmoid(t), x, from_logits=true)", [0, 1],
     [cols(X), cols(rng.normal(size=(ROWS, FEATURES)))]),
    ("replicated predictions", "x, w, y", "sparse_categorical_crossentropy(y, x @ w, from_logits=true)", [0, 1],
     [rep(X), W, LABELS]),
    ("two losses and a tiled target parameter", "x, w, b, t",
     f"mean_squared_error(t, softmax({CLASSIFIER})) + 0.5 * binary_crossentropy(sigmoid(t), sigmoid(x @ w))",
     [0, 1, 2, 3], [rows(X), W, B, rows(SOFT)]),
    # accuracy: a value (a constant to autodiff).
    ("accuracy, labels tiled", "x, w, y", "accuracy(y, x @ w)", [], [rows(X), W, rows(LABELS)]),
    ("accuracy, one-hot plain", "x, w, y", "accuracy(y, x @ w)", [], [rows(X), W, ONE_HOT]),
    ("accuracy, binary (N, 1) against (N,)", "x, v, t", "accuracy(t, sigmoid(x @ v))", [],
     [rows(X), V1, rows(BITS)]),
]

checked = 0
for name, params, body, argnums, spec in cases:
    dist = program(params, body, argnums, f"losses_{checked}")
    whole_args = [s[1] if isinstance(s, tuple) else s for s in spec]
    want = dist.run(whole_args)  # the same program on the whole arrays: the local primitives
    for k, (tiling, sizes) in enumerate(row_splits):
        make = {"rows": lambda a: rows_of(a, tiling, sizes), "columns": lambda a: columns_of(a, k),
                "replicated": replicated}
        args = [make[s[0]](s[1]) if isinstance(s, tuple) else s for s in spec]
        check(dist.run(args), want, f"{name}, rows {tiling}", args, argnums)
        checked += 1

# float32 predictions: the loss keeps the dtype, within float32 rounding.
X32, W32 = X.astype(np.float32), W.astype(np.float32)
dist = program("x, w, y", "sparse_categorical_crossentropy(y, x @ w, from_logits=true)", [0, 1], "losses_f32")
want = dist.run([X32, W32, LABELS])
for tiling, sizes in row_splits:
    args = [rows_of(X32, tiling, sizes), W32, rows_of(LABELS, tiling, sizes)]
    check(dist.run(args), want, f"float32, rows {tiling}", args, [0, 1], rtol=1e-5)
    checked += 1

# From Python: a jit classifier's loss and gradients.


@tessera.jit
def classifier_loss(x, w, b, y):
    logits = tessera.log_softmax(tessera.bias_add(x @ w, b))
    return tessera.sparse_categorical_crossentropy(y, logits, from_logits=True)


want = tessera.value_and_grad(classifier_loss, argnums=(0, 1, 2))(X, W, B, LABELS)
for tiling, sizes in row_splits:
    args = [rows_of(X, tiling, sizes), W, B, rows_of(LABELS, tiling, sizes)]
    check(tessera.value_and_grad(classifier_loss, argnums=(0, 1, 2))(*args), want, f"jit, rows {tiling}", args,
          [0, 1, 2])
    checked += 1


def raises(text, args, *pieces):
    """Runs `text` (a program whose value is called with args) and checks that
    it fails with a ValueError whose message holds every piece."""
    try:
        _core.Program(text, "errors.tsl").run(args)
    except ValueError as e:
        msg = str(e)
        for p in pieces:
            assert p in msg, (p, msg)
        return msg
    raise AssertionError(f"no error from {text}")


even = rows_of(X, *row_splits[0])
spans = tiling_cases.spans_along(X.shape, 0, row_splits[0][1], n)
# A softmax along the tiled axis, a loss across the classes' tiles.
raises("define(f, x, softmax(x, axis=0))\nf", [even],
       "[softmax] 'x' is tiled along axis 0, the axis of the softmax: tiled float64 array of shape (7, 5), rows over",
       "retile_d(x, \"rows\")")
columns = _core.TiledArray(tile_of(X.T, [(0, 5), spans[r][0]]), (5, 7), [[(0, 5), s[0]] for s in spans], "columns")
raises("define(f, x, y, categorical_crossentropy(y, x))\nf", [columns, X.T.copy()],
       "[categorical_crossentropy] y_pred is tiled along its last axis, the classes: tiled float64 array of shape "
       "(5, 7), columns over")
raises("define(f, x, y, sparse_categorical_crossentropy(y, x))\nf", [even, np.zeros(6, dtype=np.int64)],
       "[sparse_categorical_crossentropy] y_true has shape (6,) but y_pred has shape (7, 5): expected one class "
       "index per row, shape (7,)")
if n > 1:
    # Labels split otherwise than the predictions.
    other = rows_of(LABELS, *row_splits[1])
    spans_str = lambda spans: ", ".join(f"locality {q} [" + ", ".join(f"{lo}:{hi}" for lo, hi in s) + "]"
                                        for q, s in enumerate(spans))
    raises("define(f, x, y, sparse_categorical_crossentropy(y, x))\nf", [even, other],
           "[sparse_categorical_crossentropy] y_true and y_pred are tiled differently: y_true is tiled int64 array "
           f"of shape (7,), user over {n} localities with spans {spans_str(other.spans)}; y_pred is tiled float64 "
           f"array of shape (7, 5), rows over {n} localities with spans {spans_str(even.spans)}")
    # A label out of range on the last locality: every locality gets its message.
    bad = LABELS.copy()
    bad[-1] = 9
    last = max(q for q, size in row_splits[0][1] if size > 0)
    raises("define(f, x, y, sparse_categorical_crossentropy(y, x))\nf", [even, rows_of(bad, *row_splits[0])],
           f"[sparse_categorical_crossentropy] on locality {last}: ", "9")

td.barrier()
assert checked == (len(cases) + 2) * len(row_splits), checked
print("ok")
