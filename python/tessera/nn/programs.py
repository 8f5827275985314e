"""The programs of a model, written from its graph in tessera's language:
the forward pass, the loss and metrics, the training step (data parallel,
with gradient buckets overlapping the backward pass, or deterministic, in
fixed chunks summed in a fixed order), evaluation and prediction."""

from __future__ import annotations

import math
import re

import numpy as np

from . import constraints
from .call_defaults import written_training
from .clipping import SplitNorms, fixed_sum
from .functional import carried_mask_exprs
from .program_constants import compile_program
from .batch_norm_fusion import relus_after_batch_norm
from .layers import Context
from .loss_calls import ranked_labels
from .metric_programs import MetricProgramsMixin
from .regularizer_programs import regularizer_text, write_activity_loss
from .sample_weights import per_entry_shape, weight_names, weight_streams, weights_of_output
from .step_overrides import StepOverridesMixin
from .symbolic import STEP_SEED, GraphWriter, KerasTensor
from .layer_state import (collecting_program_writes, kept_writes, program_write,
                          refuse_split_writes, remember_state_results, state_results)
from .variables import collecting_program_losses
from .zero import ZeroPlan

__all__ = ["ProgramsMixin"]


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name)  # a name as an identifier of the program's text


class ProgramsMixin(StepOverridesMixin, MetricProgramsMixin):
    """Program writing for Model (see the module doc)."""


    def _names(self):
        """The programs' names of the inputs and labels."""
        xs = ["x"] if len(self._inputs) == 1 else [f"x{i}" for i in range(len(self._inputs))]
        ys = ["y"] if len(self._outputs) == 1 else [f"y{i}" for i in range(len(self._outputs))]
        return xs, ys

    def _forward_code(self, training: str, seed: str, buckets=None, names=None, gather=None,
                      part=None, marks=None, loss_of=None):
        """The forward pass as statements and the outputs' names. With
        `buckets` (the bucket plan), every trainable parameter is first
        marked as a member of its gradient bucket (grad_bucket), just before
        the code that first uses it, so that the backward pass starts each
        bucket's all-reduce as soon as the code after it in the backward
        order has produced all its gradients. With `gather` (a zero.ZeroPlan,
        stage 2 or 3) the differentiated parameters are this member's slices
        zp_j: each bucket is made whole (stage 3: all-gathered; stage 2: from
        the whole weights, grad_scatter) just before the code that first uses
        one of its parameters, with the buckets used next (stage 3: up to
        ZERO3_PREFETCH of them, ZERO3_PREFETCH_BYTES together; stage 2: the
        next one), and rematerialised (remat): the backward pass makes it
        again just before its first backward use instead of keeping it, and
        the gradient rule (all_gather's or grad_scatter's, the
        reduce-scatter) sums each bucket's gradient over the data group as
        soon as the bucket is complete (zero.ZeroPlan.gather_line).

        `part` (a pipeline stage, pipeline.py) is a dict: "feeds" {tensor id:
        name} bound besides the inputs, "targets" the tensors to compute
        instead of the outputs, "stage_of" {tensor id: stage} (fusions across
        stages are not made), "counters" {tensor id: number} (each layer's
        random-stream number, recorded when missing, so that a stage draws
        what the whole model draws) and "used", a set receiving the
        variables of the parameters the code reads.

        `loss_of` (labels' names, sample weights' name or None): a
        compute_loss override is written too, its loss kept for _loss_text
        (step_overrides.py)."""
        xs = names or self._names()[0]
        part = part or {}
        # (a layer call written again, in a train_step's gradient, draws what it drew)
        counters = part.get("counters", {})
        used = part.get("used")
        where = {}
        for j, bucket in enumerate(gather.buckets if gather is not None else []):
            off = 0
            for v in bucket:
                where[v] = (j, off)
                off += gather.sizes[v]
        gathered: set = set()
        member = {}
        for j, bucket in enumerate(buckets or []):
            for m, v in enumerate(bucket):
                member[v] = (j, m, len(bucket))
        stats: list = []
        marked: dict = {} if marks is None else marks  # parameter -> its bucket-marked name
        counter = iter(range(1 << 30))
        fresh_count = iter(range(1 << 30))
        writer = None
        entering = [None]  # the input(s) of the layer being written
        # the training of the call being written (Keras's; None: an eager call given none)
        context = [None if self.__dict__.get("_context_none") else training == "true"]
        # ZeRO-2 with bucket marks: the buckets the layer being written reads
        # (its output is fenced on the bucket ZERO2_IN_FLIGHT before them)
        reads: list = []

        def param(layer, pname):
            key = (id(layer), pname)
            if key not in self._var_of:
                raise ValueError(f"[{self.kind}] layer {layer.name!r} is used by the model but "
                                 "was not found when it was built (is it called only in a "
                                 "branch of call()?)")
            v = self._var_of[key]
            if used is not None:
                used.add(v)
            if v in S_vars:
                later = program_write(key)  # assigned by a call written before: its value
                if later is not None:
                    return later
            if v in where and gather.stage == 2 and self.ZERO2_BUCKET_MARKS:
                reads.append(where[v][0])
            if v in where and v not in gathered and gather.stage == 2 and \
                    self.ZERO2_BUCKET_MARKS:
                # ZeRO-2: the whole weight the member holds, marked as a member
                # of its bucket, whose gradient rule reduce-scatters the
                # bucket of gradients to this member's slice zp_j (no flat
                # copy of the weights is made)
                j, _ = where[v]
                m, count = gather.buckets[j].index(v), len(gather.buckets[j])
                writer.stmts.append(f"define({v}, grad_bucket_shard({gather.shards[j]}, "
                                    f"{gather.whole_name(v)}, \"s{j}\", {m}, {count}, "
                                    "group=dgroup))")
                gathered.add(v)
            if v in where and v not in gathered:
                j, _ = where[v]
                # the buckets first used next (buckets are in backward
                # order): up to ZERO3_PREFETCH of them, at most
                # ZERO3_PREFETCH_BYTES together (at least one). Blocks are
                # dataflow: each gather waits for the input of the layer
                # that first uses bucket j (`entering`), so the buckets are
                # not all gathered at the start.
                ahead, held = [], 0
                item = np.dtype(gather.dtype).itemsize
                depth = self.ZERO3_PREFETCH if gather.stage == 3 else 1  # stage 2: no gather
                for b in range(j - 1, max(-1, j - 1 - depth), -1):
                    if ahead and held + gather.N[b] * item > self.ZERO3_PREFETCH_BYTES:
                        break
                    ahead.append(b)
                    held += gather.N[b] * item
                for b in [j] + ahead:
                    if b >= 0 and f"zf_{b}" not in gathered:
                        writer.stmts.append(gather.gather_line(b, entering[0]))
                        gathered.add(f"zf_{b}")
                writer.stmts.append(gather.define_part(v, j) if gather.stage == 3 else
                                    gather.define_param(v, j, where[v][1]))
                gathered.add(v)
            if v in member:
                if v not in marked:
                    j, m, count = member[v]
                    writer.stmts.append(f"define(bk_{v}, grad_bucket({v}, \"g{j}\", {m}, "
                                        f"{count}, group=dgroup))")
                    marked[v] = f"bk_{v}"
                return marked[v]
            return v

        def fresh(tag):
            return f"_{_ident(tag)}{next(fresh_count)}"

        stride = 64 if len(self._layers) <= 32 else 1 << 16
        S_vars = set(self._params(False))

        relu_fused, add_fused = relus_after_batch_norm(self._outputs)
        stage_of = part.get("stage_of")
        if stage_of is not None:
            relu_fused = {b: r for b, r in relu_fused.items() if stage_of[b] == stage_of[r]}
            add_fused = {b: v for b, v in add_fused.items()
                         if stage_of[b] == stage_of[v[1]] == stage_of[v[2]]}
        passed = set(relu_fused.values()) | {r for _, _, r in add_fused.values()}
        adds = {a: bn for bn, (_, a, _) in add_fused.items()}

        def layer_code(t, name, w):
            layer, ins, multi = t.args
            exprs = [w.names[i.id] for i in ins]
            entering[0] = exprs[0] if len(exprs) == 1 else f"list({', '.join(exprs)})"
            if t.id in passed:
                return exprs[0]  # applied by the batch normalization before it
            if t.id in adds:
                # the batch normalization input has added the other one
                return exprs[[i.id for i in ins].index(adds[t.id])]
            # masks (KerasTensor arguments) as the expressions computing them
            static = {k: (w.expr(v) if isinstance(v, KerasTensor) else v)
                      for k, v in t.kwargs.items()}
            static.pop("training", None)
            traced = layer._is_custom() and not getattr(t, "builtin", None)  # (super().call)
            train, held = written_training(self, t, context[-1], training)
            if train == "true" and context[0] is None:  # (the eager call's seed draws anew)
                self.__dict__["_trains_a_node"] = True
            number = next(counter)
            if counters is not None:
                number = counters.setdefault(t.id, number)
            ctx = Context(train, seed, number, w.stmts.append, fresh, param, layer_code)
            ctx.seed_stride = stride
            ctx.fuse_relu = t.id in relu_fused or t.id in add_fused
            if t.id in add_fused:
                ctx.residual = w.expr(add_fused[t.id][0])
            ctx.input_shapes = [i.shape for i in ins]
            ctx.input_dtypes = [i.dtype for i in ins]  # (a merge of mixed dtypes promotes)
            ctx.input_masks = carried_mask_exprs(ins, w) if traced else None
            ctx.output_masks = getattr(t, "mask_outputs", None)  # (a nested model's)
            outer, reads[:] = reads[:], []
            p = {q.name: param(layer, q.name) for q in layer.params} if not traced else {}
            p.update({k: w.expr(v) for k, v in getattr(t, "param_overrides", {}).items()})
            context.append(held)  # (the layers its forward writes are inside it)
            out = (getattr(t, "builtin", None) or type(layer)).forward(
                layer, exprs if multi else exprs[0], p, ctx, **static)
            context.pop()
            stats.extend(ctx.stats)
            if getattr(layer, "activity_regularizer", None) is not None:
                if not isinstance(out, str):
                    raise ValueError(f"[{layer.kind}] activity_regularizer on a layer of "
                                     f"several outputs is not supported yet (layer "
                                     f"{layer.name!r})")
                out = write_activity_loss(layer, out, t.shape[1:], t.dtype, ctx)
            depth = self.ZERO2_IN_FLIGHT
            if reads and depth and isinstance(out, str) and min(reads) - depth >= 0:
                # back-pressure: this layer's backward (which makes the
                # gradients of bucket min(reads)) waits until the bucket
                # `depth` before it is no longer in flight, so at most
                # `depth` buckets of gradient are on the wire or being made
                out = f"bucket_fence({out}, \"s{min(reads) - depth}\")"
            reads[:] = outer + reads
            return out

        bound = {t.id: n for t, n in zip(self._inputs, xs)}
        bound[STEP_SEED.id] = f"({seed} * {stride} + {stride - 1})"  # draws in a model's call
        bound.update(part.get("feeds", {}))
        writer = GraphWriter(bound, param, layer_code, prefix="h")
        with collecting_program_writes() as writes:
            with collecting_program_losses() as added:  # Layer.add_loss
                outs = [writer.expr(o) for o in part.get("targets", self._outputs)]
                # the outputs' masks (Keras weights the loss by them), for _loss_text
                self._out_masks = None if "targets" in part else [
                    None if getattr(o, "_keras_mask", None) is None else
                    writer.expr(o._keras_mask) for o in self._outputs]
            if added and part:
                raise ValueError(f"[{self.kind}] a layer's add_loss is not supported with "
                                 "pipeline stages yet (the added loss would be left out)")
            self.__dict__["_added_losses"] = added
            if loss_of is not None:
                self._write_step_loss(writer, training, *loss_of)
        # the non-trainable weights the layers' calls assigned, [(variable, new value)]:
        # kept by the step (layer_state.py)
        self.__dict__["_state_writes"] = kept_writes(self, writes, S_vars, bool(part))
        for v in where:  # parameters the forward pass does not read (a regularizer may)
            if v not in gathered:
                param(self._owner[v][0], self._owner[v][1].name)
        return writer.stmts, outs, stats

    def _loss_ctx(self, prefix: str = "_loss"):
        """A context for the loss's (or, prefix "_met", the metrics')
        statements: their names differ, since both land in one block."""
        count = iter(range(1 << 30))
        stmts: list = []
        ctx = Context("false", "0", 0, stmts.append, lambda tag: f"{prefix}{next(count)}",
                      None, None)
        return ctx, stmts

    def _loss_text(self, ys, hs, sw=None, regularized=None, marks=None) -> tuple:
        """(statements, expression) of the compiled loss of labels `ys` and
        outputs `hs`, weighted per sample by `sw`, plus the regularizers (of
        the variables in `regularized`, when given: a pipeline stage's).
        `marks`: the parameters' bucket-marked names (_forward_code), which
        the regularizers read so that their gradients are summed over the
        data group with the rest of the bucket's. A compute_loss override's
        loss (written by _forward_code) in their stead."""
        custom = self.__dict__.pop("_custom_loss", None)
        if custom is not None:
            self.__dict__.pop("_added_losses", None)  # the override's own business (Keras)
            return [], custom
        ctx, stmts = self._loss_ctx()
        terms = self._compiled_loss_terms(ys, hs, sw, ctx, regularized, marks)
        if not terms:
            raise ValueError("[compile] the model has no loss to compute: give compile a loss "
                             "(loss=None, the default as in Keras, leaves only the losses its "
                             "layers add with add_loss, and it has none)")
        return stmts, " + ".join(f"({t})" for t in terms)

    def _compiled_loss_terms(self, ys, hs, sw, ctx, regularized=None, marks=None) -> list:
        """Keras's default compute_loss as expressions to sum: each output's
        compiled loss times its weight, the layers' added losses, the
        regularizers."""
        terms = []
        for k, (loss, weight) in enumerate(zip(self._compiled.losses[:len(hs)],
                                               self._compiled.loss_weights)):
            if loss is None or not weight:
                continue
            e = self._output_loss_expr(k, ys, hs, sw, ctx)
            terms.append(e if weight == 1.0 else f"{weight!r} * ({e})")
        for e in self.__dict__.pop("_added_losses", None) or []:  # Layer.add_loss: summed
            terms.append(f"astype(sum({e}), \"{self.dtype}\")")
        for v in self._params(True):
            layer, p = self._owner[v]
            if regularized is not None and v not in regularized:
                continue
            if p.regularizer is not None:
                w = (marks or {}).get(v, v)
                penalty = regularizer_text(p.regularizer, w, p.shape, self.dtype, ctx,
                                           batch_axis=False)
                terms.append(f"astype({penalty}, \"{self.dtype}\")")
        return terms

    def _output_loss_expr(self, k, ys, hs, sw, ctx) -> str:
        """Output k's compiled loss of labels ys[k] and output hs[k], weighted per
        sample by `sw` and reduced by the loss's `reduction` as Keras's
        reduce_weighted_values: the sum over the batch size ("sum_over_batch_size",
        "mean"; also None / "none", whose vector Keras's loss tracker averages),
        the sum ("sum"), or the sum over the weights' sum
        ("mean_with_sample_weight"); unweighted by its loss weight."""
        loss = self._compiled.losses[k]
        sw = weights_of_output(sw, k)  # (weights given per output: this output's)
        reduction = getattr(loss, "reduction", "sum_over_batch_size")
        spec = self._label_specs[k] if hasattr(self, "_label_specs") else None
        out_shape = self._outputs[k].shape[1:]
        mask = self._output_mask_expr(k)
        # one weight per sample against the values' axes: (batch,) + out_shape[:-1], or
        # fewer for a loss reducing more (Dice's one value for the batch: Keras broadcasts
        # it to the weights)
        rank = len(per_entry_shape(loss, np.zeros((1,) + tuple(spec[0]), spec[1]), out_shape,
                                   1)) if spec is not None else len(out_shape)
        lead = [-1] + [1] * (rank - 1) if rank else [-1]
        y, spec = ranked_labels(loss, ys[k], spec, out_shape, ctx)  # (a PyDataset's (n,))
        if mask is None and sw is None and reduction != "sum":
            return loss.expression_for(y, hs[k], ctx, spec, out_shape)
        per = ctx.define("per", loss.per_sample_for(y, hs[k], ctx, spec, out_shape))
        weights = None  # Keras's sample_weight after apply_mask, as it multiplies the values
        # one per sample broadcast over the steps, or one per entry (a (batch, steps) mask)
        w = f"astype({sw}, dtype_name({per}))"
        sww = f"if(ndim({sw}) == ndim({per}) && ndim({per}) > 1, {w}, reshape({w}, {lead}))"
        if mask is not None:
            # a loss function returning the batch's loss already reduced: Keras multiplies
            # it by the mask's weights, broadcast to their shape
            per = ctx.define("per", f"if(ndim({per}) == 0, broadcast_to({per}, "
                                    f"shape({mask})), {per})")
            mf = ctx.define("mf", f"reshape(astype({mask}, dtype_name({per})), shape({per}))")
            if reduction in ("sum_over_batch_size", "mean", None, "none"):
                # Keras's apply_mask: the mask as weights scaled by total / valid
                # entries, so the mean is over the unmasked ones
                mf = (f"{mf} * (astype(size({mf}), dtype_name({per})) / "
                      f"maximum(sum({mf}), 1.0))")
            weights = mf if sw is None else f"{mf} * {sww}"
        elif sw is not None:
            weights = sww
        count = f"size({per})"
        if weights is None:
            total = f"sum({per})"
        else:  # (over the number of weighted values, as Keras's)
            weighted = ctx.define("wl", f"{per} * {weights}")
            total, count = f"sum({weighted})", f"size({weighted})"
        if reduction == "sum":
            return total
        if reduction == "mean_with_sample_weight" and weights is not None:
            if mask is None:  # (Keras divides by the weights as given: one per sample)
                weights = f"astype({sw}, dtype_name({per}))"
            d = ctx.define("wsum", f"sum({weights})")
            # Keras's divide_no_nan: 0 when the weights sum to 0
            return f"where({d} == 0.0, 0.0 * {total}, {total} / where({d} == 0.0, 1.0, {d}))"
        return f"{total} / {count}"

    def _aux_masks(self, outs: str):
        """The outputs' masks as the loss function's aux value `outs` holds
        them (after the outputs; _loss_fn)."""
        n, j, masks = len(self._outputs), 0, []
        for o in self._outputs:
            if getattr(o, "_keras_mask", None) is None:
                masks.append(None)
            else:
                masks.append(f"{outs}[{n + j}]")
                j += 1
        self._out_masks = masks

    def _output_mask_expr(self, k):
        """The expression of output k's mask (None without one)."""
        if getattr(self._outputs[k], "_keras_mask", None) is None:
            return None
        masks = getattr(self, "_out_masks", None)
        if masks is None:
            raise ValueError(f"[{self.kind}] output {k} carries a mask (Keras weights its loss "
                             "by it), which pipeline stages do not support yet; drop the mask "
                             "before the output (a layer that does not pass it on)")
        return masks[k]

    def _program(self, kind):
        if kind != "predict":
            self._add_step_layers(kind)
        # trainable flags may change between calls (Keras: recompile; here
        # the programs follow)
        # (the sample weights' shape as given, which a Metric subclass reads: _prepare_sw)
        kind_key = (kind, tuple(self._params(True)), self.ZERO3_PREFETCH,
                    self.ZERO3_PREFETCH_BYTES, self.ZERO2_BUCKET_MARKS, self.ZERO2_IN_FLIGHT,
                    self.__dict__.get("_sw_key"))
        prog = self._programs.get(kind_key)
        if prog is not None:
            return prog
        if self._compiled is None and kind != "predict":
            raise RuntimeError(f"[{kind}] call model.compile(optimizer, loss, metrics) first")
        P, S = self._params(True), self._params(False)
        args = ", ".join(P + S)
        xs, ys = self._names()
        if kind == "train" or (isinstance(kind, tuple) and kind[0] == "train"):
            prog = self._train_program(P, S, weighted=kind[1] if isinstance(kind, tuple)
                                       else False)
        elif isinstance(kind, tuple) and kind[0] in ("train_dp", "train_det"):
            self.__dict__["_split_batch"] = True  # (a user's Metric: _metric_exprs)
            try:
                if kind[0] == "train_dp":
                    prog = self._train_program(P, S, data_parallel=True, weighted=kind[3],
                                               zero=self._zero_plan_for(kind[4:]))
                else:
                    prog = self._deterministic_program(P, S, *kind[1:5],
                                                       zero=self._zero_plan_for(kind[5:]))
            finally:
                self.__dict__.pop("_split_batch", None)
        else:
            weighted = isinstance(kind, tuple) and kind[1]
            # `seed` (the batch's, last): a keras.random draw in a layer's call
            # with a SeedGenerator gives new numbers at each batch, as Keras's
            stmts, hs, _ = self._forward_code("false", "seed", loss_of=(
                None if kind == "predict" else (ys, weight_names(weighted))))
            head = ", ".join(([args] if args else []) + xs)
            # the non-trainable weights the layers' calls assigned: their new values follow
            # the result (state_results)
            kept = self.__dict__.get("_state_writes") or []
            state = [f"list({', '.join(e for _, e in kept)})"] if kept else []
            if kind == "predict":
                result = hs[0] if len(hs) == 1 else f"list({', '.join(hs)})"
                if kept:
                    result = f"list({result}, {state[0]})"
                body = ",\n  ".join(stmts + [result])
                text = f"define(predict_fn, {head}, seed, block(\n  {body}))\npredict_fn\n"
            else:
                weighted = isinstance(kind, tuple) and kind[1]
                sw = weight_names(weighted)
                lstmts, loss = self._loss_text(ys, hs, sw)
                logs = self._step_log_sums(None)  # a traced test_step's logs
                mstmts, mets = logs if logs is not None else self._metric_exprs(ys, hs, sw)
                result = ", ".join([loss, f"list({', '.join(mets)})"] + state)
                body = ",\n  ".join(stmts + lstmts + mstmts + [f"list({result})"])
                extra = "".join(", " + s for s in weight_streams(weighted))
                text = (f"define(eval_fn, {head}, {', '.join(ys)}{extra}, seed, block(\n  {body}))\n"
                        "eval_fn\n")
            prog = compile_program(text, f"<model {kind if isinstance(kind, str) else kind[0]}>")
            remember_state_results(prog, kept)
        self._programs[kind_key] = prog
        return prog

    def _zero_plan_for(self, key):
        """The ZeroPlan of a program kind's ZeRO key (made by fit), or None."""
        if not key or not key[0]:
            return None
        return self._zero_plans[key[0]]

    def _bucket_plan(self, P):
        """Gradient buckets for the all-reduce, fixed when the step is compiled and
        the same on every locality: parameters in the order the backward pass
        finishes them (last layer first), grouped up to BUCKET_BYTES."""
        buckets, current, size = [], [], 0
        weights = self._weight_stand_ins()  # the shapes only
        for v in reversed(P):
            nbytes = int(np.prod(weights[v].shape)) * np.dtype(self.dtype).itemsize
            if current and size + nbytes > self.BUCKET_BYTES:
                buckets.append(current)
                current, size = [], 0
            current.append(v)
            size += nbytes
        if current:
            buckets.append(current)
        return buckets

    # ZeRO-2: mark each whole weight as a member of its bucket
    # (grad_bucket_shard), whose gradient rule reduce-scatters the bucket of
    # gradients, instead of making the flat bucket of the weights
    # (grad_scatter, remat). Fewer copies per step and a faster step (its
    # reduce-scatters overlap the backward pass; the flat path's run one at a
    # time). Unbounded, every bucket's gradient could be in flight at once,
    # waiting for the slowest rank (docs/parallelism.md, "ZeRO 2's bucket
    # marks"): ZERO2_IN_FLIGHT bounds them. False: the flat path.
    ZERO2_BUCKET_MARKS = True
    # ZeRO 2 with bucket marks: a layer's backward pass waits until the
    # bucket of gradients this many buckets before its own is no longer being
    # reduce-scattered (bucket_fence), so at most this many buckets of whole
    # gradient are in flight while the backward pass goes on (None: no bound).
    ZERO2_IN_FLIGHT = 2
    # Gradients fused into one all-reduce up to this many bytes.
    BUCKET_BYTES = 4 << 20
    # ZeRO 3: the forward pass gathers, with the bucket a layer first uses,
    # the next ZERO3_PREFETCH buckets (at most ZERO3_PREFETCH_BYTES of them
    # together, at least one), so that a gather is in flight while the
    # layers before it compute.
    ZERO3_PREFETCH = 2
    ZERO3_PREFETCH_BYTES = 8 << 20
    # Data parallel: each bucket's all-reduce starts inside the backward pass
    # as soon as its gradients are ready (False: all after the backward pass).
    OVERLAP_BACKWARD = True

    def _allreduce_code(self, P, grads) -> list:
        """Statements replacing each local gradient by the weighted sum over
        the localities (weight = local share of the global batch), bucket by
        bucket: one all_reduce of the concatenated, flattened members."""
        name = dict(zip(P, grads))
        weights = self._weight_stand_ins()  # the shapes only
        lines = []
        for j, bucket in enumerate(self._bucket_plan(P)):
            if len(bucket) == 1:
                g = name[bucket[0]]
                lines.append(f"define({g}, all_reduce({g} * weight, \"sum\", group=dgroup))")
                continue
            flat = ", ".join(f"ravel({name[v]} * weight)" for v in bucket)
            lines.append(f"define(bucket_{j}, all_reduce(concatenate(list({flat})), \"sum\", "
                         "group=dgroup))")
            off = 0
            for v in bucket:
                n = int(np.prod(weights[v].shape))
                lines.append(f"define({name[v]}, reshape(bucket_{j}[{off}:{off + n}], "
                             f"shape({v})))")
                off += n
        return lines

    def _loss_fn(self, P, S, weighted=False, buckets=None, sample_weighted=False, gather=None):
        """The training loss function's definition (value: list(loss,
        list(list(outputs...), batch statistics...))) and the batch norm
        layers' statistics. Weighted: the loss times a last parameter w.
        Buckets: the gradients are summed over the localities from inside
        the backward pass (_forward_code)."""
        if not P and (weighted or buckets is not None or gather is not None):
            raise ValueError("[fit] the model has no trainable parameters: nothing to train "
                             "across processes (data-parallel, ZeRO or deterministic=True)")
        xs, ys = self._names()
        marks = {}
        stmts, hs, stats = self._forward_code("true", "seed", buckets, gather=gather, marks=marks,
                                              loss_of=(ys, weight_names(sample_weighted)))
        split = weighted or buckets is not None or gather is not None or \
            self.__dict__.get("_split_batch")
        if split and self.__dict__.get("_added_losses"):
            # each locality's (chunk's) loss is weighted by its share of the
            # batch: right for the compiled loss, not for an added loss that
            # sums over the batch's samples, which cannot be told apart
            raise ValueError(f"[fit] a layer's add_loss is not supported yet with data-parallel "
                             "(several processes), ZeRO or deterministic=True training: each "
                             "part of the batch would add its own term, weighted by its share; "
                             "train in one process without deterministic=True, or write the "
                             "term as a loss or a regularizer")
        kept = self.__dict__.get("_state_writes") or []
        self.__dict__["_loss_fn_writes"] = kept  # (_train_program keeps them)
        if split or buckets is not None or gather is not None:
            refuse_split_writes(self, kept)
        lstmts, loss = self._loss_text(ys, hs, weight_names(sample_weighted), marks=marks)
        # the outputs' masks follow the outputs (for the metrics, _aux_masks)
        masks = [m for m in (self._out_masks or []) if m is not None]
        # a traced train_step's log sums follow them (_train_program)
        carried = self.__dict__.get("_step_aux", (None, []))[1]
        aux = [f"list({', '.join(hs + masks + carried)})"] + [s for _, s in stats]
        if kept:  # the new values of the non-trainable weights the calls assigned, last
            aux.append(f"list({', '.join(e for _, e in kept)})")
        held = P if gather is None else \
            gather.shards + (gather.twins if gather.local_grads else []) \
            if gather.stage == 3 else gather.shards + [gather.whole_name(v) for v in P]
        args = ", ".join(held + S + xs + ys + weight_streams(sample_weighted))
        scale, w = (" * w", ", w") if weighted else ("", "")
        if buckets is not None or gather is not None:
            w += ", dgroup"  # the data group the buckets are summed over
        body = ",\n  ".join(stmts + lstmts + [f"list(({loss}){scale}, list({', '.join(aux)}))"])
        return f"define(loss_fn, {args}, seed{w}, block(\n  {body}))\n", stats

    def _update_setup(self, P, S):
        """What both training programs start with: the argument list, the
        gradient names, the optimizer's update code (its state variables are
        kept on the model) and the argnums of value_and_grad."""
        opt = self._compiled.optimizer
        grads = [f"grad_{k}" for k in range(len(P))]
        # Weights split over a tensor group: the norms of clipnorm and Lamb
        # are those of the whole weights (clipping.py)
        norms = SplitNorms.of(self, P, opt)
        first, more = [], {}
        if norms is not None:
            if opt.clipnorm is not None:
                first = norms.norm_lines(P, grads, self._fixed_sum)
                more["global_norm"] = "tnorm"
            more["sum_squares"] = norms.lamb_sumsq(P, self._fixed_sum)
        self._split_norms = norms
        upd = opt.update_code(P, grads, state_prefix="opt_", lr_expr="lr",
                              iteration_expr="iteration", **more)
        upd.statements[:0] = first
        self._opt_vars = [s.name for s in upd.state]
        self._opt_statevars = upd.state
        return ", ".join(P + S), grads, upd, ", ".join(str(k) for k in range(len(P)))

    def _zero_update_lines(self, zero, P, grads, zero_grads=False, sliced=False,
                           norm=None) -> list:
        """ZeRO: this member's slices of the summed gradients (unless
        `zero_grads`: made already), of the parameters (stages 1 and 2; stage
        3 takes them as arguments), their update, and (stages 1 and 2) the
        whole parameters all-gathered from the updated slices. `norm`: the
        global norm for clipnorm when the caller makes it (ZeroPlan.update_lines)."""
        lines = []
        grad_of = dict(zip(P, grads))
        if not zero_grads:
            if zero.stage == 1:
                lines += zero.slice_lines(grad_of, zero.grads)
            else:
                lines += zero.reduce_scatter_lines(grad_of)
        if zero.stage < 3 and not sliced:
            lines += zero.slice_lines({v: v for v in P}, zero.shards)
        opt = self._compiled.optimizer
        norms = getattr(self, "_split_norms", None)
        if norms is not None and opt.clipnorm is not None and norm is None:
            # weights split over a tensor group: the norm of the whole
            # weights' gradients as without ZeRO (clipping.py), from the whole
            # summed gradients (stage 1) or the buckets gathered from the slices
            whole = grad_of
            if zero_grads or zero.stage >= 2:
                more, whole = zero.whole_grad_lines()
                lines += more
            lines += norms.norm_lines(P, [whole[v] for v in P], self._fixed_sum)
            norm = "tnorm"
        lines += zero.update_lines(opt, "lr", "iteration", self._fixed_sum, norm=norm, split=norms)
        if zero.stage < 3:
            lines += zero.gather_lines()
        return lines

    def _bn_var(self, bn, index: int) -> str:  # moving mean (2) or variance (3), by name
        return self._var_of[(id(bn), ("moving_mean", "moving_variance")[index - 2])]

    def _bn_update_lines(self, stats, off: int, dtype) -> list:
        """The batch normalization layers' moving mean and variance updated
        from the batch statistics summed into total_aux, from element `off`
        on (each layer's mean, then its variance), in `dtype`."""
        weights = self._weight_stand_ins()  # the shapes only
        lines = []
        for bn, _ in stats:
            m = bn.momentum
            for index_ in (2, 3):
                v = self._bn_var(bn, index_)
                n = int(np.prod(weights[v].shape))
                stat = f"astype(total_aux[{off}:{off + n}], \"{dtype}\")"
                lines.append(f"define({v}, {m!r} * {v} + {1.0 - m!r} * "
                             f"reshape({stat}, shape({v})))")
                off += n
        return lines

    def _split_batch_masks(self, how: str):
        """A masked loss is normalized by the whole batch's unmasked count
        (Keras); a batch split in chunks or over localities would divide by
        each part's own: refused rather than silently different."""
        masked = [k for k, o in enumerate(self._outputs)
                  if getattr(o, "_keras_mask", None) is not None]
        if masked:
            raise ValueError(f"[fit] outputs {masked} carry a mask (Keras normalizes their loss "
                             f"by the batch's unmasked steps), which {how} does not support yet "
                             "(each part would normalize by its own); fit in one locality "
                             "without deterministic=")

    def _train_program(self, P, S, data_parallel=False, weighted=False, zero=None):
        if data_parallel:
            self._split_batch_masks("data-parallel training")
        # Data parallel: each locality's loss is weighted by its share of the
        # global batch, so the sum of the localities' gradients is the global
        # batch's gradient; the sums run in gradient buckets that the
        # backward pass starts itself (OVERLAP_BACKWARD), or after it. The
        # sums run over the data group `dgroup` (nil: every locality). ZeRO
        # (`zero`, a zero.ZeroPlan): stage 1 sums whole buckets as above,
        # stages 2 and 3 reduce-scatter them from inside the backward pass;
        # the optimizer updates this member's slices (zero.py).
        overlap = data_parallel and self.OVERLAP_BACKWARD and (zero is None or zero.stage == 1)
        buckets = self._bucket_plan(P) if overlap else None
        weighted_loss = overlap or zero is not None
        # ZeRO 2 and 3: the loss function is differentiated in the slices zp_j
        # and reads each bucket whole (zf_j: gathered from the slices under
        # stage 3, made from the whole weights under stage 2) just before its
        # first use; each bucket's gradient is reduce-scattered to the slice's
        # as soon as it is complete (zero.ZeroPlan.gather_line)
        gather = zero if zero is not None and zero.stage >= 2 else None
        loss_fn, stats = self._loss_fn(P, S, weighted=weighted_loss, buckets=buckets,
                                       sample_weighted=weighted, gather=gather)
        args, grads, upd, nums = self._update_setup(P, S)
        first = []
        if gather is not None:
            whole = [] if zero.stage == 3 else P
            args = ", ".join(zero.shards + whole + S)
            nums = ", ".join(str(j) for j in range(len(zero.shards)))
            if zero.stage == 2:  # this member's slices of the whole weights
                first = zero.slice_lines({v: v for v in P}, zero.shards)
        xs, ys = self._names()
        data = ", ".join(xs + ys + weight_streams(weighted))
        extra = (", weight" if weighted_loss else "") + \
            (", dgroup" if overlap or gather is not None else "")
        computed = self.__dict__.pop("_step_grads", None)  # a train_step's own gradients
        if P and computed is None:
            lines = first + [f"define(r, value_and_grad(loss_fn, argnums=[{nums}], has_aux=true)"
                             f"({args}, {data}, seed{extra}))",
                             "define(grads, r[1])", "define(r_value, r[0])", "define(r_aux, r[2])"]
        else:  # nothing to train (Keras fits it all the same: the losses, the metrics)
            call_args = ", ".join(a for a in (args, data) if a)
            lines = [f"define(r, loss_fn({call_args}, seed{extra}))", "define(r_value, r[0])",
                     "define(r_aux, r[1])"]
        if P and computed is not None:
            # carried after the outputs, their masks and the logs' values (_write_step_loss)
            at = len(self._outputs) + sum(m is not None for m in self._out_masks) + computed[0]
            index = {n: at + j for j, n in enumerate(computed[1])}
            lines += [f"define({g}, r_aux[0][{index[v]}])" for g, v in zip(grads, P)]
        elif gather is not None:
            lines += [f"define({g}, grads[{j}])" for j, g in enumerate(zero.grads)]
        else:
            lines += [f"define({g}, grads[{k}])" for k, g in enumerate(grads)]
        if data_parallel and not overlap and (zero is None or zero.stage == 1):
            lines += self._allreduce_code(P, grads)
        lines += constraints.state_lines(S, self._owner, zero and zero.stage == 3 and "ZeRO 3")
        if zero is None:
            lines += upd.statements
        else:
            lines += self._zero_update_lines(zero, P, grads, zero_grads=gather is not None,
                                             sliced=bool(first))
        lines += constraints.step_lines(P, self._owner, zero and zero.stage == 3 and "ZeRO 3")

        def across(expr, weighted_=True):
            if not data_parallel:
                return expr
            return f"all_reduce({expr} * weight, \"sum\", group=dgroup)" if weighted_ else \
                f"all_reduce({expr}, \"sum\", group=dgroup)"

        for j, (bn, _) in enumerate(stats):
            m = bn.momentum
            mean_v, var_v = self._bn_var(bn, 2), self._bn_var(bn, 3)
            bmean = across(f"r_aux[{j + 1}][0]")
            bvar = across(f"r_aux[{j + 1}][1]")
            lines.append(f"define({mean_v}, {m!r} * {mean_v} + {1.0 - m!r} * {bmean})")
            lines.append(f"define({var_v}, {m!r} * {var_v} + {1.0 - m!r} * {bvar})")
        for k, (v, _) in enumerate(self.__dict__.pop("_loss_fn_writes", None) or []):
            lines.append(f"define({v}, r_aux[{len(stats) + 1}][{k}])")  # (_loss_fn's aux)
        hs = [f"r_aux[0][{k}]" for k in range(len(self._outputs))]
        self._aux_masks("r_aux[0]")
        carried = self.__dict__.get("_step_aux", (None, []))[1]
        base = len(hs) + sum(m is not None for m in self._out_masks)
        logs = self._step_log_sums([f"r_aux[0][{base + i}]" for i in range(len(carried))])
        if logs is not None:  # a traced train_step's logs, from what the aux value carries
            mstmts, mets = logs
        else:
            mstmts, mets = self._metric_exprs(ys, hs, weight_names(weighted))
        lines += mstmts
        mets = [across(e, weighted_=False) for e in mets]
        loss_value = across("r_value", weighted_=not weighted_loss)  # weighted already
        held_p = zero.shards if zero is not None and zero.stage == 3 else P
        opt_vars = self._opt_vars if zero is None else [s.name for s in zero.state]
        lines.append(f"list({loss_value}, list({', '.join(mets)}), list({', '.join(held_p)}), "
                     f"list({', '.join(opt_vars)}), list({', '.join(S)}))")
        step_args = "".join(a + ", " for a in held_p + S + opt_vars)
        tail = ", weight, dgroup, drank" if data_parallel else ""
        body = ",\n  ".join(lines)
        text = (loss_fn + f"define(train_step, {step_args}{data}, iteration, lr, seed{tail}, "
                f"block(\n  {body}))\ntrain_step\n")
        self.train_code = text
        return compile_program(text, "<model train step>")

    # Chunks of a global batch in deterministic mode: 8 is shared evenly by 1, 2,
    # 4 or 8 localities and cuts the usual batch sizes (multiples of 8) evenly;
    # more chunks cost more (smaller kernels, see docs/distributed.md).
    DETERMINISTIC_CHUNKS = 8

    _fixed_sum = staticmethod(fixed_sum)
    # the weights' streams and names (sample_weights.py), for the pipelined step too
    _weight_streams = staticmethod(weight_streams)
    _weight_names = staticmethod(weight_names)

    def _deterministic_program(self, P, S, local, chunks, n_ranks, weighted=False, zero=None):
        """The training step of deterministic mode. This locality computes the
        gradients of its `local` chunks separately (of the chunk's loss times
        its share of the batch; an empty chunk gives zeros), adds aligned
        blocks of them in the fixed order of _fixed_sum, and bucket by bucket
        each locality finishes the same sum in the same order on its slice of
        the bucket (a reduce-scatter by all_to_all) before the summed slices
        are all-gathered: the bits do not depend on the number of localities
        (nor, with deterministic tiling, of threads). The loss, the metrics'
        sums and the batch statistics, weighted, go the same way in one
        float64 bucket. The sums run over the data group `dgroup`. ZeRO
        (`zero`): stage 1 takes its slices of the whole sums; stages 2 and 3
        send every member the partial sums of its slice (all_to_all) and
        finish the same fixed sum on the slice only; stage 3 all-gathers the
        parameters first. Global-norm clipping sums squares of fixed blocks
        of the buckets in a fixed order (zero.py), with or without ZeRO."""
        self._split_batch_masks("deterministic training (chunked batches)")
        # ZeRO 3: each chunk's loss function gathers every bucket around its
        # uses, forward and backward, as in normal mode (remat), and gives
        # each slice its chunk's whole, unsummed gradient of the bucket
        # (grad_local), which the fixed sum below adds as it adds whole
        # gradients; only the buckets in use are whole at any time
        local3 = zero is not None and zero.stage == 3 and n_ranks > 1
        if local3:
            zero.local_grads = True
            try:
                loss_fn, stats = self._loss_fn(P, S, weighted=True, sample_weighted=weighted,
                                               gather=zero)
            finally:
                zero.local_grads = False
        else:
            loss_fn, stats = self._loss_fn(P, S, weighted=True, sample_weighted=weighted)
        args, grads, upd, nums = self._update_setup(P, S)
        xs, ys = self._names()
        streams = xs + ys + weight_streams(weighted)
        weights = self._weight_stand_ins()  # the shapes only
        size = {v: int(np.prod(weights[v].shape)) for v in P}
        n_sums = sum(math.prod(s) for s in self._metric_sizes())
        lines = zero.gather_lines() if zero is not None and zero.stage == 3 and not local3 \
            else []
        if local3:
            # the differentiated arguments: stand-ins of the whole buckets'
            # shape, one element each (grad_local), then the slices gathered
            lines += [f"define(zd_{b}, broadcast_to(zeros(1, dtype=\"{self.dtype}\"), "
                      f"[{zero.N[b]}]))" for b in range(len(zero.shards))]
            args = ", ".join([f"zd_{b}" for b in range(len(zero.shards))] + zero.shards + S)
            nums = ", ".join(str(b) for b in range(len(zero.shards)))
        for j in range(local):
            data = ", ".join(f"{s}_{j}" for s in streams)
            if local3:
                # every member runs every chunk (the gathers are collectives);
                # an empty chunk's gradients (fit gives it a row of zeros, with
                # weight 0) are dropped
                lines.append(f"define(r_{j}, value_and_grad(loss_fn, argnums=[{nums}], "
                             f"has_aux=true)({args}, {data}, seed_{j}, w_{j}, dgroup))")
                for b in range(len(zero.shards)):
                    lines.append(f"define(g_{j}_b{b}, if(w_{j} > 0.0, r_{j}[1][{b}], "
                                 f"zeros({zero.N[b]}, dtype=\"{self.dtype}\")))")
            else:
                lines.append(f"define(r_{j}, if(w_{j} > 0.0, value_and_grad(loss_fn, "
                             f"argnums=[{nums}], has_aux=true)({args}, {data}, seed_{j}, w_{j}), "
                             "nil))")
                for k, v in enumerate(P):
                    lines.append(f"define(g_{j}_{k}, if(w_{j} > 0.0, r_{j}[1][{k}], "
                                 f"zeros_like({v})))")
            aux = [f"astype(r_{j}[0], \"float64\")"]
            cys = [f"{y}_{j}" for y in ys]
            chs = [f"r_{j}[2][0][{k}]" for k in range(len(self._outputs))]
            self._aux_masks(f"r_{j}[2][0]")
            mstmts, mets = self._metric_exprs(cys, chs, weight_names(weighted, f"_{j}"))
            aux += [f"ravel({e})" for e in mets]
            for s_i, (bn, _) in enumerate(stats):
                aux += [f"astype(r_{j}[2][{s_i + 1}][{m}], \"float64\") * w_{j}" for m in (0, 1)]
            flat = ", ".join(f"ravel({e})" for e in aux)
            body = mstmts + [f"concatenate(list({flat}))"]
            lines.append(f"define(g_{j}_aux, if(w_{j} > 0.0, block({', '.join(body)}), "
                         f"zeros(aux_width, dtype=\"float64\")))")
        # Sums of aligned blocks of this locality's chunks (per parameter).
        block = local & -local  # the largest power of two dividing `local`
        starts = range(0, local, block)
        keys = [f"b{b}" for b in range(len(zero.shards))] if local3 else \
            [str(k) for k in range(len(P))]
        for k in keys + ["aux"]:
            for s_ in starts:
                terms = [f"g_{j}_{k}" for j in range(s_, s_ + block)]
                lines.append(f"define(p_{s_}_{k}, {self._fixed_sum(terms)})")
        width = 1 + n_sums + sum(2 * int(np.prod(weights[self._bn_var(bn, 2)].shape))
                                 for bn, _ in stats)
        index = {v: k for k, v in enumerate(P)}
        groups = [[str(index[v]) for v in bucket] for bucket in self._bucket_plan(P)] + [["aux"]]
        for b, members in enumerate(groups):
            if zero is not None and zero.stage >= 2 and members != ["aux"]:
                lines += self._scatter_sum_lines(zero, b, [f"b{b}"] if local3 else members,
                                                 starts, flat=local3)
                continue
            if n_ranks == 1:
                for k in members:
                    total = self._fixed_sum([f"p_{s_}_{k}" for s_ in starts])
                    lines.append(f"define({'total_aux' if k == 'aux' else grads[int(k)]}, {total})")
                continue
            width_b = width if members == ["aux"] else sum(size[P[int(k)]] for k in members)
            dtype_b = "float64" if members == ["aux"] else self.dtype
            lines += self._reduce_scatter_sum_lines(b, members, starts, n_ranks, width_b, dtype_b)
            off = 0
            for k in members:
                if k == "aux":
                    lines.append(f"define(total_aux, total_{b})")
                    continue
                v = P[int(k)]
                lines.append(f"define({grads[int(k)]}, reshape(total_{b}[{off}:{off + size[v]}], "
                             f"shape({v})))")
                off += size[v]
        lines += constraints.state_lines(S, self._owner, zero and zero.stage == 3 and "ZeRO 3")
        if zero is not None:
            lines += self._zero_update_lines(zero, P, grads, zero_grads=zero.stage >= 2)
        elif self._compiled.optimizer.clipnorm is not None and self._split_norms is None:
            lines += self._block_norm_update(P, grads, chunks)
        else:
            lines += upd.statements
        lines += constraints.step_lines(P, self._owner, zero and zero.stage == 3 and "ZeRO 3")
        lines += self._bn_update_lines(stats, 1 + n_sums, self.dtype)
        lines.insert(0, f"define(aux_width, {width})")
        held_p = zero.shards if zero is not None and zero.stage == 3 else P
        opt_vars = self._opt_vars if zero is None else [s.name for s in zero.state]
        lines.append(f"list(total_aux[0], list(total_aux[1:{1 + n_sums}]), "
                     f"list({', '.join(held_p)}), list({', '.join(opt_vars)}), "
                     f"list({', '.join(S)}))")
        chunk_args = ", ".join(f"{a}_{j}" for a in streams + ["w", "seed"] for j in range(local))
        step_args = ", ".join(held_p + S + opt_vars)
        tail = ", dgroup, drank" if n_ranks > 1 else ""
        body = ",\n  ".join(lines)
        text = (loss_fn + f"define(train_step, {step_args}, {chunk_args}, iteration, lr{tail}, "
                f"block(\n  {body}))\ntrain_step\n")
        self.train_code = text
        return compile_program(text, "<model deterministic train step>")

    def _reduce_scatter_sum_lines(self, b, members, starts, n_ranks, width, dtype) -> list:
        """Deterministic mode without ZeRO 2/3: bucket b's whole sum on every
        locality (total_b) by a reduce-scatter and an all-gather, ~2G bytes
        received per locality instead of the N·G of all-gathering every
        locality's partial sums. The flat bucket (`width` elements of
        `dtype`, zeros appended up to a multiple of N) is cut in N slices;
        slice q of every locality's aligned block sums goes to locality q
        (all_to_all), which adds them in the order of _fixed_sum over
        (locality, block), the order of the whole sum: the additions are
        elementwise, so each element gets the same bits as before. Every
        locality's summed slice is then all-gathered."""
        rows = len(starts)
        k = -(-width // n_ranks)
        pad = k * n_ranks - width

        def flat(s_):
            parts = [f"ravel(p_{s_}_{m})" for m in members]
            if pad:
                parts.append(f"zeros({pad}, dtype=\"{dtype}\")")
            return parts[0] if len(parts) == 1 else f"concatenate(list({', '.join(parts)}))"

        if rows == 1:
            send = f"reshape({flat(starts[0])}, [{n_ranks}, {k}])"
        else:
            stacked = ", ".join(flat(s_) for s_ in starts)
            send = (f"reshape(transpose(reshape(stack(list({stacked})), [{rows}, {n_ranks}, {k}]), "
                    f"[1, 0, 2]), [{n_ranks * rows}, {k}])")
        mine = self._fixed_sum([f"rsparts_{b}[{i}]" for i in range(n_ranks * rows)])
        whole = f"all_gather(rsum_{b}, group=dgroup)"
        return [f"define(rsparts_{b}, all_to_all({send}, group=dgroup))",
                f"define(rsum_{b}, {mine})",
                f"define(total_{b}, {whole if not pad else f'{whole}[0:{width}]'})"]

    def _scatter_sum_lines(self, zero, b, members, starts, flat=False) -> list:
        """ZeRO 2/3, deterministic: bucket b's partial sums of this member's
        aligned blocks of chunks, each cut in the members' slices and sent to
        their owners (all_to_all); every member adds the parts of its slice
        in the order of _fixed_sum over (member, block), as the whole sum.
        `flat`: the partial sums are the padded flat bucket already (one
        member, ZeRO 3's grad_local)."""
        rows = len(starts)
        flats = [f"p_{s_}_{members[0]}" if flat else
                 zero.flat(b, [f"p_{s_}_{k}" for k in members]) for s_ in starts]
        d, k = zero.d, zero.k[b]
        if rows == 1:
            send = f"reshape({flats[0]}, [{d}, {k}])"
        else:
            send = (f"reshape(transpose(reshape(stack(list({', '.join(flats)})), "
                    f"[{rows}, {d}, {k}]), [1, 0, 2]), [{d * rows}, {k}])")
        total = self._fixed_sum([f"zparts_{b}[{i}]" for i in range(d * rows)])
        return [f"define(zparts_{b}, all_to_all({send}, group=dgroup))",
                f"define({zero.grads[b]}, {total})"]

    def _block_norm_update(self, P, grads, chunks) -> list:
        """Deterministic mode without ZeRO: the update with global-norm
        clipping from the same fixed blocks of the buckets, added in the same
        order, as ZeRO's slices use, so that both give the same bits."""
        weights = self._weight_stand_ins()  # the shapes only
        plan = ZeroPlan(0, 1, chunks, self._bucket_plan(P),
                        {v: weights[v].shape for v in P}, self.dtype)
        grad_of = dict(zip(P, grads))
        lines = [f"define(zdf_{j}, {plan.flat(j, [grad_of[v] for v in b])})"
                 for j, b in enumerate(plan.buckets)]
        terms = [e for j in range(len(plan.buckets)) for e in plan.blocks_of_slice(j, f"zdf_{j}")]
        lines.append(f"define(znorm, sqrt({self._fixed_sum(terms)}))")
        upd = self._compiled.optimizer.update_code(P, grads, state_prefix="opt_", lr_expr="lr",
                                                   iteration_expr="iteration",
                                                   global_norm="znorm")
        return lines + upd.statements

    def _shard(self, arrays, n_ranks, rank):
        """This locality's rows of a global batch, and its share of the batch."""
        n = len(arrays[0])
        lo, hi = rank * n // n_ranks, (rank + 1) * n // n_ranks
        return [a[lo:hi] for a in arrays], (hi - lo) / n
