"""ZeRO stages 1, 2 and 3 on the data axis of a mesh (docs/parallelism.md, "ZeRO").

Each gradient bucket of the training step (programs._bucket_plan) is a flat
array: its parameters raveled and joined in bucket order, padded with zeros
to a multiple of `unit` (the data group's size d, or in deterministic mode
the number of chunks, a multiple of d). Member i of the data group owns
elements [i*N/d, (i+1)*N/d) of every bucket (N: the padded length), and the
optimizer updates only that slice, with state of that size:

- stage 1: gradients are summed whole (all-reduce, from inside the backward
  pass as without ZeRO); each member takes its slice, updates the slice of
  the parameters, and the updated slices are all-gathered into parameters;
- stage 2: each bucket is reduce-scattered instead, from inside the
  backward pass as soon as the bucket's gradient is complete (each whole
  weight is marked as a member of its bucket, grad_bucket_shard, whose
  gradient rule is the reduce-scatter of the joined bucket to this member's
  slice; each layer's output is fenced, bucket_fence, so that at most
  Model.ZERO2_IN_FLIGHT buckets are in flight while the backward pass goes
  on; with Model.ZERO2_BUCKET_MARKS = False the loss function reads each
  bucket as one flat array made from the whole weights, rematerialised,
  whose gradient rule, grad_scatter's, is the reduce-scatter), so a whole
  gradient exists only for a bucket or two at a time; in deterministic mode an all-to-all of the
  partial sums, finished by the fixed sum, so only the slice of the summed
  gradient is made;
- stage 3: the parameters are held only as slices between steps; the
  forward pass all-gathers each bucket just before its first use (with the
  next buckets: Model.ZERO3_PREFETCH of them, 2 by default, bounded by
  Model.ZERO3_PREFETCH_BYTES), frees it after its last forward use,
  and the backward pass gathers it again where it first needs it (remat);
  the gradient of the gather, a reduce-scatter, runs as soon as the bucket's
  gradient is complete; the step returns the updated slices. Deterministic
  mode gathers each bucket around its uses too, in every chunk's forward
  and backward pass; the differentiated arguments are then stand-ins of the
  whole buckets' shape (one element each), which grad_local gives the
  chunk's whole gradient of the bucket, unsummed, for the fixed sum.

The update of an elementwise optimizer on a slice is the slice of the
update, so in deterministic mode the result is bitwise that of one
locality. Global-norm clipping sums squares of fixed blocks of each bucket
(the same blocks whatever d) in a fixed order. Lamb's trust ratios are
norms of whole weights and of their whole update directions: both are
all-gathered (two more all-gathers per bucket) and each norm is taken as
one locality takes it.

ZeroMixin gives Model the state kept between steps (shards), whole weights
and optimizer state on demand (a collective over the data group), and
model_state_bytes()."""

from __future__ import annotations

import math
import os

import numpy as np

from .. import distributed as _dist
from ..optim import Lamb, StateVar, _num

__all__ = ["ZeroPlan", "ZeroMixin", "zero_setting"]

_ENV = "TESSERA_ZERO"


def zero_setting(zero, where: str = "fit") -> int:
    """The ZeRO stage: the argument when given, else TESSERA_ZERO (set by
    `tessera run --zero`), else 0."""
    if zero is None:
        text = os.environ.get(_ENV)
        if text is None or text == "":
            return 0
        if text not in ("0", "1", "2", "3"):
            raise ValueError(f"[{where}] the ZeRO stage must be 0, 1, 2 or 3, got {text!r} "
                             f"({_ENV} in the environment, set by tessera run --zero)")
        return int(text)
    if isinstance(zero, bool) or not isinstance(zero, (int, np.integer)) or \
            int(zero) not in (0, 1, 2, 3):
        raise ValueError(f"[{where}] zero (the ZeRO stage) must be 0, 1, 2 or 3, got {zero!r} "
                         "(argument zero=)")
    return int(zero)


def _shape_text(shape) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


class ZeroPlan:
    """Which elements of which bucket each member owns, and the program text
    of the sharded parts of a training step (see the module doc)."""

    def __init__(self, stage: int, d: int, unit: int, buckets, shapes: dict, dtype: str):
        if unit % d:
            raise ValueError(f"[fit] ZeRO: {unit} blocks cannot be shared by {d} members")
        self.stage, self.d, self.unit, self.dtype = stage, d, unit, dtype
        self.buckets = [list(b) for b in buckets]
        self.shapes = {v: tuple(int(s) for s in shapes[v]) for b in self.buckets for v in b}
        self.sizes = {v: math.prod(s) for v, s in self.shapes.items()}
        self.n = [sum(self.sizes[v] for v in b) for b in self.buckets]
        self.N = [-(-n // unit) * unit for n in self.n]
        self.k = [big // d for big in self.N]  # elements of a slice
        self.shards = [f"zp_{j}" for j in range(len(self.buckets))]
        self.grads = [f"zg_{j}" for j in range(len(self.buckets))]
        # Stage 3 in deterministic mode: the loss function is differentiated
        # in stand-ins of the whole buckets' shape (zp_j there) and takes the
        # slices as twins, undifferentiated, which it gathers (gather_line)
        self.local_grads = False
        self.twins = [f"zt_{j}" for j in range(len(self.buckets))]
        self.state = []  # the optimizer's state variables of the slices (StateVar)

    @property
    def key(self) -> tuple:
        return (self.stage, self.d, self.unit, tuple(tuple(b) for b in self.buckets))

    # ----------------------------------------------------------- text

    def flat(self, j: int, names) -> str:
        """The padded flat bucket j of arrays `names` (one per member)."""
        parts = [f"ravel({a})" for a in names]
        pad = self.N[j] - self.n[j]
        if pad:
            parts.append(f"zeros({pad}, dtype=\"{self.dtype}\")")
        return parts[0] if len(parts) == 1 else f"concatenate(list({', '.join(parts)}))"

    def mine(self, expr: str, j: int) -> str:
        """This member's slice of a padded flat bucket."""
        if self.d == 1:
            return expr
        return f"reshape({expr}, [{self.d}, {self.k[j]}])[drank]"

    def define_param(self, v: str, j: int, off: int) -> str:
        """The statement defining parameter v from the gathered bucket j."""
        n = self.sizes[v]
        return f"define({v}, reshape(zf_{j}[{off}:{off + n}], {_shape_text(self.shapes[v])}))"

    def split_points(self, j: int) -> list:
        """The ends of bucket j's parts: its parameters, then the padding when
        there is any (the last end is the padded length)."""
        points, off = [], 0
        for v in self.buckets[j][:-1]:
            off += self.sizes[v]
            points.append(off)
        if self.N[j] > self.n[j]:
            points.append(self.n[j])
        return points + [self.N[j]]

    def scatter_line(self, j: int, token=None) -> str:
        """Stage 2, inside the loss function: bucket j whole (zf_j) made from
        the whole weights zw_<v> the member holds, flattened, with
        grad_scatter, whose gradient is the reduce-scatter to this member's
        slice; rematerialised, and made once `token` is ready."""
        def held(a):
            return a if token is None else f"after({a}, {token})"

        names = [f"a{i}" for i in range(len(self.buckets[j]))]
        args = [held(self.shards[j])] + [held(self.whole_name(v)) for v in self.buckets[j]]
        return (f"define(zf_{j}, remat(lambda(s, {', '.join(names)}, grad_scatter(s, "
                f"{self.flat(j, names)}, group=dgroup)))({', '.join(args)}))")

    def gather_line(self, j: int, token=None) -> str:
        """Stage 3, inside the loss function: bucket j all-gathered from the
        slices and cut into its parameters' flat parts (zf_j, a list of views
        of the gathered bucket, then the padding), rematerialised: not kept
        for the backward pass, which gathers it again where it first needs it
        (docs/nn.md, "remat"), and made once `token` (an expression) is
        ready. The cut (bucket_parts) gives views; its gradient joins the
        parts' gradients in one copy, and that of all_gather is the
        reduce-scatter."""
        if self.stage == 2:
            return self.scatter_line(j, token)
        held = self.shards[j] if token is None else f"after({self.shards[j]}, {token})"
        points = ", ".join(str(p) for p in self.split_points(j))
        if self.local_grads:
            # deterministic mode: the differentiated argument is a stand-in
            # of the whole bucket's shape (one element), the gather reads the
            # slice (not differentiated), and grad_local gives the stand-in the
            # chunk's whole gradient of the bucket, which the step adds in its
            # fixed order
            twin = self.twins[j] if token is None else f"after({self.twins[j]}, {token})"
            return (f"define(zf_{j}, remat(lambda(s, t, bucket_parts(grad_local(s, "
                    f"all_gather(t, group=dgroup)), [{points}])))({self.shards[j]}, {twin}))")
        return (f"define(zf_{j}, remat(lambda(s, bucket_parts(all_gather(s, group=dgroup), "
                f"[{points}])))({held}))")

    def define_part(self, v: str, j: int) -> str:
        """Stage 3, inside the loss function: parameter v from its part of the
        cut bucket j (gather_line): a view, no copy."""
        m = self.buckets[j].index(v)
        return f"define({v}, reshape(zf_{j}[{m}], {_shape_text(self.shapes[v])}))"

    @staticmethod
    def whole_name(v: str) -> str:
        """Stage 2: the loss function's name of the whole parameter v."""
        return f"zw_{v}"

    def gather_lines(self) -> list:
        """Statements defining every parameter (whole) from the slices."""
        lines = []
        for j, bucket in enumerate(self.buckets):
            lines.append(f"define(zf_{j}, all_gather({self.shards[j]}, group=dgroup))")
            off = 0
            for v in bucket:
                lines.append(self.define_param(v, j, off))
                off += self.sizes[v]
        return lines

    def _slice_of_member(self, j: int, r: int, piece) -> str:
        """Member r's slice of bucket j: piece(v, a, b) gives elements [a, b)
        of parameter v's part (a view where it can), then the padding."""
        lo, hi = r * self.k[j], (r + 1) * self.k[j]
        parts, off = [], 0
        for v in self.buckets[j]:
            n = self.sizes[v]
            a, b = max(lo, off), min(hi, off + n)
            if a < b:
                parts.append(piece(v, a - off, b - off))
            off += n
        pad = hi - max(lo, self.n[j])
        if pad > 0:
            parts.append(f"zeros({pad}, dtype=\"{self.dtype}\")")
        return parts[0] if len(parts) == 1 else f"concatenate(list({', '.join(parts)}))"

    def _by_member(self, j: int, piece) -> str:
        """This member's slice of bucket j (see _slice_of_member): one
        branch per member, the same text on every member."""
        expr = self._slice_of_member(j, self.d - 1, piece)
        for r in range(self.d - 2, -1, -1):
            expr = f"if(drank == {r}, {self._slice_of_member(j, r, piece)}, {expr})"
        return expr

    def slice_lines(self, names: dict, targets) -> list:
        """Statements defining `targets[j]` as this member's slice of bucket j
        of the arrays `names` (parameter name -> array name), cut from the
        parts of the arrays it covers: no whole copy."""
        def piece(v, a, b):
            whole = a == 0 and b == self.sizes[v]
            return f"ravel({names[v]})" if whole else f"ravel({names[v]})[{a}:{b}]"

        return [f"define({t}, {self._by_member(j, piece)})" for j, t in enumerate(targets)]

    def _lamb_lines(self, opt, lr: str, iteration: str, grads, split=None,
                    fixed_sum=None) -> list:
        """Lamb on the slices, with the arithmetic of Optimizer Lamb's own
        update (so deterministic mode gives its bits): the direction r of
        each slice, then the trust ratio of each weight from the norms of the
        whole weight and of its whole r (both all-gathered over the data
        group, each norm taken as one locality takes it), spread over the
        slice's elements. `split` (clipping.SplitNorms): the sums of squares
        of weights split over a tensor group are summed over the group."""

        lr, it = f"({lr})", f"({iteration})"
        lines = [f"define(opt_lamb_c1, 1.0 - {_num(opt.beta_1)} ** ({it} + 1))",
                 f"define(opt_lamb_c2, 1.0 - {_num(opt.beta_2)} ** ({it} + 1))"]
        self.state = []
        for j, (p, g) in enumerate(zip(self.shards, grads)):
            m, v = f"opt_{p}_m", f"opt_{p}_v"
            self.state += [StateVar(m, p), StateVar(v, p)]
            if opt.weight_decay:
                lines.append(f"define({p}, {p} - {p} * {_num(opt.weight_decay)} * {lr})")
            lines += [
                f"define({m}, {m} + (({g}) - {m}) * {_num(1 - opt.beta_1)})",
                f"define({v}, {v} + (({g}) * ({g}) - {v}) * {_num(1 - opt.beta_2)})",
                f"define(zlr_{j}, ({m} / opt_lamb_c1) / (sqrt({v} / opt_lamb_c2) + "
                f"{_num(opt.epsilon)}))",
                f"define(zlw_{j}, all_gather({p}, group=dgroup))",
                f"define(zlrf_{j}, all_gather(zlr_{j}, group=dgroup))"]
            off = 0
            for w in self.buckets[j]:
                n, shape = self.sizes[w], _shape_text(self.shapes[w])
                wsq = f"sum(square(reshape(zlw_{j}[{off}:{off + n}], {shape})))"
                rsq = f"sum(square(reshape(zlrf_{j}[{off}:{off + n}], {shape})))"
                if split is not None and w in split.split:
                    lines += split.across(wsq, fixed_sum, f"zwsq_{w}")
                    lines += split.across(rsq, fixed_sum, f"zrsq_{w}")
                    wsq, rsq = f"zwsq_{w}", f"zrsq_{w}"
                lines += [
                    f"define(zwn_{w}, sqrt({wsq}))",
                    f"define(zrn_{w}, sqrt({rsq}))",
                    f"define(ztr_{w}, where(zwn_{w} > 0.0, where(zrn_{w} > 0.0, zwn_{w} / "
                    f"zrn_{w}, 1.0), 1.0))"]
                off += n
            ratio = self._by_member(j, lambda w, a, b: f"broadcast_to(ztr_{w}, [{b - a}])")
            lines += [f"define(zratio_{j}, {ratio})",
                      f"define({p}, {p} - zratio_{j} * {lr} * zlr_{j})"]
        return lines

    def whole_grad_lines(self) -> tuple:
        """(statements, {parameter: expression}): every bucket's summed
        gradient all-gathered from the members' slices, one bucket at a time,
        and each parameter's whole gradient as a view of it."""
        lines, whole = [], {}
        for j, bucket in enumerate(self.buckets):
            lines.append(f"define(zgw_{j}, all_gather({self.grads[j]}, group=dgroup))")
            off = 0
            for v in bucket:
                n = self.sizes[v]
                whole[v] = f"reshape(zgw_{j}[{off}:{off + n}], {_shape_text(self.shapes[v])})"
                off += n
        return lines, whole

    def reduce_scatter_lines(self, grad_of: dict) -> list:
        """Stage 2/3, normal mode: each bucket summed over the data group,
        this member keeping its slice (the loss is weighted already)."""
        return [f"define({self.grads[j]}, reduce_scatter("
                f"{self.flat(j, [grad_of[v] for v in b])}, \"sum\", group=dgroup))"
                for j, b in enumerate(self.buckets)]

    def blocks_of_slice(self, j: int, name: str) -> list:
        """Sums of squares of the fixed blocks of bucket j held in this
        member's slice `name` (unit / d blocks of N/unit elements)."""
        size = self.N[j] // self.unit
        return [f"sum(square({name}[{i * size}:{(i + 1) * size}]))"
                for i in range(self.unit // self.d)]

    def update_lines(self, opt, lr: str, iteration: str, fixed_sum, norm=None,
                     split=None) -> list:
        """The optimizer's update of the slices (zp_j from zg_j), with
        global-norm clipping from partial sums of squares of fixed blocks:
        every member's block sums are all-gathered and added in one fixed
        order (the order of one locality's blocks). `norm`: an expression of
        the global norm made by the caller instead (a pipeline stage's
        update: the norm of every stage's gradients; weights split over a
        tensor group, clipping.py). `split`: Lamb's norms of such weights."""
        if getattr(opt, "gradient_accumulation_steps", None):
            raise ValueError(f"[fit] {type(opt).__name__}: gradient_accumulation_steps="
                             f"{opt.gradient_accumulation_steps} is not supported under ZeRO "
                             f"(zero={self.stage}); give fit a larger batch_size instead")
        if getattr(opt, "weight_clipnorm", None) is not None:
            raise ValueError(f"[fit] {type(opt).__name__}: clipping each weight's gradient to a "
                             f"norm (Keras's clipnorm={opt.weight_clipnorm}) is not supported "
                             f"under ZeRO (zero={self.stage}: each locality holds slices of the "
                             "gradients); use global_clipnorm or clipvalue")
        lines = []
        if opt.clipnorm is not None and norm is None:
            mine = [e for j in range(len(self.buckets)) for e in
                    self.blocks_of_slice(j, self.grads[j])]
            per = self.unit // self.d
            if self.d == 1:
                terms = mine
            else:
                lines.append(f"define(zblocks, all_gather(stack(list({', '.join(mine)})), "
                             "group=dgroup))")
                count = len(mine)
                terms = [f"zblocks[{m * count + j * per + i}]" for j in range(len(self.buckets))
                         for m in range(self.d) for i in range(per)]
            lines.append(f"define(znorm, sqrt({fixed_sum(terms)}))")
            norm = "znorm"

        if isinstance(opt, Lamb):
            grads = self.grads
            if norm is not None:  # as update_code clips
                lines.append(f"define(opt_clip_scale, where(({norm}) > {_num(opt.clipnorm)}, "
                             f"{_num(opt.clipnorm)} / ({norm}), 1.0))")
                lines += [f"define(opt_clipped{i}, ({g}) * opt_clip_scale)"
                          for i, g in enumerate(grads)]
                grads = [f"opt_clipped{i}" for i in range(len(grads))]
            return lines + self._lamb_lines(opt, lr, iteration, grads, split, fixed_sum)
        upd = opt.update_code(self.shards, self.grads, state_prefix="opt_", lr_expr=lr,
                              iteration_expr=iteration, global_norm=norm)
        self.state = list(upd.state)
        return lines + upd.statements

    # ------------------------------------------------- whole <-> slices

    def whole_state_name(self, s, v: str) -> str:
        """The name of the whole optimizer state of parameter v that the
        slice state `s` (of zp_j) holds part of."""
        return "opt_" + v + s.name[len("opt_" + s.param):]

    def _bucket_of(self, s) -> int:
        return self.shards.index(s.param)

    def slices_of(self, arrays: dict, rank: int, j: int) -> np.ndarray:
        """This member's slice of bucket j of whole arrays {param: array}."""
        parts = [np.ravel(np.asarray(arrays[v])) for v in self.buckets[j]]
        flat = np.concatenate(parts) if len(parts) > 1 else parts[0]
        lo, hi = rank * self.k[j], (rank + 1) * self.k[j]
        out = np.zeros(self.k[j], dtype=flat.dtype)
        top = min(hi, len(flat))
        if top > lo:
            out[:top - lo] = flat[lo:top]
        return out

    def param_shards(self, weights: dict, rank: int) -> list:
        return [self.slices_of(weights, rank, j) for j in range(len(self.buckets))]

    def state_shards(self, whole: dict, rank: int) -> dict:
        out = {}
        for s in self.state:
            if s.scalar:
                out[s.name] = whole[s.name]
                continue
            j = self._bucket_of(s)
            out[s.name] = self.slices_of({v: whole[self.whole_state_name(s, v)]
                                          for v in self.buckets[j]}, rank, j)
        return out

    def _split(self, j: int, flat: np.ndarray) -> dict:
        out, off = {}, 0
        for v in self.buckets[j]:
            n = self.sizes[v]
            out[v] = np.array(flat[off:off + n]).reshape(self.shapes[v])
            off += n
        return out

    def _gathered(self, j: int, shard, group) -> np.ndarray:
        if self.d == 1:
            return np.asarray(shard)
        return np.asarray(_dist.all_gather(np.asarray(shard), group=group))

    def whole_params(self, shards, group) -> dict:
        """The whole parameters from every member's slices (all_gather)."""
        out = {}
        for j, shard in enumerate(shards):
            out.update(self._split(j, self._gathered(j, shard, group)))
        return out

    def whole_state(self, shards: dict, group) -> dict:
        """The whole optimizer state (per parameter) from the slices."""
        out = {}
        for s in self.state:
            if s.scalar:
                out[s.name] = shards[s.name]
                continue
            j = self._bucket_of(s)
            for v, a in self._split(j, self._gathered(j, shards[s.name], group)).items():
                out[self.whole_state_name(s, v)] = a
        return out


class _Live:
    """A fit's sharded state between steps."""

    def __init__(self, plan, rank, group):
        self.plan, self.rank, self.group = plan, rank, group
        self.params = None  # stage 3: this member's slices of the buckets
        self.opt = None  # the optimizer state's slices {name: array}
        self.whole_opt = None  # gathered on demand, until the next step
        self.whole_params = True  # stage 3: whether the model holds whole weights now


class ZeroMixin:
    """The model's side of ZeRO (see the module doc)."""

    _zero = None

    @property
    def _opt_state(self):
        """The optimizer state, whole, per parameter (under ZeRO, gathered
        from the data group's slices on demand: a collective)."""
        live = self.__dict__.get("_stage_live")
        if live is not None and not live.is_whole:
            live.whole()  # pipeline stages: every stage's state (a collective)
        z = self._zero
        if z is None or z.opt is None:
            return self.__dict__.get("_opt_state_whole")
        if z.whole_opt is None:
            z.whole_opt = z.plan.whole_state(z.opt, z.group)
        return z.whole_opt

    @_opt_state.setter
    def _opt_state(self, value):
        if self._zero is not None:
            self._zero = None
        live = self.__dict__.get("_stage_live")
        if live is not None:  # a new state: no longer a pipeline stage's
            if not live.is_whole:
                live.whole()
            self.__dict__["_stage_live"] = None
        self.__dict__["_opt_state_whole"] = value

    def _zero_begin(self, plan, rank, group, P):
        """Slices of the whole state this member keeps during fit; under
        stage 3 the model drops its whole trainable weights."""
        whole_opt = self._opt_state
        weights = self.weights
        live = _Live(plan, rank, group)
        live.opt = plan.state_shards(whole_opt, rank)
        if plan.stage == 3:
            live.params = plan.param_shards(weights, rank)
        self.__dict__["_opt_state_whole"] = None
        self._zero = live
        if plan.stage == 3:
            self._zero_drop_params(P)

    def _zero_drop_params(self, P):
        z = self._zero
        if z is None or z.plan.stage != 3:
            return
        for v in P:
            layer, p = self._owner[v]
            layer._values[p.name] = None
        z.whole_params = False

    def _zero_whole_params(self):
        """Stage 3: the whole trainable weights put back into the model from
        the slices (a collective over the data group), until the next step."""
        z = self._zero
        if z is None or z.params is None or z.whole_params:
            return
        for v, a in z.plan.whole_params(z.params, z.group).items():
            layer, p = self._owner[v]
            layer._values[p.name] = a
        z.whole_params = True

    def _zero_step_state(self, P, S) -> list:
        """The arguments a sharded step starts with: the parameters (stage 3:
        the slices), the other weights, the optimizer state's slices. The
        model's own references to them are dropped (the step returns new
        ones)."""
        z = self._zero
        values = {v: self._owner[v][0]._values for v in P + S}
        params = z.params if z.plan.stage == 3 else [values[v][self._owner[v][1].name]
                                                     for v in P]
        state = list(params) + [values[v][self._owner[v][1].name] for v in S] + \
            [z.opt[s.name] for s in z.plan.state]
        z.whole_opt = None
        z.opt = None
        z.params = None
        if z.plan.stage == 3:
            for v in P:
                self._owner[v][0]._values[self._owner[v][1].name] = None
            z.whole_params = False
        return state

    def _zero_restore(self, state, P, S):
        """A failed step: its arguments back into the model."""
        z = self._zero
        n = len(P)
        if z.plan.stage == 3:
            z.params = list(state[:len(z.plan.shards)])
            n = len(z.plan.shards)
        else:
            for v, a in zip(P, state[:n]):
                self._set(v, a)
        for v, a in zip(S, state[n:n + len(S)]):
            self._set(v, a)
        z.opt = dict(zip([s.name for s in z.plan.state], state[n + len(S):]))

    def _zero_take(self, new_p, new_o, P):
        """The step's results: slices (stage 3) or whole parameters, and the
        optimizer state's slices."""
        z = self._zero
        if z.plan.stage == 3:
            z.params = list(new_p)
        else:
            for v, a in zip(P, new_p):
                self._set(v, a)
        z.opt = dict(zip([s.name for s in z.plan.state], new_o))

    def _zero_end(self):
        """After fit: the whole weights and optimizer state back in the model
        (a collective over the data group)."""
        z = self._zero
        if z is None:
            return
        self._zero_whole_params()
        whole = self._opt_state
        self._zero = None
        self.__dict__["_opt_state_whole"] = whole

    def model_state_bytes(self) -> dict:
        """This locality's bytes of model state as held now: the trainable
        parameters, the gradients a step holds once they are summed (whole
        under ZeRO 0 and 1, this member's slices under 2 and 3), and the
        optimizer state; "total" is their sum. Under ZeRO 3 during fit the
        parameters are this member's slices; under 1-3 the optimizer state
        is; under pipeline stages during fit, this locality's stage's (its
        slices under ZeRO). Gathers nothing (docs/parallelism.md, "ZeRO")."""
        self._check_built("model_state_bytes")
        live = self.__dict__.get("_stage_live")
        if live is not None and not live.is_whole:
            return live.state_bytes()  # pipeline stages: this stage's
        P = self._params(True)
        itemsize = np.dtype(self.dtype).itemsize
        z = self._zero
        if z is not None and z.params is not None and not z.whole_params:
            params = sum(np.asarray(a).nbytes for a in z.params)
        else:
            params = sum(np.asarray(self._owner[v][0]._values[self._owner[v][1].name]).nbytes
                         for v in P)
        if z is not None and z.plan.stage >= 2:
            grads = sum(z.plan.k) * itemsize
        else:
            grads = sum(math.prod(self._owner[v][0]._values[self._owner[v][1].name].shape)
                        if self._owner[v][0]._values[self._owner[v][1].name] is not None
                        else z.plan.sizes[v] for v in P) * itemsize
        if z is not None and z.opt is not None:
            held = z.opt
        else:
            held = self.__dict__.get("_opt_state_whole") or {}
        opt = sum(np.asarray(a).nbytes for a in held.values() if np.ndim(a) > 0)
        return {"parameters": int(params), "gradients": int(grads), "optimizer": int(opt),
                "total": int(params + grads + opt)}
