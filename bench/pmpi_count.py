"""The PMPI counter (bench/pmpi/pmpi_count.cpp) from Python: launch a program on N ranks with
the counter preloaded, bracket what it measures, read the counts back (docs/scaling.md).

In the measured program (the counter's MPI_Pcontrol is found through the process's symbols):

    import pmpi_count
    pmpi_count.reset()             # zero the counters, count from here
    ...                            # what is measured
    pmpi_count.mark("one step")    # the counts so far, as the segment "one step"
    pmpi_count.pause()

In the benchmark:

    out, ranks = pmpi_count.run(8, [python, "step.py"], build="build")
    seg = pmpi_count.segment(ranks, "one step")   # one dict per rank, rank order
    most = max(s["msgs"] for s in seg)
"""

import ctypes
import json
import os
import subprocess
import tempfile

_mpi = None


def _pcontrol(level, *args):
    global _mpi
    if _mpi is None:
        _mpi = ctypes.CDLL(None)
    _mpi.MPI_Pcontrol(ctypes.c_int(level), *args)


def reset():
    """Zero every counter and count from here."""
    _pcontrol(2)


def pause():
    _pcontrol(0)


def resume():
    _pcontrol(1)


def mark(label):
    """Record the counts since the last reset as the segment `label`."""
    _pcontrol(3, ctypes.c_char_p(label.encode()))


def run(n, cmd, build="build", env=None, timeout=1800, mpirun_args=()):
    """Runs cmd on n ranks (mpirun, oversubscribed) with the counter preloaded. Returns the
    completed process's stdout and every rank's counts (a list of dicts, by rank). Raises
    RuntimeError naming the command if it fails or a rank wrote no counts."""
    lib = os.path.abspath(os.path.join(build, "bench", "libpmpi_count.so"))
    if not os.path.exists(lib):
        raise RuntimeError(f"[pmpi_count] the counter is not built: {lib} (make build)")
    with tempfile.TemporaryDirectory() as tmp:
        counts = os.path.join(tmp, "counts.jsonl")
        full_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        full_env.update(env or {})
        passed = [a for k in (env or {}) for a in ("-x", k)]
        argv = ["mpirun", "-n", str(n), "--oversubscribe", "--bind-to", "none", *passed,
                "-x", f"LD_PRELOAD={lib}", "-x", f"PMPI_COUNT_OUT={counts}", *mpirun_args, *cmd]
        done = subprocess.run(argv, env=full_env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"[pmpi_count] {' '.join(argv)} failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}")
        lines = []
        if os.path.exists(counts):
            with open(counts) as fh:
                lines = [json.loads(line) for line in fh]
    if sorted(d["rank"] for d in lines) != list(range(n)):
        raise RuntimeError(f"[pmpi_count] counts of ranks {[d['rank'] for d in lines]} from "
                           f"{n} ranks: {' '.join(argv)}")
    return done.stdout, sorted(lines, key=lambda d: d["rank"])


def segment(ranks, label):
    """Every rank's segment `label` (in rank order). Raises ValueError naming the label and the
    rank when one is missing."""
    out = []
    for d in ranks:
        seg = [s for s in d["segments"] if s["label"] == label]
        if not seg:
            raise ValueError(f"[pmpi_count] rank {d['rank']} has no segment '{label}' "
                             f"(segments: {[s['label'] for s in d['segments']]})")
        out.append(seg[0])
    return out


def on_comm(seg, name):
    """Messages and bytes a segment counted on the communicator `name` (0 and 0 if none)."""
    return seg["by_comm"].get(name, {"msgs": 0, "bytes": 0})
