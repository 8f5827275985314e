"""Localities of an SPMD run: ``tessera.distributed.rank()`` and ``size()``.

Start a script on N localities (MPI ranks) with ``tessera run -n N script.py``;
run without the launcher it is the single locality 0 and makes no MPI call.
The collectives (``all_reduce``, ``broadcast``, ``all_gather``, ...) and the
tiled-array primitives (``annotate_d``, ``constant_d``, ``random_d``,
``dot_d``, ``transpose_d``, ``retile_d``, ``all_gather_d``) are primitives of
the language: the functions below call them directly, eagerly, and inside a
``@tessera.jit`` function a call of one of them becomes the primitive itself.
Tiled arrays come back as ``tessera._core.TiledArray`` handles (``.tile``,
``.shape``, ``.spans``, ``.locality``, ``.tiling``), which jit functions take
as arguments and combine with the ordinary operations (see
docs/distributed.md, "Tiled arrays").
"""

import os
import sys

import numpy as np

from ._core import call_primitive


def _primitive(name):
    """Marks a function as the eager form of primitive ``name``, so that the
    jit translates calls of it into calls of the primitive (same arguments)."""

    def mark(fn):
        fn._tessera_primitive = name
        return fn

    return mark


def _dtype_name(dtype):
    return None if dtype is None else np.dtype(dtype).name


@_primitive("locality")
def rank():
    """This process's locality (MPI rank): 0 without ``tessera run``."""
    return int(call_primitive("locality"))


@_primitive("num_localities")
def size():
    """Number of localities (MPI ranks): 1 without ``tessera run``."""
    return int(call_primitive("num_localities"))


@_primitive("all_reduce")
def all_reduce(x, op="sum"):
    """``x`` reduced elementwise over every locality (op: sum, mean, max, min)."""
    return call_primitive("all_reduce", [x], {"op": op})


@_primitive("broadcast")
def broadcast(x, root=0):
    """The root locality's ``x`` on every locality."""
    return call_primitive("broadcast", [x], {"root": root})


@_primitive("all_gather")
def all_gather(x, axis=0):
    """Every locality's ``x`` joined along ``axis`` (extents may differ there)."""
    return call_primitive("all_gather", [x], {"axis": axis})


@_primitive("barrier")
def barrier():
    """Returns once every locality has reached it."""
    call_primitive("barrier")


@_primitive("annotate_d")
def annotate_d(x, tiling="rows", spans=None, shape=None):
    """This locality's tile ``x`` as part of a tiled array.

    ``tiling``: ``"rows"`` (axis 0), ``"columns"`` (axis 1), ``"pages"`` (axis 0
    of a 3-d or higher batch) or ``"replicated"``: the tiles are joined in
    locality order, their other extents must agree. Or ``spans``: this
    locality's ``[start, stop]`` per dimension (``tiling="overlapped"`` lets
    spans share elements). ``shape``, when given, is checked against the
    whole. Every locality must call it; they check the tiles together.
    """
    return call_primitive("annotate_d", [x], {"tiling": tiling, "spans": spans, "shape": shape})


@_primitive("constant_d")
def constant_d(value, shape, tiling="rows", dtype=None):
    """A tiled array of global ``shape`` filled with ``value``; ``tiling`` is a
    name (``"rows"``, ``"columns"``, ``"pages"``, ``"replicated"``) or this
    locality's spans."""
    return call_primitive(
        "constant_d", [value, shape], {"tiling": tiling, "dtype": _dtype_name(dtype)}
    )


@_primitive("random_d")
def random_d(
    shape,
    tiling="rows",
    distribution="uniform",
    seed=None,
    low=0.0,
    high=1.0,
    mean=0.0,
    std=1.0,
    dtype="float64",
):
    """A tiled random array equal, tile by tile, to the local draw of the same
    seed: ``random_uniform(shape, low, high, seed, dtype)``,
    ``random_normal(shape, mean, std, seed, dtype)`` or
    ``random_integers(low, high, shape, seed)`` for ``distribution``
    ``"uniform"``, ``"normal"``, ``"integers"``."""
    return call_primitive(
        "random_d",
        [shape],
        {
            "tiling": tiling,
            "distribution": distribution,
            "seed": seed,
            "low": low,
            "high": high,
            "mean": mean,
            "std": std,
            "dtype": _dtype_name(dtype),
        },
    )


@_primitive("dot_d")
def dot_d(a, b):
    """``numpy.dot`` of tiled (1-d or 2-d) arrays: rows x replicated stays tiled
    by rows, replicated x columns by columns, and a contraction over an axis
    tiled alike on both sides is summed over the localities (replicated)."""
    return call_primitive("dot_d", [a, b])


@_primitive("transpose_d")
def transpose_d(x):
    """The tiled array with its axes reversed (rows become columns), without
    communication."""
    return call_primitive("transpose_d", [x])


@_primitive("retile_d")
def retile_d(x, tiling):
    """``x`` tiled anew: by a tiling name, by this locality's spans, or like
    another tiled array of the same shape; only overlapping parts travel."""
    return call_primitive("retile_d", [x, tiling])


@_primitive("all_gather_d")
def all_gather_d(x):
    """The whole of tiled ``x`` as a NumPy array, on every locality."""
    return call_primitive("all_gather_d", [x])


def _exit_at_once_on_error(kind, value, traceback, previous=sys.excepthook):
    # A rank that dies of an uncaught exception leaves without MPI_Finalize,
    # which would wait for ranks that may be waiting for this one: mpirun then
    # ends the whole job at once instead of after the collective timeout.
    # Its trace (`tessera run --trace`) is written first: os._exit skips atexit.
    previous(kind, value, traceback)
    try:
        recording = sys.modules.get("tessera.trace")
        if recording is not None:
            recording._stop_at_exit()
    except BaseException:  # noqa: BLE001 - the exit must happen whatever the trace does
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


if os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMIX_RANK"):
    sys.excepthook = _exit_at_once_on_error


__all__ = [
    "rank",
    "size",
    "all_reduce",
    "broadcast",
    "all_gather",
    "barrier",
    "annotate_d",
    "constant_d",
    "random_d",
    "dot_d",
    "transpose_d",
    "retile_d",
    "all_gather_d",
]
