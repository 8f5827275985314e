"""Checkpoint resume at scale: the file opens and bytes read, summed over the ranks, when N
localities resume from a checkpoint that N localities wrote (docs/scaling.md, "Checkpoints").

usage: bench_resume_scaling.py [--ns 2,4,8,16] [--build build] [--check] [--zero STAGE]

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

With --zero STAGE (1, 2 or 3) every fit runs under ZeRO and each locality keeps only its slices
of the optimizer state (and under stage 3 of the weights): the bench also prints, for both
resumes, the bytes of the state each rank received from the others (the most of any rank, and
the sum) next to what it received before, when every rank got the whole state (T minus what it
read itself): the reader's own count (tessera.nn.checkpoints.last_share), which each rank writes
to a file beside the checkpoint folder.

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


def worker(folder, resume_from=False, zero=0):
    import numpy as np

    import tessera
    from tessera import distributed, nn
    from tessera.nn import checkpoints

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
        model.fit(x, y, batch_size=32, epochs=1, verbose=0, resume_from=folder, zero=zero)
    else:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0, checkpoint_dir=folder,
                  checkpoint_every="epoch", zero=zero)
    pmpi_count.mark("fit")
    pmpi_count.pause()
    # beside the checkpoint folder, not in it (the counter counts files under it only)
    with open(os.path.join(os.path.dirname(folder), f"share-{distributed.rank()}.json"),
              "w") as fh:
        json.dump(checkpoints.last_share, fh)


def shares(folder, n):
    """Each rank's last_share (read, received, kept) of the last launch, by rank."""
    out = []
    for r in range(n):
        with open(os.path.join(os.path.dirname(folder), f"share-{r}.json")) as fh:
            out.append(json.load(fh))
    return out


def measure(n, build, python, zero=0):
    """(T, manifest bytes, per-rank segments of the writing launch, of the resuming launch)
    at n ranks."""
    with tempfile.TemporaryDirectory(prefix="tessera-resume-") as tmp:
        folder = os.path.join(tmp, "ckpts")
        env = {"TESSERA_RUN_ID": "bench", "PMPI_COUNT_PATH": folder}
        cmd = [python, os.path.abspath(__file__), "--worker", folder, "--zero", str(zero)]
        _, wrote = pmpi_count.run(n, cmd, build=build, env=env, timeout=600)  # writes, commits
        _, ranks = pmpi_count.run(n, cmd, build=build, env=env, timeout=600)  # resumes
        got = shares(folder, n)
        _, later = pmpi_count.run(n, cmd + ["--resume-from"], build=build, env=env,
                                  timeout=600)  # fit(resume_from=folder)
        got_later = shares(folder, n)
        manifests = glob.glob(os.path.join(folder, "fit1-bench-*", "ckpt-*", "manifest.json"))
        if len(manifests) != 1:
            raise RuntimeError(f"[bench_resume_scaling] expected one committed checkpoint in "
                               f"{folder}, found {manifests}")
        with open(manifests[0]) as fh:
            total = json.load(fh)["total_bytes"]
        size = os.path.getsize(manifests[0])
        return (total, size, pmpi_count.segment(wrote, "fit"), pmpi_count.segment(ranks, "fit"),
                pmpi_count.segment(later, "fit"), got, got_later)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ns", default="2,4,8,16")
    p.add_argument("--build", default="build")
    p.add_argument("--check", action="store_true",
                   help="fail unless every N reads each shard once (exact counts)")
    p.add_argument("--worker", metavar="FOLDER")
    p.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3),
                   help="every fit under this ZeRO stage")
    p.add_argument("--resume-from", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.resume_from, args.zero)
        return 0
    python = os.environ.get("TESSERA_PYTHON", sys.executable)
    bad = []
    print(f"{'':>15} {'resume':-^48} {'commit':-^18} {'resume_from=':-^35}")
    print(f"{'N':>4} {'T (bytes)':>10} {'opens':>6} {'2N+2':>5} {'bytes read':>11} "
          f"{'read / T':>8} {'most by a rank':>14} {'opens':>6} {'bytes read':>11} "
          f"{'bytes read':>11} {'read / T':>8} {'most by a rank':>14}")
    for n in [int(v) for v in args.ns.split(",")]:
        total, manifest, wrote, seg, later, got, got_later = measure(n, args.build, python,
                                                                      args.zero)
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
        if args.zero:
            for what, by in (("resume", got), ("resume_from", got_later)):
                before = [total - g["read"] for g in by]
                print(f"{'':>4} ZeRO {args.zero}, {what}: received by a rank: most "
                      f"{max(g['received'] for g in by):,}, in all "
                      f"{sum(g['received'] for g in by):,}; before (the whole state): most "
                      f"{max(before):,}, in all {sum(before):,}; kept by a rank: most "
                      f"{max(g['kept'] for g in by):,} (T = {total:,})", flush=True)
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
