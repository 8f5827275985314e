"""tessera.nn.ops: Keras 3's ``keras.ops`` (``from tessera.nn import ops``).

Each op has Keras's name, signature and defaults. On arrays it runs at once
(tessera's primitives; NumPy arrays in and out). On symbolic tensors (inside
a custom layer's ``call``, a loss or a metric) it is recorded into the
model's program, like the NumPy functions, and differentiated by the
primitives' gradient rules. A Keras op tessera lacks is an AttributeError
naming the closest supported op."""

from __future__ import annotations

from . import core, einops, extra, image, linalg, nn, nn_more, numpy, transforms
from ._base import missing
from .core import *  # noqa: F401,F403
from .einops import rearrange  # noqa: F401
from .transforms import associative_scan, custom_gradient  # noqa: F401
from .extra import *  # noqa: F401,F403
from .linalg import (cholesky, cholesky_inverse, det, eig, eigh, inv, lstsq, lu_factor,  # noqa
                     matrix_rank, norm, pinv, qr, slogdet, solve, solve_triangular, svd)
from .nn import *  # noqa: F401,F403
from .nn_more import *  # noqa: F401,F403
from .numpy import *  # noqa: F401,F403

__all__ = sorted(set(core.__all__) | set(extra.__all__) | set(nn.__all__) | set(numpy.__all__) |
                 set(nn_more.__all__) | set(einops.__all__) | set(transforms.__all__) |
                 {"cholesky", "cholesky_inverse", "det", "eig", "eigh", "inv", "lstsq", "norm",
                  "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd", "matrix_rank",
                  "lu_factor"} |
                 {"core", "image", "linalg", "nn", "numpy"})

# keras.ops.numpy holds these too: the same functions under both names.
for _name in extra.NUMPY_NAMES:
    setattr(numpy, _name, getattr(extra, _name))
numpy.slogdet = slogdet
numpy.__all__ += [*extra.NUMPY_NAMES, "slogdet"]
for _name in ("adaptive_average_pool", "adaptive_max_pool", "fold", "unfold", "polar"):
    setattr(nn, _name, getattr(nn_more, _name))
for _name in ("depth_to_space", "space_to_depth", "psnr", "separable_conv", "sparsemax"):
    setattr(nn, _name, getattr(extra, _name))
nn.__all__ += ["adaptive_average_pool", "adaptive_max_pool", "fold", "unfold", "polar",
               "depth_to_space", "space_to_depth", "psnr", "separable_conv", "sparsemax"]
del _name


def __getattr__(name):
    """A Keras op tessera lacks: an AttributeError naming the closest supported one."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("tessera.nn.ops", name, __all__)
