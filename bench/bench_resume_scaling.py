"""Checkpoint resume at scale: the file opens and bytes read, summed over the ranks, when N
localities resume from a checkpoint that N localities wrote (docs/scaling.md, "Checkpoints").

usage: bench_resume_scaling.py [--ns 2,4,8,16] [--build build] [--check]

For each N a job on N oversubscribed ranks (mpirun, the PMPI counter preloaded:
bench/pmpi_count.py) trains one epoch of a model whose state (weights and Adam's moments) is
T ≈ 1 MB, writing and committing a checkpoint; a second launch of the same job finds the run done
and resumes from that checkpoint. Both fits are bracketed by the counter (only files under the
checkpoint folder count). Printed per N: T, at resume the opens and bytes read summed over the
ranks and the most any rank read, at commit the opens and bytes read. With --check the counts
must be exactly those of one reader per shard and a commit by a gather: at resume N + 2 opens
(the lock, the manifest, the N shards) and T + the manifest's size bytes, each rank reading its
own shard only; at commit N + 2 opens (the lock, the N shards' temporaries, the manifest's) and
nothing read; a third launch, a new job given fit(resume_from=the folder), reads each shard
once too (T + the manifest's size bytes). Exit status 1 otherwise. Counts do not depend on the
machine.

    .venv/bin/python bench/bench_resume_scaling.py --ns 2,4,8,16

The worker (run by the bench on N ranks): bench_resume_scaling.py --worker FOLDER
"""

import argparse
import glob
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pmpi_count  # noqa: E402


def worker(folder, resume_from=False):
    import numpy as np

    import tessera
    from tessera import nn

    rng = np.random.default_rng(1)
    x = rng.normal(size=(256, 64)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1)
    # 64*256 + 256 + 256*256 + 256 + 256*3 + 3 = 83,459 weights; with Adam's two moments
    # T = 3 * 4 * 83,459 ≈ 1 MB
    model = nn.Sequential([nn.Dense(256, activation="relu"), nn.Dense(256, activation="relu"),
                           nn.Dense(3, activation="softmax")], input_shape=(64,), seed=2)
    model.compile(tessera.optim.Adam(1e-3), "sparse_categorical_crossentropy")
    pmpi_count.reset()
    if resume_from:  # a new job continuing from the run's folder (reads, never writes)
        model.fit(x, y, batch_size=32, epochs=1, verbose=0, resume_from=folder)
    else:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0, checkpoint_dir=folder,
                  checkpoint_every="epoch")
    pmpi_count.mark("fit")
    pmpi_count.pause()


def measure(n, build, python):
    """(T, manifest bytes, per-rank segments of the writing launch, of the resuming launch)
    at n ranks."""
    with tempfile.TemporaryDirectory(prefix="tessera-resume-") as tmp:
        folder = os.path.join(tmp, "ckpts")
        env = {"TESSERA_RUN_ID": "bench", "PMPI_COUNT_PATH": folder}
        cmd = [python, os.path.abspath(__file__), "--worker", folder]
        _, wrote = pmpi_count.run(n, cmd, build=build, env=env, timeout=600)  # writes, commits
        _, ranks = pmpi_count.run(n, cmd, build=build, env=env, timeout=600)  # resumes
        _, later = pmpi_count.run(n, cmd + ["--resume-from"], build=build, env=env,
                                  timeout=600)  # fit(resume_from=folder)
        manifests = glob.glob(os.path.join(folder, "fit1-bench-*", "ckpt-*", "manifest.json"))
        if len(manifests) != 1:
            raise RuntimeError(f"[bench_resume_scaling] expected one committed checkpoint in "
                               f"{folder}, found {manifests}")
        with open(manifests[0]) as fh:
            total = json.load(fh)["total_bytes"]
        size = os.path.getsize(manifests[0])
        return (total, size, pmpi_count.segment(wrote, "fit"), pmpi_count.segment(ranks, "fit"),
                pmpi_count.segment(later, "fit"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ns", default="2,4,8,16")
    p.add_argument("--build", default="build")
    p.add_argument("--check", action="store_true",
                   help="fail unless every N reads each shard once (exact counts)")
    p.add_argument("--worker", metavar="FOLDER")
    p.add_argument("--resume-from", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.resume_from)
        return 0
    python = os.environ.get("TESSERA_PYTHON", sys.executable)
    bad = []
    print(f"{'':>15} {'resume':-^48} {'commit':-^18} {'resume_from=':-^35}")
    print(f"{'N':>4} {'T (bytes)':>10} {'opens':>6} {'2N+2':>5} {'bytes read':>11} "
          f"{'read / T':>8} {'most by a rank':>14} {'opens':>6} {'bytes read':>11} "
          f"{'bytes read':>11} {'read / T':>8} {'most by a rank':>14}")
    for n in [int(v) for v in args.ns.split(",")]:
        total, manifest, wrote, seg, later = measure(n, args.build, python)
        f_read = sum(s["read_bytes"] for s in later)
        f_most = max(s["read_bytes"] for s in later)
        opens = sum(s["file_opens"] for s in seg)
        read = sum(s["read_bytes"] for s in seg)
        most = max(s["read_bytes"] for s in seg)
        w_opens = sum(s["file_opens"] for s in wrote)
        w_read = sum(s["read_bytes"] for s in wrote)
        print(f"{n:>4} {total:>10} {opens:>6} {2 * n + 2:>5} {read:>11} {read / total:>8.3f} "
              f"{most:>14} {w_opens:>6} {w_read:>11} {f_read:>11} {f_read / total:>8.3f} "
              f"{f_most:>14}", flush=True)
        if args.check:
            # writing: each rank opens its shard's temporary, rank 0 also the lock and the
            # manifest's temporary; nothing is read (the reports come by a gather)
            for r, s in enumerate(wrote):
                got, want = (s["file_opens"], s["read_bytes"]), (3 if r == 0 else 1, 0)
                if got != want:
                    bad.append(f"N = {n}, rank {r}, writing: {got[0]} opens and {got[1]} bytes "
                               f"read, expected {want[0]} and {want[1]}")
            # rank r reads bytes [r*T//n, (r+1)*T//n) (its shard); rank 0 also the lock's
            # open and the manifest
            for r, s in enumerate(seg):
                want = ((3 if r == 0 else 1),
                        (r + 1) * total // n - r * total // n + (manifest if r == 0 else 0))
                got = (s["file_opens"], s["read_bytes"])
                if got != want:
                    bad.append(f"N = {n}, rank {r}: {got[0]} opens and {got[1]} bytes read, "
                               f"expected {want[0]} and {want[1]} (T = {total}, manifest "
                               f"{manifest} bytes)")
            # fit(resume_from=): rank r reads its shard, rank 0 also the manifest
            for r, s in enumerate(later):
                want = (r + 1) * total // n - r * total // n + (manifest if r == 0 else 0)
                if s["read_bytes"] != want:
                    bad.append(f"N = {n}, rank {r}, resume_from: {s['read_bytes']} bytes read, "
                               f"expected {want} (T = {total}, manifest {manifest} bytes)")
    for line in bad:
        print(f"FAIL: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
