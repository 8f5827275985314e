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
    assert s["live_bytes"] + s["cached_bytes"] <= s["high_water_bytes"]


def test_peak_counts_an_intermediate():
    f = tessera.jit(lambda x: np.sum(np.exp(x) * 2.0))
    x = np.ones(1 << 20)  # 8 MiB of float64
    f(x)
    tessera.reset_peak_memory()
    base = tessera.memory_stats()["live_bytes"]
    assert f(x) == pytest.approx(2.0 * np.e * (1 << 20))
    peak = tessera.memory_stats()["peak_live_bytes"]
    assert peak - base >= 8 << 20  # exp(x) * 2.0 existed, at least once
    tessera.reset_peak_memory()
    assert tessera.memory_stats()["peak_live_bytes"] == tessera.memory_stats()["live_bytes"]


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
