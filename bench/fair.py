"""A fair race against PyTorch (issue 16, item 7): what every tessera-vs-PyTorch
benchmark of bench/ shares.

PyTorch is raced at its best on this machine:

- a tuned allocator. With stock glibc malloc, PyTorch's fresh activation
  buffers of every pass (hundreds of MB at batch 8000) are mmap'ed and unmapped
  each time, and a step pays page faults for all of them. The cure is set in
  the environment before the process starts: glibc's
  ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=100000000000``, or Debian's
  jemalloc/tcmalloc by ``LD_PRELOAD``. bench_allocators.py measures them: tcmalloc
  is as fast as the tuned glibc for PyTorch or faster, and the fastest for
  tessera (which the tuned glibc slows down), so it is the default
  (BEST_ALLOCATOR; docs/benchmarks.md has the figures). A benchmark re-executes itself with
  the chosen environment (``ensure_allocator``); tessera runs in the same
  process, so under the same allocator;
- PyTorch's native layouts (N, C, L) and (N, C, H, W): the data is handed to
  it in that layout, converted once outside the timed region;
- ``torch.inference_mode()`` for forward passes;
- ``torch.compile`` (inductor) as well as eager: both are timed and reported,
  and the faster is the peer ("best").

Times are taken in one process, interleaved (tessera, PyTorch eager, PyTorch
compiled, tessera, ...; the order rotates each round), after a pause that lets
the other side's threads go to sleep; figures are medians over the rounds.
The ratio against PyTorch in its default configuration (stock glibc malloc,
eager, ``torch.no_grad()``) is measured the same way in a child process
started with the stock environment.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from machine import machine_line

LIBDIR = "/usr/lib/x86_64-linux-gnu"
TUNED_GLIBC = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "100000000000"}
ALLOCATORS = {
    # name: (environment, description)
    "glibc": ({}, "stock glibc malloc (default environment)"),
    "glibc-tuned": (TUNED_GLIBC, "glibc malloc with MALLOC_MMAP_MAX_=0 "
                                 "MALLOC_TRIM_THRESHOLD_=100000000000"),
    "jemalloc": ({"LD_PRELOAD": f"{LIBDIR}/libjemalloc.so.2"},
                 f"jemalloc 5 (Debian libjemalloc2, LD_PRELOAD={LIBDIR}/libjemalloc.so.2)"),
    "tcmalloc": ({"LD_PRELOAD": f"{LIBDIR}/libtcmalloc_minimal.so.4"},
                 f"tcmalloc (Debian libtcmalloc-minimal4, "
                 f"LD_PRELOAD={LIBDIR}/libtcmalloc_minimal.so.4)"),
}
BEST_ALLOCATOR = "tcmalloc"  # fastest here for both (bench_allocators.py, docs/benchmarks.md)
MARK = "TESSERA_BENCH_ALLOCATOR"
_ALLOC_VARS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "LD_PRELOAD")


def allocator_env(name: str, base=None) -> dict:
    """The environment of a process that runs with allocator `name`."""
    if name not in ALLOCATORS:
        sys.exit(f"unknown allocator {name!r}: one of {', '.join(ALLOCATORS)}")
    env = dict(os.environ if base is None else base)
    for k in _ALLOC_VARS:
        env.pop(k, None)
    extra, _ = ALLOCATORS[name]
    lib = extra.get("LD_PRELOAD")
    if lib and not os.path.exists(lib):
        sys.exit(f"{lib} is not installed (apt-get install libjemalloc2 libtcmalloc-minimal4)")
    env.update(extra)
    env[MARK] = name
    return env


def ensure_allocator(name: str) -> None:
    """Re-executes this script under allocator `name` unless it already runs
    under it (environment variables of malloc count only from the start)."""
    if os.environ.get(MARK) == name:
        return
    lib = ALLOCATORS.get(name, ({}, ""))[0].get("LD_PRELOAD")
    if lib and not os.path.exists(lib):
        print(f"WARNING: {lib} is not installed (apt-get install libtcmalloc-minimal4 "
              "libjemalloc2): racing under glibc-tuned instead")
        name = "glibc-tuned"
        if os.environ.get(MARK) == name:
            return
    env = allocator_env(name)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def allocator_in_use() -> str:
    name = os.environ.get(MARK)
    if name is None:
        return "unknown (not started through fair.ensure_allocator)"
    return ALLOCATORS[name][1]


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min; 2 cores: above ~0.5 others share them)"


def header(title: str, threads=None, extra=(), allocator=True) -> None:
    import torch

    print(f"== {title}")
    print(machine_line())
    if threads is not None:
        print(f"threads: {threads} (tessera.set_num_threads, torch.set_num_threads), 1 process")
    print(f"PyTorch {torch.__version__}" + (f"; allocator of this process (tessera and PyTorch): "
                                            f"{allocator_in_use()}" if allocator else ""))
    for line in extra:
        print(line)
    print(f"load average at start: {load_average()}")
    sys.stdout.flush()


def interleave(fns: dict, rounds: int, warmup: int = 1, pause: float = 0.1) -> dict:
    """Calls each of `fns` (name -> callable) once per round, the order
    rotating each round; `warmup` rounds first, not kept. Returns name -> list
    of seconds. `pause` seconds before each call let the previous side's
    spinning threads (OpenMP, tessera's workers) go to sleep."""
    names = list(fns)
    times = {n: [] for n in names}
    for r in range(warmup + rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            time.sleep(pause)
            t = time.perf_counter()
            fns[n]()
            dt = time.perf_counter() - t
            if r >= warmup:
                times[n].append(dt)
    return times


def med(ts) -> float:
    return statistics.median(ts)


def race(r: dict, default=None) -> dict:
    """One thread count's medians: tessera, PyTorch eager and compiled (when
    it ran), the faster of the two (the peer raced), the ratio, and the
    default-configuration child's PyTorch time and ratio (None without it)."""
    tt, pe = med(r["tessera"]), med(r["eager"])
    pc = med(r["compiled"]) if "compiled" in r else None
    best = min(pe, pc) if pc else pe
    out = {"tessera": tt, "eager": pe, "compiled": pc, "best": best,
           "best_name": "compiled" if pc and pc < pe else "eager", "ratio": tt / best,
           "default": None, "default_ratio": None}
    if default:
        out["default"] = med(default["eager"])
        out["default_ratio"] = med(default["tessera"]) / out["default"]
    return out


def spread(ts) -> str:
    return f"{min(ts):.3f}-{max(ts):.3f}"


def try_compile(torch, fn, what: str, **kw):
    """torch.compile(fn) or None (with the reason printed) when inductor fails here."""
    try:
        return torch.compile(fn, **kw)
    except Exception as e:  # noqa: BLE001
        print(f"torch.compile of {what} failed: {type(e).__name__}: {e}; eager only")
        return None


def first_call(fn, what: str):
    """Calls fn once (a compiled function compiles here); returns the seconds or
    None when it fails."""
    t = time.perf_counter()
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else ""
        print(f"{what} failed on its first call: {type(e).__name__}: {msg[:300]}; left out")
        return None
    return time.perf_counter() - t


def classifier_step_race(torch, tm, net, x, y, xt, yt, args, default_config: bool,
                         what: str) -> dict:
    """One training step of a classifier raced: tessera's `fit` of one batch of
    (x, y) against PyTorch's `net` on (xt, yt) (cross-entropy, Adam 1e-3, fused
    unless in the default configuration), eager and, unless default_config or
    args.no_compile, compiled; interleaved over args.rounds. `what` names the
    model in messages. The seconds per step of each, and "_compile_s"."""
    net.train()
    opt = torch.optim.Adam(net.parameters(), 1e-3, **({} if default_config else {"fused": True}))

    def step_of(model):
        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt), yt).backward()
            opt.step()
        return step

    fns = {"tessera": lambda: tm.fit(x, y, batch_size=args.batch, epochs=1, verbose=0,
                                     shuffle=False),
           "eager": step_of(net)}
    compile_s = None
    if not (default_config or args.no_compile):
        torch._dynamo.reset()
        cnet = try_compile(torch, net, f"the {what}")
        if cnet is not None:
            compile_s = first_call(step_of(cnet), f"compiled {what} step")
            if compile_s is not None:
                fns["compiled"] = step_of(cnet)
    times = interleave(fns, args.rounds, warmup=1)
    times["_compile_s"] = compile_s
    return times


def classifier_race_main(script: str, step_race, gflop_per_sample, title: str, model_line,
                         layout: str, threads="1,2", rounds=5, batch=128, quick_batch=16,
                         digits=3, target=None) -> None:
    """The command line and report of a classifier's training-step race
    (bench_resnet.py, bench_conv3d.py): `step_race(threads, args,
    default_config=False)` times one thread count (classifier_step_race);
    `model_line(args, gflop)` describes the model; `layout` says each side's
    layout; the defaults of --threads, --rounds and --batch, --quick's batch,
    the digits of the seconds and the ratio's target (None: no column)."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=title)
    p.add_argument("--threads", default=threads)
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--allocator", default=BEST_ALLOCATOR, choices=list(ALLOCATORS))
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-default", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: 1 thread, 1 round, batch {quick_batch}")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--default-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.threads, args.rounds, args.batch = "1", 1, quick_batch
        args.no_compile = args.no_default = True
    counts = [int(t) for t in args.threads.split(",")]
    if args.default_child:
        print(json.dumps({str(t): step_race(t, args, True) for t in counts}))
        return
    ensure_allocator(args.allocator)
    gf = gflop_per_sample * args.batch * 3 / 1e9
    header(f"{title}, tessera vs PyTorch at its best", args.threads, [
        f"{model_line(args, gf)}; medians of {args.rounds} interleaved rounds after 1 warm-up "
        "round",
        f"{layout}, Adam(fused=True), eager and torch.compile (inductor), the faster is the peer",
        "PyTorch default configuration: a child under stock glibc malloc, eager, Adam(), "
        "interleaved with tessera there"])
    results = {str(t): step_race(t, args) for t in counts}
    default = {}
    if not args.no_default:
        default = run_default_child(script, ["--threads", args.threads, "--rounds",
                                             str(args.rounds), "--batch", str(args.batch)])
    target_head = f" {'target':>12}" if target is not None else ""
    print(f"\n{'thr':>3} {'tessera s':>10} {'eager s':>8} {'compiled s':>11} {'best':>9} "
          f"{'ratio':>6}{target_head} {'tessera GF/s':>13} {'default s':>10} {'vs default':>10}")
    summary = {}
    for t in counts:
        r = results[str(t)]
        x = race(r, default.get(str(t)))
        tt, pe, pc, ratio = x["tessera"], x["eager"], x["compiled"], x["ratio"]
        ds = f"{x['default']:.{digits}f}" if x["default"] else "-"
        dr = f"{x['default_ratio']:.2f}" if x["default"] else "-"
        met = "" if target is None else \
            f" {f'<={target} ' + ('met' if ratio <= target else 'NOT met'):>12}"
        print(f"{t:>3} {tt:>10.{digits}f} {pe:>8.{digits}f} "
              f"{(f'{pc:.{digits}f}' if pc else '-'):>11} {x['best_name']:>9} {ratio:>6.2f}{met} "
              f"{gf / tt:>13.1f} {ds:>10} {dr:>10}")
        print(f"    spread (min-max): tessera {spread(r['tessera'])}, eager {spread(r['eager'])}" +
              (f", compiled {spread(r['compiled'])}" if "compiled" in r else ""))
        if r.get("_compile_s"):
            print(f"    compiled step's first call {r['_compile_s']:.1f} s")
        summary[f"{t}t"] = {"tessera": tt, "eager": pe, "compiled": pc, "ratio": ratio,
                            "default": x["default"]}
    print(f"load average at end: {load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_line(), "allocator": args.allocator,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "summary": summary,
                       "raw": results, "default_raw": default}, fh, indent=1)


def run_default_child(script: str, args: list) -> dict:
    """Runs `script args --default-child` under stock glibc malloc and returns
    the JSON object it prints on its last line."""
    import json

    env = allocator_env("glibc")
    proc = subprocess.run([sys.executable, script] + args + ["--default-child"], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"[the default-configuration child failed: exit {proc.returncode}]\n"
              f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
        return {}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ratio_line(what: str, t: float, peer: float, target=None) -> str:
    r = t / peer
    s = f"{what}: tessera/PyTorch = {r:.2f}"
    if target is not None:
        s += f" (target <= {target}: {'met' if r <= target else 'NOT met'})"
    return s
