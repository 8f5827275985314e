"""bench/pipeline_phases.py's split of a pipelined step, on a made-up trace
whose phases are known (the benchmark never asserts a time: this checks the
arithmetic that reads one)."""

import os
import sys

_BENCH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench")
sys.path.insert(0, os.path.abspath(_BENCH))

import pipeline_phases as pp  # noqa: E402


def ev(cat, name, t0, t1, pid=0, program=None):
    e = {"ph": "X", "pid": pid, "cat": cat, "name": name, "ts": t0 * 1e3, "dur": (t1 - t0) * 1e3}
    if program:
        e["args"] = {"program": program, "position": "1:1"}
    return e


def test_phases_of_a_known_step():
    pas, upd = "<model pipeline stage 0 pass>", "<model pipeline stage 0 update>"
    events = [ev("step", "step 0", 0, 50), ev("step", "step 1", 100, 200)]
    # step 1 (step 0 is the warm-up): compute 0-30 and 60-90 (ms from 100), a
    # receive posted at 30 whose message comes at 60, a send, a gap, the update
    events += [ev("primitive", "matmul", 100, 130, program=pas),
               ev("primitive", "pipe_recv", 130, 131, program=pas),
               ev("communication", "pipe_recv(stage 0 of pipeline <- 1, tag=0)", 130, 160),
               ev("primitive", "tanh", 160, 180, program=pas),
               ev("primitive", "pipe_send", 180, 182, program=pas),
               ev("primitive", "add", 185, 190, program=pas),
               ev("primitive", "adam", 192, 198, program=upd),
               ev("primitive", "other", 10, 20, program=pas)]  # step 0's: not counted
    got = pp.phases(events, warmup=1)[0]
    want = {"step": 100, "pass": 90, "compute": 55, "recv": 1, "send": 2, "wait": 29,
            "gaps": 3, "update": 6, "outside": 4}
    assert set(got) == set(want)
    for k, v in want.items():
        assert abs(got[k] - v) < 1e-9, (k, got[k], v)
