"""The NumPy speed suite's table of kernels (bench/bench_numpy_kernels.py
runs it): for each kernel its function (numpy_kernels.py, published_kernels.py),
its category and kind, the inputs at full and quick sizes, its tolerances, and
for kernels drawing random numbers the statistical check that stands in for
equality. Also the published kernels' names and the known failures."""

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from numpy_kernels import *  # noqa: F403 - the kernels the table names
from published_kernels import (  # noqa: E402 - bench/, on the path above
    lu_decompose, insertion_sort, bubble_sort, sieve, life_roll,
    random_walk_2d, black_scholes, black_scholes_erf, rk4_oscillator, sor_poisson,
    knn_predict, rolling_std, count_prime_factors, matrix_chain_order, spectral_norm,
    nbody_game, select_to_list, digitize_histogram, _check_walk_2d, _options, _bodies,
    _knn_data, MORE_PUBLISHED, FOURTH_PUBLISHED)


@dataclass
class Kernel:
    name: str
    category: str
    func: Callable
    setup: Callable  # setup(quick) -> tuple of arguments
    kind: str = "vector"  # vector | loop | random
    elements: Callable | None = None  # elements(quick) -> size of the main array
    stat: Callable | None = None  # random kernels: stat(result, args) raises AssertionError
    rtol: float = 1e-6
    atol: float = 1e-12
    lists: bool = False  # loop kernels: also runs as plain CPython on lists
    notes: str = ""
    extra: dict = field(default_factory=dict)
    helpers: tuple = ()  # module-level functions the kernel calls (Numba: each @njit too)


def _rng(seed=42):
    return np.random.default_rng(seed)


def _pick(quick, small, big):
    return small if quick else big


def _check_pi(result, args):
    n = args[0]
    assert np.ndim(result) == 0, f"pi estimate: expected a scalar, got shape {np.shape(result)}"
    tol = 6 * 1.7 / math.sqrt(n)
    assert abs(float(result) - math.pi) < tol, f"pi estimate {float(result)} not within {tol} of pi"


def _check_walk(result, args):
    n = args[0]
    r = np.asarray(result)
    assert r.shape == (n,), f"walk: shape {r.shape} != {(n,)}"
    assert r.dtype.kind == "i", f"walk: dtype {r.dtype} is not an integer dtype"
    steps = np.diff(np.concatenate(([0], r)))
    assert np.all(np.abs(steps) == 1), "walk: a step is not +-1"
    assert abs(steps.mean()) < 6 / math.sqrt(n), f"walk: mean step {steps.mean()} not near 0"


def _check_chain(result, args):
    n = args[0]
    r = np.asarray(result)
    assert r.shape == (n,), f"chain: shape {r.shape} != {(n,)}"
    assert abs(r.mean()) < 0.2, f"chain: mean {r.mean()} of a standard normal target not near 0"
    assert abs(r.var() - 1.0) < 0.3, f"chain: variance {r.var()} of a standard normal not near 1"


def _life_grid(n, seed=5):
    return (np.random.default_rng(seed).random((n, n)) < 0.3).astype(np.int64)


def _codes(n, seed):
    return np.random.default_rng(seed).integers(0, 4, n)


def _tridiag(n):
    r = _rng()
    a = r.random(n)
    c = r.random(n)
    b = a + c + 1.0 + r.random(n)  # diagonally dominant
    return a, b, c, r.random(n)


def _spd(n, seed=3):
    r = np.random.default_rng(seed)
    m = r.random((n, n))
    return m @ m.T / n + np.eye(n)


def _graph(n):
    r = _rng()
    d = r.random((n, n)) * 10
    d[r.random((n, n)) < 0.7] = np.inf
    np.fill_diagonal(d, 0.0)
    return d


def _latlon(n):
    r = _rng()
    return (r.uniform(-90, 90, n), r.uniform(-180, 180, n),
            r.uniform(-90, 90, n), r.uniform(-180, 180, n))


def _gray_scott_grid(n):
    U = np.ones((n, n))
    V = np.zeros((n, n))
    c = n // 2
    U[c - 8:c + 8, c - 8:c + 8] = 0.5
    V[c - 8:c + 8, c - 8:c + 8] = 0.25
    return U, V


def _sq(n):
    return lambda quick: (_pick(quick, 64, n)) ** 2


KERNELS = [
    # stencils and diffusion
    Kernel("jacobi_1d", "stencil",
           jacobi_1d,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)),
                      np.zeros(_pick(q, 1000, 1_000_000)), _pick(q, 3, 10)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("jacobi_2d", "stencil",
           jacobi_2d,
           lambda q: (_rng().random((_pick(q, 40, 1000),) * 2),
                      np.zeros((_pick(q, 40, 1000),) * 2), _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("heat_1d", "stencil",
           heat_1d,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), 0.25, _pick(q, 3, 20)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("heat_2d", "stencil",
           heat_2d,
           lambda q: (_rng().random((_pick(q, 40, 1000),) * 2), 0.1, _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("laplacian_2d", "stencil",
           laplacian_2d,
           lambda q: (_rng().random((_pick(q, 40, 2000),) * 2), 0.01),
           elements=_sq(2000)),
    Kernel("wave_2d", "stencil",
           wave_2d,
           lambda q: (np.zeros((_pick(q, 40, 1000),) * 2),
                      _rng().random((_pick(q, 40, 1000),) * 2), 0.3, _pick(q, 3, 5)),
           elements=_sq(1000)),
    Kernel("gray_scott", "stencil",
           gray_scott,
           lambda q: (*_gray_scott_grid(_pick(q, 40, 1000)), 0.16, 0.08, 0.035, 0.065,
                      _pick(q, 3, 2)),
           elements=_sq(1000)),
    # distances
    Kernel("pairwise_distances", "distance",
           pairwise_distances,
           lambda q: (_rng().random((_pick(q, 30, 600), 3)),),
           elements=lambda q: _pick(q, 30, 600) ** 2 * 3),
    Kernel("euclidean_gram", "distance",
           euclidean_gram,
           lambda q: (_rng().random((_pick(q, 50, 1500), 64)),
                      _rng(7).random((_pick(q, 40, 1500), 64))),
           elements=lambda q: _pick(q, 50, 1500) * _pick(q, 40, 1500)),
    Kernel("cosine_similarity", "distance",
           cosine_similarity,
           lambda q: (_rng().random((_pick(q, 50, 2000), 128)),
                      _rng(7).random((_pick(q, 40, 1500), 128))),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 40, 1500)),
    Kernel("haversine", "distance",
           haversine,
           lambda q: _latlon(_pick(q, 1000, 1_000_000)),
           elements=lambda q: _pick(q, 1000, 1_000_000)),
    # reductions
    Kernel("column_stats", "reduction",
           column_stats,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    Kernel("standardize", "reduction",
           standardize,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    Kernel("normalize_rows", "reduction",
           normalize_rows,
           lambda q: (_rng().random((_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    Kernel("l2_norms", "reduction",
           l2_norms,
           lambda q: (_rng().random((_pick(q, 50, 4000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 1000)),
    Kernel("rosenbrock", "reduction",
           rosenbrock,
           lambda q: (_rng().random(_pick(q, 1000, 4_000_000)),),
           elements=lambda q: _pick(q, 1000, 4_000_000)),
    Kernel("softmax", "reduction",
           softmax,
           lambda q: (_rng().normal(size=(_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    Kernel("logsumexp", "reduction",
           logsumexp,
           lambda q: (_rng().normal(size=(_pick(q, 50, 4000), _pick(q, 30, 500))),),
           elements=lambda q: _pick(q, 50, 4000) * _pick(q, 30, 500)),
    # cumulative sums
    Kernel("moving_average", "cumulative",
           moving_average,
           lambda q: (_rng().random(_pick(q, 1000, 4_000_000)), 50),
           elements=lambda q: _pick(q, 1000, 4_000_000), rtol=1e-5, atol=1e-9),
    Kernel("cumsum_2d", "cumulative",
           cumsum_2d,
           lambda q: (_rng().random((_pick(q, 50, 2000), _pick(q, 30, 1000))),),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 30, 1000)),
    # image filters
    Kernel("box_blur_3x3", "image",
           box_blur_3x3,
           lambda q: (_rng().random((_pick(q, 40, 1200),) * 2),),
           elements=_sq(1200)),
    Kernel("sobel", "image",
           sobel,
           lambda q: (_rng().random((_pick(q, 40, 1200),) * 2),),
           elements=_sq(1200)),
    Kernel("bilinear_resize", "image",
           bilinear_resize,
           lambda q: (_rng().random((_pick(q, 30, 1000),) * 2),
                      _pick(q, 50, 2000), _pick(q, 45, 1500)),
           elements=lambda q: _pick(q, 50, 2000) * _pick(q, 45, 1500)),
    # Monte Carlo
    Kernel("monte_carlo_pi", "monte carlo",
           monte_carlo_pi,
           lambda q: (_pick(q, 10_000, 4_000_000),),
           kind="random", stat=_check_pi, elements=lambda q: _pick(q, 10_000, 4_000_000)),
    Kernel("random_walk", "monte carlo",
           random_walk,
           lambda q: (_pick(q, 10_000, 2_000_000),),
           kind="random", stat=_check_walk, elements=lambda q: _pick(q, 10_000, 2_000_000)),
    Kernel("monte_carlo_pi_loop", "monte carlo",
           monte_carlo_pi_loop,
           lambda q: (_pick(q, 20_000, 50_000),),
           kind="random", stat=_check_pi),
    # element loops
    Kernel("axpy_loop", "element loop",
           axpy_loop,
           lambda q: (2.5, _rng().random(_pick(q, 1000, 100_000)),
                      _rng(7).random(_pick(q, 1000, 100_000))),
           kind="loop", lists=True),
    Kernel("prefix_sum_loop", "element loop",
           prefix_sum_loop,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)),),
           kind="loop", rtol=1e-9),
    Kernel("smooth_loop", "element loop",
           smooth_loop,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)),),
           kind="loop"),
    Kernel("histogram_loop", "element loop",
           histogram_loop,
           lambda q: (_rng().normal(size=_pick(q, 1000, 100_000)), 50, -3.0, 3.0),
           kind="loop", lists=True),
    Kernel("lcg", "element loop",
           lcg,
           lambda q: (_pick(q, 1000, 200_000), 12345),
           kind="loop"),
    Kernel("mandelbrot_loop", "element loop",
           mandelbrot_loop,
           lambda q: (-2.0, 1.0, -1.5, 1.5, _pick(q, 30, 150), _pick(q, 20, 100), 50),
           kind="loop"),
    Kernel("thomas_solve", "element loop",
           thomas_solve,
           lambda q: _tridiag(_pick(q, 1000, 50_000)),
           kind="loop", lists=True, rtol=1e-9),
    Kernel("collatz_lengths", "element loop",
           collatz_lengths,
           lambda q: (_pick(q, 300, 10_000),),
           kind="loop"),
    Kernel("mandelbrot_complex", "complex",
           mandelbrot_complex,
           lambda q: (_pick(q, 40, 600), _pick(q, 30, 400), _pick(q, 5, 20)),
           elements=lambda q: _pick(q, 40, 600) * _pick(q, 30, 400)),
    # linear algebra
    Kernel("matrix_chain", "linear algebra",
           matrix_chain,
           lambda q: tuple(_rng(s).random((_pick(q, 30, 600),) * 2) for s in range(3)),
           rtol=1e-9, elements=_sq(600)),
    Kernel("power_iteration", "linear algebra",
           power_iteration,
           lambda q: (_spd(_pick(q, 30, 1000)), _pick(q, 5, 50)),
           rtol=1e-8, elements=_sq(1000)),
    Kernel("gram_schmidt", "linear algebra",
           gram_schmidt,
           lambda q: (_rng().random((_pick(q, 30, 1000), _pick(q, 8, 60))),),
           rtol=1e-6, atol=1e-9, elements=lambda q: _pick(q, 30, 1000) * _pick(q, 8, 60)),
    Kernel("solve_and_inverse", "linear algebra",
           solve_and_inverse,
           lambda q: (_spd(_pick(q, 30, 500)), _rng(7).random(_pick(q, 30, 500))),
           rtol=1e-8, atol=1e-10, elements=_sq(500)),
    # machine learning, graphs, physics, polynomials
    Kernel("kmeans_step", "machine learning",
           kmeans_step,
           lambda q: (_rng().random((_pick(q, 200, 100_000), 4)),
                      _rng(7).random((_pick(q, 3, 8), 4))),
           rtol=1e-9, elements=lambda q: _pick(q, 200, 100_000) * _pick(q, 3, 8) * 4),
    Kernel("logistic_step", "machine learning",
           logistic_step,
           lambda q: (_rng().normal(size=(_pick(q, 100, 100_000), _pick(q, 5, 50))),
                      (_rng(7).random(_pick(q, 100, 100_000)) > 0.5).astype(float),
                      np.zeros(_pick(q, 5, 50)), 0.1),
           rtol=1e-9, elements=lambda q: _pick(q, 100, 100_000) * _pick(q, 5, 50)),
    Kernel("floyd_warshall", "graph",
           floyd_warshall,
           lambda q: (_graph(_pick(q, 20, 250)),),
           elements=lambda q: _pick(q, 20, 250) ** 2),
    Kernel("nbody_forces", "physics",
           nbody_forces,
           lambda q: (_rng().random((_pick(q, 20, 600), 3)), _rng(7).random(_pick(q, 20, 600)),
                      0.01),
           rtol=1e-8, elements=lambda q: _pick(q, 20, 600) ** 2 * 3),
    Kernel("horner", "polynomial",
           horner,
           lambda q: (_rng(7).random(10), _rng().random(_pick(q, 1000, 2_000_000))),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 2_000_000)),
    Kernel("growth", "polynomial",
           growth,
           lambda q: (_rng().random(_pick(q, 100, 50_000)) * 1000,
                      _rng(7).random(_pick(q, 100, 50_000)) * 0.05, _pick(q, 5, 100)),
           rtol=1e-9, elements=lambda q: _pick(q, 100, 50_000) * _pick(q, 6, 101)),
    # issue 31's kinds: per-point fractals, stencils and convolutions by loops, a Monte Carlo
    # chain, cellular automata, dynamic programming, n-body by loops, histogramming, a sorting
    # network; np.repeat expansion, a convolution by slicing, and small (1,000-element) arrays
    Kernel("julia_loop", "element loop",
           julia_loop,
           lambda q: (_pick(q, 30, 150), _pick(q, 20, 100), -0.8, 0.156, _pick(q, 20, 50)),
           kind="loop"),
    Kernel("conv2d_loop", "element loop",
           conv2d_loop,
           lambda q: (_rng().random((_pick(q, 12, 100),) * 2), _rng(7).random((3, 3))),
           kind="loop", rtol=1e-9),
    Kernel("wave_1d_loop", "element loop",
           wave_1d_loop,
           lambda q: (np.sin(np.linspace(0, 6, _pick(q, 100, 2000))),
                      np.sin(np.linspace(0, 6, _pick(q, 100, 2000))), 0.2, _pick(q, 3, 50)),
           kind="loop", rtol=1e-9),
    Kernel("metropolis_loop", "monte carlo",
           metropolis_loop,
           lambda q: (_pick(q, 20_000, 50_000), 1.0),
           kind="random", stat=_check_chain, helpers=("_log_density",)),
    Kernel("life_loop", "cellular automaton",
           life_loop,
           lambda q: (_life_grid(_pick(q, 12, 40)), _pick(q, 2, 5)),
           kind="loop"),
    Kernel("life", "cellular automaton",
           life,
           lambda q: (_life_grid(_pick(q, 40, 1000)), _pick(q, 3, 10)),
           elements=_sq(1000)),
    Kernel("edit_distance_loop", "dynamic program",
           edit_distance_loop,
           lambda q: (_codes(_pick(q, 30, 300), 1), _codes(_pick(q, 25, 280), 2)),
           kind="loop"),
    Kernel("lcs_loop", "dynamic program",
           lcs_loop,
           lambda q: (_codes(_pick(q, 30, 300), 3), _codes(_pick(q, 25, 280), 4)),
           kind="loop"),
    Kernel("nbody_loop", "physics",
           nbody_loop,
           lambda q: (_rng().random((_pick(q, 20, 150), 3)), _rng(7).random(_pick(q, 20, 150)),
                      0.01),
           kind="loop", rtol=1e-9),
    Kernel("odd_even_sort_loop", "sorting network",
           odd_even_sort_loop,
           lambda q: (_rng().random(_pick(q, 50, 500)),),
           kind="loop"),
    Kernel("histogram_bincount", "histogram",
           histogram_bincount,
           lambda q: (_rng().normal(size=_pick(q, 1000, 4_000_000)), 50, -3.0, 3.0),
           elements=lambda q: _pick(q, 1000, 4_000_000)),
    Kernel("upsample_repeat", "expansion",
           upsample_repeat,
           lambda q: (_rng().random((_pick(q, 30, 1000),) * 2), 2),
           elements=lambda q: _pick(q, 30, 1000) ** 2 * 4),
    Kernel("conv1d_slicing", "convolution",
           conv1d_slicing,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), _rng(7).random(15)),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000)),
    Kernel("lorenz96_rk4", "small arrays",
           lorenz96_rk4,
           lambda q: (_rng().random(1000) + 8.0, 8.0, 0.01, _pick(q, 5, 200)),
           rtol=1e-9, elements=lambda q: 1000),
    Kernel("small_arrays", "small arrays",
           small_arrays,
           lambda q: (_rng().random(1000), _rng(7).random(1000), _pick(q, 5, 500)),
           rtol=1e-9, elements=lambda q: 1000),
    # published kernels (above): as their authors write them, only @tessera.jit added
    Kernel("lu_decompose", "published",
           lu_decompose,
           lambda q: (_spd(_pick(q, 20, 200)),),
           kind="loop", rtol=1e-9),
    Kernel("insertion_sort", "published",
           insertion_sort,
           lambda q: (_rng().random(_pick(q, 200, 3000)),),
           kind="loop", lists=True),
    Kernel("bubble_sort", "published",
           bubble_sort,
           lambda q: (_rng().integers(0, 1_000_000, _pick(q, 100, 1500)),),
           kind="loop", lists=True),
    Kernel("sieve", "published",
           sieve,
           lambda q: (_pick(q, 1000, 2_000_000),),
           elements=lambda q: _pick(q, 1000, 2_000_000)),
    Kernel("life_roll", "published",
           life_roll,
           lambda q: (_life_grid(_pick(q, 40, 500)).astype(bool), _pick(q, 3, 10)),
           elements=_sq(500)),
    Kernel("random_walk_2d", "published",
           random_walk_2d,
           lambda q: (_pick(q, 10_000, 2_000_000),),
           kind="random", stat=_check_walk_2d, elements=lambda q: _pick(q, 10_000, 2_000_000)),
    Kernel("black_scholes", "published",
           black_scholes,
           lambda q: _options(_pick(q, 1000, 1_000_000)),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000), helpers=("_cnd",)),
    Kernel("black_scholes_erf", "published",
           black_scholes_erf,
           lambda q: _options(_pick(q, 500, 100_000)),
           kind="loop", rtol=1e-12),
    Kernel("rk4_oscillator", "published",
           rk4_oscillator,
           lambda q: (1.0, 0.0, 2.0, 0.1, 0.001, _pick(q, 500, 100_000)),
           kind="loop", rtol=1e-9),
    Kernel("sor_poisson", "published",
           sor_poisson,
           lambda q: (np.zeros((_pick(q, 20, 200),) * 2), _rng().random((_pick(q, 20, 200),) * 2),
                      0.005, 1.5, _pick(q, 3, 20)),
           kind="loop", rtol=1e-9),
    Kernel("knn_predict", "published",
           knn_predict,
           lambda q: _knn_data(_pick(q, 100, 2000), _pick(q, 20, 500)),
           elements=lambda q: _pick(q, 100, 2000) * _pick(q, 20, 500)),
    Kernel("rolling_std", "published",
           rolling_std,
           lambda q: (_rng().random(_pick(q, 1000, 1_000_000)), 50),
           rtol=1e-9, elements=lambda q: _pick(q, 1000, 1_000_000) * 50),
    Kernel("count_prime_factors", "published",
           count_prime_factors,
           lambda q: (_pick(q, 300, 50_000),),
           kind="loop", helpers=("prime_factors",)),
    Kernel("matrix_chain_order", "published",
           matrix_chain_order,
           lambda q: (_rng().integers(5, 50, _pick(q, 20, 150)),),
           kind="loop"),
    Kernel("spectral_norm", "published",
           spectral_norm,
           lambda q: (_pick(q, 30, 300),),
           kind="loop", rtol=1e-12),
    Kernel("nbody_game", "published",
           nbody_game,
           lambda q: (*_bodies()[:2], _bodies()[2], _pick(q, 20, 20_000), 0.01),
           kind="loop", rtol=1e-9),
    Kernel("select_to_list", "published",
           select_to_list,
           lambda q: (_rng().random(_pick(q, 1000, 200_000)), 0.5),
           kind="loop"),
    Kernel("digitize_histogram", "published",
           digitize_histogram,
           lambda q: (_rng().normal(size=_pick(q, 1000, 2_000_000)), np.linspace(-3, 3, 41)),
           elements=lambda q: _pick(q, 1000, 2_000_000)),
]

KERNELS += [Kernel(category="published", **spec) for spec in MORE_PUBLISHED]
KERNELS += [Kernel(category="published", **spec) for spec in FOURTH_PUBLISHED]

# The published kernels (issue 31's check "against programs nobody here wrote"):
# tests/python/test_jit_published_kernels.py runs them at 1 and 2 threads.
PUBLISHED = [k.name for k in KERNELS if k.category == "published"]

# Kernels that tessera does not run correctly today, with the reason. The
# smoke test (tests/python/test_bench_kernels.py) requires every other kernel
# to pass; this list is the work list for making tessera complete.
KNOWN_FAILURES: dict[str, str] = {}
