"""tessera: NumPy-style Python run on tessera's execution tree of futures.

Decorate a function with ``@tessera.jit``: its source is translated into
tessera's expression language, compiled once per argument signature into an
execution tree, and evaluated by the C++ runtime on every core with the GIL
released::

    import numpy as np
    import tessera

    @tessera.jit
    def scale(x, factor=2.0):
        return x * factor + x.sum(axis=0)

    scale(np.ones((3, 4)))

Data crosses in both directions without copies where it can: C-contiguous
NumPy arrays of bool, int64, float32 and float64 are read in place (other
integer and float dtypes are converted), results come back as NumPy arrays,
0-d results as NumPy scalars, lists as lists. Errors keep tessera's messages,
which name the operation and the user's ``file.py:line``:
``ValueError`` / ``TypeError`` / ``IndexError`` / ``MemoryError`` at run time,
``tessera.CompileError`` (a ``ValueError``) for text that does not compile and
``tessera.UnsupportedError`` for Python the translator does not handle.

The C++ engine is ``tessera._core`` (``Program``, ``call_primitive``, ...).
"""

import atexit as _atexit
import os as _os

try:
    from . import _core
except ImportError as error:  # pragma: no cover - a checkout without `make build`
    raise ImportError(
        "tessera's C++ extension tessera._core is missing or cannot be loaded "
        f"({error}); run `make build` in the tessera checkout, or `pip install .`"
    ) from error
# The job's heartbeat secret from `tessera run` goes out of the environment
# before the program can start a process (docs/security.md, "Heartbeats").
_core._take_job_key()
_os.environ.pop("TESSERA_JOB_KEY", None)
from ._core import (CompileError, Program, call_primitive, conv_winograd, deterministic,
                    memory_stats, num_threads, release_cached_memory, reset_peak_memory,
                    set_conv_winograd, set_deterministic, set_num_threads, set_simd_level,
                    simd_best, simd_level)
from .jit import UnsupportedError, is_eager, jit, prange, set_eager

# The background compile of native loops' optimised code (docs/runtime.md,
# "Tiered compilation") is stopped while the interpreter finalises, before
# any C++ static is destroyed under a compile that runs.
_atexit.register(_core._native_tiers_stop)
from .autodiff import checkpoint, grad, remat, value_and_grad, vjp
from . import data, distributed, nn, optim, resilience, trace

__version__ = "0.1.0"

__all__ = [
    "CompileError",
    "Program",
    "UnsupportedError",
    "call_primitive",
    "conv_winograd",
    "data",
    "deterministic",
    "distributed",
    "grad",
    "is_eager",
    "jit",
    "memory_stats",
    "nn",
    "num_threads",
    "optim",
    "prange",
    "resilience",
    "ops",
    "release_cached_memory",
    "reset_peak_memory",
    "set_conv_winograd",
    "set_deterministic",
    "set_eager",
    "set_num_threads",
    "set_simd_level",
    "simd_best",
    "simd_level",
    "trace",
    "value_and_grad",
    "vjp",
    "checkpoint",
    "remat",
]


def ops():
    """Return every primitive as ``(name, signature, family, help)``, sorted by name.

    The same list as ``tessera ops`` on the command line; ``signature`` shows
    the parameters with their defaults, e.g. ``sum(x, axis=nil, keepdims=false)``.
    """
    return _core.primitives()
