"""bench/pipeline_replay.py's replay of a pipelined step, on schedules and traces whose bubble is
known (the benchmark never asserts a time: this checks the arithmetic that reads one)."""

import os
import sys

import pytest

_BENCH = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench")
sys.path.insert(0, os.path.abspath(_BENCH))

import pipeline_replay as pr  # noqa: E402
from tessera.nn.pipeline import schedule  # noqa: E402


def schedule_items(p, m, kind, f, b, latency=0.0):
    """Each stage's Items for `kind` with forwards of cost f and backwards of cost b."""
    stages = []
    for s in range(p):
        items = []
        for step, i in schedule(s, p, m, kind):
            if step == "F":
                waits = (("F", s - 1, i),) if s > 0 else ()
                send = ("F", s, i) if s < p - 1 else None
                items.append(pr.Item(f, waits=waits, send=send, latency=latency, name=f"F{i}"))
            else:
                waits = (("B", s + 1, i),) if s < p - 1 else ()
                send = ("B", s, i) if s > 0 else None
                items.append(pr.Item(b, waits=waits, send=send, latency=latency, name=f"B{i}"))
        stages.append(items)
    return stages


@pytest.mark.parametrize("kind", ["1f1b", "gpipe"])
@pytest.mark.parametrize("p,m", [(2, 4), (2, 8), (4, 4), (4, 8), (4, 16), (3, 5)])
def test_equal_stages_leave_the_formulas_bubble(kind, p, m):
    r = pr.replay(schedule_items(p, m, kind, f=1.0, b=2.0))
    assert r.window == pytest.approx((m + p - 1) * 3.0)
    for s in range(p):
        assert r.busy[s] == pytest.approx(m * 3.0)
        assert r.bubble[s] == pytest.approx((p - 1) / (m + p - 1))


def test_latency_delays_the_receiver_by_the_send():
    # p = 2, m = 2, 1F1B (stage 0: F0 F1 B0 B1; stage 1: F0 B0 F1 B1), forwards 1, backwards 2,
    # each message L: stage 1's F0 at 1 + L, B0 ends at 4 + L, its cotangent reaches stage 0 at
    # 4 + 2L; F1 (arrived at 2 + L) 4 + L .. 5 + L, B1 .. 7 + L; stage 0's B1 at 7 + 2L .. 9 + 2L
    L = 0.5
    r = pr.replay(schedule_items(2, 2, "1f1b", f=1.0, b=2.0, latency=L))
    assert r.start[1][0] == pytest.approx(1 + L)
    assert r.start[0][2] == pytest.approx(4 + 2 * L)
    assert r.start[1][2] == pytest.approx(4 + L)
    assert r.window == pytest.approx(9 + 2 * L)
    assert r.bubble[0] == pytest.approx(1 - 6 / (9 + 2 * L))
    assert r.bubble[1] == pytest.approx(1 - 6 / (9 + 2 * L))


def test_a_slow_stage_sets_the_pace():
    # stage 1's forward and backward twice stage 0's: stage 0 waits for it each micro-batch
    stages = schedule_items(2, 4, "1f1b", f=1.0, b=1.0)
    for it in stages[1]:
        it.cost *= 2
    r = pr.replay(stages)
    # stage 1: F0 can start at 1; then 4 x (2 + 2) back to back; stage 0's last B follows
    assert r.end[1] == pytest.approx(1 + 16)
    assert r.window == pytest.approx(18)
    assert r.bubble[0] == pytest.approx(1 - 8 / 18)
    assert r.bubble[1] == pytest.approx(1 - 16 / 18)


def test_a_message_nobody_sends_and_a_cycle_are_errors():
    with pytest.raises(ValueError, match=r"item 0 \(x\) of stage 1 waits for message 'k'"):
        pr.replay([[pr.Item(1.0)], [pr.Item(1.0, waits=("k",), name="x")]])
    cycle = [[pr.Item(1.0, waits=("b",), name="a"), pr.Item(0.0, send="a")],
             [pr.Item(1.0, waits=("a",), name="b"), pr.Item(0.0, send="b")]]
    with pytest.raises(ValueError, match="wait for each other.*stage 0 at item 0"):
        pr.replay(cycle)
    with pytest.raises(ValueError, match="sent twice"):
        pr.replay([[pr.Item(1.0, send="k")], [pr.Item(1.0, send="k")]])


# ------------------------------------------------------------------ from a trace

PASS = "<model pipeline stage {} pass>"


def prim(pid, name, t0, dur, cpu, cpu_at, tid=1):
    return {"ph": "X", "pid": pid, "tid": tid, "cat": "primitive", "name": name, "ts": t0,
            "dur": dur, "args": {"program": PASS.format(pid), "position": "1:1",
                                 "cpu_us": cpu, "cpu_at_us": cpu_at}}


def comm(pid, name, t0, t1):
    return {"ph": "X", "pid": pid, "tid": 1000000, "cat": "communication", "name": name,
            "ts": t0, "dur": t1 - t0, "args": {"bytes": 8, "site": "s", "peer": 1 - pid}}


def step(pid, t0, t1):
    return {"ph": "X", "pid": pid, "tid": 2000000, "cat": "step", "name": "step", "ts": t0,
            "dur": t1 - t0}


def two_stage_trace(c=0.0):
    """One step of 2 stages, 1 micro-batch, on a loaded machine: stage 0 computes F (CPU 10 µs,
    descheduled to a wall 50), sends (CPU 1), receives the cotangent, computes B (CPU 20); stage
    1 posts its receive, waits, computes F (CPU 10) and B (CPU 20, wall 90), sends. The threads'
    CPU clocks also show 2 µs of dispatch between stage 0's send and its receive. Reading the CPU
    clock costs `c` µs: it adds c to each evaluation's CPU span and to each gap after one."""
    e = [step(0, 0, 1000), step(1, 0, 1000)]
    # stage 0
    e += [prim(0, "matmul", 0, 50, 10 + c, 100),
          prim(0, "pipe_send", 60, 1, 1 + c, 110 + 2 * c),
          comm(0, "pipe_send(stage 0 of pipeline -> 1, tag=0)", 60.5, 300),
          prim(0, "pipe_recv", 70, 1, 1 + c, 113 + 4 * c),  # 2 µs after the send's end
          comm(0, "pipe_recv(stage 0 of pipeline <- 1, tag=1)", 70.5, 400),
          prim(0, "tanh", 410, 20, 20 + c, 150)]
    # stage 1
    e += [prim(1, "pipe_recv", 5, 1, 1 + c, 500),
          comm(1, "pipe_recv(stage 1 of pipeline <- 0, tag=0)", 5.5, 200),
          prim(1, "matmul", 210, 10, 10 + c, 600),
          prim(1, "matmul_grad_x", 220, 90, 20 + c, 610 + 2 * c),
          prim(1, "pipe_send", 320, 1, 1 + c, 630 + 4 * c),
          comm(1, "pipe_send(stage 1 of pipeline -> 0, tag=1)", 320.5, 400)]
    return e


@pytest.mark.parametrize("c", [0.0, 0.7])
def test_a_trace_is_replayed_with_its_cpu_times_and_messages(c):
    events = two_stage_trace(c)
    assert pr.clock_cost(e for e in events if e["cat"] == "primitive") == pytest.approx(c)
    (stages,) = pr.step_items(events, 2, warmup=0)
    assert [it.name for it in stages[0]] == ["matmul", "pipe_send", "gap", "pipe_recv", "tanh"]
    assert [it.waits for it in stages[0]][-1] == ((1, 0, 1, 0),)
    assert stages[0][1].send == (0, 1, 0, 0) and stages[1][1].waits == ((0, 1, 0, 0),)
    r = pr.replay(stages)
    # stage 0: matmul 0-10, send 10-11 (arrives 12), gap 11-13, recv 13-14;
    # stage 1: recv 0-1, matmul waits for 12: 12-22, grad 22-42, send 42-43 (arrives 44);
    # stage 0's tanh 44-64
    assert r.start[1][1] == pytest.approx(12)
    assert r.start[0][-1] == pytest.approx(44)
    assert r.window == pytest.approx(64)
    assert r.busy[0] == pytest.approx(10 + 2 + 20)  # pipe_* not busy; the dispatch gap is
    assert r.bubble[0] == pytest.approx(1 - 32 / 64)
    assert r.bubble[1] == pytest.approx(1 - 30 / 64)
    b, windows = pr.replayed_bubbles(events, 2, warmup=0)
    assert b == {0: [pytest.approx(0.5)], 1: [pytest.approx(1 - 30 / 64)]}
    assert windows == [pytest.approx(64)]


def test_a_trace_without_cpu_times_is_refused():
    events = two_stage_trace()
    for e in events:
        if e["cat"] == "primitive":
            del e["args"]["cpu_us"]
    with pytest.raises(ValueError, match="no CPU time"):
        pr.step_items(events, 2, warmup=0)
