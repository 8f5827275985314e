"""The pipeline bubble as the schedule makes it on a machine with a core per rank: a replay of a
traced pipelined step (issue 28; docs/parallelism.md, "The bubble and a stage's memory,
measured").

On a machine with fewer cores than ranks, the wall clock of a trace says as much about the
operating system's scheduler as about the pipeline: a rank descheduled between two primitives
looks idle. The replay keeps what the trace says about the work and drops what it says about the
machine. For each stage it takes, in the order they ran, its pass program's primitive
evaluations with their *thread CPU time* (`cpu_us` in the trace, at most the wall span) and the
CPU its thread spent between two of them (dispatch; read from the thread's CPU clock, at most
the wall gap), less what reading the clock cost (`clock_cost`), and lets them run back to back on
a clock of its own, except that:

- an evaluation that started after a `pipe_recv`'s message arrived (on the wall clock: it may
  have needed the message; the ones before it did not) starts no earlier than that message's
  arrival on the replayed clock: the replayed end of the matching `pipe_send` evaluation on the
  sender's clock plus the message's latency, taken to be that send's own cost (its CPU time) —
  sends and receives matched by (sender, receiver, tag) in order, as MPI matches them; the CPU
  the thread spent before such an evaluation is waiting, not work, and is dropped.

Every stage starts the step at 0; the step's replayed window is the latest stage's end; a
stage's busy time is its evaluations' CPU time but for pipe_send / pipe_recv, and the dispatch
between them (the stage working on its own schedule, which the wall definition of
bench_pipeline_bubble.py cannot tell from the operating system running another process); its
bubble is 1 - busy / window: the time it waits for a neighbour. What it assumes: each rank
has a core of its own and the ranks do not slow each other (no contention for memory bandwidth
or caches), the evaluations would take the CPU time they took here, and a message costs its
send once more in flight. Evaluations of one stage that overlapped on the wall clock (several
threads) are replayed one after another, which overstates that stage's time.

`replay` is the discrete-event core, on plain items (tests/python/test_bubble_replay.py checks it
on schedules whose bubble is known); `step_items` builds the items from a Chrome trace.
"""

import re
import statistics
from dataclasses import dataclass, field

COMM = ("pipe_send", "pipe_recv")
_PIPE = re.compile(r"pipe_(send|recv)\(stage (\d+)(?: of [^)]*?)? (->|<-) (\d+), tag=(\d+)\)$")


@dataclass
class Item:
    """One piece of a stage's replayed sequence: `cost` (µs) of work, counted busy or not; it
    starts after every message of `waits` arrived; if `send` is a message key, that message
    leaves when it ends and arrives `latency` µs later."""

    cost: float
    busy: bool = True
    waits: tuple = ()
    send: object = None
    latency: float = 0.0
    name: str = ""


@dataclass
class Replay:
    start: list = field(default_factory=list)  # [stage][item] replayed start (µs)
    end: list = field(default_factory=list)  # [stage] replayed end of its last item
    busy: list = field(default_factory=list)  # [stage] busy µs
    window: float = 0.0
    bubble: list = field(default_factory=list)  # [stage] 1 - busy / window


def replay(stages) -> Replay:
    """Runs the stages' sequences of Items against each other (every stage from time 0, one item
    at a time) and returns the replayed times and bubbles. Raises ValueError naming the stage and
    the item when a stage waits for a message no stage sends, or two items send the same key."""
    arrival = {}
    senders = {}
    for s, items in enumerate(stages):
        for k, it in enumerate(items):
            if it.send is not None:
                if it.send in senders:
                    raise ValueError(f"[replay] message {it.send!r} is sent twice: by item "
                                     f"{senders[it.send][1]} of stage {senders[it.send][0]} and "
                                     f"item {k} ({it.name}) of stage {s}")
                senders[it.send] = (s, k)
    for s, items in enumerate(stages):
        for k, it in enumerate(items):
            for key in it.waits:
                if key not in senders:
                    raise ValueError(f"[replay] item {k} ({it.name}) of stage {s} waits for "
                                     f"message {key!r}, which no stage sends")
    n = len(stages)
    pos, clock = [0] * n, [0.0] * n
    starts = [[0.0] * len(items) for items in stages]
    while any(pos[s] < len(stages[s]) for s in range(n)):
        moved = False
        for s in range(n):
            items = stages[s]
            while pos[s] < len(items):
                it = items[pos[s]]
                if any(key not in arrival for key in it.waits):
                    break
                t = max([clock[s]] + [arrival[key] for key in it.waits])
                starts[s][pos[s]] = t
                clock[s] = t + it.cost
                if it.send is not None:
                    arrival[it.send] = clock[s] + it.latency
                pos[s] += 1
                moved = True
        if not moved:
            stuck = [f"stage {s} at item {pos[s]} ({stages[s][pos[s]].name}) waiting for "
                     f"{[k for k in stages[s][pos[s]].waits if k not in arrival]}"
                     for s in range(n) if pos[s] < len(stages[s])]
            raise ValueError("[replay] the stages wait for each other (a cycle): "
                             + "; ".join(stuck))
    busy = [sum(it.cost for it in items if it.busy) for items in stages]
    window = max(clock) if clock else 0.0
    bubble = [1.0 - b / window if window > 0 else 0.0 for b in busy]
    return Replay(starts, clock, busy, window, bubble)


def _pipe_message(name):
    """('send' | 'recv', sender stage, receiver stage, tag) of a pipe communication's name."""
    m = _PIPE.match(name)
    if not m:
        return None
    kind, me, arrow, peer, tag = m.groups()
    me, peer = int(me), int(peer)
    return (kind, me, peer, int(tag)) if arrow == "->" else (kind, peer, me, int(tag))


def clock_cost(prims) -> float:
    """What reading the CPU clock adds to an evaluation's CPU span and to the gap after it (µs):
    the CPU span runs from one clock read to the next, the wall span between two steady-clock
    reads inside them, so an evaluation that ran undisturbed shows cpu - wall = one clock read
    (a system call). The median over the evaluations whose CPU exceeds their wall span (one
    descheduled has less)."""
    over = [float(e["args"]["cpu_us"]) - e["dur"] for e in prims
            if float(e["args"]["cpu_us"]) > e["dur"]]
    return statistics.median(over) if over else 0.0


def step_items(events, p, warmup):
    """[[items of stage s] for each timed step] from a Chrome trace's events (`tessera.trace(DIR)
    .chrome()`'s traceEvents of `tessera run --mesh pipeline=p --trace DIR`). Stage s is
    locality s; its pass program is the program whose name ends in ' pass>'."""
    steps, prims, comms = {}, {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        pid, cat = e["pid"], e.get("cat")
        if cat == "step":
            steps.setdefault(pid, []).append((e["ts"], e["ts"] + e["dur"]))
        elif cat == "primitive" and (e.get("args") or {}).get("program", "").endswith(" pass>"):
            prims.setdefault(pid, []).append(e)
        elif cat == "communication":
            msg = _pipe_message(e["name"])
            if msg:
                comms.setdefault(pid, []).append((e["ts"], e["ts"] + e["dur"], msg))
    if sorted(prims) != list(range(p)):
        raise ValueError(f"[replay] the trace has pass programs of localities {sorted(prims)}, "
                         f"expected 0..{p - 1}")
    missing = [e for s in range(p) for e in prims[s] if "cpu_us" not in (e.get("args") or {})]
    if missing:
        raise ValueError(f"[replay] {len(missing)} primitive evaluations have no CPU time "
                         "(cpu_us): record the trace with TESSERA_TRACE_CPU=1 (docs/tracing.md)")
    clock = clock_cost(e for s in range(p) for e in prims[s])
    # The k-th message from a to b with tag t, on each side (MPI's order).
    key_of = {}  # (pid, comm start) -> key
    for pid, cs in comms.items():
        seen = {}
        for t0, _, msg in sorted(cs, key=lambda c: c[0]):
            kind, a, b, tag = msg
            n = seen.get(msg, 0)
            seen[msg] = n + 1
            key_of[(pid, t0)] = (a, b, tag, n)
    n_steps = min(len(v) for v in steps.values())
    out = []
    for k in range(warmup, n_steps):
        stages = []
        for s in range(p):
            lo, hi = sorted(steps[s])[k]
            mine = sorted((e for e in prims[s] if lo <= e["ts"] <= hi), key=lambda e: e["ts"])
            sends = sorted((t0, key_of[(s, t0)]) for t0, _, m in comms.get(s, [])
                           if m[0] == "send" and lo <= t0 <= hi)
            recvs = sorted((t1, key_of[(s, t0)]) for t0, t1, m in comms.get(s, [])
                           if m[0] == "recv" and lo <= t0 <= hi)
            items, prev, r = [], None, 0
            for e in mine:
                a = e["args"]
                cost = max(0.0, min(float(a["cpu_us"]) - clock, e["dur"]))
                waits = []
                while r < len(recvs) and recvs[r][0] <= e["ts"]:
                    waits.append(recvs[r][1])
                    r += 1
                send = None
                if e["name"] == "pipe_send":
                    inside = [key for t0, key in sends if e["ts"] <= t0 <= e["ts"] + e["dur"]]
                    if len(inside) != 1:
                        raise ValueError(f"[replay] stage {s}: a pipe_send evaluation at "
                                         f"{e['ts']} µs holds {len(inside)} messages, expected 1")
                    send = inside[0]
                if prev is not None and not waits and prev["tid"] == e["tid"]:
                    # the thread's CPU between the two: dispatch, not a neighbour's message
                    pa = prev["args"]
                    gap = float(a["cpu_at_us"]) - float(pa["cpu_at_us"]) - float(pa["cpu_us"])
                    gap = min(gap - clock, e["ts"] - prev["ts"] - prev["dur"])
                    if gap > 1e-6:  # µs: not float rounding
                        items.append(Item(gap, name="gap"))
                items.append(Item(cost, busy=e["name"] not in COMM, waits=tuple(waits),
                                  send=send, latency=cost if send else 0.0, name=e["name"]))
                prev = e
            if r < len(recvs):  # messages that came after the stage's last evaluation
                items.append(Item(0.0, busy=False, waits=tuple(key for _, key in recvs[r:]),
                                  name="end of pass"))
            stages.append(items)
        out.append(stages)
    return out


def replayed_bubbles(events, p, warmup):
    """{stage: [replayed bubble of each timed step]} and the replayed windows (µs)."""
    out, windows = {s: [] for s in range(p)}, []
    for stages in step_items(events, p, warmup):
        r = replay(stages)
        windows.append(r.window)
        for s in range(p):
            out[s].append(r.bubble[s])
    return out, windows
