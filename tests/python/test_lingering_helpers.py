"""Lingering helpers (docs/runtime.md): a worker that finished its share of a
parallel operation watches for the next one. Who runs a tile changes, never
what it computes: jitted loops of parallel operations give the same bits with
lingering off, at its default and long; the setting's sources and checks."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tessera
from tessera import _core

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from bench_numpy_kernels import power_iteration  # noqa: E402  (the suite's kernel)


def relax(x, y, iters):
    for _ in range(iters):
        x = 0.5 * x + 0.25 * np.sqrt(y * y + 1.0)
    return x, np.sum(x * x)


@pytest.fixture
def two_threads():
    before = _core.helper_linger_us()
    tessera.set_num_threads(2)
    yield
    _core.set_helper_linger_us(before)
    tessera.set_num_threads(os.cpu_count())


@pytest.mark.parametrize("fn, make", [
    (power_iteration, lambda r: (r.random((600, 600)) + np.eye(600), 30)),
    (relax, lambda r: (r.random(400_000), r.random(400_000), 12)),
], ids=["power_iteration", "relax"])
def test_the_same_bits_with_lingering_off_default_and_long(two_threads, fn, make):
    args = make(np.random.default_rng(3))
    expected = fn(*args)
    jf = tessera.jit(fn)
    results = []
    for linger_us in (0, 200, 5000, 0):
        _core.set_helper_linger_us(linger_us)
        results.append(jf(*args))
    for got in results:
        for a, b in zip(got, results[0]):
            assert np.array_equal(a, b)
    for a, e in zip(results[0], expected):
        np.testing.assert_allclose(a, e, rtol=1e-10)


def test_set_helper_linger_us_checks_its_argument():
    with pytest.raises(ValueError, match=r"\[set_helper_linger_us\].*-1"):
        _core.set_helper_linger_us(-1)
    with pytest.raises(ValueError, match=r"\[set_helper_linger_us\]"):
        _core.set_helper_linger_us(float("nan"))


def _linger_in_child(env_extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_LINGER_US", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                        "PMI_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c",
                        "from tessera import _core; print(_core.helper_linger_us())"],
                       env=env, capture_output=True, text=True, timeout=120, check=True)
    return float(r.stdout.strip().splitlines()[-1]), r.stderr


def test_the_setting_from_the_environment_and_launchers():
    assert _linger_in_child({})[0] == 200.0
    assert _linger_in_child({"TESSERA_LINGER_US": "50"})[0] == 50.0
    assert _linger_in_child({"TESSERA_LINGER_US": "0"})[0] == 0.0
    value, err = _linger_in_child({"TESSERA_LINGER_US": "fast"})
    assert value == 200.0 and "TESSERA_LINGER_US=fast" in err
    # several ranks on one host share its cores: off unless asked for
    assert _linger_in_child({"OMPI_COMM_WORLD_LOCAL_SIZE": "2"})[0] == 0.0
    assert _linger_in_child({"SLURM_NTASKS_PER_NODE": "4"})[0] == 0.0
    assert _linger_in_child({"OMPI_COMM_WORLD_LOCAL_SIZE": "1"})[0] == 200.0
    assert _linger_in_child({"OMPI_COMM_WORLD_LOCAL_SIZE": "2",
                             "TESSERA_LINGER_US": "100"})[0] == 100.0
