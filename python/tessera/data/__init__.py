"""Datasets and mini-batches.

* ``load_har(root=None, split="train")``: the UCI HAR dataset ("Human Activity
  Recognition Using Smartphones") as distributed, read into ``x`` of shape
  ``(N, 128, 9)`` float32 and ``y`` int64 in 0..5.
* ``synthetic_har(n=None, seed=0, split="train")``: data of the same shapes and
  classes for when the real files are absent; learnable from the signals and
  the same for a given seed.
* ``load_fashion_mnist(split="train", root=...)``: Fashion-MNIST from Debian's
  ``dataset-fashion-mnist`` package: ``x`` ``(N, 28, 28, 1)`` float32 in [0, 1],
  ``y`` int64 in 0..9.
* ``batches(x, y, batch_size, shuffle=True, seed=0, epoch=0)``: mini-batches in
  an order that depends only on (seed, epoch).
* ``Dataset``: a tf.data-like pipeline (``from_tensor_slices``, ``from_npy``
  memory-mapped, ``from_generator``, ``range``, ``zip``; ``shuffle``, ``batch``,
  ``padded_batch``, ``unbatch``, ``map``, ``filter``, ``take``, ``shard``,
  ``concatenate``, ``enumerate``, ``cache``, ``repeat``, ``prefetch``) whose ``epoch_batches(epoch, num_shards=,
  shard_index=, start_batch=)`` is what ``Model.fit`` reads: each locality only
  its rows of every global batch, resumable at any batch.

The numerical work happens in tessera's C++ primitives (``file_read_txt``,
``file_read_idx``, ``stack``, ``take``, ``permutation``, the random draws of a
small generated program), not in Python. See docs/data.md.

The package: ``loaders`` (the datasets, ``batches``), ``structure`` (``Spec``,
``Batch``, nested structures), ``dataset`` (``Dataset``), ``pipelines`` (its
transformations outside the fixed plan, and ``cache``'s files).
"""

from .dataset import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from .loaders import (FASHION_MNIST_CLASSES, HAR_CLASSES, HAR_SIGNALS, batches,
                      load_fashion_mnist, load_har, synthetic_har)
from .structure import Batch, Spec
# (what tessera.nn reads of the pipeline's internals)
from .dataset import _PLAN
from .structure import _shard_args, _shard_range

__all__ = [
    "HAR_SIGNALS",
    "HAR_CLASSES",
    "FASHION_MNIST_CLASSES",
    "load_har",
    "synthetic_har",
    "load_fashion_mnist",
    "batches",
    "Dataset",
    "Batch",
    "Spec",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
]
