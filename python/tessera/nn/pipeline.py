"""Pipeline parallelism for `Model.fit`: the model cut into stages of layers,
one stage per locality of the mesh's pipeline axis, each global batch cut
into micro-batches that flow through the stages (docs/parallelism.md,
"Pipeline parallelism").

This module holds the three parts, each usable on its own:

* the schedules, pure functions: `schedule(stage, stages, microbatches,
  kind)` is the order in which one stage runs the forward ("F", i) and the
  backward ("B", i) of its micro-batches (GPipe or 1F1B), `simulate` runs
  every stage's order against the others with blocking sends and reports a
  deadlock, `in_flight` counts the micro-batches a stage holds;
* the split, `plan_stages(model, stages, split, costs)`: which layers each
  stage runs and which tensors cross each cut (`measure_layers` gives the
  per-layer times an automatic split balances);
* the stage's training step, `StageStep`: two programs of tessera's
  language per stage, the pass (receive, forward, send; receive the
  cotangent, backward, send the input's cotangent; the gradient sums in a
  fixed order) and the update (the data group's sum, the optimizer update
  of the stage's own parameters), and the Python side fit needs
  (arguments, results, gathering the whole model); `setup` makes it.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from .. import distributed as _dist
from . import constraints
from .clipping import SplitNorms
from .params import peek_value, value_spec
from .programs import ProgramsMixin
from .program_constants import compile_program
from .symbolic import GraphWriter
from .zero import ZeroPlan

__all__ = ["schedule", "simulate", "in_flight", "bubble", "plan_stages", "measure_layers",
           "StagePlan", "StageStep", "MAX_CUT_TENSORS", "SCHEDULES"]

SCHEDULES = ("1f1b", "gpipe")
# At most this many tensors may cross a cut between two stages.
MAX_CUT_TENSORS = 4


# --------------------------------------------------------------------- schedules

def _check_counts(stage, stages, microbatches, where="schedule"):
    for name, v in (("stages", stages), ("microbatches", microbatches)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"[{where}] {name} must be a positive int, got {v!r}")
    if isinstance(stage, bool) or not isinstance(stage, (int, np.integer)) or \
            not 0 <= stage < stages:
        raise ValueError(f"[{where}] stage must be an int in [0, {stages}), got {stage!r}")
    if microbatches < stages:
        raise ValueError(f"[{where}] {microbatches} micro-batches for {stages} stages: a "
                         "pipeline needs at least as many micro-batches as stages")


def schedule(stage: int, stages: int, microbatches: int, kind: str = "1f1b") -> list:
    """The order in which `stage` (0-based, of `stages`) runs the forward
    ("F", i) and backward ("B", i) passes of micro-batches 0..microbatches-1.

    "gpipe": every forward, then every backward (each stage holds all
    micro-batches at once). "1f1b" (one forward, one backward): a warm-up of
    `stages - stage - 1` forwards, then alternately one forward and one
    backward, then the remaining backwards; stage s holds at most
    `stages - s` micro-batches between their forward and backward."""
    _check_counts(stage, stages, microbatches)
    if kind not in SCHEDULES:
        raise ValueError(f"[schedule] unknown schedule {kind!r}: use one of {list(SCHEDULES)}")
    m = microbatches
    if kind == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(stages - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        order.append(("F", f))
        f += 1
        order.append(("B", b))
        b += 1
    order += [("B", i) for i in range(b, m)]
    return order


def in_flight(order) -> int:
    """The largest number of micro-batches whose forward has run and whose
    backward has not, along `order`."""
    live = most = 0
    for action, _ in order:
        live += 1 if action == "F" else -1
        most = max(most, live)
    return most


def bubble(stages: int, microbatches: int) -> float:
    """The idle share of a step of equal stages: (p - 1) / (m + p - 1)."""
    return (stages - 1) / (microbatches + stages - 1)


def simulate(orders) -> list:
    """Runs the stages' orders against each other with blocking
    point-to-point messages: the forward of micro-batch i on stage s
    receives its input from stage s-1 and sends its output to s+1; the
    backward receives the cotangent from s+1 and sends one to s-1. A send
    completes only when its receiver has posted the matching receive; a send
    and the receive that follows it from the same peer are posted together
    (MPI_Sendrecv, as Megatron's send_forward_recv_backward), and nothing
    else is. Returns the order in which the actions completed, as (stage,
    action, i); raises RuntimeError naming where each stage is stuck when
    no stage can go on (a deadlock), and ValueError when an order is not a
    schedule (a backward before its forward, an action twice or missing)."""
    p = len(orders)
    if p == 0:
        return []
    m = None
    ops = []
    for s, order in enumerate(orders):
        order = list(order)
        fs = [i for a, i in order if a == "F"]
        bs = [i for a, i in order if a == "B"]
        if m is None:
            m = len(fs)
        if sorted(fs) != list(range(m)) or sorted(bs) != list(range(m)) or \
                len(order) != 2 * m:
            raise ValueError(f"[simulate] stage {s}'s order must run F and B of each of "
                             f"{m} micro-batches once, got {order}")
        done = set()
        for a, i in order:
            if a == "B" and ("F", i) not in done:
                raise ValueError(f"[simulate] stage {s} runs the backward of micro-batch {i} "
                                 "before its forward")
            done.add((a, i))
        seq = []  # each op: a list of parts (kind, peer, action, i)
        for a, i in order:
            before, after = [], []
            if a == "F":
                if s > 0:
                    before.append(("recv", s - 1, "F", i))
                if s < p - 1:
                    after.append(("send", s + 1, "F", i))
            else:
                if s < p - 1:
                    before.append(("recv", s + 1, "B", i))
                if s > 0:
                    after.append(("send", s - 1, "B", i))
            if before and seq and len(seq[-1]) == 1 and seq[-1][0][0] == "send" and \
                    seq[-1][0][1] == before[0][1]:
                seq[-1].append(before[0])  # posted together with the send before it
            elif before:
                seq.append(before)
            seq.append([("run", None, a, i)])
            if after:
                seq.append(after)
        ops.append(seq)
    pos = [0] * p
    pending = [set(ops[s][0]) if ops[s] else set() for s in range(p)]
    completed = []

    def advance(s):
        pos[s] += 1
        pending[s].clear()
        if pos[s] < len(ops[s]):
            pending[s].update(ops[s][pos[s]])

    while True:
        moved = False
        for s in range(p):
            while pos[s] < len(ops[s]) and ops[s][pos[s]][0][0] == "run":
                _, _, a, i = ops[s][pos[s]][0]
                completed.append((s, a, i))
                advance(s)
                moved = True
        for s in range(p):
            for part in list(pending[s]):
                kind, peer, a, i = part
                if kind != "send":
                    continue
                match = ("recv", s, a, i)
                if match in pending[peer]:
                    pending[s].discard(part)
                    pending[peer].discard(match)
                    moved = True
        for s in range(p):
            if pos[s] < len(ops[s]) and not pending[s]:
                advance(s)
                moved = True
        if all(pos[s] == len(ops[s]) for s in range(p)):
            return completed
        if not moved:
            stuck = ", ".join(
                f"stage {s} at " + " + ".join(f"{k} {a}{i}" for k, _, a, i in
                                              sorted(pending[s], key=str))
                for s in range(p) if pos[s] < len(ops[s]))
            raise RuntimeError(f"[simulate] deadlock: {stuck}")


# --------------------------------------------------------------------- the split

def _graph(model):
    """(order, consumers): every tensor the outputs depend on in a
    depth-first post-order from the outputs (a topological order), and the
    ids of the tensors reading each one."""
    order, seen, readers = [], set(), {}
    for root in model._outputs:
        stack = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if t.id in seen:
                continue
            if not ready:
                stack.append((t, True))
                for a in reversed(GraphWriter._inputs(t)):
                    readers.setdefault(a.id, set()).add(t.id)
                    if a.id not in seen:
                        stack.append((a, False))
                continue
            seen.add(t.id)
            order.append(t)
    return order, readers


class StagePlan:
    """The split of a model: `stage_of` {tensor id: stage}; per stage, the
    tensors it receives (`feeds[s]`, crossing the cut before it) and sends
    (`sends[s]`, crossing the cut after it), its layers (`layers[s]`), and
    the first layer of every stage after the first (`starts`)."""

    def __init__(self, stages, stage_of, feeds, sends, layers, starts):
        self.stages = stages
        self.stage_of = stage_of
        self.feeds = feeds
        self.sends = sends
        self.layers = layers
        self.starts = starts

    def describe(self) -> str:
        return "; ".join(f"stage {s}: {', '.join(l.name for l in ls) or '(no layers)'}"
                         for s, ls in enumerate(self.layers))


def _layer_of(t):
    return t.args[0] if t.op == "layer" else None


def _cuts(model, order, readers, stage_of, stages):
    """The tensors crossing each cut, in graph order: made at a stage <= s
    and read at a stage > s (a model output is read by the last stage)."""
    outs = {o.id for o in model._outputs}
    cuts = [[] for _ in range(stages - 1)]
    for t in order:
        if t.id not in stage_of:
            continue
        if t.op in ("input", "param"):
            continue
        made = stage_of[t.id]
        last = max([stage_of.get(r, made) for r in readers.get(t.id, ())] +
                   [stages - 1 if t.id in outs else made])
        for s in range(made, last):
            cuts[s].append(t)
    return cuts


def _maker(t) -> str:
    """The layer (or operation) making tensor t, for error messages."""
    if t.op == "item":
        t = t.args[0]
    layer = _layer_of(t)
    if layer is not None:
        return f"layer {layer.name!r}"
    return f"the operation {getattr(t, 'fn', t.op)!r} at {t.where}" if getattr(
        t, "where", None) else f"the operation {getattr(t, 'fn', t.op)!r}"


def _layer_positions(order):
    """{layer name: index in order of the first node of each of its calls}."""
    first = {}
    for n, t in enumerate(order):
        layer = _layer_of(t)
        if layer is not None and layer.name not in first:
            first[layer.name] = n
    return first


def plan_stages(model, stages: int, split=None, costs=None) -> StagePlan:
    """Cuts `model` into `stages` stages: before each layer named in `split`
    (stages - 1 names, in the order the model runs them), or, without
    `split`, where the stages' costs are most even: `costs` {layer name:
    cost} (measure_layers), else their trainable parameter counts. A
    cut may carry at most MAX_CUT_TENSORS float tensors; a layer's
    parameters stay in one stage."""
    order, readers = _graph(model)
    first = _layer_positions(order)
    layer_nodes = [t for t in order if _layer_of(t) is not None]
    if split is not None:
        if isinstance(split, str) or not isinstance(split, (list, tuple)):
            raise TypeError(f"[fit] pipeline_split must be a list of layer names, got "
                            f"{type(split).__name__} {split!r}")
        for name in split:
            if not isinstance(name, str):
                raise TypeError(f"[fit] pipeline_split must hold layer names (str), got "
                                f"{name!r}")
            if name not in first:
                raise ValueError(f"[fit] pipeline_split names layer {name!r}, which the model "
                                 f"does not have; its layers: {[l.name for l in model.layers]}")
        if len(split) != stages - 1:
            raise ValueError(f"[fit] pipeline_split names {len(split)} layer(s), which makes "
                             f"{len(split) + 1} stages, but the mesh's pipeline axis has "
                             f"{stages} localities (TESSERA_MESH / tessera run --mesh "
                             f"pipeline={stages}): name {stages - 1}")
        positions = [first[name] for name in split]
        if len(set(split)) != len(split) or positions != sorted(positions):
            raise ValueError(f"[fit] pipeline_split must name distinct layers in the order the "
                             f"model runs them, got {list(split)} (that order: "
                             f"{sorted(split, key=lambda n: first[n])})")
        if positions and positions[0] == min(first.values()):
            raise ValueError(f"[fit] pipeline_split names {split[0]!r}, the model's first "
                             "layer: stage 0 would have no layers")
        plan = _make_plan(model, order, readers, positions, stages)
        _check_plan(model, plan, split)
        return plan
    return _auto_plan(model, order, readers, layer_nodes, stages, costs)


def _make_plan(model, order, readers, positions, stages):
    stage_of = {}
    for n, t in enumerate(order):
        if t.op in ("input", "param"):
            continue
        if t.op == "item":
            stage_of[t.id] = stage_of[t.args[0].id]
            continue
        stage_of[t.id] = sum(1 for q in positions if q <= n)
    # A parameter node goes with the stage reading it.
    for t in order:
        if t.op == "param":
            rs = [stage_of[r] for r in readers.get(t.id, ()) if r in stage_of]
            stage_of[t.id] = min(rs) if rs else stages - 1
    cuts = _cuts(model, order, readers, stage_of, stages)
    feeds = [[]] + cuts
    sends = cuts + [[]]
    layers = [[] for _ in range(stages)]
    seen = set()
    for t in order:
        layer = _layer_of(t)
        if layer is not None and id(layer) not in seen:
            seen.add(id(layer))
            layers[stage_of[t.id]].append(layer)
    starts = [order[q] for q in positions]
    plan = StagePlan(stages, stage_of, feeds, sends, layers, starts)
    plan._nodes = order
    return plan


def _check_plan(model, plan, split=None):
    """Refuses cuts carrying too many tensors or tensors without gradients,
    and layers or parameters used in two stages."""
    for s, cut in enumerate(plan.sends[:-1]):
        where = (f"the cut before layer {split[s]!r}" if split else
                 f"the cut between stage {s} and stage {s + 1}")
        if len(cut) > MAX_CUT_TENSORS:
            makers = ", ".join(_maker(t) for t in cut)
            raise ValueError(f"[fit] pipeline_split: {where} (stage {s} to {s + 1}) carries "
                             f"{len(cut)} tensors (made by {makers}); at most "
                             f"{MAX_CUT_TENSORS} may cross a cut: cut at another layer")
        for t in cut:
            if not str(t.dtype).startswith("float"):
                raise ValueError(f"[fit] pipeline_split: {where} carries a {t.dtype} tensor "
                                 f"(made by {_maker(t)}), which has no gradient to send back: "
                                 "cut at another layer")
    where_layer = {}
    for t in plan._nodes:
        layer = _layer_of(t)
        if layer is None:
            continue
        s = plan.stage_of[t.id]
        if where_layer.setdefault(id(layer), (layer, s))[1] != s:
            raise ValueError(f"[fit] pipeline_split: layer {layer.name!r} is called in stage "
                             f"{where_layer[id(layer)][1]} and in stage {s} (a layer's weights "
                             "live in one stage): cut elsewhere")


def _auto_plan(model, order, readers, layer_nodes, stages, costs=None):
    """The cut positions (before a layer's first call) that make the largest
    stage's cost (`costs`, else its trainable parameter count) smallest,
    among cuts carrying at most MAX_CUT_TENSORS float tensors and leaving
    trainable weights in every stage (dynamic programming over the layers)."""
    starts = []
    seen = set()
    for n, t in enumerate(order):
        layer = _layer_of(t)
        if layer is not None and id(layer) not in seen:
            seen.add(id(layer))
            starts.append((n, layer))
    if len(starts) < stages:
        whole = [layer.name for _, layer in starts if layer._is_custom()]
        note = (f"; {', '.join(repr(w) for w in whole)} stay whole (a subclassed model's "
                "call or a custom layer is one layer to the pipeline: write the model as "
                "Sequential or functional to split it)") if whole else ""
        raise ValueError(f"[fit] the model has {len(starts)} layers, too few for the "
                         f"{stages} stages of the mesh's pipeline axis{note}")
    weights = model._weight_stand_ins()  # the shapes only
    trainable = set(model._params(True))

    def count(layer):
        return sum(int(np.prod(weights[model._var_of[(id(layer), p.name)]].shape))
                   for p in layer.params
                   if model._var_of.get((id(layer), p.name)) in trainable)

    sizes = [count(layer) for _, layer in starts]
    prefix = [0]
    for c in sizes:
        prefix.append(prefix[-1] + c)
    weigh = [costs.get(layer.name, 0.0) for _, layer in starts] if costs else sizes
    acc = [0]
    for c in weigh:
        acc.append(acc[-1] + c)
    k = len(starts)

    def ok(j):
        """A cut before layer j is allowed."""
        plan = _make_plan(model, order, readers, [starts[j][0]], 2)
        cut = plan.sends[0]
        if len(cut) > MAX_CUT_TENSORS or any(not str(t.dtype).startswith("float")
                                             for t in cut):
            return False
        owners = {}
        for t in order:
            layer = _layer_of(t)
            if layer is not None and owners.setdefault(id(layer), plan.stage_of[t.id]) != \
                    plan.stage_of[t.id]:
                return False
        return True

    allowed = [j for j in range(1, k) if ok(j)]
    inf = float("inf")
    # best[c][j]: the smallest largest stage for layers [0, j) in c stages
    best = [[inf] * (k + 1) for _ in range(stages + 1)]
    back = [[None] * (k + 1) for _ in range(stages + 1)]
    best[0][0] = 0
    cut_points = [0] + allowed
    for c in range(1, stages + 1):
        ends = allowed if c < stages else [k]
        for j in ends:
            for i in cut_points:
                if i >= j or best[c - 1][i] == inf or prefix[j] == prefix[i]:
                    continue  # (every stage needs trainable weights)
                cost = max(best[c - 1][i], acc[j] - acc[i])
                if cost < best[c][j]:
                    best[c][j] = cost
                    back[c][j] = i
    if best[stages][k] == inf:
        raise ValueError(f"[fit] the model cannot be cut into {stages} stages that each hold "
                         f"trainable weights with at most {MAX_CUT_TENSORS} float tensors "
                         "crossing each cut; give pipeline_split=[layer names] or use fewer "
                         "pipeline stages")
    cuts, j = [], k
    for c in range(stages, 0, -1):
        i = back[c][j]
        if c > 1:
            cuts.append(i)
        j = i
    positions = [starts[i][0] for i in sorted(cuts)]
    plan = _make_plan(model, order, readers, positions, stages)
    _check_plan(model, plan)
    return plan


# --------------------------------------------------------------------- the step

def _param_of(model, var):
    """(layer, parameter name) of a model variable."""
    layer, p = model._owner[var]
    return layer, p.name


def measure_layers(model, rows: int, repeats: int = 3) -> dict:
    """{layer name: seconds}: each layer's training-mode forward on `rows`
    stand-in rows, timed alone (the best of `repeats` runs after one to
    warm up). Its inputs are ones of the shapes and dtypes the layer reads;
    fusions between layers are not made (each layer is timed whole)."""
    order, _ = _graph(model)
    counters: dict = {}
    model._forward_code("true", "seed", part={"counters": counters})
    apart = {t.id: n for n, t in enumerate(order)}  # no fusion across layers
    out, seen = {}, set()
    for t in order:
        layer = _layer_of(t)
        if layer is None or id(layer) in seen:
            continue
        seen.add(id(layer))
        ins = [a for a in GraphWriter._inputs(t) if a.op != "param"]
        feeds = {a.id: f"a{k}" for k, a in enumerate(ins)}
        used: set = set()
        stmts, outs, _ = model._forward_code("true", "seed", part={
            "feeds": feeds, "targets": [t], "stage_of": apart, "counters": counters,
            "used": used})
        flat = [o for group in outs for o in (group if isinstance(group, list) else [group])]
        params = sorted(used)
        args = params + [f"a{k}" for k in range(len(ins))] + ["seed"]
        body = ",\n  ".join(stmts + [f"list({', '.join(flat)})"])
        prog = compile_program(f"define(f, {', '.join(args)}, block(\n  {body}))\nf\n",
                             f"<pipeline timing of {layer.name}>")
        # a weight whose draw is pending is drawn for the timing, not kept
        values = [peek_value(*_param_of(model, v)) for v in params]
        for a in ins:
            shape = tuple(rows if d is None else d for d in a.shape)
            values.append(np.ones(shape, dtype=model.dtype if str(a.dtype).startswith("float")
                                  else a.dtype))
        values.append(1)
        best = float("inf")
        for r in range(repeats + 1):
            start = time.perf_counter()
            prog.run(values)
            if r:
                best = min(best, time.perf_counter() - start)
        out[layer.name] = best
    return out


def _fixed_sum(terms):

    return ProgramsMixin._fixed_sum(terms)


def _chain(leaves, prefix):
    """The running sum of `leaves` [(name, micro-batch)] in their order, as
    _tree's nodes and root: one partial sum lives at a time (normal mode,
    where no fixed tree is owed)."""
    nodes, (acc, _) = [], leaves[0]
    for n, (b, ib) in enumerate(leaves[1:]):
        name = f"{prefix}_{n}"
        nodes.append((name, acc, b, ib))
        acc = name
    return nodes, acc


def _tree(leaves, prefix):
    """_fixed_sum's tree over `leaves` [(name, micro-batch)], as its inner
    nodes (name, left, right, last micro-batch) in the order they can be
    made, and the root's name: the same sums, each named, so that a node is
    added (and its operands freed) as soon as its last micro-batch is done."""
    nodes, terms, n = [], list(leaves), 0
    while len(terms) > 1:
        joined = []
        for q in range(0, len(terms), 2):
            if q + 1 == len(terms):
                joined.append(terms[q])
                continue
            (a, ia), (b, ib) = terms[q], terms[q + 1]
            name = f"{prefix}_{n}"
            n += 1
            nodes.append((name, a, b, max(ia, ib)))
            joined.append((name, max(ia, ib)))
        terms = joined
    return nodes, terms[0][0]


def _tag(i: int, k: int) -> int:
    """The pipe tag of tensor k of micro-batch i (pipe_send and pipe_recv
    keep a tag space per direction: a cotangent and its activation share it)."""
    return i * MAX_CUT_TENSORS + k


def _count_setting(value, env, what):
    """A positive int from an argument or, when None, the environment."""
    source = f"{what}="
    if value is None:
        text = os.environ.get(env)
        if not text:
            return None, None
        source = f"{env} in the environment, set by tessera run --microbatches"
        if not text.isdigit() or not text.isascii() or int(text) < 1:
            raise ValueError(f"[fit] {what} must be a positive int, got {text!r} ({source})")
        return int(text), source
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"[fit] {what} must be a positive int, got {value!r} ({source})")
    return int(value), source


class StageStep:
    """This locality's stage of a pipelined fit: the stage's variables, its
    training-step programs, and what fit needs around them (see the module
    doc). `p` is the number of stages (the mesh's pipeline axis), `d` the
    data axis's size, `m` the micro-batches of each data locality."""

    def __init__(self, model, plan, mesh, microbatches, kind, chunks, deterministic):
        self.model = model
        self.plan = plan
        self.p = plan.stages
        self.stage = mesh.rank("pipeline")
        self.d = mesh.size("data")
        self.data_rank = mesh.rank("data")
        self.pg = mesh.group("pipeline")
        self.dg = mesh.group("data")
        self.m = microbatches
        self.kind = kind
        self.chunks = chunks  # micro-batches of a global batch: d * m
        self.keep_activations = True  # False: every stage recomputes its forward
        self.zero = None  # a zero.ZeroPlan of the stage's parameters, ZeRO 1, 2 or 3
        self.is_whole = True  # the model holds every stage's weights and state
        self.opt = None  # this stage's optimizer state (its slices under ZeRO) during fit
        self.params = None  # under ZeRO 3: this member's slices of the stage's parameters
        self.deterministic = deterministic
        self.norm_gather = ""  # clipnorm: the update's first line, its pipeline all-gather
        self._owners()
        self.order = schedule(self.stage, self.p, self.m, kind)

    # the variables of every stage
    def _stage_code(self, s, counters, used):
        model = self.model
        plan = self.plan
        xs, _ = model._names()
        feeds = {t.id: f"a{k}" for k, t in enumerate(plan.feeds[s])}
        targets = model._outputs if s == self.p - 1 else plan.sends[s]
        return model._forward_code("true", "seed", names=xs, part={
            "feeds": feeds, "targets": targets, "stage_of": plan.stage_of,
            "counters": counters, "used": used})

    def _owners(self):
        model = self.model
        self.counters = {}
        model._forward_code("true", "seed", part={"counters": self.counters})
        owner = {}
        self.code = None
        for s in range(self.p):
            used = set()
            code = self._stage_code(s, self.counters, used)
            if s == self.stage:
                self.code = code
            for v in sorted(used):
                if owner.setdefault(v, s) != s:
                    layer = model._owner[v][0]
                    raise ValueError(f"[fit] pipeline: the weights of layer {layer.name!r} are "
                                     f"used in stage {owner[v]} and in stage {s} (a weight "
                                     "lives in one stage): cut elsewhere "
                                     f"({self.plan.describe()})")
        for v in model._owner:
            owner.setdefault(v, self.p - 1)  # read by no stage: the last keeps it
        self.owner = owner
        P, S = model._params(True), model._params(False)
        for s in range(self.p):
            if not any(owner[v] == s for v in P):
                raise ValueError(f"[fit] pipeline: stage {s} has no trainable weights "
                                 f"({self.plan.describe()}): cut elsewhere, or use fewer "
                                 "pipeline stages")
        self.P = [v for v in P if owner[v] == self.stage]
        self.S = [v for v in S if owner[v] == self.stage]

    # the program
    def program(self, weighted: bool):
        """The stage's two programs (compiled once per model and settings):
        the pass over the micro-batches, then the update."""
        key = ("train_pipe", self.stage, self.p, self.d, self.m, self.kind,
               bool(self.deterministic), weighted, tuple(self.model._params(True)),
               self.zero.key if self.zero is not None else None)
        found = self.model._programs.get(key)
        if found is None:
            pass_text, update_text = self.text(weighted)
            where = f"<model pipeline stage {self.stage}"
            # A collective is matched by its call site (program, line,
            # column): the update's all-gather over the pipeline group
            # (clipnorm) sits on its first line, and the update is named
            # alike on every stage so that the stages' calls meet.
            upd_where = "<model pipeline update>" if self.norm_gather else where + " update>"
            found = self.model._programs[key] = (
                compile_program(pass_text, where + " pass>"),
                compile_program(update_text, upd_where), self.O, self.markers, self.zero)
        self.pass_prog, self.update_prog, self.O, self.markers, self.zero = found
        return self

    def run(self, args):
        """One training step: the pass, then the update; the update's
        result (loss, sums, weights, optimizer state, statistics)."""
        it, lr = args[-2:]
        k = self._n_params() + len(self.S)
        state = args[:k + len(self.O)]
        partials, _ = self.pass_prog.run(args[:k] + args[k + len(self.O):-2])
        tail = [self.data_rank] if self.zero is not None else []
        lm, _, new_p, new_o, new_s = self.update_prog.run(state + list(partials) + [it, lr] +
                                                          tail)
        # Each stage's program is its own: the pipeline group's sum is
        # called from here, the same call on every stage.
        lm = np.asarray(_dist.all_reduce(np.asarray(lm, dtype=np.float64), "sum",
                                         group=self.pg))
        return lm[0], [lm[1:]], new_p, new_o, new_s

    def text(self, weighted: bool) -> str:
        model = self.model
        self.norm_gather = ""
        s, p, m = self.stage, self.p, self.m
        last = s == p - 1
        xs, ys = model._names()
        streams = xs + ys + model._weight_streams(weighted)
        P, S = self.P, self.S
        stmts, outs, stats = self.code
        feeds = [f"a{k}" for k in range(len(self.plan.feeds[s]))]
        n_feed = len(feeds)
        opt = model._compiled.optimizer
        weights = model._weight_stand_ins()  # the shapes (the stage's own are drawn later)
        dtype = model.dtype
        regs = [f"astype({model._owner[v][1].regularizer.expression(v)}, \"{dtype}\")"
                for v in P if model._owner[v][1].regularizer is not None]
        aux_of_stats = [s_ for _, s_ in stats]
        # Keep the forward's intermediates for the backward (vjp) where the
        # stage has no regularizers (a stage sending several tensors: the
        # vjp's value is their list, its pullback takes their cotangents);
        # else the backward recomputes the forward (value_and_grad of
        # sum(output * cotangent)).
        keep = not last and not regs and self.keep_activations
        self.keeps = keep
        defs = []
        if last:
            lstmts, loss = model._loss_text(ys, outs, model._weight_names(weighted),
                                            regularized=set(P))
            aux = [f"list({', '.join(outs)})"] + aux_of_stats
            args = P + S + xs + ys + model._weight_streams(weighted) + feeds + ["seed", "w"]
            body = ",\n  ".join(stmts + lstmts + [f"list(({loss}) * w, "
                                                  f"list({', '.join(aux)}))"])
            defs.append(f"define(stage_loss, {', '.join(args)}, block(\n  {body}))\n")
            feed_at = len(P) + len(S) + len(streams)
        else:
            cts = [f"c{k}" for k in range(len(outs))]
            dot = " + ".join(f"sum({o} * {c})" for o, c in zip(outs, cts))
            if regs:
                dot = f"{dot} + w * ({' + '.join(regs)})"
            aux = [f"list({', '.join(outs)})"] + aux_of_stats
            args = P + S + xs + feeds + ["seed", "w"] + cts
            body = ",\n  ".join(stmts + [f"list({dot}, list({', '.join(aux)}))"])
            defs.append(f"define(stage_obj, {', '.join(args)}, block(\n  {body}))\n")
            fargs = P + S + xs + feeds + ["seed"]
            if keep:
                # vjp: the pullback keeps what the backward needs; value: the output(s)
                value = outs[0] if len(outs) == 1 else f"list({', '.join(outs)})"
                vaux = ", ".join(["list()"] + aux_of_stats)
                body = ",\n  ".join(stmts + [f"list({value}, list({vaux}))"])
                defs.append(f"define(stage_vjp, {', '.join(fargs)}, block(\n  {body}))\n")
            else:
                body = ",\n  ".join(stmts + [f"list({', '.join(outs)})"])
                defs.append(f"define(stage_fwd, {', '.join(fargs)}, block(\n  {body}))\n")
            feed_at = len(P) + len(S) + len(xs)
        argnums = list(range(len(P))) + [feed_at + k for k in range(n_feed)]
        nums = ", ".join(map(str, argnums))
        head = ", ".join(P + S)
        pg = f"group={int(self.pg)}"
        lines, sent = [], []
        self.markers = {}  # (action, i): index in lines, made line numbers below
        n_sums = sum(math.prod(z) for z in model._metric_sizes()) if last else 0
        stat_sizes = [int(np.prod(weights[model._bn_var(bn, 2)].shape)) for bn, _ in stats]
        width = (1 + n_sums if last else 0) + 2 * sum(stat_sizes)
        lines.append(f"define(aux_width, {width})")
        gathered = self.zero is not None and self.zero.stage == 3
        # ZeRO 2 and 3 in normal mode: each bucket of the stage's gradients
        # is reduce-scattered over the data group from inside the pass, as
        # soon as the last micro-batch's backward completes it, so only this
        # member's slice of its sum outlives the pass
        scatter = self.zero is not None and self.zero.stage >= 2 and not self.deterministic
        if gathered or scatter:
            lines.append(f"define(dgroup, {int(self.dg)})")
        if gathered:
            # ZeRO 3: the stage's parameters are slices between steps; the
            # pass starts by all-gathering them over the data group (whose
            # members run this same program), before any pipe message
            lines += self.zero.gather_lines()
        # The micro-batches' sums of this locality, in deterministic mode in
        # the fixed order of the one-locality run (aligned blocks of a
        # pairwise tree, which holds up to log2(m) + 1 partial sums), in
        # normal mode a running sum (one), are the pass's result; the update
        # program sums them over the data group. Each sum is made when its
        # last micro-batch's backward is done, and what it adds is freed then.
        keys = [str(k) for k in range(len(P))] + (["aux"] if width else [])
        block = (m & -m) if self.deterministic else m
        starts = list(range(0, m, block))
        partials, sums_at = [], {}
        made_at = {}  # a partial sum: the micro-batch whose backward completes it
        scattered = []  # buckets reduce-scattered in the pass so far
        for k in keys:
            for st in starts:
                nodes, root = (_tree if self.deterministic else _chain)(
                    [(f"g_{j}_{k}", j) for j in range(st, st + block)], f"t_{st}_{k}")
                for name, a, b, last_ in nodes:
                    sums_at.setdefault(last_, []).append(
                        [f"define({name}, ({a} + {b}))", f"define({a}, nil)",
                         f"define({b}, nil)"])
                sums_at.setdefault(st + block - 1, []).append(
                    [f"define(p_{st}_{k}, {root})", f"define({root}, nil)"])
                partials.append(f"p_{st}_{k}")
                made_at[f"p_{st}_{k}"] = st + block - 1
        for action, i in self.order:
            data = ", ".join(f"{z}_{i}" for z in (xs if not last else streams))
            a_i = [f"a_{i}_{k}" for k in range(n_feed)]
            if action == "F":
                for k in range(n_feed):
                    lines.append(f"define(a_{i}_{k}, pipe_recv({s - 1}, {_tag(i, k)}, {pg}))")
                j = i - (p - s)
                # go_i: forward i may start; under 1F1B after the backward of i - (p - s)
                # (done_j): at most p - s in flight. Both mark a trace (is_nil, `markers`).
                gate = f"done_{j}" if self.kind == "1f1b" and j >= 0 else "nil"
                self.markers[("F", i)] = len(lines)
                lines.append(f"define(go_{i}, is_nil({gate}))")
                lines.append(f"define(sd_{i}, if(go_{i}, seed_{i}, seed_{i}))")
                if not last:
                    fa = ", ".join([head] * bool(head) + [f"{z}_{i}" for z in xs] + a_i +
                                   [f"sd_{i}"])
                    if keep:  # the pullback (pb) and statistics (ax) wait for the backward
                        lines.append(f"define(v_{i}, vjp(stage_vjp, argnums=[{nums}], "
                                     f"has_aux=true)({fa}))")
                        lines += [f"define(pb_{i}, v_{i}[1])", f"define(ax_{i}, v_{i}[2])"]
                        lines.append(f"define(o_{i}, list(v_{i}[0]))" if len(outs) == 1
                                     else f"define(o_{i}, v_{i}[0])")
                    else:
                        lines.append(f"define(o_{i}, stage_fwd({fa}))")
                    for k in range(len(outs)):
                        # copy=false: the message holds the output, not a copy; the cotangent
                        # is checked against its template (ol): no output outlives its send
                        lines.append(f"define(sf_{i}_{k}, pipe_send(o_{i}[{k}], {s + 1}, "
                                     f"{_tag(i, k)}, {pg}, copy=false))")
                        lines.append(f"define(ol_{i}_{k}, grad_template(o_{i}[{k}]))")
                        sent.append(f"sf_{i}_{k}")
                    lines += [f"define(o_{i}, nil)"] + [f"define(v_{i}, nil)"] * keep
                continue
            # the backward of micro-batch i
            if last:
                call = ", ".join([head] * bool(head) + [data] + a_i + [f"sd_{i}", f"w_{i}"])
                fn = "stage_loss"
            else:
                for k in range(len(outs)):
                    # like: another shape or dtype is an error naming both stages
                    lines.append(f"define(c_{i}_{k}, pipe_recv({s + 1}, {_tag(i, k)}, {pg}, "
                                 f"like=ol_{i}_{k}))")
                call = ", ".join([head] * bool(head) + [data] + a_i + [f"sd_{i}", f"w_{i}"] +
                                 [f"c_{i}_{k}" for k in range(len(outs))])
                fn = "stage_obj"
            if keep:  # the backward only, from the forward's pullback
                ct = f"c_{i}_0" if len(outs) == 1 else \
                    f"list({', '.join(f'c_{i}_{k}' for k in range(len(outs)))})"
                lines.append(f"define(r_{i}, if(w_{i} > 0.0, list(nil, pb_{i}({ct}), "
                             f"ax_{i}), nil))")
            else:
                lines.append(f"define(r_{i}, if(w_{i} > 0.0, value_and_grad({fn}, "
                             f"argnums=[{nums}], has_aux=true)({call}), nil))")
            self.markers[("B", i)] = len(lines)
            lines.append(f"define(done_{i}, is_nil(r_{i}))")
            for k, v in enumerate(P):
                lines.append(f"define(g_{i}_{k}, if(w_{i} > 0.0, r_{i}[1][{k}], "
                             f"zeros_like({v})))")
            if s > 0:
                for k in range(n_feed):
                    ct = f"if(w_{i} > 0.0, r_{i}[1][{len(P) + k}], zeros_like(a_{i}_{k}))"
                    lines.append(f"define(sb_{i}_{k}, pipe_send({ct}, {s - 1}, {_tag(i, k)}, "
                                 f"{pg}, copy=false))")
                    sent.append(f"sb_{i}_{k}")
            if width:
                parts, mstmts = [], []
                if last:
                    parts.append(f"astype(r_{i}[0], \"float64\")")
                    cys = [f"{y}_{i}" for y in ys]
                    chs = [f"r_{i}[2][0][{k}]" for k in range(len(model._outputs))]
                    mstmts, mets = model._metric_exprs(cys, chs,
                                                       model._weight_names(weighted, f"_{i}"))
                    parts += [f"ravel({e})" for e in mets]
                for q in range(len(stats)):
                    parts += [f"astype(r_{i}[2][{q + 1}][{z}], \"float64\") * w_{i}"
                              for z in (0, 1)]
                flat = ", ".join(f"ravel({e})" for e in parts)
                body = mstmts + [f"concatenate(list({flat}))"]
                lines.append(f"define(g_{i}_aux, if(w_{i} > 0.0, block({', '.join(body)}), "
                             "zeros(aux_width, dtype=\"float64\")))")
            for stmts_ in sums_at.get(i, []):
                lines += stmts_
            if scatter:
                lines += self._scatter_lines(made_at, i, scattered)
            # what micro-batch i held is freed (its residuals: the pullback)
            held = [f"r_{i}"] + [f"a_{i}_{k}" for k in range(n_feed)]
            if not last:
                held += [f"{z}_{i}_{k}" for z in ("c", "ol") for k in range(len(outs))]
                held += [f"pb_{i}", f"ax_{i}"] if keep else []
            lines += [f"define({z}, nil)" for z in held]
        # Two programs: the pass holds every point-to-point message of the
        # pipeline group, the update the data group's collectives but ZeRO
        # 2/3's reduce-scatters (normal mode), which the pass launches.
        # Tensor-parallel layers put collectives of the tensor group into
        # the pass too: its members run this same stage program, and the
        # engine posts point-to-point messages and tests them on every pass
        # of its progress loop whatever collectives are pending, so they
        # meet while messages are in flight (tests/distributed/mesh3d_fit.py).
        if scatter:  # the slices of the buckets' sums instead of the sums
            partials = list(self.zero.grads) + [z for z in partials if z.endswith("_aux")]
        lines.append(f"list(list({', '.join(partials)}), list({', '.join(sent)}))")
        chunk_args = ", ".join(f"{a}_{j}" for a in streams + ["w", "seed"] for j in range(m))
        body = ",\n  ".join(lines)
        head_args = ", ".join((self.zero.shards if gathered else P) + S)
        pass_text = "".join(defs) + (f"define(stage_pass, {head_args}{', ' if head_args else ''}"
                                     f"{chunk_args}, block(\n  {body}))\nstage_pass\n")
        first = "".join(defs).count("\n") + 2  # the line of lines[0]
        self.markers = {key: first + n for key, n in self.markers.items()}
        # the update: the data group's sums, the optimizer, the statistics
        lines = []
        grads = [f"grad_{k}" for k in range(len(P))]
        dg = f"group={int(self.dg)}"
        zero = self.zero
        if zero is not None:
            lines.append(f"define(dgroup, {int(self.dg)})")
        for k in keys:
            target = "total_aux" if k == "aux" else grads[int(k)]
            mine = [f"p_{st}_{k}" for st in starts]
            if scatter and k != "aux":
                continue  # reduce-scattered in the pass
            if self.d == 1:
                lines.append(f"define({target}, {_fixed_sum(mine)})")
            elif self.deterministic:
                rows = ", ".join(f"ravel({z})" for z in mine)
                lines.append(f"define(parts_{k}, all_gather(stack(list({rows})), {dg}))")
                total = _fixed_sum([f"parts_{k}[{q}]" for q in range(self.d * len(starts))])
                shape = "[-1]" if k == "aux" else \
                    f"[{', '.join(str(int(z)) for z in weights[P[int(k)]].shape)}]"
                lines.append(f"define({target}, reshape({total}, {shape}))")
            else:
                lines.append(f"define({target}, all_reduce({mine[0]}, \"sum\", {dg}))")
        # the loss and the metrics' sums reach every stage (the last
        # stage's; the others add zeros, or their regularizers' values
        # before the update)
        n_all = sum(math.prod(z) for z in model._metric_sizes())
        if last:
            mine = f"total_aux[0:{1 + n_all}]"
        elif regs:
            if gathered:  # ZeRO 3: the regularizers read the whole weights
                lines += zero.gather_lines()
            mine = (f"concatenate(list(reshape(astype({' + '.join(regs)}, \"float64\"), [1]), "
                    f"zeros({n_all}, dtype=\"float64\")))")
        else:
            mine = f"zeros({1 + n_all}, dtype=\"float64\")"
        lines.append(f"define(lm, {mine})")
        lines += constraints.state_lines(S, model._owner, gathered and "ZeRO 3 in a pipeline")
        new_p = P
        if zero is None:
            more, norms, norm = self._clip_norm_lines(model, opt, P, grads, s, p)
            lines += more
            upd = opt.update_code(P, grads, state_prefix="opt_", lr_expr="lr",
                                  iteration_expr="iteration", global_norm=norm,
                                  sum_squares=None if norms is None else
                                  norms.lamb_sumsq(P, model._fixed_sum))
            self.O = [z.name for z in upd.state]
            lines += upd.statements
        else:
            # ZeRO on the stage's data group: this member's slices of the
            # summed gradients and (1, 2) of the parameters, their update,
            # and (1, 2) the whole parameters all-gathered; ZeRO 3 returns
            # the updated slices (zero.py). ZeRO 2 and 3 in deterministic
            # mode: the fixed sum above is whole, then sliced, as stage 1 does.
            if not scatter:
                lines += zero.slice_lines(dict(zip(P, grads)), zero.grads)
            # split weights: each parameter's sum of squares of its whole
            # summed gradient (the buckets gathered from the slices under ZeRO
            # 2/3 in normal mode), as without ZeRO; without split weights the
            # norm of every stage's gradients from the whole sums where the
            # stage has them (ZeRO 1; deterministic mode, whose fixed sums are
            # whole), else from this member's slices
            more, _, norm = self._clip_norm_lines(
                model, opt, P, grads, s, p,
                whole=zero.whole_grad_lines if scatter else None,
                plain=self._slice_norm_lines if scatter else None)
            lines += more
            lines += model._zero_update_lines(zero, P, grads, zero_grads=True, norm=norm)
            self.O = [z.name for z in zero.state]
        lines += constraints.step_lines(P, model._owner, zero is not None and "ZeRO in a pipeline")
        new_p = zero.shards if gathered else P  # ZeRO 3: the updated slices
        lines += model._bn_update_lines(stats, 1 + n_sums if last else 0, dtype)
        lines.append(f"list(lm, list(), list({', '.join(new_p)}), "
                     f"list({', '.join(self.O)}), list({', '.join(S)}))")
        body = ",\n  ".join(lines)
        upd_args = ", ".join(new_p + S + self.O + partials)
        tail = ", drank" if zero is not None else ""
        update_text = (f"{self.norm_gather}define(stage_update, {upd_args}, iteration, "
                       f"lr{tail}, block(\n  {body}))\n"
                       "stage_update\n")
        model.train_code = pass_text + update_text
        return pass_text, update_text

    def _clip_norm_lines(self, model, opt, P, grads, s, p, whole=None, plain=None):
        """(statements, SplitNorms or None, the norm's name or None) of the
        update's global norm for clipnorm ("pnorm"). With weights split over
        a tensor group the norms of the whole weights (clipping.py), from
        `grads` or, when given, whole() = (statements, {parameter: whole
        summed gradient}); without, plain() or the stages' norm of `grads`."""
        norms = SplitNorms.of(model, model._params(True), opt)
        if opt.clipnorm is None:
            return [], norms, None
        if norms is None:
            return (plain() if plain is not None else self._norm_lines(grads)), None, "pnorm"
        lines, exprs = [], grads
        if whole is not None:
            more, sums = whole()
            lines += more
            exprs = [sums[v] for v in P]
        more, self.norm_gather = norms.stage_norm_lines(
            model._params(True), P, exprs, self.owner, s, p, int(self.pg), model._fixed_sum)
        return lines + more, norms, "pnorm"

    def _scatter_lines(self, made_at, i, scattered) -> list:
        """ZeRO 2/3, normal mode: the reduce-scatter of each bucket whose
        gradients' sums are all made by micro-batch i's backward (in the
        buckets' order, the order the backward finishes them), the whole
        sums freed once it is launched."""
        zero = self.zero
        index = {v: k for k, v in enumerate(self.P)}
        lines = []
        for j, bucket in enumerate(zero.buckets):
            names = [f"p_0_{index[v]}" for v in bucket]
            if j in scattered or not all(made_at[z] <= i for z in names):
                continue
            scattered.append(j)
            lines.append(f"define({zero.grads[j]}, reduce_scatter({zero.flat(j, names)}, "
                         "\"sum\", group=dgroup))")
            lines += [f"define({z}, nil)" for z in names]
        return lines

    def _slice_norm_lines(self) -> list:
        """ZeRO 2/3 in normal mode: `pnorm`, the global norm of every
        stage's gradients from this member's slices of its stage's summed
        buckets: the sum of their squares summed over the data group, then
        over the pipeline group (an all-gather of one number per stage on
        the update's first line, as _norm_lines)."""
        zero = self.zero
        mine = " + ".join(f"sum(square({g}))" for g in zero.grads)
        self.norm_gather = f"define(pn_gather, x, all_gather(x, group={int(self.pg)}))\n"
        return [f"define(pn_mine, all_reduce(reshape({mine}, [1]), \"sum\", group=dgroup))",
                "define(pn_all, pn_gather(pn_mine))",
                "define(pnorm, sqrt(sum(pn_all)))"]

    def _norm_lines(self, grads) -> list:
        """Statements defining `pnorm`, the global norm of every stage's
        summed gradients (`grads`: this stage's, whole), for clipnorm.

        The norm is the one the one-process run takes (programs.
        _block_norm_update): the whole model's gradient buckets, each cut
        into `chunks` fixed blocks, the sums of squares of the blocks added
        in one fixed order. A block whose elements all lie in this stage's
        weights is summed here; a block straddling a cut is summed by every
        stage from its elements. One all-gather over the pipeline group
        carries each stage's block sums and its elements of the straddling
        blocks; every stage then adds the same terms in the same order, so
        in deterministic mode the norm (and the update) is bitwise the
        one-process run's."""
        model = self.model
        P_all = model._params(True)
        weights = model._weight_stand_ins()
        plan = ZeroPlan(0, 1, self.chunks, model._bucket_plan(P_all),
                        {v: weights[v].shape for v in P_all}, model.dtype)
        grad_of = dict(zip(self.P, grads))
        dtype = model.dtype
        # every block as its segments: (variable, lo, hi) or (None, 0, zeros)
        blocks = []
        for j, bucket in enumerate(plan.buckets):
            segs, off = [], 0
            for v in bucket:
                segs.append((v, off, off + plan.sizes[v]))
                off += plan.sizes[v]
            size = plan.N[j] // plan.unit
            for i in range(plan.unit):
                lo, hi = i * size, (i + 1) * size
                parts = [(v, max(a, lo) - a, min(b, hi) - a) for v, a, b in segs
                         if a < hi and b > lo]
                if hi > plan.n[j]:
                    parts.append((None, 0, hi - max(lo, plan.n[j])))
                blocks.append(parts)

        def owner(parts):
            stages = {self.owner[v] for v, _, _ in parts if v is not None}
            return stages.pop() if len(stages) == 1 else (None if not stages else -1)

        # what each stage sends: its block sums, then its straddling elements
        layout = [[] for _ in range(self.p)]  # per stage: (block index, kind, length)
        for b, parts in enumerate(blocks):
            s = owner(parts)
            if s is None:
                continue
            if s >= 0:
                layout[s].append((b, "sum", 1))
                continue
            for v, lo, hi in parts:
                if v is not None:
                    layout[self.owner[v]].append((b, (v, lo, hi), hi - lo))
        width = max(1, max(sum(n for _, _, n in items) for items in layout))

        def piece(v, lo, hi):
            return f"ravel({grad_of[v]})[{lo}:{hi}]"

        def zeros(n):
            return f"zeros({n}, dtype=\"{dtype}\")"

        mine = []
        for b, kind, n in layout[self.stage]:
            if kind == "sum":
                inner = [piece(v, lo, hi) if v is not None else zeros(hi)
                         for v, lo, hi in blocks[b]]
                flat = inner[0] if len(inner) == 1 else f"concatenate(list({', '.join(inner)}))"
                mine.append(f"reshape(sum(square({flat})), [1])")
            else:
                mine.append(piece(*kind))
        used = sum(n for _, _, n in layout[self.stage])
        if used < width:
            mine.append(zeros(width - used))
        flat = mine[0] if len(mine) == 1 else f"concatenate(list({', '.join(mine)}))"
        lines = [f"define(pn_mine, {flat})", "define(pn_all, pn_gather(pn_mine))"]
        self.norm_gather = f"define(pn_gather, x, all_gather(x, group={int(self.pg)}))\n"
        where = {}  # (block, segment or "sum"): offset in pn_all
        for s, items in enumerate(layout):
            off = s * width
            for b, kind, n in items:
                where[(b, kind)] = off
                off += n
        terms = []
        for b, parts in enumerate(blocks):
            s = owner(parts)
            if s is None:
                terms.append(f"sum(square({zeros(parts[0][2])}))")
            elif s >= 0:
                terms.append(f"pn_all[{where[(b, 'sum')]}]")
            else:
                inner = []
                for v, lo, hi in parts:
                    if v is None:
                        inner.append(zeros(hi))
                    else:
                        at = where[(b, (v, lo, hi))]
                        inner.append(f"pn_all[{at}:{at + hi - lo}]")
                terms.append(f"sum(square(concatenate(list({', '.join(inner)}))))")
        lines.append(f"define(pnorm, sqrt({_fixed_sum(terms)}))")
        return lines

    # what fit does around the program
    def args(self, arrays, n, it, lr, seed) -> list:
        """The step's arguments: the stage's weights and optimizer state,
        this data rank's micro-batches of a global batch of n rows (the
        chunks of deterministic mode), their shares and seeds, it, lr. The
        other stages' weights and state are dropped first (`drop`)."""
        model = self.model
        if self.is_whole:
            self.drop()
        values = self._values
        params = list(self.params) if self.params is not None else [values(v) for v in self.P]
        state = params + [values(v) for v in self.S] + [self.opt[z] for z in self.O]
        return state + model._chunk_args(arrays, n, self.chunks, self.d, self.data_rank, seed,
                                         it) + [it, lr]

    def _n_params(self) -> int:
        """The number of parameter arguments of the step: the stage's
        trainable weights, or under ZeRO 3 their buckets' slices."""
        return len(self.zero.shards) if self._sliced() else len(self.P)

    def _sliced(self) -> bool:
        return self.zero is not None and self.zero.stage == 3

    def _values(self, v):
        layer, p = self.model._owner[v]
        return layer._values[p.name]

    def take(self, result):
        """Stores the stage's new weights and optimizer state; (loss, sums)."""
        loss, mets, new_p, new_o, new_s = result
        model = self.model
        if self._sliced():
            self.params = list(new_p)
        else:
            for v, a in zip(self.P, new_p):
                model._set(v, a)
        self.opt = dict(zip(self.O, new_o))
        for v, a in zip(self.S, new_s):
            model._set(v, a)
        return loss, mets

    # the state between steps: this stage's only
    def begin(self):
        """fit's start (after program): from the whole weights and optimizer
        state, this locality keeps its stage's (under ZeRO, its slices of
        the stage's optimizer state over the data group, and under ZeRO 3
        of its weights too); the other stages' are dropped until `whole`
        gathers them on demand."""
        model = self.model
        whole = model._opt_state
        self.shapes = {}  # every weight and state array: (shape, dtype), for whole
        for v, (layer, p) in model._owner.items():
            self.shapes[("w", v)] = value_spec(layer, p.name)  # not drawn if pending
        for z in self._state_vars():
            a = np.asarray(whole[z.name])
            self.shapes[("o", z.name)] = (a.shape, a.dtype)
        if self.zero is None:
            # the stage's own state, writable (a fresh state is read-only
            # stand-ins of one value each: fit makes no whole state here)
            self.opt = {z: whole[z] if np.ndim(whole[z]) == 0 or whole[z].flags.writeable
                        else np.array(whole[z], copy=True) for z in self.O}
        else:
            self.opt = self.zero.state_shards(whole, self.data_rank)
        if self._sliced():  # ZeRO 3: the stage's parameters as slices too
            self.params = self.zero.param_shards({v: self._values(v) for v in self.P},
                                                 self.data_rank)
        self.scalars = {z.name: whole[z.name] for z in getattr(model, "_opt_statevars", None)
                        or [] if z.scalar}
        model.__dict__["_stage_live"] = self
        self.is_whole = True
        self.drop()

    def _state_vars(self):
        """The whole model's optimizer state variables of weights (not scalars)."""
        return [z for z in getattr(self.model, "_opt_statevars", None) or [] if not z.scalar]

    def drop(self):
        """Only this stage's weights and optimizer state stay (the others'
        references are dropped: None in the layers, no whole state dict)."""
        model = self.model
        mine = set(self.P) if self._sliced() else set()  # ZeRO 3: held as slices
        for v, (layer, p) in model._owner.items():
            if self.owner[v] != self.stage or v in mine:
                layer._values[p.name] = None
        model.__dict__["_opt_state_whole"] = None
        self.is_whole = False

    def whole(self):
        """Gives every locality of the pipeline group the whole model: each
        stage's weights and optimizer state (under ZeRO first gathered over
        the stage's data group), broadcast from the stage holding them (one
        broadcast per stage and dtype). A collective: every locality calls
        it (the model's weights and _opt_state call it on demand)."""
        if self.is_whole:
            return
        model = self.model
        own = dict(self.opt) if self.zero is None else \
            self.zero.whole_state(self.opt, self.dg)
        if self._sliced():  # ZeRO 3: the stage's parameters from the slices
            for v, a in self.zero.whole_params(self.params, self.dg).items():
                model._set(v, a)
        state = dict(self.scalars)
        for z, a in own.items():
            if np.ndim(a) == 0:
                state[z] = a
        for s in range(self.p):
            names = [("w", v) for v in model._owner if self.owner[v] == s]
            names += [("o", z.name) for z in self._state_vars() if self.owner.get(z.param) == s]
            by_dtype: dict = {}
            for key in names:
                shape, dtype = self.shapes[key]
                if s == self.stage:
                    a = np.asarray(self._values(key[1]) if key[0] == "w" else own[key[1]])
                else:
                    a = None
                by_dtype.setdefault(np.dtype(dtype).str, []).append((key, shape, a))
            for code in sorted(by_dtype):
                items = by_dtype[code]
                total = sum(math.prod(shape) for _, shape, _ in items)
                if s == self.stage:
                    flat = np.concatenate([a.ravel() for _, _, a in items])
                else:
                    flat = np.zeros(total, dtype=np.dtype(code))
                got = np.asarray(_dist.broadcast(flat, root=s, group=self.pg))
                off = 0
                for (kind, name), shape, a in items:
                    size = math.prod(shape)
                    if s == self.stage:
                        part = a  # its own: kept as it is
                    else:
                        part = np.array(got[off:off + size].reshape(shape), copy=True)
                    off += size
                    if kind == "w":
                        model._set(name, part)
                    else:
                        state[name] = part
        model.__dict__["_opt_state_whole"] = state
        self.is_whole = True

    def end(self):
        """fit's end: the whole model on every locality, and the model no
        longer tied to this stage (a collective)."""
        self.whole()
        if self.model.__dict__.get("_stage_live") is self:
            self.model.__dict__["_stage_live"] = None

    def state_bytes(self) -> dict:
        """model_state_bytes while this locality holds only its stage's
        state: its parameters, their gradients (under ZeRO 2 this member's
        slices) and its optimizer state (under ZeRO its slices)."""
        itemsize = np.dtype(self.model.dtype).itemsize
        if self._sliced():
            params = sum(np.asarray(a).nbytes for a in self.params)
        else:
            params = sum(np.asarray(self._values(v)).nbytes for v in self.P)
        if self.zero is not None and self.zero.stage >= 2:
            grads = sum(self.zero.k) * itemsize
        else:
            grads = sum(math.prod(self.shapes[("w", v)][0]) for v in self.P) * itemsize
        opt = sum(np.asarray(a).nbytes for a in self.opt.values() if np.ndim(a) > 0)
        return {"parameters": int(params), "gradients": int(grads), "optimizer": int(opt),
                "total": int(params + grads + opt)}


def setup(model, split, microbatches, kind, deterministic, data_parallel, rows=64,
          time_split=True, zero=0):
    """The StageStep of this locality when the job's mesh has a pipeline
    axis of more than one locality (or pipeline_split asks for one), else
    None. Every check raises the same error on every locality."""
    if kind not in SCHEDULES:
        raise ValueError(f"[fit] pipeline_schedule must be one of {list(SCHEDULES)}, got "
                         f"{kind!r}")
    n = _dist.size() if data_parallel is not False else 1
    # the mesh of the model's tensor-parallel layers, else the job's
    mesh = (model._layer_mesh() or _dist.mesh()) if n > 1 else None
    p = mesh.size("pipeline") if mesh is not None else 1
    if p == 1:
        # the same script runs without a pipeline: the names are checked,
        # the split is not made
        if split is not None:
            plan_stages(model, len(split) + 1 if isinstance(split, (list, tuple)) else 2,
                        split)
        return None
    d = mesh.size("data")
    m, source = _count_setting(microbatches, "TESSERA_MICROBATCHES", "microbatches")
    if deterministic is True or (deterministic not in (False, None)):
        if deterministic is True:
            chunks = m * d if m is not None else ProgramsMixin.DETERMINISTIC_CHUNKS
        else:
            if isinstance(deterministic, bool) or not isinstance(deterministic, int) or \
                    deterministic < 1:
                raise ValueError("[fit] deterministic must be True, False or a number of "
                                 f"chunks (a positive int), got {deterministic!r}")
            chunks = deterministic
            if m is not None and m * d != chunks:
                raise ValueError(f"[fit] deterministic={chunks} chunks and {m} micro-batches "
                                 f"({source}) on {d} data localities disagree: in "
                                 "deterministic mode each data locality's micro-batches are "
                                 f"its chunks (chunks = data x micro-batches = {m * d})")
        if chunks % d:
            raise ValueError(f"[fit] deterministic mode cuts each global batch into {chunks} "
                             f"chunks, which {d} data localities (axis 'data') cannot share "
                             f"evenly: pass deterministic=<chunks> with a multiple of {d}")
        m = chunks // d
        if source is None:
            source = f"deterministic: {chunks} chunks over {d} data localities"
    else:
        if m is None:
            m, source = 2 * p, "the default, twice the stages"
        chunks = m * d
    if m < p:
        raise ValueError(f"[fit] pipeline: {m} micro-batches ({source}) for {p} stages (axis "
                         f"'pipeline' of the mesh, TESSERA_MESH): a pipeline needs at least as "
                         f"many micro-batches as stages; pass microbatches={p} or more (tessera "
                         "run --microbatches)")
    costs = None
    if split is None and time_split:
        # measured per-layer times, the same on every locality (the
        # slowest's); the parameter counts if a layer cannot be timed alone
        try:
            mine = measure_layers(model, max(1, rows // max(chunks, 1)))
        except Exception:  # noqa: BLE001 - any layer that will not run alone
            mine = None
        names = [layer.name for layer in model._layers]
        vec = np.array([mine.get(n, 0.0) for n in names] if mine else [np.inf] * len(names))
        vec = np.asarray(_dist.all_reduce(vec, "max"))
        if np.isfinite(vec).all():
            costs = dict(zip(names, vec.tolist()))
    plan = plan_stages(model, p, split, costs)
    P, S = model._params(True), model._params(False)
    model._update_setup(P, S)  # the whole model's optimizer state variables
    step = StageStep(model, plan, mesh, m, kind, chunks, bool(deterministic))
    d = mesh.size("data")
    if zero and d > 1:
        weights = model._weight_stand_ins()
        step.zero = ZeroPlan(zero, d, chunks if step.deterministic else d,
                             model._bucket_plan(step.P), {v: weights[v].shape for v in step.P},
                             model.dtype)
    return step
