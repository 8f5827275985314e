"""Comparisons of tessera.nn's results with Keras's (the oracle) shared by the tests of
Keras's behaviour: values as float64 within a tolerance, and logs (History entries,
evaluate's dicts) with the same keys and values."""

import numpy as np


def close(a, b, tol=2e-5):
    """a and b (arrays, numbers or nested lists) equal within `tol`, relative and absolute."""
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64),
                               np.asarray(b, dtype=np.float64), rtol=tol, atol=tol)


def same_logs(t, k, tol=1e-4):
    """Logs `t` (tessera's) and `k` (Keras's): the same keys, each value close."""
    assert sorted(t) == sorted(k)
    for key in k:
        close(t[key], k[key], tol)
