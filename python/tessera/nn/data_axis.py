"""Where fit's data parallelism runs: the data axis of the model's mesh (or
the job's, from `tessera run --mesh`), the check that every locality was given
the same data, and the ZeRO plan of a fit (docs/parallelism.md, "fit on the
data axis", "ZeRO"). A mixin of Model."""

from __future__ import annotations

import os

import numpy as np

from .. import distributed as _dist
from .zero import ZeroPlan


class DataAxisMixin:
    """fit's data axis (see the module doc)."""

    def _data_axis(self, data_parallel):
        """(group, size, rank) of fit's data parallelism: the data group of
        the mesh of the model's tensor-parallel layers, or of the job's mesh
        (TESSERA_MESH, from tessera run --mesh); without a mesh every
        locality (group None); with data_parallel=False this one alone."""
        world = _dist.size()
        if data_parallel is False or world == 1:
            return None, 1, 0
        mesh = self._layer_mesh()
        if mesh is None and os.environ.get("TESSERA_MESH"):
            mesh = _dist.mesh()
        if mesh is None:
            return None, world, _dist.rank()
        return mesh.group("data"), mesh.size("data"), mesh.rank("data")

    def _layer_mesh(self):
        """The mesh of the model's tensor-parallel layers (the first layer
        holding weights whose group belongs to a Mesh), or None."""
        for layer, _ in self._owner.values():  # every layer holding weights, nested ones too
            g = getattr(layer, "group", None)
            if isinstance(g, _dist.Group) and getattr(g, "mesh", None) is not None:
                return g.mesh
        return None

    def _zero_plan(self, stage, d, chunks):
        """The ZeroPlan of this fit (None without ZeRO or with one data
        member, where every stage is plain data parallelism)."""
        if not stage or d == 1:
            return None
        P = self._params(True)
        weights = self.weights
        plan = ZeroPlan(stage, d, chunks or d, self._bucket_plan(P),
                        {v: weights[v].shape for v in P}, self.dtype)
        plans = self.__dict__.setdefault("_zero_plans", {})
        return plans.setdefault(plan.key, plan)

    @staticmethod
    def _same_data_everywhere(rows, n_batches, batch_size, n_ranks):
        """Data parallel fit: every locality must pass the same data (each
        takes its share of every global batch). One small collective at the
        start compares the row and batch counts; an error names each one's."""
        mine = np.array([[-1 if rows is None else rows, -1 if n_batches is None else n_batches,
                          batch_size]], dtype=np.int64)
        every = np.asarray(_dist.all_gather(mine)).reshape(n_ranks, 3)
        if (every == every[0]).all():
            return

        def says(r, v):
            rows_r = "an unknown number of rows" if v[0] < 0 else f"{v[0]} rows"
            batches = "?" if v[1] < 0 else v[1]
            return f"locality {r} has {rows_r} ({batches} batches of {v[2]})"

        raise ValueError("[fit] the localities were given different amounts of data: "
                         + ", ".join(says(r, v) for r, v in enumerate(every.tolist()))
                         + "; every locality must pass the same data to fit (each takes its "
                         "share of every global batch)")
