"""Sequential models: compile, fit, evaluate, predict, summary, weights.

The training step of `fit` is one program of tessera's language — forward,
backward (by the core's autodiff) and the optimizer update — compiled once and
run for every mini-batch with the GIL released. Python only slices batches,
passes arrays (without copies) and prints progress.
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Optional, Sequence

import numpy as np

from .. import _core, data as _data, distributed as _dist, optim as _optim
from . import losses as _losses
from .layers import Context, Layer, initial_value
from .weights import load_weights, save_weights

__all__ = ["Sequential", "History"]

def _optimizer(opt):
    if isinstance(opt, _optim.Optimizer):
        return opt
    table = {"sgd": _optim.SGD, "adam": _optim.Adam, "adamw": _optim.AdamW,
             "rmsprop": _optim.RMSprop, "adagrad": _optim.Adagrad}
    if isinstance(opt, str) and opt.lower() in table:
        return table[opt.lower()]()
    raise ValueError(f"[compile] unknown optimizer {opt!r}: use one of {sorted(table)} or a "
                     "tessera.optim optimizer")


class History:
    """Per-epoch metrics of a fit: `history["loss"]`, `["accuracy"]`,
    `["val_loss"]`, `["val_accuracy"]`, `["time"]`."""

    def __init__(self):
        self.history: dict = {}
        self.epoch: list = []

    def _add(self, epoch: int, logs: dict):
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)


class Sequential:
    """A stack of layers, like keras.Sequential.

        model = Sequential([Conv1D(64, 3, activation="relu"), Flatten(), Dense(6, "softmax")],
                           input_shape=(128, 9))
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=64, epochs=5, validation_data=(xv, yv))
    """

    def __init__(self, layers: Sequence[Layer] = (), input_shape=None, seed: int = 0,
                 dtype: str = "float32"):
        self.layers = list(layers)
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"[Sequential] layer {i} is not a tessera.nn layer: {layer!r}")
        if dtype not in ("float32", "float64"):
            raise ValueError(f"[Sequential] dtype must be 'float32' or 'float64', got {dtype!r}")
        self.dtype = dtype
        self.seed = seed
        if input_shape is None and self.layers and self.layers[0].declared_input_shape:
            input_shape = self.layers[0].declared_input_shape  # Keras: on the first layer
        self.input_shape = tuple(input_shape) if input_shape is not None else None
        self.weights: dict = {}
        self._compiled = None
        self._programs: dict = {}
        self._opt_state: Optional[dict] = None
        self._iteration = 0
        if self.input_shape is not None:
            self.build(self.input_shape)

    def add(self, layer: Layer):
        """Appends a layer (before the model is built)."""
        if self.weights:
            raise RuntimeError("[Sequential.add] the model is already built")
        if not isinstance(layer, Layer):
            raise TypeError(f"[Sequential.add] not a tessera.nn layer: {layer!r}")
        if not self.layers and self.input_shape is None and layer.declared_input_shape:
            self.input_shape = layer.declared_input_shape  # built at compile/fit
        self.layers.append(layer)

    # ------------------------------------------------------------------ building

    def build(self, input_shape):
        """Fixes every layer's shapes and creates the parameters (seeded)."""
        shape = tuple(int(d) for d in input_shape)
        self.input_shape = shape
        for i, layer in enumerate(self.layers):
            try:
                shape = layer.build(shape)
            except ValueError as e:
                raise ValueError(f"layer {i} ({layer.kind}): {e}") from None
        self.output_shape = shape
        self.weights = {}
        for i, layer in enumerate(self.layers):
            for j, p in enumerate(layer.params):
                self.weights[self._var(i, p)] = initial_value(p, self.seed * 1000 + i * 10 + j,
                                                              self.dtype)
        self._programs.clear()
        self._opt_state = None
        self._iteration = 0
        return self

    def _var(self, i: int, p) -> str:
        return f"l{i}_{p.name}"

    def _params(self, trainable: bool) -> list:
        return [self._var(i, p) for i, layer in enumerate(self.layers) for p in layer.params
                if p.trainable == trainable]

    def count_params(self) -> int:
        return sum(layer.count_params() for layer in self.layers)

    def summary(self, print_fn=print):
        """Prints each layer's type, output shape and parameter count."""
        if not self.weights:
            raise RuntimeError("[summary] the model is not built: pass input_shape or call build")
        rows = [("Layer (type)", "Output Shape", "Param #")]
        for i, layer in enumerate(self.layers):
            name = layer.name or f"{layer.kind.lower()}_{i}"
            rows.append((f"{name} ({layer.kind})", str((None,) + layer.output_shape),
                         f"{layer.count_params():,}"))
        widths = [max(len(r[k]) for r in rows) + 2 for k in range(3)]
        line = "=" * sum(widths)
        print_fn("Model: Sequential")
        print_fn(line)
        for n, r in enumerate(rows):
            print_fn("".join(c.ljust(w) for c, w in zip(r, widths)))
            print_fn(line if n == 0 else "-" * sum(widths))
        trainable = sum(math.prod(self.weights[v].shape) for v in self._params(True))
        print_fn(f"Total params: {self.count_params():,}")
        print_fn(f"Trainable params: {trainable:,}")
        print_fn(f"Non-trainable params: {self.count_params() - trainable:,}")

    # ------------------------------------------------------------------ programs

    def compile(self, optimizer="adam", loss="sparse_categorical_crossentropy", metrics=()):
        """Chooses the optimizer, the loss and the metrics (only 'accuracy')."""
        loss = _losses.get(loss)
        for m in metrics:
            if m not in ("accuracy", "acc"):
                raise ValueError(f"[compile] unknown metric {m!r}; only 'accuracy' is supported")
        self._compiled = (_optimizer(optimizer), loss, bool(metrics))
        self._programs.clear()
        self._opt_state = None
        self._iteration = 0
        return self

    @property
    def optimizer(self):
        return self._compiled[0] if self._compiled else None

    def _layer_code(self, training: str, seed: str, buckets=None):
        """The forward pass as statements. With `buckets` (the bucket plan),
        every trainable parameter is first marked as a member of its gradient
        bucket (grad_bucket), just before the layer that uses it, so that the
        backward pass starts each bucket's all-reduce as soon as the layers
        after it in the backward order have produced all its gradients."""
        stmts, stats = ["define(h0, x)"], []
        member = {}
        for j, bucket in enumerate(buckets or []):
            for m, v in enumerate(bucket):
                member[v] = (j, m, len(bucket))
        h = "h0"
        for i, layer in enumerate(self.layers):
            ctx = Context(training, seed, i)
            pmap = {p.name: self._var(i, p) for p in layer.params}
            for name, v in pmap.items():
                if v in member:
                    j, m, count = member[v]
                    stmts.append(f"define(bk_{v}, grad_bucket({v}, \"g{j}\", {m}, {count}))")
                    pmap[name] = f"bk_{v}"
            expr = layer.forward(h, pmap, ctx)
            stmts.append(f"define(h{i + 1}, {expr})")
            for bn, x in ctx.stats:
                stats.append((i, bn, x))
            h = f"h{i + 1}"
        return stmts, h, stats

    def _loss(self, y: str, h: str) -> str:
        """The compiled loss as an expression of the labels y and the output h."""
        return self._compiled[1].expression(y, h)

    def _metric(self, y: str, h: str) -> str:
        _, loss, metric = self._compiled
        if not metric:
            return "nil"
        if loss == "binary_crossentropy":
            return f"mean(astype(({h} > 0.5) == ({y} > 0.5), \"float64\"))"
        return f"accuracy({y}, {h})"

    def _program(self, kind: str):
        prog = self._programs.get(kind)
        if prog is not None:
            return prog
        if self._compiled is None and kind != "predict":
            raise RuntimeError(f"[{kind}] call model.compile(optimizer, loss, metrics) first")
        P, S = self._params(True), self._params(False)
        args = ", ".join(P + S)
        if kind == "train":
            prog = self._train_program(P, S)
        elif isinstance(kind, tuple) and kind[0] == "train_dp":
            prog = self._train_program(P, S, data_parallel=True)
        elif isinstance(kind, tuple) and kind[0] == "train_det":
            prog = self._deterministic_program(P, S, *kind[1:])
        else:
            stmts, h, _ = self._layer_code("false", "0")
            if kind == "predict":
                body = ",\n  ".join(stmts + [h])
                text = f"define(predict_fn, {args}, x, block(\n  {body}))\npredict_fn\n"
            else:
                body = ",\n  ".join(stmts + [f"list({self._loss('y', h)}, {self._metric('y', h)})"])
                text = f"define(eval_fn, {args}, x, y, block(\n  {body}))\neval_fn\n"
            prog = _core.Program(text, f"<model {kind}>")
        self._programs[kind] = prog
        return prog

    def _bucket_plan(self, P):
        """Gradient buckets for the all-reduce, fixed when the step is compiled and
        the same on every locality: parameters in the order the backward pass
        finishes them (last layer first), grouped up to BUCKET_BYTES."""
        buckets, current, size = [], [], 0
        for v in reversed(P):
            nbytes = int(np.prod(self.weights[v].shape)) * np.dtype(self.dtype).itemsize
            if current and size + nbytes > self.BUCKET_BYTES:
                buckets.append(current)
                current, size = [], 0
            current.append(v)
            size += nbytes
        if current:
            buckets.append(current)
        return buckets

    # Gradients fused into one all-reduce up to this many bytes.
    BUCKET_BYTES = 4 << 20
    # Data parallel: each bucket's all-reduce starts inside the backward pass
    # as soon as its gradients are ready (False: all after the backward pass).
    OVERLAP_BACKWARD = True

    def _allreduce_code(self, P, grads) -> list:
        """Statements replacing each local gradient by the weighted sum over
        the localities (weight = local share of the global batch), bucket by
        bucket: one all_reduce of the concatenated, flattened members."""
        name = dict(zip(P, grads))
        lines = []
        for j, bucket in enumerate(self._bucket_plan(P)):
            if len(bucket) == 1:
                g = name[bucket[0]]
                lines.append(f"define({g}, all_reduce({g} * weight, \"sum\"))")
                continue
            flat = ", ".join(f"ravel({name[v]} * weight)" for v in bucket)
            lines.append(f"define(bucket_{j}, all_reduce(concatenate(list({flat})), \"sum\"))")
            off = 0
            for v in bucket:
                n = int(np.prod(self.weights[v].shape))
                lines.append(f"define({name[v]}, reshape(bucket_{j}[{off}:{off + n}], "
                             f"shape({v})))")
                off += n
        return lines

    def _loss_fn(self, P, S, weighted=False, buckets=None):
        """The training loss function's definition (value: list(loss, list(output,
        batch statistics...))) and the batch norm layers' statistics. Weighted:
        the loss times a last parameter w. Buckets: the gradients are summed
        over the localities from inside the backward pass (_layer_code)."""
        if not P:
            raise ValueError("[fit] the model has no trainable parameters")
        stmts, h, stats = self._layer_code("true", "seed", buckets)
        aux = [h] + [f"batch_norm_stats({x})" for _, _, x in stats]
        args = ", ".join(P + S)
        scale, w = (" * w", ", w") if weighted else ("", "")
        body = ",\n  ".join(stmts + [f"list(({self._loss('y', h)}){scale}, list({', '.join(aux)}))"])
        return f"define(loss_fn, {args}, x, y, seed{w}, block(\n  {body}))\n", stats

    def _update_setup(self, P, S):
        """What both training programs start with: the argument list, the
        gradient names, the optimizer's update code (its state variables are
        kept on the model) and the argnums of value_and_grad."""
        opt = self._compiled[0]
        grads = [f"grad_{k}" for k in range(len(P))]
        upd = opt.update_code(P, grads, state_prefix="opt_", lr_expr="lr",
                              iteration_expr="iteration")
        self._opt_vars = [s.name for s in upd.state]
        self._opt_statevars = upd.state
        return ", ".join(P + S), grads, upd, ", ".join(str(k) for k in range(len(P)))

    def _train_program(self, P, S, data_parallel=False):
        # Data parallel: each locality's loss is weighted by its share of the
        # global batch, so the sum of the localities' gradients is the global
        # batch's gradient; the sums run in gradient buckets that the
        # backward pass starts itself (OVERLAP_BACKWARD), or after it.
        overlap = data_parallel and self.OVERLAP_BACKWARD
        buckets = self._bucket_plan(P) if overlap else None
        loss_fn, stats = self._loss_fn(P, S, weighted=overlap, buckets=buckets)
        args, grads, upd, nums = self._update_setup(P, S)
        extra = ", weight" if overlap else ""
        lines = [f"define(r, value_and_grad(loss_fn, argnums=[{nums}], has_aux=true)"
                 f"({args}, x, y, seed{extra}))",
                 "define(grads, r[1])"]
        lines += [f"define({g}, grads[{k}])" for k, g in enumerate(grads)]
        if data_parallel and not overlap:
            lines += self._allreduce_code(P, grads)
        lines += upd.statements
        def across(expr, op="sum", weighted=True):
            if not data_parallel:
                return expr
            return f"all_reduce({expr} * weight, \"{op}\")" if weighted else \
                f"all_reduce({expr}, \"{op}\")"

        for j, (i, bn, _) in enumerate(stats):
            m = bn.momentum
            mean_v = self._var(i, bn.params[2])
            var_v = self._var(i, bn.params[3])
            bmean = across(f"r[2][{j + 1}][0]")
            bvar = across(f"r[2][{j + 1}][1]")
            lines.append(f"define({mean_v}, {m!r} * {mean_v} + {1.0 - m!r} * {bmean})")
            lines.append(f"define({var_v}, {m!r} * {var_v} + {1.0 - m!r} * {bvar})")
        metric = self._metric("y", "r[2][0]")
        if metric != "nil":
            metric = across(metric)
        loss_value = across("r[0]", weighted=not overlap)  # the loss is weighted already
        lines.append(f"list({loss_value}, {metric}, list({', '.join(P)}), "
                     f"list({', '.join(self._opt_vars)}), list({', '.join(S)}))")
        step_args = ", ".join(P + S + self._opt_vars)
        tail = ", weight" if data_parallel else ""
        body = ",\n  ".join(lines)
        text = (loss_fn + f"define(train_step, {step_args}, x, y, iteration, lr, seed{tail}, "
                f"block(\n  "
                f"{body}))\ntrain_step\n")
        self.train_code = text
        return _core.Program(text, "<model train step>")

    # Chunks of a global batch in deterministic mode: 8 is shared evenly by 1, 2,
    # 4 or 8 localities and cuts the usual batch sizes (multiples of 8) evenly;
    # more chunks cost more (smaller kernels, see docs/distributed.md).
    DETERMINISTIC_CHUNKS = 8

    @staticmethod
    def _fixed_sum(terms):
        """The sum of `terms` (expressions) in one fixed order: adjacent pairs,
        level by level, an odd last term carried up. A block of 2**a terms
        aligned at a multiple of 2**a is a node of this tree, so localities can
        add their own aligned blocks first and the result stays the same."""
        while len(terms) > 1:
            terms = [f"({terms[i]} + {terms[i + 1]})" if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        return terms[0]

    def _deterministic_program(self, P, S, local, chunks, n_ranks):
        """The training step of deterministic mode. This locality computes the
        gradients of its `local` chunks separately (of the chunk's loss times
        its share of the batch; an empty chunk gives zeros), adds aligned
        blocks of them in the fixed order of _fixed_sum, all-gathers those
        block sums bucket by bucket, and every locality finishes the same sum
        in the same order: the bits do not depend on the number of localities
        (nor, with deterministic tiling, of threads). The loss, metric and
        batch statistics, weighted, go the same way in one float64 bucket."""
        has_metric = self._compiled[2]
        loss_fn, stats = self._loss_fn(P, S, weighted=True)
        args, grads, upd, nums = self._update_setup(P, S)
        size = {v: int(np.prod(self.weights[v].shape)) for v in P}
        # The float64 bucket: loss (already weighted), metric, then each batch
        # norm's mean and variance.
        aux = ["astype(r_{j}[0], \"float64\")"]
        if has_metric:
            aux.append(f"astype({self._metric('y_{j}', 'r_{j}[2][0]')}, \"float64\") * w_{{j}}")
        widths = [1] * len(aux)
        for s_i, (i, bn, _) in enumerate(stats):
            channels = int(np.prod(self.weights[self._var(i, bn.params[2])].shape))
            aux += [f"astype(r_{{j}}[2][{s_i + 1}][{m}], \"float64\") * w_{{j}}" for m in (0, 1)]
            widths += [channels, channels]
        lines = []
        for j in range(local):
            lines.append(f"define(r_{j}, if(w_{j} > 0.0, value_and_grad(loss_fn, "
                         f"argnums=[{nums}], has_aux=true)({args}, x_{j}, y_{j}, seed_{j}, w_{j}), "
                         "nil))")
            for k, v in enumerate(P):
                lines.append(f"define(g_{j}_{k}, if(w_{j} > 0.0, r_{j}[1][{k}], zeros_like({v})))")
            flat = ", ".join(f"ravel({e.format(j=j)})" for e in aux)
            lines.append(f"define(g_{j}_aux, if(w_{j} > 0.0, concatenate(list({flat})), "
                         f"zeros({sum(widths)}, dtype=\"float64\")))")
        # Sums of aligned blocks of this locality's chunks (per parameter).
        block = local & -local  # the largest power of two dividing `local`
        starts = range(0, local, block)
        for k in [str(k) for k in range(len(P))] + ["aux"]:
            for s_ in starts:
                terms = [f"g_{j}_{k}" for j in range(s_, s_ + block)]
                lines.append(f"define(p_{s_}_{k}, {self._fixed_sum(terms)})")
        index = {v: k for k, v in enumerate(P)}
        groups = [[str(index[v]) for v in bucket] for bucket in self._bucket_plan(P)] + [["aux"]]
        for b, members in enumerate(groups):
            if n_ranks == 1:
                for k in members:
                    total = self._fixed_sum([f"p_{s_}_{k}" for s_ in starts])
                    lines.append(f"define({'total_aux' if k == 'aux' else grads[int(k)]}, {total})")
                continue
            rows = ", ".join("concatenate(list(" + ", ".join(f"ravel(p_{s_}_{k})" for k in members)
                             + "))" for s_ in starts)
            lines.append(f"define(parts_{b}, all_gather(stack(list({rows}))))")
            total = self._fixed_sum([f"parts_{b}[{i}]" for i in range(n_ranks * len(starts))])
            lines.append(f"define(total_{b}, {total})")
            off = 0
            for k in members:
                if k == "aux":
                    lines.append(f"define(total_aux, total_{b})")
                    continue
                v = P[int(k)]
                lines.append(f"define({grads[int(k)]}, reshape(total_{b}[{off}:{off + size[v]}], "
                             f"shape({v})))")
                off += size[v]
        lines += upd.statements
        off = 1 + int(has_metric)
        for i, bn, _ in stats:
            m = bn.momentum
            for param in (bn.params[2], bn.params[3]):
                v = self._var(i, param)
                n = int(np.prod(self.weights[v].shape))
                stat = f"astype(total_aux[{off}:{off + n}], \"{self.dtype}\")"
                lines.append(f"define({v}, {m!r} * {v} + {1.0 - m!r} * "
                             f"reshape({stat}, shape({v})))")
                off += n
        metric = "total_aux[1]" if has_metric else "nil"
        lines.append(f"list(total_aux[0], {metric}, list({', '.join(P)}), "
                     f"list({', '.join(self._opt_vars)}), list({', '.join(S)}))")
        chunk_args = ", ".join(f"{a}_{j}" for a in ("x", "y", "w", "seed") for j in range(local))
        step_args = ", ".join(P + S + self._opt_vars)
        body = ",\n  ".join(lines)
        text = (loss_fn + f"define(train_step, {step_args}, {chunk_args}, iteration, lr, "
                f"block(\n  {body}))\ntrain_step\n")
        self.train_code = text
        return _core.Program(text, "<model deterministic train step>")

    def _shard(self, xb, yb, n_ranks, rank):
        """This locality's rows of a global batch, and its share of the batch."""
        n = len(xb)
        lo, hi = rank * n // n_ranks, (rank + 1) * n // n_ranks
        return xb[lo:hi], yb[lo:hi], (hi - lo) / n

    # ------------------------------------------------------------------ data checks

    def _check_xy(self, x, y, where: str):
        x = np.asarray(x)
        if x.dtype != np.dtype(self.dtype):
            x = x.astype(self.dtype)
        if not self.weights:
            self.build(x.shape[1:])
        if tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(f"[{where}] x has samples of shape {tuple(x.shape[1:])}, but the "
                             f"model expects {self.input_shape}")
        if y is not None:
            y = np.asarray(y)
            if len(y) != len(x):
                raise ValueError(f"[{where}] x and y have different numbers of samples: "
                                 f"{len(x)} and {len(y)}")
            if self._compiled and self._compiled[1].sparse_labels:
                if not np.issubdtype(y.dtype, np.integer):
                    raise ValueError(f"[{where}] sparse_categorical_crossentropy needs integer "
                                     f"class labels, got dtype {y.dtype}")
                y = y.astype(np.int64, copy=False)
            elif y.dtype != np.dtype(self.dtype):
                y = y.astype(self.dtype)
        return x, y

    # ------------------------------------------------------------------ training

    def fit(self, x, y, batch_size: int = 32, epochs: int = 1, validation_data=None,
            shuffle: bool = True, seed: int = 0, verbose: int = 1, nan_policy: str = "stop",
            data_parallel=None, deterministic=False):
        """Trains for `epochs` passes over (x, y) in mini-batches. Returns a
        History. A non-finite loss stops training with FloatingPointError
        naming the step (nan_policy='continue' keeps going).

        Under `tessera run -n N` (data_parallel None or True) every locality
        holds the same data and parameters, takes its share of each global
        batch of `batch_size` rows, and the gradients are summed across the
        localities (weighted by share, in buckets fixed at compile time), so
        the parameters stay identical; the loss and metrics printed are those
        of the whole batch. Only locality 0 prints.

        deterministic=True (or a number of chunks) makes the result bitwise
        the same for any number of localities and threads: each global batch
        is cut into DETERMINISTIC_CHUNKS chunks (which the localities must
        share evenly), the chunks' gradients are computed separately and
        added in one fixed order, and kernels tile independently of the
        thread count while fit runs."""
        if self._compiled is None:
            raise RuntimeError("[fit] call model.compile(optimizer, loss, metrics) first")
        if nan_policy not in ("stop", "continue"):
            raise ValueError(f"[fit] nan_policy must be 'stop' or 'continue', got {nan_policy!r}")
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"[fit] batch_size must be a positive int, got {batch_size!r}")
        x, y = self._check_xy(x, y, "fit")
        if len(x) == 0:
            raise ValueError("[fit] x is empty")
        n_ranks = _dist.size() if data_parallel is not False else 1
        rank = _dist.rank() if n_ranks > 1 else 0
        if data_parallel and n_ranks == 1:
            data_parallel = False
        chunks = self._chunk_count(deterministic, n_ranks)
        if n_ranks > 1 and batch_size < n_ranks and not chunks:
            raise ValueError(f"[fit] batch_size {batch_size} is smaller than the {n_ranks} "
                             "localities sharing each batch")
        verbose = verbose if rank == 0 else 0
        if chunks:
            prog = self._program(("train_det", chunks // n_ranks, chunks, n_ranks))
        else:
            # The data-parallel step depends on the bucket settings.
            prog = self._program(("train_dp", self.BUCKET_BYTES, self.OVERLAP_BACKWARD)
                                 if n_ranks > 1 else "train")
        opt = self._compiled[0]
        P, S = self._params(True), self._params(False)
        if self._opt_state is None:
            self._opt_state = opt.init_state(self.weights, self._opt_statevars)
        history = History()
        n_batches = -(-len(x) // batch_size)
        tiling = _core.deterministic()
        if chunks:
            _core.set_deterministic(True)
        try:
            for epoch in range(epochs):
                start = time.perf_counter()
                total_loss = total_acc = 0.0
                seen = 0
                for b, (xb, yb) in enumerate(_data.batches(x, y, batch_size, shuffle=shuffle,
                                                          seed=seed, epoch=epoch)):
                    it = self._iteration
                    n = len(xb)
                    state = ([self.weights[v] for v in P] + [self.weights[v] for v in S]
                             + [self._opt_state[v] for v in self._opt_vars])
                    if chunks:
                        args = state + self._chunk_args(xb, yb, chunks, n_ranks, rank, seed, it) \
                            + [it, opt.learning_rate(it)]
                    else:
                        extra = []
                        if n_ranks > 1:
                            xb, yb, share = self._shard(xb, yb, n_ranks, rank)
                            extra = [share]
                        args = state + [xb, yb, it, opt.learning_rate(it),
                                        (seed * 1_000_003 + it) * 64 + rank] + extra
                    t_step = _core._trace_now()
                    try:
                        loss, acc, new_p, new_o, new_s = prog.run(args)
                    except Exception:
                        # A step that failed part way may leave gradient
                        # buckets waiting for members; the next would meet them.
                        if n_ranks > 1:
                            _core._drop_gradient_buckets()
                        raise
                    _core._trace_step(it, t_step, _core._trace_now())
                    loss = float(loss)
                    if not math.isfinite(loss) and nan_policy == "stop":
                        raise FloatingPointError(
                            f"[fit] the loss became {loss} at epoch {epoch + 1}, step {b + 1} "
                            f"(update {it + 1}); the weights are those before this step. Lower "
                            "the learning rate, check the data, or pass nan_policy='continue'")
                    for v, a in zip(P, new_p):
                        self.weights[v] = a
                    for v, a in zip(self._opt_vars, new_o):
                        self._opt_state[v] = a
                    for v, a in zip(S, new_s):
                        self.weights[v] = a
                    self._iteration += 1
                    seen += n
                    total_loss += loss * n
                    if acc is not None:
                        total_acc += float(acc) * n
                    if verbose:
                        self._progress(epoch, epochs, b + 1, n_batches, total_loss / seen,
                                       total_acc / seen if acc is not None else None, start)
                logs = {"loss": total_loss / seen}
                if self._compiled[2]:
                    logs["accuracy"] = total_acc / seen
                if validation_data is not None:
                    vl, va = self.evaluate(*validation_data, batch_size=max(batch_size, 256),
                                           verbose=0)
                    logs["val_loss"] = vl
                    if va is not None:
                        logs["val_accuracy"] = va
                logs["time"] = time.perf_counter() - start
                history._add(epoch, logs)
                if verbose:
                    self._progress_end(epoch, epochs, logs)
        finally:
            _core.set_deterministic(tiling)
        return history

    def _chunk_count(self, deterministic, n_ranks) -> int:
        """The number of chunks per global batch in deterministic mode (0: off)."""
        if deterministic is False or deterministic is None:
            return 0
        chunks = self.DETERMINISTIC_CHUNKS if deterministic is True else deterministic
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise ValueError("[fit] deterministic must be True, False or a number of chunks (a "
                             f"positive int), got {deterministic!r}")
        if chunks % n_ranks:
            raise ValueError(f"[fit] deterministic mode cuts each global batch into {chunks} "
                             f"chunks, which {n_ranks} localities cannot share evenly: run on a "
                             f"number of localities that divides {chunks}, or pass "
                             f"deterministic=<chunks> with a multiple of {n_ranks}")
        return chunks

    @staticmethod
    def _chunk_args(xb, yb, chunks, n_ranks, rank, seed, it) -> list:
        """This locality's chunks of a global batch (chunk c: rows c*n//chunks up to
        (c+1)*n//chunks), their shares of the batch and their dropout seeds, as
        the deterministic step takes them: x_0.., y_0.., w_0.., seed_0.."""
        n, local = len(xb), chunks // n_ranks
        mine = range(rank * local, (rank + 1) * local)
        bounds = [(c * n // chunks, (c + 1) * n // chunks) for c in mine]
        return ([xb[lo:hi] for lo, hi in bounds] + [yb[lo:hi] for lo, hi in bounds]
                + [(hi - lo) / n for lo, hi in bounds]
                + [(seed * 1_000_003 + it) * chunks + c for c in mine])

    @staticmethod
    def _live() -> bool:
        """A progress bar redrawn in place: only on a terminal, and not under
        mpirun (which forwards output line by line)."""
        return sys.stdout.isatty() and "OMPI_COMM_WORLD_SIZE" not in os.environ

    def _progress(self, epoch, epochs, b, n, loss, acc, start):
        if not self._live():
            return
        width = 24
        done = int(width * b / n)
        bar = "=" * max(0, done - 1) + (">" if done < width else "=") + "." * (width - done)
        msg = f"\rEpoch {epoch + 1}/{epochs} [{bar}] {b}/{n} - loss {loss:.4f}"
        if acc is not None:
            msg += f" - accuracy {acc:.4f}"
        msg += f" - {time.perf_counter() - start:.1f}s"
        sys.stdout.write(msg)
        sys.stdout.flush()

    def _progress_end(self, epoch, epochs, logs):
        parts = [f"Epoch {epoch + 1}/{epochs}"]
        parts += [f"{k} {v:.4f}" for k, v in logs.items() if k != "time"]
        parts.append(f"{logs['time']:.2f}s")
        end = "\r" if self._live() else ""
        sys.stdout.write(end + " - ".join(parts) + " " * 10 + "\n")
        sys.stdout.flush()

    # ------------------------------------------------------------------ inference

    def evaluate(self, x, y, batch_size: int = 256, verbose: int = 1):
        """(loss, accuracy or None) over (x, y), in inference mode."""
        x, y = self._check_xy(x, y, "evaluate")
        prog = self._program("evaluate")
        args0 = [self.weights[v] for v in self._params(True) + self._params(False)]
        total_loss = total_acc = 0.0
        has_acc = False
        for xb, yb in _data.batches(x, y, batch_size, shuffle=False):
            loss, acc = prog.run(args0 + [xb, yb])
            total_loss += float(loss) * len(xb)
            if acc is not None:
                has_acc = True
                total_acc += float(acc) * len(xb)
        n = max(1, len(x))
        result = (total_loss / n, total_acc / n if has_acc else None)
        if verbose:
            print(f"evaluate: loss {result[0]:.4f}" +
                  (f" - accuracy {result[1]:.4f}" if has_acc else ""))
        return result

    def predict(self, x, batch_size: int = 256):
        """The model's outputs for x, in inference mode, as one array."""
        x, _ = self._check_xy(x, None, "predict")
        prog = self._program("predict")
        args0 = [self.weights[v] for v in self._params(True) + self._params(False)]
        outs = [prog.run(args0 + [xb]) for xb in _data.batches(x, None, batch_size,
                                                                 shuffle=False)]
        if not outs:
            return np.zeros((0,) + self.output_shape, dtype=self.dtype)
        return outs[0] if len(outs) == 1 else _core.call_primitive("concatenate", [outs], {})

    # ------------------------------------------------------------------ weights

    def get_weights(self) -> list:
        """The weights as a list of NumPy arrays (copies), layer by layer in
        the order of each layer's parameters, as Keras's get_weights."""
        if not self.weights:
            raise RuntimeError("[get_weights] the model is not built: pass input_shape or call "
                               "build")
        return [np.array(v, copy=True) for v in self.weights.values()]

    def set_weights(self, weights):
        """Replaces the weights from a list like get_weights gives: the same
        count, and each array of the same shape (cast to the model's dtype).
        Nothing is changed when any of them does not fit."""
        if not self.weights:
            raise RuntimeError("[set_weights] the model is not built: pass input_shape or call "
                               "build")
        weights = list(weights)
        names = list(self.weights)
        if len(weights) != len(names):
            raise ValueError(f"[set_weights] the model has {len(names)} weight arrays, got "
                             f"{len(weights)}")
        new = {}
        for i, (name, w) in enumerate(zip(names, weights)):
            w = np.asarray(w)
            want = self.weights[name].shape
            if w.shape != want:
                raise ValueError(f"[set_weights] weight {i} ({name}) must have shape {want}, got "
                                 f"{w.shape}")
            if not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
                raise TypeError(f"[set_weights] weight {i} ({name}) must hold real numbers, got "
                                f"dtype {w.dtype}")
            new[name] = np.array(w, dtype=self.dtype, copy=True)
        self.weights.update(new)

    def save_weights(self, path):
        """Writes the weights in tessera's weights format (docs/nn.md)."""
        if not self.weights:
            raise RuntimeError("[save_weights] the model is not built")
        save_weights(path, self.weights)

    def load_weights(self, path):
        """Reads weights written by save_weights; every name, shape and dtype
        must match this model, and the checksum must be right, or nothing is
        loaded."""
        if not self.weights:
            raise RuntimeError("[load_weights] the model is not built: build it first")
        expected = {k: (v.shape, v.dtype) for k, v in self.weights.items()}
        self.weights = load_weights(path, expected)
