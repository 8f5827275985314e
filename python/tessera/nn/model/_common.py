"""Helpers the model's modules share: the optimizer by name, log formatting,
what compile() chose, deferred initial draws."""

from __future__ import annotations

import os

import numpy as np

from ... import data as _data
from ... import distributed as _dist
from ... import optim as _optim
from .. import initializers
from ..optimizer_classes import get as keras_optimizer
from ..params import WEIGHTS_IN_FILE
from ..given_batches import iterable_batches
from ..utils import PyDataset, iterator_dataset


def _optimizer(opt):
    """compile's optimizer: an Optimizer as it is, or a name or config dict (Keras's
    meaning for "sgd", "adam", "adamw": nn/optimizer_classes.py)."""
    if isinstance(opt, _optim.Optimizer):
        return opt
    if isinstance(opt, (str, dict)):
        try:
            return keras_optimizer(opt)
        except ValueError as e:
            raise ValueError(f"[compile] {e}") from None
    raise TypeError(f"[compile] optimizer must be a name, a config dict or a tessera.optim "
                    f"optimizer, got {type(opt).__name__}: {opt!r}")


def _fmt(v) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _draws_deferred() -> bool:
    """Whether a model made here draws its initial weights on first read:
    on a locality of a pipeline (TESSERA_MESH with pipeline > 1, from
    tessera run --mesh), where fit keeps only the stage's layers, so that
    the other stages' weights are never made there. Not while load_model
    counts the weights a file holds (it checks each draw's size first)."""
    text = os.environ.get("TESSERA_MESH")
    if not text or WEIGHTS_IN_FILE.get() is not None:
        return False
    try:
        return _dist._mesh_sizes(text).get("pipeline", 1) > 1
    except ValueError:
        return False  # the mesh's own check reports it where the mesh is made


def _own_initializer(p) -> bool:
    """A parameter drawn by one of tessera's initializers (a pure function
    of the seed); a user's initializer object is called when the model is
    made, as without a pipeline."""
    init = p.init if hasattr(p.init, "generate") else initializers.get(p.init)
    return type(init).__module__ == initializers.__name__


def _readable_bytes(n: float) -> str:
    """Keras's summary's sizes: 1024-based units with two decimals."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024:
            return f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} PB"


class _Compiled:
    """What compile() chose: the optimizer, a loss and its weight per output,
    the metrics per output."""

    def __init__(self, optimizer, losses, loss_weights, metrics):
        self.optimizer = optimizer
        self.losses = losses
        self.loss_weights = loss_weights
        self.metrics = metrics  # per output: list of Metric
        # per output: is each metric weighted by sample_weight (weighted_metrics=)
        self.weighted = [[False] * len(ms) for ms in metrics]
        self.output_losses: list = []  # OutputLoss trackers (a model of several outputs)

    def all_metrics(self) -> list:
        """The metrics the programs sum, in order: compile's, then each
        output's loss tracker."""
        return [m for ms in self.metrics for m in ms] + list(self.output_losses)

    @property
    def has_metrics(self) -> bool:
        return any(self.metrics) or bool(self.output_losses)


class OutputLoss:
    """Keras's per-output loss tracker of a model of several outputs (logged
    as "<output>_loss"): the mean over the batches (weighted by their sizes)
    of output k's compiled loss, before its loss weight (as Keras's)."""

    def __init__(self, k: int, name: str):
        self.k, self.name = k, name

    def result(self, totals):
        return float(totals[0] / totals[1]) if totals[1] else 0.0


def _from_py_dataset(x, where, steps=None, shuffle_seed=None, form=None):
    """A keras.utils.PyDataset, or a Python generator or iterator of batches
    (Keras's generator input: `steps` batches an epoch, or until it ends), as a
    tessera Dataset of the batches as given (fit, evaluate and predict read those);
    shuffle_seed: fit's shuffle of a PyDataset's batch order, as Keras's; form: the
    model's flattening of a PyDataset's batches (Model._batch_form), or None."""
    if isinstance(x, PyDataset):
        return x._to_dataset(where, shuffle_seed, form)
    if hasattr(x, "__next__") and not isinstance(x, (np.ndarray, _data.Dataset)):
        return iterator_dataset(x, where, steps)
    if _batch_iterable(x):
        return iterable_batches(x, where, steps)
    return x


def _batch_iterable(x) -> bool:
    """An iterable of batches read again each epoch (a PyTorch DataLoader, as Keras
    takes one): iterable, not an iterator, and none of what fit reads as data itself
    (arrays and anything with __array__ or a shape, lists, tuples, dicts, strings,
    tessera Datasets)."""
    return (hasattr(type(x), "__iter__") and not hasattr(x, "__next__")
            and not isinstance(x, (np.ndarray, list, tuple, dict, str, bytes, _data.Dataset))
            and not hasattr(x, "__array__") and not hasattr(x, "shape"))
