# conv1d_d under `tessera run -n N` against conv1d of the whole array on every
# rank: kernel sizes 1, 3, 5, dilations 1, 2, 3, paddings valid, same, causal,
# strides 1 and 2, 11 and 3 steps, time tiles (even, uneven, empty, out of
# locality order),
# overlapped tiles (overlap_d) and batch tiles; the gradients of a loss whose
# local parts sum to the single-process loss, and the gradient primitives
# themselves, against the single-process gradients. Prints "ok".
import numpy as np

import tessera.distributed as td
from tessera import _core

import tiling_cases  # tests/distributed/tiling_cases.py

r, n = td.rank(), td.size()
BATCH, CHANNELS, FILTERS = 3, 3, 2
SETTINGS = "stride=s, padding=p, dilation=d"

forward = _core.Program(f"define(f, x, w, s, p, d, conv1d_d(x, w, {SETTINGS}))\nf", "conv_d_forward.tsl")
overlapped = _core.Program(
    f"define(f, x, w, k, s, p, d, block(define(o, overlap_d(x, k, {SETTINGS})), "
    f"list(o, conv1d_d(o, w, {SETTINGS}))))\nf",
    "conv_d_overlapped.tsl")
whole = _core.Program(
    f"define(loss, x, w, r, s, p, d, sum(conv1d(x, w, {SETTINGS}) * r))\n"
    f"define(f, x, w, r, s, p, d, value_and_grad(loss, [0, 1])(x, w, r, s, p, d))\nf",
    "conv_d_whole.tsl")
# Every locality's part of the loss: the parts sum to the whole loss, the
# convention of distributed gradients (see docs/distributed.md).
tiled_grad = _core.Program(
    f"define(loss, x, w, r, s, p, d, sum(local_tile(conv1d_d(x, w, {SETTINGS})) * r))\n"
    f"define(f, x, w, r, s, p, d, value_and_grad(loss, [0, 1])(x, w, r, s, p, d))\nf",
    "conv_d_grad.tsl")
overlapped_grad = _core.Program(
    f"define(loss, x, w, r, k, s, p, d, sum(local_tile(conv1d_d(overlap_d(x, k, {SETTINGS}), w, {SETTINGS})) * r))\n"
    f"define(f, x, w, r, k, s, p, d, value_and_grad(loss, [0, 1])(x, w, r, k, s, p, d))\nf",
    "conv_d_overlapped_grad.tsl")
vjp = _core.Program(
    f"define(f, g, x, w, s, p, d, list(conv1d_d_grad_input(g, w, x, {SETTINGS}), "
    f"conv1d_d_grad_weight(g, x, shape(w), {SETTINGS})))\nf",
    "conv_d_vjp.tsl")


def spans_along(shape, axis, sizes):
    return tiling_cases.spans_along(shape, axis, sizes, n)


def time_tilings(steps):
    """Tilings of `steps` over n localities, the same on every locality."""
    even = [len(part) for part in np.array_split(np.arange(steps), n)]
    out = {"even": [(q, even[q]) for q in range(n)]}
    if n > 1:
        lopsided = [0] * n
        lopsided[0], lopsided[-1] = 1, steps - 1
        out["uneven, empty"] = [(q, lopsided[q]) for q in range(n)]
        # Reverse locality order, locality n // 2 empty, small tiles first.
        sizes, left = {}, steps
        for q in reversed(range(n)):
            if q == n // 2:
                sizes[q] = 0
                continue
            sizes[q] = left if q == 0 else min(left, 1 + q % 3)
            left -= sizes[q]
        out["reversed"] = [(q, sizes[q]) for q in reversed(range(n))]
    return out


def same_spans(a, b):
    return [tuple(map(tuple, s)) for s in a] == [tuple(map(tuple, s)) for s in b]


def tile_of(a, span):
    return np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in span)])


def tiled(a, spans, tiling):
    return _core.TiledArray(tile_of(a, spans[r]), a.shape, spans, tiling)


def check_output(y, want, what):
    assert tuple(y.shape) == want.shape, (what, y.shape, want.shape)
    np.testing.assert_allclose(y.tile, tile_of(want, y.spans[r]), rtol=1e-12, atol=1e-12, err_msg=what)
    # The spans partition the result: every element in exactly one tile.
    count = np.zeros(want.shape, dtype=np.int64)
    for span in y.spans:
        count[tuple(slice(lo, hi) for lo, hi in span)] += 1
    assert (count == 1).all(), (what, y.spans)


def check_grads(got, want_value, want_dx, want_dw, x_spans, what):
    value, (dx, dw) = got
    np.testing.assert_allclose(td.all_reduce(np.asarray(value)), want_value, rtol=1e-12, err_msg=what)
    assert same_spans(dx.spans, x_spans), (what, dx.spans, x_spans)
    np.testing.assert_allclose(dx.tile, tile_of(want_dx, x_spans[r]), rtol=1e-10, atol=1e-12, err_msg=what + " dx")
    np.testing.assert_allclose(dw, want_dw, rtol=1e-10, atol=1e-12, err_msg=what + " dw")


rng = np.random.default_rng(5)
cases = settings = 0
for steps in (11, 3):
    x = rng.normal(size=(BATCH, steps, CHANNELS))
    for k in (1, 3, 5):
        w = rng.normal(size=(k, CHANNELS, FILTERS))
        for d in (1, 2, 3):
            for p in ("valid", "same", "causal"):
                for s in (1, 2):
                    if p == "valid" and d * (k - 1) + 1 > steps:
                        continue
                    settings += 1
                    y_whole = _core.call_primitive("conv1d", [x, w], {"stride": s, "padding": p, "dilation": d})
                    rr = rng.normal(size=y_whole.shape)
                    loss, (dx_whole, dw_whole) = whole.run([x, w, rr, s, p, d])
                    setting = f"steps={steps} k={k} d={d} padding={p} stride={s}"
                    for name, sizes in time_tilings(steps).items():
                        what = f"{setting}, time tiles {name}"
                        spans = spans_along(x.shape, 1, sizes)
                        xt = tiled(x, spans, "user")
                        y = forward.run([xt, w, s, p, d])
                        check_output(y, y_whole, what)
                        o, yo = overlapped.run([xt, w, k, s, p, d])
                        along_time = any(0 < hi - lo < steps for _, (lo, hi), _ in spans)
                        assert o.tiling == ("overlapped" if along_time else "user"), (what, o.tiling)
                        np.testing.assert_array_equal(o.tile, tile_of(x, o.spans[r]), err_msg=what)
                        check_output(yo, y_whole, what + ", overlapped")
                        # The same outputs on the same localities, unless two widened
                        # spans are the whole array (nothing then tells where the cut was).
                        if sum(o_span[1] == (0, steps) for o_span in o.spans) < 2:
                            assert same_spans(yo.spans, y.spans), (what, yo.spans, y.spans)
                        r_tile = tile_of(rr, y.spans[r])
                        check_grads(tiled_grad.run([xt, w, r_tile, s, p, d]), loss, dx_whole, dw_whole, spans, what)
                        check_grads(overlapped_grad.run([xt, w, tile_of(rr, yo.spans[r]), k, s, p, d]), loss,
                                    dx_whole, dw_whole, spans, what + ", through overlap_d")
                        # The gradient primitives with a given cotangent.
                        g = _core.TiledArray(r_tile, y_whole.shape, y.spans, "user")
                        dx, dw = vjp.run([g, xt, w, s, p, d])
                        np.testing.assert_allclose(dx.tile, tile_of(dx_whole, spans[r]), rtol=1e-10, atol=1e-12,
                                                   err_msg=what + " vjp dx")
                        np.testing.assert_allclose(dw, dw_whole, rtol=1e-10, atol=1e-12, err_msg=what + " vjp dw")
                        cases += 1
                    # Batch tiles (uneven with 2 localities, one empty with 4).
                    batch_sizes = [len(part) for part in np.array_split(np.arange(BATCH), n)]
                    spans = spans_along(x.shape, 0, list(enumerate(batch_sizes)))
                    xt = tiled(x, spans, "pages")
                    y = forward.run([xt, w, s, p, d])
                    check_output(y, y_whole, setting + ", batch tiles")
                    assert y.tiling == "pages"
                    o, yo = overlapped.run([xt, w, k, s, p, d])
                    assert same_spans(o.spans, spans)
                    check_grads(tiled_grad.run([xt, w, tile_of(rr, y.spans[r]), s, p, d]), loss, dx_whole, dw_whole,
                                spans, setting + ", batch tiles")
                    cases += 1

# Exchanges of two call sites in flight together, on different inputs, issued
# in one order on even localities and in the other on odd ones: each exchange
# gets its own halos, because the messages' tags differ by call site.
x, x2, w = rng.normal(size=(BATCH, 11, CHANNELS)), rng.normal(size=(BATCH, 11, CHANNELS)), rng.normal(size=(3, 3, 2))
spans = spans_along(x.shape, 1, time_tilings(11)["even"])
both = _core.Program(
    """define(f, a, b, w, block(
    define(first, v, conv1d_d(v, w, padding="same", dilation=2)),
    define(second, v, conv1d_d(v, w, padding="same", dilation=2)),
    if(locality() % 2 == 0, list(first(a), second(b)), block(define(l, list(second(b), first(a))), list(l[1], l[0])))))
f""",
    "conv_d_concurrent.tsl")
ya, yb = both.run([tiled(x, spans, "user"), tiled(x2, spans, "user"), w])
for y, whole_x in ((ya, x), (yb, x2)):
    check_output(y, _core.call_primitive("conv1d", [whole_x, w], {"padding": "same", "dilation": 2}), "concurrent")

# A 'valid' window longer than the input fails on every locality, before any message.
xt = tiled(x, spans, "user")
try:
    forward.run([xt, rng.normal(size=(5, CHANNELS, FILTERS)), 1, "valid", 3])
    raise AssertionError("no error for a window longer than the input")
except ValueError as e:
    want = "[conv1d_d] kernel of effective size 13 (size 5, dilation 3) is larger than the input (11 steps)"
    assert want in str(e), e

td.barrier()
assert settings > 90 and cases == settings * (len(time_tilings(11)) + 1), (settings, cases)
print("ok")
