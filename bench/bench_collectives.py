"""All-reduce on 2 ranks: tessera against raw MPI_Allreduce and PyTorch's gloo.

One command runs both sides on this machine and prints one table:

  (a) build/bench/bench_allreduce --json under `mpirun -n 2` (tessera's
      all-reduce and raw MPI_Allreduce in the same processes, tessera at two
      levels: the collective as the communication engine runs it, and the
      all_reduce primitive in a one-line program; a 4 KB comparison of raw
      MPI, engine, program and a program's loop interleaved in blocks; 256
      all-reduces of 4 KB fused vs unfused; the share of a 16 MB all-reduce
      hidden behind ~20 ms of matrix products);
  (b) torch.distributed.all_reduce with the gloo backend, 2 processes on
      localhost (TCP store), torch.set_num_threads(1), at the same sizes.

Each side is launched --runs times; a figure is the median over the runs of
each run's median of single timed calls (rank 0, after a warm-up). Sizes are
float32 vectors of 4 B to 64 MB, by factors of 4. Bandwidth is the algorithm
bandwidth, bytes / time (for 2 ranks it equals the bus bandwidth).

With --tcp-rate RATE (root, Linux tc), the overlap is measured once more
over TCP on the loopback device shaped to RATE (a token bucket, e.g. 4gbit):
a network whose wire, not a core, moves the bytes, as between hosts. The
shaping is removed afterwards; a loopback device that already has a
queueing discipline is left alone and the measurement skipped.

run: .venv/bin/python bench/bench_collectives.py [--build build] [--runs 3]
         [--threads 1] [--max-bytes 67108864] [--json out.json] [--tcp-rate 4gbit]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from machine import end_torch_worker, free_port, machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def repeats_for(nbytes, fixed):
    """The same repetition counts as bench_allreduce.cpp."""
    if fixed:
        return fixed
    if nbytes <= 64 << 10:
        return 51
    if nbytes <= 4 << 20:
        return 15
    return 7


def sizes(max_bytes):
    out, b = [], 4
    while b <= max_bytes:
        out.append(b)
        b *= 4
    return out


def launch_bench_allreduce(build, threads, repeats, mpirun_args, bench_args):
    """One launch of bench_allreduce --json on 2 ranks; its JSON object."""
    exe = os.path.join(build, "bench", "bench_allreduce")
    if not os.access(exe, os.X_OK):
        sys.exit(f"bench_collectives: {exe} not found: build it first "
                 f"(cmake --build {build} --target bench_allreduce)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TESSERA_THREADS=str(threads))
    cmd = ["mpirun", "-n", "2", "--bind-to", "none", *mpirun_args, exe, "--json", *bench_args]
    if repeats:
        cmd += ["--repeats", str(repeats)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"bench_collectives: {' '.join(cmd)} failed (exit {proc.returncode}):\n"
                 f"{proc.stdout}{proc.stderr}")
    return json.loads(lines[-1])


def run_tessera(build, threads, max_bytes, repeats):
    """The whole of bench_allreduce, over shared memory."""
    return launch_bench_allreduce(build, threads, repeats, [], ["--max-bytes", str(max_bytes)])


def run_overlap_over_tcp(build, threads, rate, repeats):
    """bench_allreduce --only overlap over TCP on loopback shaped to `rate`; its
    JSON object, or None (after saying why) when the device cannot be shaped."""
    shown = subprocess.run(["tc", "qdisc", "show", "dev", "lo"], capture_output=True, text=True)
    if shown.returncode != 0:
        print(f"--tcp-rate: `tc qdisc show dev lo` failed ({shown.stderr.strip()}): skipped")
        return None
    if "noqueue" not in shown.stdout:
        print(f"--tcp-rate: lo already has a queueing discipline ({shown.stdout.strip()}): "
              "left alone, skipped")
        return None
    add = subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst",
                          "4mb", "latency", "50ms"], capture_output=True, text=True)
    if add.returncode != 0:
        print(f"--tcp-rate: could not shape lo to {rate} (root is needed): {add.stderr.strip()}")
        return None
    try:
        return launch_bench_allreduce(
            build, threads, repeats,
            ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"],
            ["--only", "overlap"])
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)


# ---------------------------------------------------------------- gloo side

def _gloo_worker(rank, port, threads, max_bytes, repeats, out_path):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)

    def median_s(reps, fn):
        fn()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    rows = []
    for nbytes in sizes(max_bytes):
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        reps = repeats_for(nbytes, repeats)
        dist.barrier()
        rows.append({"bytes": nbytes, "repeats": reps,
                     "gloo_s": median_s(reps, lambda: dist.all_reduce(x))})

    # The same 256 x 4 KB as tessera's fused/unfused case: all in flight at
    # once (async_op), or concatenated into one 1 MB all-reduce.
    parts = [torch.ones(1024, dtype=torch.float32) + i for i in range(256)]
    reps = repeats or 15

    def unfused():
        for w in [dist.all_reduce(p, async_op=True) for p in parts]:
            w.wait()

    def fused():
        flat = torch.cat(parts)
        dist.all_reduce(flat)
        return flat.split(1024)

    dist.barrier()
    tu = median_s(reps, unfused)
    dist.barrier()
    tf = median_s(reps, fused)
    if rank == 0:
        with open(out_path, "w") as fh:
            json.dump({"allreduce": rows, "fused": {"unfused_s": tu, "fused_s": tf},
                       "torch": torch.__version__}, fh)
    dist.barrier()
    end_torch_worker(dist)


def run_gloo(threads, max_bytes, repeats):
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "gloo.json")
        mp.spawn(_gloo_worker, args=(free_port(), threads, max_bytes, repeats, out), nprocs=2)
        with open(out) as fh:
            return json.load(fh)


# ---------------------------------------------------------------- report

def med(values):
    values = [v for v in values if v]
    return statistics.median(values) if values else 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="build directory holding bench/bench_allreduce (default: build)")
    p.add_argument("--runs", type=int, default=3, help="launches of each side (default 3)")
    p.add_argument("--threads", type=int, default=1, help="threads per rank (default 1)")
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--repeats", type=int, default=0,
                   help="timed calls per size in a run (default: 51 up to 64 KB, 15 up to 4 MB, "
                        "then 7)")
    p.add_argument("--no-gloo", action="store_true", help="skip PyTorch (tessera and MPI only)")
    p.add_argument("--json", metavar="FILE", help="also write every run's figures to FILE")
    p.add_argument("--tcp-rate", metavar="RATE",
                   help="also measure the overlap over TCP on loopback shaped to RATE with tc "
                        "(root; e.g. 4gbit)")
    args = p.parse_args()
    if args.runs < 1 or args.threads < 1 or args.max_bytes < 4:
        sys.exit("bench_collectives: --runs and --threads must be >= 1, --max-bytes >= 4")

    have_torch = not args.no_gloo
    if have_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("PyTorch is not installed: gloo left out (.venv/bin/pip install torch==2.13.0)")
            have_torch = False

    load_before = os.getloadavg()[0]
    tess_runs, gloo_runs = [], []
    tcp_runs = []
    for _ in range(args.runs):
        tess_runs.append(run_tessera(args.build, args.threads, args.max_bytes, args.repeats))
        if have_torch:
            gloo_runs.append(run_gloo(args.threads, args.max_bytes, args.repeats))
        if args.tcp_rate:
            r = run_overlap_over_tcp(args.build, args.threads, args.tcp_rate, args.repeats)
            if r:
                tcp_runs.append(r)

    first = tess_runs[0]
    torch_version = gloo_runs[0]["torch"] if gloo_runs else "not run"
    print(machine_line())
    print(f"ranks: 2 on this machine, threads per rank: {args.threads} (tessera: TESSERA_THREADS="
          f"{args.threads} workers + its MPI progress thread; gloo: torch.set_num_threads("
          f"{args.threads}), PyTorch {torch_version}); median over {args.runs} launches of each "
          "launch's median of single calls on rank 0")
    print(f"tessera: {os.path.join(args.build, 'bench', 'bench_allreduce')}")
    print(f"load average (1 min) before the run: {load_before:.2f} (above ~0.5, other work shared "
          "the cores and the figures are noisy)")
    if not first["raw_mpi"]:
        print("MPI is not initialized with MPI_THREAD_MULTIPLE: the raw MPI column is empty")
    print()
    head = (f"{'bytes':>10} {'engine us':>10} {'program us':>11} {'MPI us':>9} {'gloo us':>9} "
            f"{'eng/MPI':>8} {'prog/MPI':>9} {'eng/gloo':>9}   {'GB/s: engine':>12} {'MPI':>6} "
            f"{'gloo':>6}")
    print(head)
    table = []
    for i, row in enumerate(first["allreduce"]):
        nbytes = row["bytes"]
        t = med([r["allreduce"][i]["tessera_s"] for r in tess_runs])
        e = med([r["allreduce"][i].get("engine_s", 0) for r in tess_runs])
        m = med([r["allreduce"][i]["mpi_s"] for r in tess_runs])
        g = med([r["allreduce"][i]["gloo_s"] for r in gloo_runs])
        table.append({"bytes": nbytes, "tessera_s": t, "engine_s": e, "mpi_s": m, "gloo_s": g})

        def us(v):
            return f"{v * 1e6:.1f}" if v else "-"

        def ratio(a, b):
            return f"{a / b:.2f}" if a and b else "-"

        def bw(v):
            return f"{nbytes / v / 1e9:.3g}" if v else "-"

        print(f"{nbytes:>10} {us(e):>10} {us(t):>11} {us(m):>9} {us(g):>9} {ratio(e, m):>8} "
              f"{ratio(t, m):>9} {ratio(e, g):>9}   {bw(e):>12} {bw(m):>6} {bw(g):>6}")

    tu = med([r["fused"]["unfused_s"] for r in tess_runs])
    tf = med([r["fused"]["fused_s"] for r in tess_runs])
    tco = med([r["fused"].get("coalesced_s", 0) for r in tess_runs])
    mu = med([r["fused"].get("mpi_unfused_s", 0) for r in tess_runs])
    mf = med([r["fused"].get("mpi_fused_s", 0) for r in tess_runs])
    print(f"\n256 all-reduces of 4 KB: tessera unfused {tu * 1e3:.2f} ms (each its own operation, "
          f"TESSERA_COALESCE=0), coalesced by the engine {tco * 1e3:.2f} ms, fused {tf * 1e3:.2f} ms: "
          f"fused {tu / tf:.1f}x faster than unfused (goal >= 5x)")
    if mu and mf:
        print(f"  raw MPI, for scale: 256 MPI_Allreduce calls of 4 KB {mu * 1e3:.2f} ms, one of 1 MB "
              f"{mf * 1e3:.2f} ms ({mu / mf:.1f}x)")
    if gloo_runs:
        gu = med([r["fused"]["unfused_s"] for r in gloo_runs])
        gf = med([r["fused"]["fused_s"] for r in gloo_runs])
        print(f"  gloo, same 256 x 4 KB: {gu * 1e3:.2f} ms as 256 async all_reduce calls, "
              f"{gf * 1e3:.2f} ms concatenated into one ({gu / gf:.1f}x)")
    loop = med([r["loop"]["per_turn_s"] for r in tess_runs if "loop" in r])
    if loop:
        four = next((r for r in table if r["bytes"] == 4096), None)
        single = f" (single calls: {four['tessera_s'] * 1e6:.1f} us)" if four else ""
        print(f"a loop of 4 KB all-reduces inside one program: {loop * 1e6:.1f} us per turn{single}")
    lat = {k: med([r["latency4k"][k] for r in tess_runs if "latency4k" in r])
           for k in ("mpi_s", "engine_s", "program_s", "loop_s")}
    if lat["mpi_s"]:
        print(f"\n4 KB all-reduce, raw MPI / engine / program / program loop interleaved in blocks of 100 "
              f"calls: MPI {lat['mpi_s'] * 1e6:.2f} us, engine {lat['engine_s'] * 1e6:.2f} us "
              f"({lat['engine_s'] / lat['mpi_s']:.2f}x), one-line program {lat['program_s'] * 1e6:.2f} us "
              f"({lat['program_s'] / lat['mpi_s']:.2f}x), in a program's loop "
              f"{lat['loop_s'] * 1e6:.2f} us per turn ({lat['loop_s'] / lat['mpi_s']:.2f}x)")
    ov = {k: med([r["overlap"][k] for r in tess_runs]) for k in ("comm_s", "work_s", "both_s")}
    hidden = statistics.median([r["overlap"]["hidden"] for r in tess_runs])
    print(f"\n16 MB all-reduce {ov['comm_s'] * 1e3:.2f} ms, computation "
          f"{ov['work_s'] * 1e3:.2f} ms, both at once {ov['both_s'] * 1e3:.2f} ms: {hidden:.0%} "
          "of the all-reduce hidden (median of the runs' shares; goal >= 90%)")
    if tcp_runs:
        t = {k: med([r["overlap"][k] for r in tcp_runs]) for k in ("comm_s", "work_s", "both_s")}
        h = statistics.median([r["overlap"]["hidden"] for r in tcp_runs])
        work_hidden = max(0.0, min(1.0, (t["comm_s"] + t["work_s"] - t["both_s"]) / t["work_s"]))
        most = min(1.0, t["work_s"] / t["comm_s"])
        print(f"  over TCP on loopback shaped to {args.tcp_rate} (the wire, not a core, moves the "
              f"bytes): all-reduce {t['comm_s'] * 1e3:.2f} ms, computation {t['work_s'] * 1e3:.2f} "
              f"ms, both at once {t['both_s'] * 1e3:.2f} ms: {h:.0%} of the all-reduce hidden (at "
              f"most {most:.0%} when the computation is the shorter), {work_hidden:.0%} of the "
              "computation hidden under it")
    reliable = 0.6 * 20e-3 < ov["work_s"] < 1.5 * 20e-3
    if not reliable:
        print(f"  the computation took {ov['work_s'] * 1e3:.0f} ms instead of about 20: the "
              "machine was busy, and this share is not reliable")

    if lat["mpi_s"]:
        r = lat["engine_s"] / lat["mpi_s"]
        rp = lat["program_s"] / lat["mpi_s"]
        print(f"\ntargets: 4 KB all-reduce {r:.2f}x raw MPI as the engine runs it, {rp:.2f}x as a "
              f"one-line program (goal <= 1.5x: {'met' if r <= 1.5 else 'not met'} by the engine, "
              f"{'met' if rp <= 1.5 else 'not met'} by the program); fused {tu / tf:.1f}x faster "
              f"(goal >= 5x: {'met' if tu / tf >= 5 else 'not met'}); overlap {hidden:.0%} "
              f"(goal >= 90%: {'met' if hidden >= 0.9 else 'not met'}"
              f"{'' if reliable else ', not reliable'})")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_line(), "threads": args.threads, "ranks": 2,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "table": table,
                       "tessera_runs": tess_runs, "gloo_runs": gloo_runs, "tcp_rate": args.tcp_rate,
                       "tcp_runs": tcp_runs}, fh, indent=1)


if __name__ == "__main__":
    main()
