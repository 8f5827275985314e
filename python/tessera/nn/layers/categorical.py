"""Keras's categorical preprocessing layers: CategoryEncoding (integer
indices to one_hot / multi_hot / count vectors) and Discretization
(numbers to bucket indices). Eagerly they compute with NumPy on arrays;
called on a model's symbolic tensor they compile into the model's program
(encoding.py), with Keras-on-JAX's semantics and no gradient (their outputs
are indices and counts)."""

from __future__ import annotations

import numpy as np

from ..symbolic import KerasTensor, user_location
from .encoding import encode_expr, encoded_shape, float_list
from .preprocessing import _batches, _check_mode, _encode, _no_sparse, _Preprocessing

__all__ = ["CategoryEncoding", "Discretization"]


class CategoryEncoding(_Preprocessing):
    """Integer indices to one_hot / multi_hot / count vectors of length
    num_tokens, like keras.layers.CategoryEncoding (call(x,
    count_weights=...) weights the counts)."""

    kind = "CategoryEncoding"

    def __init__(self, num_tokens=None, output_mode="multi_hot", sparse=False, name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens <= 0:
            raise ValueError(f"[CategoryEncoding] num_tokens must be a positive int, got "
                             f"{num_tokens!r}")
        self.output_mode = _check_mode(output_mode, ("one_hot", "multi_hot", "count"),
                                       "CategoryEncoding")
        _no_sparse(sparse, "CategoryEncoding")
        self.num_tokens = num_tokens
        self.sparse = False

    in_graph = True

    def split_call(self, inputs, count_weights=None):
        """In a model: the indices, and count_weights (a symbolic tensor of
        their shape) as a second input."""
        self.multi_input = count_weights is not None
        if count_weights is None:
            return [inputs], {}
        if self.output_mode != "count":
            raise ValueError("[CategoryEncoding] count_weights is only for output_mode='count', "
                             f"got output_mode={self.output_mode!r} (at {user_location()})")
        if not isinstance(count_weights, KerasTensor):
            raise TypeError(f"[CategoryEncoding] layer {self.name!r} called on a symbolic tensor "
                            "takes count_weights as a symbolic tensor too (an Input or a "
                            f"layer's output), got {type(count_weights).__name__} (at "
                            f"{user_location()})")
        return [inputs, count_weights], {}

    def compute_output_shape(self, s):
        s, w = (s[0], s[1]) if getattr(self, "multi_input", False) else (s, None)
        if w is not None and tuple(w) != tuple(s):
            raise ValueError(f"[CategoryEncoding] layer {self.name!r}: count_weights must have "
                             f"the shape of the inputs, got {tuple(w)} for inputs {tuple(s)}")
        return encoded_shape(self.kind, self.name, s, self.output_mode, self.num_tokens)

    def forward(self, x, p, ctx):
        # a list when this call had count_weights (the layer may be shared by calls without)
        x, w = (x[0], x[1]) if isinstance(x, (list, tuple)) else (x, None)
        s = self._in_shape[0] if w is not None else self._in_shape
        if w is not None:
            w = f"stop_gradient(astype({w}, \"float32\"))"
        return encode_expr(f"astype({x}, \"int64\")", s, self.output_mode, self.num_tokens,
                           weights=w)

    def call(self, inputs, count_weights=None):
        a = np.asarray(inputs)
        if a.dtype.kind == "f" and np.all(np.mod(a, 1) == 0):
            a = a.astype(np.int64)
        if a.dtype.kind not in "iub":
            raise TypeError(f"[CategoryEncoding] takes integer indices, got dtype {a.dtype}")
        if count_weights is not None and self.output_mode != "count":
            raise ValueError("[CategoryEncoding] count_weights is only for output_mode='count', "
                             f"got output_mode={self.output_mode!r}")
        if a.ndim > 2:
            raise ValueError(f"[CategoryEncoding] inputs must be rank 1 or 2, got shape {a.shape}")
        return _encode(a, self.output_mode, self.num_tokens, "CategoryEncoding",
                       count_weights=count_weights)


class Discretization(_Preprocessing):
    """Buckets numbers by bin_boundaries (np.digitize), like
    keras.layers.Discretization; with num_bins, adapt learns the boundaries
    with Keras's approximate-quantile summaries (epsilon), so they equal
    Keras's."""

    kind = "Discretization"

    def __init__(self, bin_boundaries=None, num_bins=None, epsilon=0.01, output_mode="int",
                 sparse=False, dtype=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if (bin_boundaries is None) == (num_bins is None):
            raise ValueError("[Discretization] give exactly one of bin_boundaries and num_bins, "
                             f"got bin_boundaries={bin_boundaries!r}, num_bins={num_bins!r}")
        if num_bins is not None and (isinstance(num_bins, bool) or not isinstance(num_bins, int)
                                     or num_bins < 1):
            raise ValueError(f"[Discretization] num_bins must be a positive int, got {num_bins!r}")
        self.output_mode = _check_mode(output_mode, ("int", "one_hot", "multi_hot", "count"),
                                       "Discretization")
        _no_sparse(sparse, "Discretization")
        self.bin_boundaries = None if bin_boundaries is None else [float(b) for b in
                                                                    bin_boundaries]
        self.num_bins = num_bins
        self.epsilon = float(epsilon)
        self.out_dtype = dtype
        self.sparse = False
        self._summary = np.zeros((2, 0), np.float32)

    @staticmethod
    def _compress(summary, eps):
        if summary.shape[1] * eps < 1:
            return summary
        percents = eps + np.arange(0.0, 1.0, eps)
        cum = summary[1].cumsum()
        bins = np.interp(percents, cum / cum[-1], summary[0])
        cum = np.interp(percents, cum / cum[-1], cum)
        weights = cum - np.concatenate(([0.0], cum[:-1]))
        return np.stack((bins, weights)).astype(np.float32)

    def adapt(self, data, batch_size=None, steps=None):
        """Learns num_bins - 1 boundaries from the data's quantiles."""
        if self.num_bins is None:
            raise ValueError("[Discretization] adapt needs num_bins (the layer was made with "
                             "bin_boundaries)")
        summary = np.zeros((2, 0), np.float32)
        for batch in _batches(data, steps, "Discretization", lists_are_batches=True):
            v = np.sort(np.asarray(batch, dtype=np.float32).reshape(-1))
            step = max(v.size / (1.0 / self.epsilon), 1)
            picked = v[int(step - 1)::int(step)]
            part = np.stack([picked, np.ones_like(picked) * step])
            merged = np.concatenate((part, summary), axis=1)
            merged = np.take(merged, np.argsort(merged[0]), axis=1)
            summary = self._compress(merged, self.epsilon)
        if summary.shape[1] == 0:
            raise ValueError("[Discretization] adapt got no data")
        if self.__dict__.get("_compiled_at") is not None:
            raise RuntimeError(
                f"[Discretization] layer {self.name!r} is already compiled into a model's "
                f"program (called at {self._compiled_at}), which keeps the boundaries it was "
                "compiled with; adapt before the model's first fit, evaluate or predict (at "
                f"{user_location()})")
        self.bin_boundaries = self._compress(summary, 1.0 / self.num_bins)[0, :-1].tolist()

    def get_config(self):
        config = super().get_config()
        config["bin_boundaries"] = self.bin_boundaries
        return config

    @classmethod
    def from_config(cls, config):
        """As Keras's: an adapted layer's config holds both num_bins and the
        learned bin_boundaries; the boundaries are set after construction."""
        config = dict(config)
        bounds = config.pop("bin_boundaries", None)
        if config.get("num_bins") is None:
            return cls(bin_boundaries=bounds, **config)
        layer = cls(**config)
        layer.bin_boundaries = bounds
        return layer

    in_graph = True

    @property
    def output_dtype(self):
        """Keras's: int32 indices, else the layer's dtype (float32)."""
        return "int32" if self.output_mode == "int" else (self.out_dtype or "float32")

    def _depth(self) -> int:
        return len(self.bin_boundaries) + 1 if self.bin_boundaries is not None else \
            self.num_bins

    def compute_output_shape(self, s):
        self._called_at = user_location()
        return encoded_shape(self.kind, self.name, s, self.output_mode, self._depth())

    def forward(self, x, p, ctx):
        # the boundaries as they are now (adapt may follow the model's construction)
        if self.bin_boundaries is None:
            raise ValueError(f"[Discretization] layer {self.name!r} (called at "
                             f"{self._called_at}) has no bin_boundaries yet: call adapt(data) "
                             "before the model's first fit, evaluate or predict")
        self._compiled_at = self._called_at
        bounds = float_list(self.bin_boundaries)
        idx = f"searchsorted({bounds}, astype(stop_gradient({x}), \"float32\"), side=\"right\")"
        if self.output_mode == "int":
            return f"astype({idx}, \"int32\")"
        return encode_expr(idx, self._in_shape, self.output_mode, self._depth(),
                           dtype=self.output_dtype)

    def call(self, inputs):
        if self.bin_boundaries is None:
            raise ValueError("[Discretization] give bin_boundaries or call adapt(data) before "
                             "calling the layer")
        a = np.asarray(inputs)
        if a.dtype.kind not in "iuf":
            raise TypeError(f"[Discretization] takes numbers, got dtype {a.dtype}")
        # Keras casts the inputs to float32 and gives int32 indices
        idx = np.digitize(a.astype(np.float32), np.asarray(self.bin_boundaries, np.float32))
        if self.output_mode == "int":
            return idx.astype(np.int32)
        return _encode(idx, self.output_mode, self._depth(), "Discretization",
                       dtype=self.output_dtype)
