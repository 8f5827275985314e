"""Task resilience, as HPX's resiliency module offers it: ``replay`` and
``replicate``, and a fault injector that shows they work.

::

    import numpy as np
    import tessera
    from tessera.resilience import inject_faults, replicate

    def step(x):
        return np.sin(x) * 2.0 + np.cos(x)

    @tessera.jit
    def safe_step(x):
        return replicate(3, step, x)            # 3 copies as 3 tasks; the majority wins

    with inject_faults(bitflip=0.2, seed=7):    # silent corruption in some copies
        y = safe_step(np.linspace(0.0, 1.0, 1000))
    assert np.array_equal(y, step(np.linspace(0.0, 1.0, 1000)))

Inside ``@tessera.jit`` functions the calls become the language's ``replay``
and ``replicate`` primitives (copies run as tasks on the runtime's workers).
Called from plain Python (or in eager mode) with a Python function, they run
here, with the same rules and the same fault injector, the copies one after
the other in the calling thread. See docs/resilience.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import operator
import os
import pickle
import sys

from . import _core

__all__ = ["fault_counts", "inject_faults", "replay", "replicate"]

# Exceptions that are not faults of an attempt: never retried.
_NOT_RETRIED = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _primitive(name):
    """Marks an eager function as the language primitive ``name``: jit
    translates calls of it into calls of the primitive (same arguments)."""

    def mark(fn):
        fn._tessera_primitive = name
        return fn

    return mark


def _where(depth=2):
    """``file.py:line`` of the caller's caller (the user's call)."""
    frame = sys._getframe(depth)
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def _check(op, n, f, validate, vote, where):
    """The arguments' errors, as the primitives give them; n as an int."""
    what = "attempts" if op == "replay" else "copies"
    try:
        count = operator.index(n) if not isinstance(n, bool) else None
    except TypeError:
        count = None
    if count is None:
        raise TypeError(
            f"[{op}] argument 'n' must be an int (a number of {what}), got "
            f"{type(n).__name__} {n!r} (at {where})"
        )
    if not 1 <= count <= 1 << 20:
        raise ValueError(
            f"[{op}] argument 'n' must be a number of {what} from 1 to {1 << 20}, "
            f"got {count} (at {where})"
        )
    if not callable(f):
        raise TypeError(
            f"[{op}] argument 'f' must be a function, got {type(f).__name__} {f!r} (at {where})"
        )
    for pname, g in (("validate", validate), ("vote", vote)):
        if g is not None and not callable(g):
            raise TypeError(
                f"[{op}] argument '{pname}' must be a function or None, got "
                f"{type(g).__name__} {g!r} (at {where})"
            )
    return count


class _Rejected(Exception):
    """validate(result) was false."""


def _same_kind(error, message):
    """``message`` as an exception of ``error``'s kind (RuntimeError for a
    rejected result or a kind that cannot be made from a message)."""
    if isinstance(error, _Rejected):
        return RuntimeError(message)
    try:
        out = type(error)(message)
        if str(out) == message:
            return out
    except Exception:
        pass
    return RuntimeError(message)


def _attempt(op, f, args, validate, call, index, where):
    """One call of f through the injector and validate: its accepted value."""
    value = f(*args)
    if call is not None:
        try:
            value = _core._inject_fault(value, call, index, _name(f), op, where)
        except TypeError:
            pass  # a result the injector cannot represent is left alone
    if validate is not None:
        ok = validate(value)
        if not bool(ok):
            what = "attempt" if op == "replay" else "copy"
            raise _Rejected(
                f"validate rejected the result of {what} {index + 1}: "
                f"{_name(validate)}(result) returned {ok!r}"
            )
    return value


def _checksum(value):
    try:
        return _core._value_checksum(value)
    except (TypeError, ValueError):
        return hashlib.blake2b(pickle.dumps(value), digest_size=8).hexdigest()


@_primitive("replay")
def replay(n, f, *args, validate=None):
    """``f(*args)``, called again when it fails, up to ``n`` attempts in all.

    An attempt fails when ``f`` raises or, with ``validate``, when
    ``validate(result)`` is false (or raises). The first accepted result is
    returned. After ``n`` failures the error names the operation, the attempts
    and the position, and carries the last attempt's error, of its kind (a
    ValueError stays a ValueError; a rejected result gives a RuntimeError).
    Inside ``@tessera.jit`` it is the language's ``replay`` primitive.
    """
    where = _where()
    n = _check("replay", n, f, validate, None, where)
    call = _core._fault_call()
    last = None
    for k in range(n):
        try:
            return _attempt("replay", f, args, validate, call, k, where)
        except _NOT_RETRIED:
            raise
        except Exception as e:
            last = e
    s = "" if n == 1 else "s"
    raise _same_kind(
        last, f"[replay] {_name(f)} failed all {n} attempt{s} (at {where}); the last error: {last}"
    ) from last


@_primitive("replicate")
def replicate(n, f, *args, validate=None, vote=None):
    """``n`` copies of ``f(*args)``, one result chosen among theirs.

    Copies that raise (or that ``validate`` rejects) are dropped; then the
    value is ``vote(list_of_results)`` with ``vote``; else, with
    ``validate``, the first valid result (by copy number); else the
    consensus: the result whose bitwise checksum more than half of the
    remaining results share (a RuntimeError names the groups when none
    does). When every copy fails, the error is the last copy's, of its kind.
    Inside ``@tessera.jit`` it is the language's ``replicate`` primitive and
    the copies run as tasks at once; here they run one after the other.
    """
    where = _where()
    n = _check("replicate", n, f, validate, vote, where)
    call = _core._fault_call()
    ok, last, failed = [], None, 0
    for i in range(n):
        try:
            ok.append(_attempt("replicate", f, args, validate, call, i, where))
        except _NOT_RETRIED:
            raise
        except Exception as e:
            last, failed = e, failed + 1
    if not ok:
        raise _same_kind(
            last,
            f"[replicate] all {n} copies of {_name(f)} failed (at {where}); the last error: {last}",
        ) from last
    if vote is not None:
        return vote(ok)
    if validate is not None:
        return ok[0]
    groups = {}
    for i, v in enumerate(ok):
        groups.setdefault(_checksum(v), []).append(i)
    best = max(groups.values(), key=len)
    if 2 * len(best) > len(ok):
        return ok[best[0]]
    listed = ", ".join(str([i + 1 for i in g]) for g in sorted(groups.values()))
    more = f" ({failed} more failed)" if failed else ""
    copies = "copy" if len(ok) == 1 else "copies"
    raise RuntimeError(
        f"[replicate] no majority among the results of {len(ok)} {copies} of {_name(f)}{more}: "
        f"{len(groups)} different checksums, copies agreeing: {listed} (at {where})"
    )


@contextlib.contextmanager
def inject_faults(config=None, *, throw=0.0, bitflip=0.0, seed=0, only=None):
    """Injects faults into the calls made by replay and replicate while the
    block runs, then restores what was in force before (such as
    ``TESSERA_INJECT_FAULTS``).

    Each attempt (or copy) fails with probability ``throw`` (a RuntimeError
    ``[inject_faults] ...``), or else has one random bit of its result (of
    one of its arrays or numbers, in a copy) flipped with probability
    ``bitflip``: silent corruption. Draws are keyed by ``seed``, the call's
    serial number and the attempt, so a block injects the same faults each
    time it runs. ``only`` restricts faults to the function of that name.
    ``config`` may instead give the environment variable's text,
    ``"throw=0.1,bitflip=0.01,seed=7,only=step"``.
    """
    if config is None:
        for pname, p in (("throw", throw), ("bitflip", bitflip)):
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ValueError(
                    f"[inject_faults] {pname} must be a probability in [0, 1], got {p!r}"
                )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"[inject_faults] seed must be a non-negative int, got {seed!r}")
        if only is not None and (not isinstance(only, str) or "," in only or not only):
            raise ValueError(f"[inject_faults] only must be a function name, got {only!r}")
        config = f"throw={float(throw)!r},bitflip={float(bitflip)!r},seed={seed}"
        if only:
            config += f",only={only}"
    elif not isinstance(config, str):
        raise TypeError(
            f"[inject_faults] config must be a string like 'throw=0.1,seed=7', got "
            f"{type(config).__name__} {config!r}"
        )
    before = _core._fault_injection()
    _core._set_fault_injection(config)
    try:
        yield
    finally:
        _core._set_fault_injection(before)


def fault_counts():
    """``{"calls": ..., "throws": ..., "bitflips": ...}``: the results that
    went through the injector and the faults it injected since it was last
    turned on."""
    calls, throws, bitflips = _core._fault_counts()
    return {"calls": calls, "throws": throws, "bitflips": bitflips}
