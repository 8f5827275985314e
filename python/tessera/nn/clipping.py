"""Norms of gradients and weights split over a tensor group (docs/parallelism.md,
"Tensor parallelism", "Clipping and Lamb").

A layer split over a tensor group (tessera.nn.parallel) holds this member's
slice of each split weight and the whole of its replicated weights (a
row-parallel layer's bias, say); replicated layers (LayerNormalization) hold
whole weights too, with the same gradient on every member. A norm of the
whole model's gradients is then

    sqrt(R + S_0 + ... + S_{t-1})

where R is the sum of squares of the replicated gradients (every member
makes the same R: counted once) and S_k member k's sum of squares of its
slices of the split gradients. The S_k are all-gathered over the tensor group
(one small collective of one number per member) and added in member order by
every member, so every member applies the same scale, and the bits depend on
t only (not on the data size, the threads or the run). Lamb's norm of a
split weight and of its update direction are made alike from the members'
sums of squares of their slices.

Under pipeline stages each stage's sums of squares of its parameters are
all-gathered over the pipeline group first (stage_norm_lines), and every
stage adds the same terms in the whole model's order: the same bits as
without a pipeline.

Under ZeRO on the data axis the norms are those of the whole summed
gradients and weights too: ZeRO 1 has the whole sums; under ZeRO 2 and 3 each
bucket is all-gathered from the members' slices for the norm (one bucket at a
time; zero.ZeroPlan.whole_grad_lines), and Lamb's slices already gather each
weight and direction (zero.ZeroPlan._lamb_lines): the same bits as without
ZeRO.

Together (pipeline stages, ZeRO and split layers) the stage's per-parameter
sums come from its whole summed gradients, gathered from the slices where
ZeRO 2/3 keeps only those."""

from __future__ import annotations

from ..optim import Lamb

__all__ = ["SplitNorms", "fixed_sum"]


def _what(opt):
    if opt.clipnorm is not None:
        return "clipnorm (a global norm of the gradients)"
    if getattr(opt, "weight_clipnorm", None) is not None:
        return "clipnorm (each weight's gradient clipped to a norm)"
    if isinstance(opt, Lamb):
        return "Lamb (trust ratios from the norms of each weight)"
    return None


class SplitNorms:
    """Which of a model's trainable variables are split over its tensor group,
    and the program text of norms over the whole weights."""

    def __init__(self, model, P):
        self.split = set()
        self.dtype = model.dtype
        self.groups = {}  # group id -> a layer split over it (for messages)
        for v in P:
            layer, param = model._owner[v]
            if getattr(layer, "tensor_size", 1) > 1 and param.name in layer._split_axis:
                self.split.add(v)
                self.groups.setdefault(int(layer.group), layer)
        self.group = next(iter(self.groups)) if len(self.groups) == 1 else None

    @classmethod
    def of(cls, model, P, opt):
        """The SplitNorms of P when `opt` needs norms (clipnorm, Lamb) and a
        weight is split over a tensor group; else None. Layers split over two
        different groups are refused (their sum would need both)."""
        if _what(opt) is None:
            return None
        norms = cls(model, P)
        if not norms.split:
            return None
        if norms.group is None:
            names = ", ".join(f"{layer.name!r} over {layer._group_text()}"
                              for layer in norms.groups.values())
            raise ValueError(f"[fit] {type(opt).__name__}: {_what(opt)} needs one tensor group, "
                             f"but the model's layers are split over several: {names}")
        return norms

    # ----------------------------------------------------------- text

    def across(self, expr: str, fixed_sum, name: str) -> list:
        """Statements defining `name` as the sum over the tensor group of the
        scalar `expr` (each member's), added in member order."""
        return [f"define({name}_all, all_gather(reshape({expr}, [1]), group={self.group}))",
                f"define({name}, {fixed_sum([f'{name}_all[{k}]' for k in range(self._t())])})"]

    def _t(self) -> int:
        return self.groups[self.group].tensor_size

    def norm_lines(self, P, grads, fixed_sum, name: str = "tnorm") -> list:
        """Statements defining `name`, the global norm of the whole model's
        gradients (`grads`: this member's, of P) from the replicated
        gradients' sum of squares and the split ones' summed over the group
        (module doc)."""
        rep = [f"sum(square({g}))" for v, g in zip(P, grads) if v not in self.split]
        mine = [f"sum(square({g}))" for v, g in zip(P, grads) if v in self.split]
        lines = self.across(fixed_sum(mine), fixed_sum, f"{name}_split")
        total = f"{name}_split" if not rep else f"({fixed_sum(rep)} + {name}_split)"
        return lines + [f"define({name}, sqrt({total}))"]

    def lamb_sumsq(self, P, fixed_sum):
        """Lamb's sum of squares of parameter i (or of its direction): over
        the whole weight for a split parameter (optim.Optimizer.update_code's
        `sum_squares`)."""
        def sumsq(i: int, expr: str, name: str) -> tuple:
            if P[i] not in self.split:
                return [], f"sum(square({expr}))"
            return self.across(f"sum(square({expr}))", fixed_sum, name), name

        return sumsq

    def stage_norm_lines(self, P_all, P, grads, owner, stage: int, p: int, pgroup: int,
                         fixed_sum, name: str = "pnorm") -> tuple:
        """A pipeline stage's statements defining `name`, the norm of every
        stage's gradients (this stage's: `grads` of its parameters P), and
        the text of the function its pipeline all-gather is called through
        (the update program's first line): each stage's sums of squares of
        its parameters are all-gathered over the pipeline group, and every
        stage adds the same terms in the order of the whole model's
        parameters P_all, as norm_lines does without a pipeline (the same
        bits)."""
        width = max(sum(1 for v in P_all if owner[v] == s) for s in range(p))
        mine = [f"reshape(sum(square({g})), [1])" for g in grads]
        if len(mine) < width:
            mine.append(f"zeros({width - len(mine)}, dtype=\"{self.dtype}\")")
        flat = mine[0] if len(mine) == 1 else f"concatenate(list({', '.join(mine)}))"
        at, seen = {}, [0] * p
        for v in P_all:
            at[v] = owner[v] * width + seen[owner[v]]
            seen[owner[v]] += 1
        rep = [f"{name}_all[{at[v]}]" for v in P_all if v not in self.split]
        split = [f"{name}_all[{at[v]}]" for v in P_all if v in self.split]
        lines = [f"define({name}_mine, {flat})", f"define({name}_all, {name}_gather({name}_mine))"]
        lines += self.across(fixed_sum(split), fixed_sum, f"{name}_split")
        total = f"{name}_split" if not rep else f"({fixed_sum(rep)} + {name}_split)"
        gather = f"define({name}_gather, x, all_gather(x, group={pgroup}))\n"
        return lines + [f"define({name}, sqrt({total}))"], gather


def fixed_sum(terms):
    """The sum of `terms` (expressions) in one fixed order: adjacent pairs,
    level by level, an odd last term carried up. A block of 2**a terms
    aligned at a multiple of 2**a is a node of this tree, so localities can
    add their own aligned blocks first and the result stays the same."""
    while len(terms) > 1:
        terms = [f"({terms[i]} + {terms[i + 1]})" if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]
