"""A branch of an `if` outside the fast-loop subset (a raise, the general form of
a random draw) no longer keeps the loop off the fast path and native code: taking
it leaves for the general evaluation (docs/runtime.md "Scalar loops"). The results
are the same with native code, with the register interpreter (TESSERA_NATIVE=0)
and with the general evaluation (TESSERA_FAST_LOOPS=0), and match NumPy's; the
debug output must show the loops compiled, so the tests cannot pass by never
running native code."""

import json
import math

import numpy as np
import pytest
from jit_check import check, run_script


def checked_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            raise ValueError(f"negative value {x[i]} at {i}")
        s += x[i] * 2.0
    return s


def binned(x, n):
    counts = np.zeros(n, dtype=np.int64)
    for i in range(x.shape[0]):
        counts[int(x[i] * n)] += 1
    return counts


def normal_walk(mu, s, seed):
    np.random.seed(seed)
    out = np.empty(mu.shape[0])
    for i in range(mu.shape[0]):
        out[i] = np.random.normal(mu[i], s)
    return out


def gamma_loss(k, seed):
    np.random.seed(seed)
    out = np.empty(k.shape[0])
    for i in range(k.shape[0]):
        out[i] = np.random.gamma(k[i] * 2.5, 10.0) if k[i] > 0 else 0.0
    return out


def gamma_of_rows(k, seed):
    # a parameter that is an array: the general form, one array a turn
    np.random.seed(seed)
    total = np.zeros(k.shape[1])
    for i in range(k.shape[0]):
        total += np.random.gamma(k[i], 1.0)
    return total


def test_raise_in_a_branch_matches_python():
    check(checked_sum, np.linspace(0.0, 1.0, 300))
    x = np.linspace(0.0, 1.0, 300)
    x[250] = -1.0
    check(checked_sum, x)
    check(binned, np.linspace(0.0, 0.99, 500), 10)
    check(binned, np.array([0.5, 1.5]), 10)  # an index out of range: IndexError


_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import numpy as np
import tessera
import test_fast_loop_branches as t

out = {{}}
x = np.linspace(0.0, 1.0, 5000)
out["sum"] = float(tessera.jit(t.checked_sum)(x))
bad = x.copy()
bad[4000] = -1.0
try:
    tessera.jit(t.checked_sum)(bad)
except ValueError as e:
    out["error"] = str(e)
out["binned"] = tessera.jit(t.binned)(x * 0.99, 7).tolist()
mu = np.linspace(-1.0, 1.0, 4000)
out["normal"] = tessera.jit(t.normal_walk)(mu, 0.5, 3).tolist()
k = np.arange(4000) % 3
out["gamma"] = tessera.jit(t.gamma_loss)(k, 5).tolist()
out["rows"] = tessera.jit(t.gamma_of_rows)(np.ones((50, 3)) * 2.0, 7).tolist()
try:
    tessera.jit(t.normal_walk)(mu, -0.5, 3)
except ValueError as e:
    out["scale_error"] = type(e).__name__
print(json.dumps(out))
"""


def _run(**env):
    out, err = run_script(_SCRIPT, **env)
    return json.loads(out), err


@pytest.fixture(scope="module")
def runs():
    return {mode: _run(**env) for mode, env in {
        "native": {"TESSERA_FAST_LOOPS": "debug", "TESSERA_NATIVE": "1"},
        "interpreter": {"TESSERA_FAST_LOOPS": "1", "TESSERA_NATIVE": "0"},
        "general": {"TESSERA_FAST_LOOPS": "0"},
    }.items()}


def test_same_results_on_every_path(runs):
    native = runs["native"][0]
    for mode in ("interpreter", "general"):
        assert runs[mode][0] == native, mode


def test_results_match_numpy(runs):
    got = runs["native"][0]
    x = np.linspace(0.0, 1.0, 5000)
    assert got["sum"] == pytest.approx(checked_sum(x), rel=1e-12)
    assert got["error"].startswith("negative value -1.0 at 4000 (at test_fast_loop_branches.py:")
    assert got["binned"] == binned(x * 0.99, 7).tolist()
    assert got["scale_error"] == "ValueError"
    # the draws: the distributions NumPy draws from (the streams differ)
    mu = np.linspace(-1.0, 1.0, 4000)
    z = (np.array(got["normal"]) - mu) / 0.5
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.std() - 1.0) < 0.05
    g = np.array(got["gamma"])
    k = np.arange(4000) % 3
    for kk in (1, 2):
        sample = g[k == kk]
        want = kk * 2.5 * 10.0  # gamma(shape, scale) has mean shape * scale
        assert abs(sample.mean() - want) < 5 * math.sqrt(kk * 2.5) * 10.0 / math.sqrt(sample.size)
    assert np.all(g[k == 0] == 0.0)
    rows = np.array(got["rows"])
    assert rows.shape == (3,) and np.all(np.abs(rows / 50 - 2.0) < 5 * math.sqrt(2.0 / 50))


def test_the_loops_run_native(runs):
    err = runs["native"][1]
    for fn in (checked_sum, binned, normal_walk, gamma_loss):
        line = fn.__code__.co_firstlineno
        lines = range(line, line + 8)
        assert any(f"test_fast_loop_branches.py:{n}: native code compiled" in err or
                   f"test_fast_loop_branches.py:{n}: native code loaded" in err
                   for n in lines), (fn.__name__, err)
    assert "this branch runs in the general evaluation when taken" in err
