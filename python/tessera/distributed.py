"""Localities of an SPMD run: ``tessera.distributed.rank()`` and ``size()``.

Start a script on N localities (MPI ranks) with ``tessera run -n N script.py``;
run without the launcher it is the single locality 0 and makes no MPI call.
The collectives (``all_reduce``, ``broadcast``, ``all_gather``, ...) are
primitives of the language, so jit-compiled functions call them like any other
operation; the functions below call them directly, eagerly.
"""

import os
import sys

from ._core import call_primitive


def rank():
    """This process's locality (MPI rank): 0 without ``tessera run``."""
    return int(call_primitive("locality"))


def size():
    """Number of localities (MPI ranks): 1 without ``tessera run``."""
    return int(call_primitive("num_localities"))


def all_reduce(x, op="sum"):
    """``x`` reduced elementwise over every locality (op: sum, mean, max, min)."""
    return call_primitive("all_reduce", [x], {"op": op})


def broadcast(x, root=0):
    """The root locality's ``x`` on every locality."""
    return call_primitive("broadcast", [x], {"root": root})


def all_gather(x, axis=0):
    """Every locality's ``x`` joined along ``axis`` (extents may differ there)."""
    return call_primitive("all_gather", [x], {"axis": axis})


def barrier():
    """Returns once every locality has reached it."""
    call_primitive("barrier")


def _exit_at_once_on_error(kind, value, traceback, previous=sys.excepthook):
    # A rank that dies of an uncaught exception leaves without MPI_Finalize,
    # which would wait for ranks that may be waiting for this one: mpirun then
    # ends the whole job at once instead of after the collective timeout.
    previous(kind, value, traceback)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


if os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMIX_RANK"):
    sys.excepthook = _exit_at_once_on_error


__all__ = ["rank", "size", "all_reduce", "broadcast", "all_gather", "barrier"]
