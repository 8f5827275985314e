#!/usr/bin/env python3
"""NumPy speed suite: 40+ NumPy kernels run through tessera.jit and as NumPy.

The kernels are plain Python/NumPy functions, written the way NumPy users
write them (stencils, distances, reductions, cumulative sums, image filters,
Monte Carlo, element loops, small linear algebra, machine learning, graphs,
physics, polynomials); the harness wraps each in ``tessera.jit(f, threads=N)``
itself. Each kernel is first checked against NumPy (its result and every
argument array after the call, by tests/python/jit_check.py's ``assert_same``;
kernels drawing random numbers by statistics and shapes, since tessera's
stream differs from NumPy's by design), then timed interleaved with NumPy in
one process: NumPy, tessera at 1 thread and tessera at 2 threads called in
turn (rotating which goes first), after a warm-up, median of ``--runs``.
Element-loop kernels are raced against CPython running the same code (that
is what NumPy runs for them), and where the code allows also on Python lists.
Numba's ``@njit`` of the same code (every function of the kernel decorated,
single-threaded as by default; a benchmark peer only, ``pip install numba``)
is checked the same way and raced in the same rounds; a kernel Numba refuses
says so. First-call times (translation or type inference and compilation)
are printed beside the run times. The summary holds issue 31's targets:
vectorised kernels <= 0.8x NumPy (geometric mean) and none over 1.5x;
element loops <= 1.5x Numba (geometric mean) and none over 3x.

Each kernel runs in a process of its own, so one that crashes or hangs is a
FAIL line and the suite goes on (``--in-process`` to debug one).

Run:
  .venv/bin/python bench/bench_numpy_kernels.py [--runs 5] [--filter NAME] [--quick]
      [--check-only] [--no-numba] [--cold] [--json FILE]
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python bench/bench_numpy_kernels.py
      (NumPy's OpenBLAS at its best kernel where these are set; see docs/benchmarks.md)

The kernels are in numpy_kernels.py (their code) and numpy_kernel_table.py
(sizes, inputs, checks; the published ones from published_kernels.py), all
both importable from here; this file is the harness. Kernels tessera does not run
today are listed in KNOWN_FAILURES, with the reason.
"""

import argparse
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import types

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(_HERE, os.pardir, "tests", "python"))

from numpy_kernels import *  # noqa: E402,F403 - the kernels, importable from here as before
from numpy_kernel_table import (  # noqa: E402,F401 - the table, importable from here as before
    KERNELS, KNOWN_FAILURES, PUBLISHED, Kernel, _pick, _rng)


# ---------------------------------------------------------------- checking

THREADS = (1, 2)
TARGET_GEOMEAN = 0.8  # vectorised kernels, tessera 2t / NumPy (issue 31)
TARGET_WORST = 1.5  # no vectorised kernel slower than this many times NumPy
TARGET_LOOPS_VS_NUMBA = 1.5  # element loops, tessera 2t / Numba, geometric mean
TARGET_LOOPS_WORST_VS_NUMBA = 3.0
TARGET_SPEEDUP = 1.6


def by_name(name):
    for k in KERNELS:
        if k.name == name:
            return k
    raise KeyError(f"no kernel named {name!r}")


def _copy(args):
    return copy.deepcopy(args)


def _as_lists(args):
    return tuple(a.tolist() if isinstance(a, np.ndarray) else a for a in _copy(args))


def _param_names(f):
    return list(f.__code__.co_varnames[: f.__code__.co_argcount])


def compare(kernel, got, got_args, expected, expected_args, args):
    """Raises AssertionError when tessera's result or arguments differ from NumPy's."""
    from jit_check import assert_same  # noqa: PLC0415 - tests/python, on the path above

    if kernel.kind == "random":
        kernel.stat(got, args)
    else:
        assert_same(got, expected, rtol=kernel.rtol, atol=kernel.atol)
    names = _param_names(kernel.func)
    for i, (g, e) in enumerate(zip(got_args, expected_args)):
        if isinstance(e, (np.ndarray, list)):
            assert_same(g, e, rtol=kernel.rtol, atol=kernel.atol,
                        path=f"argument '{names[i]}' after the call")


def _short(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    lines[:1] = [f"{type(e).__name__}: {lines[0] if lines else ''}"]
    # assert_allclose's message: keep its first lines (what differed and how much).
    return " / ".join(lines[:4])[:300]


def _timed(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def run_kernel(kernel, quick=False, runs=5, check_only=False, with_numba=True):
    """Checks one kernel against NumPy and times it (and Numba's @njit of the same
    code, unless with_numba is false); returns a dict of results."""
    import tessera  # noqa: PLC0415
    from tessera import _core  # noqa: PLC0415

    res = dict(name=kernel.name, category=kernel.category, kind=kernel.kind,
               scalar_loop=kernel.kind == "loop" or kernel.name.endswith("_loop"),
               elements=kernel.elements(quick) if kernel.elements else None,
               status="ok", error=None)
    args = kernel.setup(quick)
    np.random.seed(0)
    expected_args = _copy(args)
    t_first_np, expected = _timed(kernel.func, expected_args)
    res["first_numpy_s"] = t_first_np

    jits = {t: tessera.jit(kernel.func, threads=t) for t in THREADS}
    first = {}
    for t in THREADS:
        got_args = _copy(args)
        _core.set_num_threads(t)
        try:
            first[t], got = _timed(jits[t], got_args)
            compare(kernel, got, got_args, expected, expected_args, args)
        except Exception as e:  # noqa: BLE001 - any failure is a FAIL line, not the end
            res["status"] = "FAIL"
            res["error"] = f"{_short(e)} (at {t} thread{'s' if t > 1 else ''})"
            return res
    res["first_tessera_s"] = first
    # Native loops compile a quick tier first and their optimised code on a
    # background thread (docs/runtime.md, "Compile time"): the timed runs
    # below are of the optimised code, once it is swapped in.
    wait = getattr(_core, "_native_tiers_wait", None)
    if wait is not None:
        wait()

    with_lists = False
    if kernel.lists:
        try:
            got = kernel.func(*_as_lists(args))
            np.testing.assert_allclose(np.asarray(got, dtype=float),
                                       np.asarray(expected, dtype=float), rtol=1e-9)
            with_lists = True
        except Exception as e:  # noqa: BLE001
            res["lists_error"] = _short(e)
    if check_only:
        return res

    numba_fn = None
    if with_numba:
        numba_fn = _numba_version(kernel, res, args, expected, expected_args)

    contenders = [("numpy", kernel.func, None, _copy)]
    blas1 = _blas_one_thread()
    if blas1 is not None and not res["scalar_loop"]:
        # NumPy at its best: on a busy machine OpenBLAS's threads can make a product
        # many times slower than one thread; the faster of the two is the peer.
        contenders.append(("numpy_blas1", blas1(kernel.func), None, _copy))
    contenders += [(f"tessera{t}", jits[t], t, _copy) for t in THREADS]
    if numba_fn is not None:
        contenders.append(("numba", numba_fn, None, _copy))
    if with_lists:
        contenders.append(("cpython_lists", kernel.func, None, _as_lists))
    slowest_first = max([t_first_np, *first.values()])
    n_runs = 1 if slowest_first > 20.0 else runs  # a kernel taking minutes gets one run
    times = {c[0]: [] for c in contenders}
    for r in range(n_runs + 1):  # the first round is the warm-up
        k = r % len(contenders)
        for name, fn, threads, prepare in contenders[k:] + contenders[:k]:
            call_args = prepare(args)
            if threads is not None:
                _core.set_num_threads(threads)  # outside the timed call
            if not res["scalar_loop"]:
                # Each at its best: OpenBLAS's threads spin for ~0.1 s after
                # NumPy's BLAS calls, on the cores tessera's threads need, so
                # they are let fall asleep before a tessera call, and woken by
                # a product before a NumPy call (as in a program using NumPy).
                if name.startswith("tessera"):
                    time.sleep(BLAS_SPIN_S)
                elif name == "numpy":
                    _WARM_BLAS @ _WARM_BLAS
            np.random.seed(r)
            dt, _ = _timed(fn, call_args)
            if r > 0:
                times[name].append(dt)
    # tessera's 2-thread speedup, measured in rounds of its own: within the
    # race, OpenBLAS's idle threads spin for ~0.1 s after each of NumPy's
    # BLAS calls (or threadpoolctl's limits) on the core that tessera's
    # second thread needs, which is NumPy's doing, not tessera's scaling.
    # (Twice the rounds of the race: the ratio of two noisy medians.)
    time.sleep(0.3)
    for r in range(2 * n_runs + 1):
        for t in THREADS if r % 2 == 0 else THREADS[::-1]:
            call_args = _copy(args)
            _core.set_num_threads(t)
            np.random.seed(r)
            dt, _ = _timed(jits[t], call_args)
            if r > 0:
                times.setdefault(f"solo{t}", []).append(dt)
    res["runs"] = n_runs
    res["times_s"] = times
    res["ms"] = {name: statistics.median(v) * 1e3 for name, v in times.items()}
    _pick_best_numpy(res)
    return res


def _numba_version(kernel, res, args, expected, expected_args):
    """Numba's @njit of the kernel (every module-level function it calls decorated
    too, single-threaded as by default), called once and checked like tessera's.
    Returns the compiled function, or None after recording in res["numba"] that
    Numba refused the code, raised, or gave a different answer."""
    try:
        import numba  # noqa: PLC0415 - a benchmark peer, never a tessera dependency
        from numba.core import errors as numba_errors  # noqa: PLC0415
    except ImportError:
        res["numba"] = "not installed (.venv/bin/pip install numba)"
        return None
    res["numba_version"] = numba.__version__
    scope = dict(kernel.func.__globals__)  # the kernel's module, helpers swapped for njit's

    def rebind(f):
        return types.FunctionType(f.__code__, scope, f.__name__, f.__defaults__, f.__closure__)

    for name in kernel.helpers:
        scope[name] = numba.njit(rebind(scope[name]))
    fn = numba.njit(rebind(kernel.func))
    got_args = _copy(args)
    np.random.seed(0)
    try:
        t0 = time.perf_counter()
        got = fn(*got_args)
        res["first_numba_s"] = time.perf_counter() - t0
    except (numba_errors.NumbaError, NotImplementedError) as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()
                 and not ln.startswith(("Failed in nopython", "- Resolution failure"))]
        res["numba"] = "refused: " + " ".join(lines[:2])[:160]
        return None
    except Exception as e:  # noqa: BLE001 - Numba's compiled code raised
        res["numba"] = "raised: " + _short(e)[:160]
        return None
    try:
        compare(kernel, got, got_args, expected, expected_args, args)
    except AssertionError as e:
        res["numba"] = "differs from NumPy: " + _short(e)[:160]
        return None
    res["numba"] = "ok"
    return fn


# How long OpenBLAS's idle threads spin before they sleep (2**28 cycles by
# default: ~0.1 s), and a product large enough to wake them all.
BLAS_SPIN_S = 0.12
_WARM_BLAS = np.ones((256, 256))


def _blas_one_thread():
    """A wrapper running a function with NumPy's BLAS on one thread (None
    without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415
    except ImportError:
        return None

    def wrap(f):
        def g(*a):
            with threadpool_limits(limits=1, user_api="blas"):
                return f(*a)
        return g

    return wrap


def _pick_best_numpy(res):
    """The NumPy column is the faster of NumPy with its BLAS threads and with one."""
    ms = res["ms"]
    if "numpy_blas1" in ms:
        ms["numpy_blas_threads"] = ms["numpy"]
        if ms["numpy_blas1"] < ms["numpy"]:
            ms["numpy"] = ms["numpy_blas1"]
            res["numpy_best"] = "BLAS on 1 thread"


# ---------------------------------------------------------------- report


def machine_info():
    from machine import machine_line  # noqa: PLC0415 - bench/machine.py

    import tessera  # noqa: PLC0415

    info = dict(machine=machine_line(), python=platform.python_version(),
                numpy=np.__version__, tessera=getattr(tessera, "__version__", "?"),
                loadavg=os.getloadavg(),
                openblas_env={k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_")})
    try:
        import numba  # noqa: PLC0415 - benchmark peer only

        info["numba"] = numba.__version__
    except ImportError:
        info["numba"] = None
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415

        info["numpy_blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                   "threading_layer", "filepath")}
            for p in threadpool_info() if p.get("user_api") == "blas"
        ]
    except ImportError:
        info["numpy_blas"] = "threadpoolctl not installed (.venv/bin/pip install threadpoolctl)"
    return info


def _scale2(x):
    return x * 2.0


def bandwidth_probe(runs=5):
    """Memory bandwidth seen by tessera at 1 and 2 threads: x * 2.0 over a
    256 MB array (read + write). A kernel that streams memory gains at most
    this ratio from a second thread, whatever the runtime does."""
    import tessera  # noqa: PLC0415
    from tessera import _core  # noqa: PLC0415

    x = np.ones(32_000_000)
    fn = tessera.jit(_scale2)
    out = {}
    for t in THREADS:
        _core.set_num_threads(t)
        fn(x)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn(x)
            times.append(time.perf_counter() - t0)
        out[t] = 2 * x.nbytes / statistics.median(times) / 1e9
    return out


def print_header(info, args):
    print(info["machine"])
    print(f"Python {info['python']}, NumPy {info['numpy']}, tessera {info['tessera']}; "
          f"tessera threads {', '.join(map(str, THREADS))}; load average before the run "
          + " ".join(f"{x:.2f}" for x in info["loadavg"]))
    blas = info["numpy_blas"]
    if isinstance(blas, list):
        for b in blas:
            whose = "NumPy's BLAS" if "numpy" in (b["filepath"] or "") else \
                "also loaded (tessera's, called single-threaded)"
            print(f"{whose}: {b['internal_api']} {b['version']}, kernel {b['architecture']}, "
                  f"{b['num_threads']} threads ({b['threading_layer']}), "
                  f"{os.path.basename(b['filepath'] or '?')}")
    else:
        print(f"NumPy's BLAS: {blas}")
    if info["openblas_env"]:
        env = " ".join(f"{k}={v}" for k, v in sorted(info["openblas_env"].items()))
        print(f"note: {env} is set: NumPy's OpenBLAS runs that core type's kernels, not its "
              "best; unset both for NumPy at its best (docs/benchmarks.md)")
    bw = info.get("bandwidth_gbs")
    if bw:
        one, two = bw[THREADS[0]], bw[THREADS[-1]]
        print(f"memory bandwidth (tessera, x * 2.0 over 256 MB, read + write): {one:.0f} GB/s at "
              f"1 thread, {two:.0f} GB/s at 2: a kernel that streams memory gains at most "
              f"{two / one:.2f}x from a second thread on this machine")
    if not args.check_only and not args.no_numba:
        print(f"Numba {info['numba']}: @njit with its defaults (single-threaded, no fastmath, "
              "no parallel), every function of the kernel decorated" if info["numba"] else
              "Numba: not installed (.venv/bin/pip install numba), no Numba column")
    mode = "quick sizes, " if args.quick else ""
    if args.check_only:
        print(f"{mode}checking every kernel against NumPy (no timing)")
    else:
        print(f"{mode}median of {args.runs} interleaved runs after a warm-up; times in ms; "
              "ratio = tessera at 2 threads / NumPy (below 1: tessera faster); "
              "2t/1t = tessera's speedup from 1 to 2 threads, timed in rounds of its own after "
              "the race (no NumPy call in between: OpenBLAS's idle threads spin ~0.1 s); "
              "Numba = its @njit raced in the same rounds, 2t/Numba = tessera 2t / Numba; "
              "1st t, 1st nb = first call of tessera (1t, the call that compiles) and Numba in "
              "s (translation or type inference + compilation + one run)"
              + ("; --cold: tessera's disk cache off (TESSERA_CACHE_DIR=0), every compile cold"
                 if args.cold else "; tessera's disk cache on (--cold: off)")
              + "; tessera's run times are its optimised native code (the bench waits for "
              "the background compiles after the first calls)")
    print()


COLUMNS = (f"{'kernel':22s} {'category':18s} {'NumPy':>9s} {'tessera 1t':>10s} "
           f"{'tessera 2t':>10s} {'ratio':>7s} {'2t/1t':>6s} {'Numba':>9s} {'2t/Numba':>8s}  "
           f"{'1st t':>6s} {'1st nb':>6s}")


def speedup(ms):
    """tessera's speedup from 1 to 2 threads: from the rounds of its own
    (run_kernel), or from the race in results recorded before those."""
    if "solo1" in ms and "solo2" in ms:
        return ms["solo1"] / ms["solo2"]
    return ms["tessera1"] / ms["tessera2"]


def _first_call(r):
    """tessera's first call of the kernel in its process (at 1 thread: the call
    that compiles; the 2-thread jit of the same function finds its loops
    compiled), in s."""
    first = r.get("first_tessera_s", {})
    if not isinstance(first, dict):
        return None
    return first.get(str(THREADS[0]), first.get(THREADS[0]))


def _numba_cells(r):
    """The Numba columns of a row: its time, tessera 2t / Numba, and the first
    calls (translation and compilation included) of tessera (2t) and Numba."""
    ms = r["ms"]
    first_t = _first_call(r)
    first = f"{first_t:6.2f}" if first_t is not None else f"{'':6s}"
    if "numba" in ms:
        return (f" {ms['numba']:9.2f} {ms['tessera2'] / ms['numba']:8.2f}  {first} "
                f"{r['first_numba_s']:6.2f}")
    status = r.get("numba", "not run")
    return f" {'refused' if status.startswith('refused') else status.split(':')[0]:>9s} " \
           f"{'':8s}  {first} {'':6s}"


def format_row(r):
    lead = f"{r['name']:22s} {r['category']:18s}"
    if r["status"] != "ok":
        return f"{lead} FAIL: {r['error']}"
    if "ms" not in r:
        return f"{lead} ok (checked against NumPy)"
    ms = r["ms"]
    ratio = ms["tessera2"] / ms["numpy"]
    line = (f"{lead} {ms['numpy']:9.2f} {ms['tessera1']:10.2f} {ms['tessera2']:10.2f} "
            f"{ratio:7.2f} {speedup(ms):6.2f}" + _numba_cells(r))
    notes = []
    if r["scalar_loop"]:
        notes.append("NumPy column = CPython")
    if "numba" not in ms and r.get("numba", "ok") != "ok":
        notes.append("Numba " + r["numba"])
    if "numpy_blas1" in ms and ms["numpy_blas1"] < 0.8 * ms["numpy_blas_threads"]:
        notes.append(f"NumPy with BLAS threads {ms['numpy_blas_threads']:.2f}")
    if "cpython_lists" in ms:
        notes.append(f"CPython on lists {ms['cpython_lists']:.2f}")
    if r.get("runs") == 1:
        notes.append("1 run (slow)")
    return line + ("  (" + "; ".join(notes) + ")" if notes else "")


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def print_summary(results):
    ran = [r for r in results if r["status"] == "ok" and "ms" in r]
    failed = [r for r in results if r["status"] != "ok"]
    print()
    print(f"kernels: {len(results)}; ran: {len(ran)}; failed: {len(failed)}"
          + (" (" + ", ".join(r["name"] for r in failed) + ")" if failed else ""))
    if not ran:
        return

    def ratio(r):
        return r["ms"]["tessera2"] / r["ms"]["numpy"]

    def vs_numba(r):
        return r["ms"]["tessera2"] / r["ms"]["numba"]

    vec = [r for r in ran if not r["scalar_loop"]]
    loops = [r for r in ran if r["scalar_loop"]]
    print(f"geometric mean of tessera(2 threads)/NumPy over the {len(ran)} kernels that ran: "
          f"{geomean([ratio(r) for r in ran]):.2f}; "
          f"vectorised {geomean([ratio(r) for r in vec]):.2f} (target <= {TARGET_GEOMEAN}), "
          f"element loops {geomean([ratio(r) for r in loops]):.2f} (against CPython)")
    slow = sorted((r for r in vec if ratio(r) > TARGET_WORST), key=ratio, reverse=True)
    print(f"vectorised kernels slower than {TARGET_WORST:g}x NumPy: {len(slow)} (target 0)"
          + (": " + ", ".join(f"{r['name']} {ratio(r):.1f}x" for r in slow) if slow else ""))
    with_numba = [r for r in ran if "numba" in r["ms"]]
    refused = [r for r in ran if "numba" not in r["ms"] and "numba" in r]
    if with_numba or refused:
        loops_nb = [r for r in loops if "numba" in r["ms"]]
        vec_nb = [r for r in vec if "numba" in r["ms"]]
        print(f"Numba @njit (1 thread): ran {len(with_numba)} of {len(ran)}; refused or wrong "
              f"{len(refused)}" + (" (" + ", ".join(f"{r['name']}: {r['numba']}"[:90]
                                                 for r in refused) + ")" if refused else ""))
        if loops_nb:
            worst = max(loops_nb, key=vs_numba)
            print(f"element loops, tessera 2t / Numba over {len(loops_nb)}: geomean "
                  f"{geomean([vs_numba(r) for r in loops_nb]):.2f} (target <= "
                  f"{TARGET_LOOPS_VS_NUMBA}), worst {worst['name']} {vs_numba(worst):.1f}x "
                  f"(target <= {TARGET_LOOPS_WORST_VS_NUMBA:g})")
        if vec_nb:
            print(f"vectorised, over the {len(vec_nb)} Numba runs: tessera 2t / Numba geomean "
                  f"{geomean([vs_numba(r) for r in vec_nb]):.2f}; Numba / NumPy geomean "
                  f"{geomean([r['ms']['numba'] / r['ms']['numpy'] for r in vec_nb]):.2f}")
    if loops:
        print("element loops against CPython running the same code (target: ratio <= 1):")
        for r in loops:
            ms = r["ms"]
            text = f"  {r['name']:22s} tessera 2t / CPython {ms['tessera2'] / ms['numpy']:6.2f}"
            if "cpython_lists" in ms:
                text += f"; / CPython on lists {ms['tessera2'] / ms['cpython_lists']:6.2f}"
            print(text)
        met = sum(1 for r in loops if ratio(r) <= 1.0)
        print(f"  at least CPython's speed: {met} of {len(loops)}")
    big = [r for r in vec if (r["elements"] or 0) >= 1_000_000]
    if big:
        sp = [speedup(r["ms"]) for r in big]
        met = sum(1 for x in sp if x >= TARGET_SPEEDUP)
        print(f"2 threads / 1 thread on the {len(big)} vectorised kernels with >= 1M elements: "
              f"geomean {geomean(sp):.2f}, min {min(sp):.2f}, max {max(sp):.2f}; "
              f">= {TARGET_SPEEDUP}: {met} of {len(big)}")


def combine(paths):
    """Results of several --json files merged: each time is the median over the
    files of each file's median (a kernel failing in any file is a FAIL)."""
    runs = []
    for path in paths:
        with open(path) as fh:
            runs.append({r["name"]: r for r in json.load(fh)["results"]})
    merged = []
    for name in runs[0]:
        rs = [run[name] for run in runs if name in run]
        bad = [r for r in rs if r["status"] != "ok" or "ms" not in r]
        if bad:
            merged.append(bad[0])
            continue
        r = dict(rs[0])
        r["ms"] = {c: statistics.median(x["ms"][c] for x in rs if c in x["ms"])
                   for c in rs[0]["ms"]}
        r["runs"] = sum(x["runs"] for x in rs)
        merged.append(r)
    return merged


def print_markdown(results):
    print("| kernel | category | NumPy ms | tessera 1t ms | tessera 2t ms | 2t / NumPy | 2t / 1t "
          "| Numba ms | 2t / Numba | first call s: tessera 1t, Numba |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if r["status"] != "ok":
            error = r["error"].split(" (at ")[0]
            print(f"| {r['name']} | {r['category']} | FAIL: {error} | | | | | | | |")
            continue
        ms = r["ms"]
        peer = f"{ms['numpy']:.1f}"
        if "cpython_lists" in ms:
            peer += f" (CPython; on lists {ms['cpython_lists']:.1f})"
        elif r["scalar_loop"]:
            peer += " (CPython)"
        first_t = _first_call(r)
        first_t = f"{first_t:.2f}" if first_t is not None else "-"
        if "numba" in ms:
            nb = (f"{ms['numba']:.2f} | {ms['tessera2'] / ms['numba']:.2f} | "
                  f"{first_t}, {r['first_numba_s']:.2f}")
        else:
            nb = f"{r.get('numba', 'not run').split(':')[0]} | | {first_t}, -"
        print(f"| {r['name']} | {r['category']} | {peer} | {ms['tessera1']:.1f} | "
              f"{ms['tessera2']:.1f} | {ms['tessera2'] / ms['numpy']:.2f} | "
              f"{speedup(ms):.2f} | {nb} |")


# ---------------------------------------------------------------- driver


def run_isolated(kernel, args, script=None):
    """Runs one kernel in a child process (of `script`, this file by default: another suite
    on this machinery passes its own): a crash or a hang is a FAIL, not the end."""
    cmd = [sys.executable, script or os.path.abspath(__file__), "--one", kernel.name, "--runs",
           str(args.runs)]
    if args.quick:
        cmd.append("--quick")
    if args.check_only:
        cmd.append("--check-only")
    if args.no_numba:
        cmd.append("--no-numba")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(name=kernel.name, category=kernel.category, status="FAIL",
                    error=f"timeout: no answer in {args.timeout:g} s", scalar_loop=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = " / ".join((proc.stderr or "").strip().splitlines()[-3:])
    return dict(name=kernel.name, category=kernel.category, status="FAIL",
                error=f"the process ended with code {proc.returncode}: {tail}"[:300],
                scalar_loop=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per kernel (median)")
    ap.add_argument("--filter", default="", help="only kernels whose name contains this (or one of these, comma-separated; "
                    "'published' picks the published kernels)")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--check-only", action="store_true", help="check against NumPy, no timing")
    ap.add_argument("--json", help="write every result and raw time to this file")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per kernel")
    ap.add_argument("--in-process", action="store_true",
                    help="run the kernels in this process (to debug; a crash ends the suite)")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="no run: merge earlier --json files (median of their medians)")
    ap.add_argument("--markdown", action="store_true", help="with --combine: a markdown table")
    ap.add_argument("--no-numba", action="store_true", help="no Numba column")
    ap.add_argument("--cold", action="store_true",
                    help="tessera's disk cache of native code off (TESSERA_CACHE_DIR=0): the "
                    "first-call column is a cold compile")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.combine:
        results = combine(args.combine)
        if args.markdown:
            print_markdown(results)
        else:
            print(COLUMNS)
            for r in results:
                print(format_row(r))
        print_summary(results)
        return 0

    if args.one:
        try:
            res = run_kernel(by_name(args.one), args.quick, args.runs, args.check_only,
                             not args.no_numba)
        except Exception as e:  # noqa: BLE001 - the setup or NumPy itself failed
            res = dict(name=args.one, category=by_name(args.one).category, status="FAIL",
                       error=f"harness: {_short(e)}", scalar_loop=False)
        print("RESULT " + json.dumps(res), flush=True)
        return 0

    if args.cold:
        os.environ["TESSERA_CACHE_DIR"] = "0"  # the kernels' processes inherit it
    kernels = [k for k in KERNELS
               if any(f in k.name or f == k.category for f in args.filter.split(","))]
    info = machine_info()
    if not args.check_only and not args.quick:
        info["bandwidth_gbs"] = bandwidth_probe()
    print_header(info, args)
    print(COLUMNS, flush=True)
    results = []
    for k in kernels:
        if args.in_process:
            res = run_kernel(k, args.quick, args.runs, args.check_only, not args.no_numba)
        else:
            res = run_isolated(k, args)
        if res["status"] != "ok" and k.name in KNOWN_FAILURES:
            res["known"] = KNOWN_FAILURES[k.name]
        results.append(res)
        print(format_row(res), flush=True)
    if not args.check_only:
        print_summary(results)
    else:
        failed = [r["name"] for r in results if r["status"] != "ok"]
        print(f"\nchecked {len(results)} kernels: {len(results) - len(failed)} agree with NumPy"
              + (f"; failed: {', '.join(failed)}" if failed else ""))
    print(info["machine"] + f"; tessera threads {', '.join(map(str, THREADS))}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(info=info, runs=args.runs, quick=args.quick, results=results), fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
