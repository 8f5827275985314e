"""Shared pytest setup for tessera's Python tests.

`make build` puts the checkout's ``python/`` folder on the venv's path (a
``tessera.pth``); the fallback below lets ``pytest tests/python`` work from a
fresh build directory too. Fixtures stay few and small.
"""

import atexit
import os
import shutil
import signal
import sys
import tempfile

import numpy as np
import pytest

# Keras on JAX, the nn tests' oracle, compiles each model's steps with XLA: at the CPU
# backend's default optimisation that was two thirds of those tests' time (44 of 68 s in
# two files, 346 compilations of small models run for a few steps). At level 1 without
# LLVM's expensive passes the same files take 38 CPU s instead of 47. Not level 0: there
# XLA computed NaN where the default gives numbers (test_nn_layer_state's batch
# normalisation with sample weights). A user's own XLA_FLAGS are kept.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=1 "
                                   "--xla_llvm_disable_expensive_passes=true")
# The oracle's compilations shared by pytest's workers (and the scripts they start):
# the same model built by tests parametrised over tessera's threads, or by several
# tests, compiles once per run (a folder of this run's, removed at its end).
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _JAX_CACHE = tempfile.mkdtemp(prefix="tessera-tests-jax-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _JAX_CACHE
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    atexit.register(shutil.rmtree, _JAX_CACHE, True)

# The interrupt tests send SIGINT to the scripts they start. A shell without job control
# starts a background command (`make test &` in a script) with SIGINT ignored, which every
# child inherits, so those scripts would never see it: Python's own handler again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: the interrupt tests fail and say so
        pass

_PYTHON_DIR = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "python")
try:
    import tessera  # noqa: F401
except ImportError:  # pragma: no cover - only without `make build`'s .pth
    sys.path.insert(0, os.path.abspath(_PYTHON_DIR))


@pytest.fixture
def core():
    """The compiled extension ``tessera._core``."""
    from tessera import _core

    return _core


@pytest.fixture
def rng():
    """A NumPy random generator with a fixed seed."""
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def keras():
    """Keras 3 on JAX, the oracle of tessera.nn's tests (scripts/install-deps
    installs it; never a dependency of tessera). A missing Keras fails the
    tests that ask for it instead of skipping them."""
    os.environ["KERAS_BACKEND"] = "jax"
    import keras as k  # noqa: PLC0415 - after KERAS_BACKEND

    if k.backend.backend() != "jax":
        pytest.fail(f"Keras runs on {k.backend.backend()}, not jax: set KERAS_BACKEND=jax")
    return k


@pytest.fixture(params=[1, 2])
def threads(request):
    """Runs a test once per worker-thread count, restoring the previous count."""
    from tessera import _core

    before = _core.num_threads()
    _core.set_num_threads(request.param)
    yield request.param
    _core.set_num_threads(before)


@pytest.fixture(autouse=True)
def _unseeded_global_stream():
    """A test that calls set_random_seed leaves the global stream seeded, which makes later
    models and fit calls without a seed draw theirs from it; each test starts unseeded."""
    yield
    mod = sys.modules.get("tessera.nn.random")
    if mod is not None:
        mod.forget_global_seed()
