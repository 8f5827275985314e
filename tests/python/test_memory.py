"""tessera.memory_stats() and the memory a training step holds."""

import numpy as np
import pytest

import tessera
from tessera import nn


def test_memory_stats_keys_and_units():
    s = tessera.memory_stats()
    assert set(s) == {"live_bytes", "peak_live_bytes", "high_water_bytes", "cached_bytes",
                      "cache_limit_bytes"}
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
    assert s["high_water_bytes"] >= s["peak_live_bytes"] >= s["live_bytes"]
    # Kept blocks stay under the mark (each is kept only while live + kept bytes do);
    # arrays under 1 MiB made since may lift live + kept above it (docs/runtime.md).
    assert s["cached_bytes"] <= s["high_water_bytes"]


def test_peak_counts_an_intermediate():
    # np.sort(x) is an array of its own (8 MiB) before the sum reads it
    f = tessera.jit(lambda x: np.sum(np.sort(x) * 2.0))
    x = np.ones(1 << 20)  # 8 MiB of float64
    f(x)
    tessera.reset_peak_memory()
    base = tessera.memory_stats()["live_bytes"]
    assert f(x) == pytest.approx(2.0 * (1 << 20))
    peak = tessera.memory_stats()["peak_live_bytes"]
    assert peak - base >= 8 << 20  # the sorted copy existed, at least once
    tessera.reset_peak_memory()
    assert tessera.memory_stats()["peak_live_bytes"] == tessera.memory_stats()["live_bytes"]


def test_a_reduction_of_a_fused_expression_writes_no_array_of_it():
    # np.exp(x) * 2.0 is reduced as the fused pass computes it (docs/runtime.md,
    # "Fused expressions"): no 8 MiB array of it, only blocks of 16,384 values.
    f = tessera.jit(lambda x: np.sum(np.exp(x) * 2.0))
    x = np.ones(1 << 20)
    f(x)
    tessera.reset_peak_memory()
    base = tessera.memory_stats()["live_bytes"]
    assert f(x) == pytest.approx(2.0 * np.e * (1 << 20))
    assert tessera.memory_stats()["peak_live_bytes"] - base < 1 << 20


def test_release_cached_memory_empties_the_cache():
    tessera.jit(lambda x: np.sum(x * 2.0))(np.ones(1 << 20))
    tessera.release_cached_memory()
    assert tessera.memory_stats()["cached_bytes"] == 0


def test_training_step_keeps_only_what_the_backward_pass_reads():
    # Six Dense(256, relu) layers on 4096 rows: the backward pass reads each
    # layer's input (the previous relu's output, 4 MiB each) and nothing of
    # the products or bias sums before the relus. Keeping those as well (the
    # cotangents' shapes were once taken from the values themselves) made
    # the step hold three times as much.
    rows, width, depth = 4096, 256, 6
    act = rows * width * 4
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    y = rng.integers(0, 10, size=rows)
    model = nn.Sequential([nn.Dense(width, activation="relu") for _ in range(depth)] +
                          [nn.Dense(10)], input_shape=(width,), seed=0)
    model.compile("sgd", nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=rows, epochs=1, verbose=0, shuffle=False)
    tessera.reset_peak_memory()
    base = tessera.memory_stats()["live_bytes"]
    model.fit(x, y, batch_size=rows, epochs=1, verbose=0, shuffle=False)
    held = tessera.memory_stats()["peak_live_bytes"] - base
    # The relu outputs, the batch, and a few cotangents and products in flight.
    assert held < (depth + 6) * act, f"{held / act:.1f} activations held"


MIB8 = 8 << 20  # one float64 array of 2**20 elements


def _made_by_tessera():
    """An 8 MiB array that tessera made (a NumPy view of tessera's storage)."""
    return tessera.Program("lambda(n, ones(n) * 0.5)").run([1 << 20])


def _peak_above(run):
    before = tessera.memory_stats()["live_bytes"]
    tessera.reset_peak_memory()
    r = run()
    return tessera.memory_stats()["peak_live_bytes"] - before, r


def test_run_consume_hands_the_arguments_over():
    # w is read by the first statement only: handed over (consume=True), it
    # is freed after it, so the chain holds w's successors two at a time;
    # kept by the caller, it lives beside them for the whole run.
    step = tessera.Program("define(f, w, block(define(a, w * 2.0), define(b, a + 1.0),\n"
                           "  define(c, b * 3.0), sum(c)))\nf")
    kept = [_made_by_tessera()]
    held, r_kept = _peak_above(lambda: step.run(kept))
    assert len(kept) == 1 and held >= 2 * MIB8
    args = [_made_by_tessera()]
    handed, r_handed = _peak_above(lambda: step.run(args, consume=True))
    assert args == []  # the list let go of its items
    assert handed <= MIB8 + MIB8 // 2, handed  # above w itself: one more array at a time
    assert r_handed == r_kept == pytest.approx(6.0 * (1 << 20))


def test_arrays_made_by_tessera_come_back_as_themselves():
    # A result passed back to tessera is taken as the array behind it (no
    # Python reference in between); a NumPy view of part of it is wrapped as
    # before; writes through either are seen.
    w = _made_by_tessera()
    w[3] = 7.0
    part = w[1::2]
    part[0] = -2.0
    first = tessera.Program("lambda(x, list(x[1], x[3], size(x)))")
    assert first.run([w]) == [-2.0, 7.0, 1 << 20]
    assert first.run([part]) == [7.0, 0.5, 1 << 19]
    assert tessera.Program("lambda(x, block(setitem(x, 9.0, 5), x[5]))").run([w]) == 9.0
    assert w[5] == 9.0


def test_fit_hands_the_step_its_state_with_nan_policy_continue():
    # Eight Dense(512) layers (2.1 M parameters: 8 MiB of weights, 16 MiB of
    # Adam's moments). With 'stop' fit keeps the state it gives a step (to
    # give it back on a non-finite loss), so the step's new state comes on
    # top of it; with 'continue' it hands it over and each old array goes
    # as its new one is made. The weights are the same.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512)).astype(np.float32)
    y = rng.standard_normal((64, 512)).astype(np.float32)
    peaks, weights = {}, {}
    for policy in ("stop", "continue"):
        model = nn.Sequential([nn.Dense(512, activation="relu") for _ in range(7)] +
                              [nn.Dense(512)], input_shape=(512,), seed=1)
        model.compile(optimizer=tessera.optim.Adam(1e-3), loss="mse")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, nan_policy=policy)
        before = tessera.memory_stats()["live_bytes"]
        tessera.reset_peak_memory()
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, nan_policy=policy)
        peaks[policy] = tessera.memory_stats()["peak_live_bytes"] - before
        weights[policy] = model.get_weights()
    state = 12 * 2_101_248  # weights and two moments, float32
    assert peaks["continue"] < peaks["stop"] - state // 3, peaks
    for a, b in zip(weights["stop"], weights["continue"]):
        np.testing.assert_array_equal(a, b)
