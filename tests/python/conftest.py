"""Shared pytest setup for tessera's Python tests.

`make build` puts the checkout's ``python/`` folder on the venv's path (a
``tessera.pth``); the fallback below lets ``pytest tests/python`` work from a
fresh build directory too. Fixtures stay few and small.
"""

import os
import sys

import numpy as np
import pytest

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
