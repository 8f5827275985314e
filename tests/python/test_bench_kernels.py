"""Smoke test of the NumPy speed suite (bench/bench_numpy_kernels.py): every
kernel runs once at its quick sizes through tessera.jit and is compared with
NumPy. Only correctness is checked, never speed. Kernels listed in the bench
file's KNOWN_FAILURES (with the reason) are expected to fail today; every
other kernel must agree with NumPy."""

import json
import os
import subprocess
import sys

import pytest

_BENCH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench")
sys.path.insert(0, os.path.abspath(_BENCH))

import bench_numpy_kernels as suite  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One quick, check-only run of the whole suite, by kernel name: in one process
    (the benchmark runs each kernel in a process of its own, for timing; a process
    per kernel here cost 100-200 s of a worker in `make test`, 3 s in one)."""
    out = tmp_path_factory.mktemp("bench") / "kernels.json"
    cmd = [sys.executable, os.path.join(_BENCH, "bench_numpy_kernels.py"), "--quick",
           "--check-only", "--in-process", "--timeout", "300", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out) as fh:
        return {r["name"]: r for r in json.load(fh)["results"]}


def test_the_suite_has_at_least_30_kernels():
    names = [k.name for k in suite.KERNELS]
    assert len(names) >= 30
    assert len(set(names)) == len(names)
    assert set(suite.KNOWN_FAILURES) <= set(names), "KNOWN_FAILURES names an unknown kernel"
    assert all(reason.strip() for reason in suite.KNOWN_FAILURES.values())


@pytest.mark.parametrize("name", [k.name for k in suite.KERNELS])
def test_kernel_agrees_with_numpy(results, name):
    r = results[name]
    if name in suite.KNOWN_FAILURES:
        if r["status"] == "ok":
            pytest.fail(f"{name} now agrees with NumPy: remove it from KNOWN_FAILURES")
        pytest.xfail(suite.KNOWN_FAILURES[name])
    assert r["status"] == "ok", r["error"]


def test_the_numba_column_runs_a_loop_and_reports_a_refusal():
    """The harness's Numba peer (bench only): a loop kernel compiles with
    @njit and agrees with NumPy; np.repeat with an axis is refused, and said so."""
    pytest.importorskip("numba")
    loop = suite.by_name("axpy_loop")
    args = loop.setup(True)
    expected_args = suite._copy(args)
    expected = loop.func(*expected_args)
    res = {}
    fn = suite._numba_version(loop, res, args, expected, expected_args)
    assert res["numba"] == "ok" and fn is not None and res["first_numba_s"] > 0
    refused = suite.by_name("upsample_repeat")
    args = refused.setup(True)
    res = {}
    assert suite._numba_version(refused, res, args, refused.func(*args), args) is None
    assert res["numba"].startswith("refused: "), res["numba"]
