"""``ops.linalg``: Keras 3's linear algebra ops (norm, inv, det, solve,
cholesky, qr, svd, eigh, ...). Those giving one tensor work inside a model
(differentiable where the primitive is); factorizations giving several run
eagerly on arrays."""

from __future__ import annotations

import numpy as np

from ..symbolic import user_location
from ._base import eager_only, floating, missing, prim, shape_of

__all__ = ["norm", "inv", "det", "solve", "solve_triangular", "cholesky", "cholesky_inverse",
           "qr", "svd", "eigh", "eig", "lstsq", "slogdet", "matrix_rank", "pinv", "lu_factor"]


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - Keras's names
    return prim("norm", floating(x), ord=ord, axis=list(axis) if isinstance(axis, tuple)
                else axis, keepdims=keepdims)


def inv(x):
    return prim("inv", floating(x))


def det(x):
    return prim("det", floating(x))


def solve(a, b):
    return prim("solve", floating(a), floating(b))


def solve_triangular(a, b, lower=False):
    a = floating(a)
    a = prim("tril", a) if lower else prim("triu", a)
    return solve(a, b)


def cholesky(x, upper=False):
    r = prim("cholesky", floating(x))
    return prim("swapaxes", r, -1, -2) if upper else r


def cholesky_inverse(x, upper=False):
    x = floating(x)
    xt = prim("swapaxes", x, -1, -2)
    a = prim("matmul", xt, x) if upper else prim("matmul", x, xt)
    return inv(a)


def _eager_list(op, x, *args, **kwargs):
    eager_only(f"linalg.{op}", x)
    r = prim(op, floating(x), *args, **kwargs)
    return tuple(r) if isinstance(r, (list, tuple)) else r


def qr(x, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise ValueError(f"[ops.linalg.qr] mode must be 'reduced' or 'complete', got {mode!r}")
    return _eager_list("qr", x, mode=mode)


def svd(x, full_matrices=True, compute_uv=True):
    return _eager_list("svd", x, full_matrices=full_matrices, compute_uv=compute_uv)


def eigh(x):
    return _eager_list("eigh", x)


def eig(x):
    return _eager_list("eig", x)


def lstsq(a, b, rcond=None):
    eager_only("linalg.lstsq", a, b)
    r = np.linalg.lstsq(np.asarray(a), np.asarray(b), rcond=rcond)[0]
    return r.astype(np.asarray(a).dtype)


def slogdet(x):
    return _eager_list("slogdet", x)


def matrix_rank(x, tol=None):
    eager_only("linalg.matrix_rank", x)
    return np.asarray(np.linalg.matrix_rank(np.asarray(x), tol), dtype="int32")


def pinv(x, rcond=None):
    eager_only("linalg.pinv", x)
    kw = {} if rcond is None else {"rcond": rcond}
    return np.linalg.pinv(np.asarray(x), **kw).astype(np.asarray(x).dtype)


def lu_factor(x):
    """(lu, pivots) of square matrices (batched), as jax.scipy.linalg.lu_factor:
    L (unit diagonal, below) and U in one matrix; pivots the 0-based row swapped
    with row i at step i (int32). Eager only (a factorization, several outputs)."""
    eager_only("linalg.lu_factor", x)
    a = np.array(x, dtype=np.result_type(np.asarray(x).dtype, np.float32))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"[ops.linalg.lu_factor] expects square matrices (..., n, n), got "
                         f"shape {a.shape} (at {user_location()})")
    n = a.shape[-1]
    lu = a.reshape(-1, n, n).copy()
    piv = np.zeros((lu.shape[0], n), "int32")
    for m, piv_m in zip(lu, piv):
        for k in range(n):
            p = k + int(np.argmax(np.abs(m[k:, k])))
            piv_m[k] = p
            if p != k:
                m[[k, p]] = m[[p, k]]
            if m[k, k] != 0:
                m[k + 1:, k] /= m[k, k]
                m[k + 1:, k + 1:] -= np.outer(m[k + 1:, k], m[k, k + 1:])
    return lu.reshape(a.shape), piv.reshape(a.shape[:-1])


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise missing("tessera.nn.ops.linalg", name, __all__)


del shape_of
