"""NumPy's random distributions in @tessera.jit (python/tessera/_random_lib.py), for
np.random.NAME and rng.NAME on a default_rng generator. tessera's stream is not NumPy's,
so the values differ; the distributions must not: 20,000 draws with fixed seeds are
compared with the exact CDF (Kolmogorov-Smirnov) or pmf (chi-square) of scipy.stats, and
their mean with the exact mean, at thresholds of a 1e-4 false alarm rate (so a wrong
distribution fails and the fixed seeds never flake). Also: NumPy's shapes, dtypes and
result types for each signature form, NumPy's ValueErrors for invalid parameters named at
the user's line, the same values at 1 and 2 threads, draws inside a compiled loop, and the
distributions still refused."""

import inspect
import math

import numpy as np
import pytest
from scipy import stats

import tessera
from jit_check import numpy_body, run_script

N = 20000
ALPHA = 1e-4
KS_LIMIT = math.sqrt(-math.log(ALPHA / 2) / 2) / math.sqrt(N)  # Kolmogorov's bound
Z = 4.0  # a mean off by more than Z standard errors fails (two-sided 6e-5)


def draws(call, seed=5, threads=None, params="seed"):
    """`call` (an expression drawing N values) after np.random.seed(seed), or on a
    default_rng(seed) generator `rng`, run by tessera.jit."""
    body = f"np.random.seed(seed)\nrng = np.random.default_rng(seed)\nreturn {call}"
    fn = numpy_body(body, params)
    jitted = tessera.jit(fn) if threads is None else tessera.jit(fn, threads=threads)
    return jitted(seed)


def assert_mean(x, dist):
    mean, var = dist.mean(), dist.var()
    tol = Z * math.sqrt(var / x.size)
    assert abs(x.mean() - mean) < tol, (x.mean(), mean, tol)


def assert_ks(x, dist):
    d = stats.kstest(np.ravel(x), dist.cdf).statistic
    assert d < KS_LIMIT, (d, KS_LIMIT)


def assert_chi2(x, dist, lo=None, hi=None):
    """Pearson's statistic over the values with an expected count of 5 or more, the
    two tails pooled, against the chi-square quantile at 1 - ALPHA."""
    x = np.ravel(x).astype(np.int64)
    k = np.arange(int(dist.ppf(1e-9)) if lo is None else lo,
                  int(dist.ppf(1 - 1e-9)) + 1 if hi is None else hi + 1)
    pmf = dist.pmf(k)
    keep = pmf * x.size >= 5
    k, pmf = k[keep], pmf[keep]
    observed = np.array([np.sum(x == v) for v in k] + [np.sum(x < k[0]), np.sum(x > k[-1])])
    expected = np.concatenate([pmf, [dist.cdf(k[0] - 1), dist.sf(k[-1])]]) * x.size
    tail = expected >= 1e-3
    stat = np.sum((observed[tail] - expected[tail]) ** 2 / expected[tail])
    assert np.all(observed[~tail] == 0)
    limit = stats.chi2.ppf(1 - ALPHA, tail.sum() - 1)
    assert stat < limit, (stat, limit)


CONTINUOUS = [
    ("exponential(2.5, N)", stats.expon(scale=2.5)),
    ("standard_exponential(N)", stats.expon()),
    ("laplace(1.0, 2.0, N)", stats.laplace(1.0, 2.0)),
    ("logistic(-1.0, 0.5, N)", stats.logistic(-1.0, 0.5)),
    ("gumbel(0.5, 2.0, N)", stats.gumbel_r(0.5, 2.0)),
    ("rayleigh(1.5, N)", stats.rayleigh(scale=1.5)),
    ("weibull(1.7, N)", stats.weibull_min(1.7)),
    ("pareto(3.5, N)", stats.lomax(3.5)),
    ("power(2.5, N)", stats.powerlaw(2.5)),
    ("triangular(-1.0, 0.5, 3.0, N)", stats.triang(1.5 / 4.0, loc=-1.0, scale=4.0)),
    ("standard_cauchy(N)", stats.cauchy()),
    ("lognormal(0.3, 0.6, N)", stats.lognorm(0.6, scale=math.exp(0.3))),
    ("wald(1.5, 2.0, N)", stats.invgauss(1.5 / 2.0, scale=2.0)),
    ("standard_gamma(0.4, N)", stats.gamma(0.4)),
    ("gamma(3.2, 0.5, N)", stats.gamma(3.2, scale=0.5)),
    ("gamma(1.0, 2.0, N)", stats.gamma(1.0, scale=2.0)),
    ("beta(0.7, 2.5, N)", stats.beta(0.7, 2.5)),
    ("beta(4.0, 3.0, N)", stats.beta(4.0, 3.0)),
    ("chisquare(3.0, N)", stats.chi2(3.0)),
    ("standard_t(5.0, N)", stats.t(5.0)),
    ("f(4.0, 9.0, N)", stats.f(4.0, 9.0)),
]

DISCRETE = [
    ("geometric(0.3, N)", stats.geom(0.3)),
    ("poisson(3.5, N)", stats.poisson(3.5)),
    ("poisson(0.2, N)", stats.poisson(0.2)),
    ("poisson(37.0, N)", stats.poisson(37.0)),
    ("poisson(1500.0, N)", stats.poisson(1500.0)),
    ("binomial(20, 0.3, N)", stats.binom(20, 0.3)),
    ("binomial(5000, 0.8, N)", stats.binom(5000, 0.8)),
    ("negative_binomial(3.5, 0.4, N)", stats.nbinom(3.5, 0.4)),
    ("hypergeometric(12, 20, 9, N)", stats.hypergeom(32, 12, 9)),
    ("hypergeometric(12, 5, 14, N)", stats.hypergeom(17, 12, 14)),
]


def _call(form, expr):
    return ("np.random." if form == "legacy" else "rng.") + expr.replace("N)", f"{N})")


@pytest.mark.parametrize("form", ["legacy", "generator"])
@pytest.mark.parametrize("expr, dist", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_distribution_matches_the_exact_cdf(expr, dist, form):
    x = draws(_call(form, expr))
    assert x.shape == (N,) and x.dtype == np.float64
    assert_ks(x, dist)
    if np.isfinite(dist.var()):
        assert_mean(x, dist)


@pytest.mark.parametrize("form", ["legacy", "generator"])
@pytest.mark.parametrize("expr, dist", DISCRETE, ids=[c[0] for c in DISCRETE])
def test_discrete_distribution_matches_the_exact_pmf(expr, dist, form):
    x = draws(_call(form, expr))
    assert x.shape == (N,) and x.dtype == np.int64
    lo = 1 if "geometric" in expr else None
    assert_chi2(x, dist, lo=lo)
    assert_mean(x, dist)


SCALAR = [
    ("np.random.exponential(2.5)", stats.expon(scale=2.5)),
    ("rng.laplace(1.0, 2.0)", stats.laplace(1.0, 2.0)),
    ("np.random.logistic(-1.0, 0.5)", stats.logistic(-1.0, 0.5)),
    ("rng.gumbel(0.5, 2.0)", stats.gumbel_r(0.5, 2.0)),
    ("np.random.rayleigh(1.5)", stats.rayleigh(scale=1.5)),
    ("rng.weibull(1.7)", stats.weibull_min(1.7)),
    ("np.random.pareto(3.5)", stats.lomax(3.5)),
    ("rng.power(2.5)", stats.powerlaw(2.5)),
    ("np.random.standard_cauchy()", stats.cauchy()),
    ("rng.lognormal(0.3, 0.6)", stats.lognorm(0.6, scale=math.exp(0.3))),
    ("np.random.standard_gamma(0.4)", stats.gamma(0.4)),
    ("rng.gamma(3.2, 0.5)", stats.gamma(3.2, scale=0.5)),
    ("np.random.beta(0.7, 2.5)", stats.beta(0.7, 2.5)),
    ("rng.chisquare(3.0)", stats.chi2(3.0)),
    ("np.random.standard_t(5.0)", stats.t(5.0)),
]
SCALAR_DISCRETE = [
    ("rng.geometric(0.3)", stats.geom(0.3), 1),
    ("np.random.poisson(3.5)", stats.poisson(3.5), None),
    ("rng.poisson(37.0)", stats.poisson(37.0), None),
]


def test_one_value_per_call_has_the_same_distributions():
    # size=None with scalar parameters: the scalar forms (a loop drawing one value a turn)
    m = 1500
    calls = [c for c, _ in SCALAR] + [c for c, _, _ in SCALAR_DISCRETE]
    body = (f"np.random.seed(seed)\nrng = np.random.default_rng(seed)\n"
            f"out = np.zeros(({len(calls)}, {m}))\nfor i in range({m}):\n" +
            "".join(f"    out[{j}, i] = {c}\n" for j, c in enumerate(calls)) + "return out")
    x = tessera.jit(numpy_body(body, "seed"))(21)
    lim = math.sqrt(-math.log(ALPHA / 2) / 2) / math.sqrt(m)
    for j, (c, dist) in enumerate(SCALAR):
        assert stats.kstest(x[j], dist.cdf).statistic < lim, c
    for j, (c, dist, lo) in enumerate(SCALAR_DISCRETE):
        assert_chi2(x[len(SCALAR) + j], dist, lo=lo)
        assert_mean(x[len(SCALAR) + j], dist)


def test_a_wrong_distribution_fails_the_checks():
    # the thresholds are tight enough to see a 3% scale error or a shifted mean
    x = draws(f"np.random.exponential(2.5, {N})")
    with pytest.raises(AssertionError):
        assert_ks(x * 1.03, stats.expon(scale=2.5))
    k = draws(f"np.random.poisson(3.5, {N})")
    with pytest.raises(AssertionError):
        assert_chi2(k, stats.poisson(3.6))
    with pytest.raises(AssertionError):
        assert_mean(k, stats.poisson(3.6))


def test_parameters_broadcast_elementwise():
    # each column its own parameters: every column has its own distribution
    x = draws("np.random.gamma(np.array([0.5, 2.0, 7.0]), np.array([1.0, 3.0, 0.5]), "
              "(8000, 3))")
    assert x.shape == (8000, 3)
    for j, (a, s) in enumerate([(0.5, 1.0), (2.0, 3.0), (7.0, 0.5)]):
        assert stats.kstest(x[:, j], stats.gamma(a, scale=s).cdf).statistic < math.sqrt(
            -math.log(ALPHA / 2) / 2 / 8000)
    k = draws("rng.poisson(np.array([[2.0], [60.0]]), (2, 6000))")
    assert_chi2(k[0], stats.poisson(2.0))
    assert_chi2(k[1], stats.poisson(60.0))
    b = draws("np.random.binomial(np.array([4, 40]), np.array([0.9, 0.1]), (7000, 2))")
    assert_chi2(b[:, 0], stats.binom(4, 0.9), lo=0, hi=4)
    assert_chi2(b[:, 1], stats.binom(40, 0.1))
    # n p beyond the inversion's range, per element (one table each)
    c = draws("rng.binomial(np.array([400, 30]), np.array([0.3, 0.6]), (1500, 2))")
    assert_chi2(c[:, 0], stats.binom(400, 0.3))
    assert_chi2(c[:, 1], stats.binom(30, 0.6))


def test_infinite_gamma_shape_is_infinite():
    # NumPy's value (the rejection loop must not spin on it)
    assert draws("np.random.gamma(np.array([np.inf, 2.0]))")[0] == np.inf


def test_multinomial_counts():
    x = draws("np.random.multinomial(30, [0.2, 0.5, 0.3], 6000)")
    assert x.shape == (6000, 3) and x.dtype == np.int64
    assert np.all(x.sum(axis=1) == 30)
    for j, p in enumerate([0.2, 0.5, 0.3]):
        assert_chi2(x[:, j], stats.binom(30, p))
    # the conditional second count given the first is binomial(30 - x0, 0.5 / 0.8)
    sub = x[x[:, 0] == 6, 1]
    assert_chi2(sub, stats.binom(24, 0.5 / 0.8))


def test_dirichlet_marginals_are_beta():
    x = draws("rng.dirichlet([0.5, 2.0, 3.5], 8000)")
    assert x.shape == (8000, 3)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=1e-12)
    lim = math.sqrt(-math.log(ALPHA / 2) / 2 / 8000)
    assert stats.kstest(x[:, 0], stats.beta(0.5, 5.5).cdf).statistic < lim
    assert stats.kstest(x[:, 2], stats.beta(3.5, 2.5).cdf).statistic < lim


def test_dirichlet_of_tiny_alphas_has_no_nan():
    # their gamma draws underflow to 0: the weights are normalised from the logs
    x = draws("np.random.dirichlet([1e-3, 1e-3], 2000)")
    assert np.all(np.isfinite(x)) and np.allclose(x.sum(axis=1), 1.0)
    # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1))
    assert abs(x[:, 0].mean() - 0.5) < Z * math.sqrt(1 / (4 * 1.002) / 2000)


def test_multivariate_normal_moments():
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    body = ("np.random.seed(seed)\n"
            "return np.random.multivariate_normal(np.array([1.0, -2.0, 0.5]), cov, 20000)")
    x = tessera.jit(numpy_body(body, "seed, cov"))(3, cov)
    assert x.shape == (20000, 3)
    mean = np.array([1.0, -2.0, 0.5])
    assert np.all(np.abs(x.mean(axis=0) - mean) < Z * np.sqrt(np.diag(cov) / 20000))
    c = np.cov(x.T)
    # the standard error of a sample covariance: sqrt((s_ii s_jj + s_ij^2) / n)
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / 20000)
    assert np.all(np.abs(c - cov) < Z * se), (c, cov)
    # each direction's variance is u' cov u: a factor that is not cov's would miss it
    u = np.array([1.0, -1.0, 2.0])
    lim = math.sqrt(-math.log(ALPHA / 2) / 2 / 20000)
    assert stats.kstest((x - mean) @ u, stats.norm(0, math.sqrt(u @ cov @ u)).cdf).statistic < lim


P5 = [0.1, 0.4, 0.05, 0.25, 0.2]


def test_choice_with_replacement():
    x = draws(f"np.random.choice(5, {N}, p=np.array({P5}))")
    assert x.dtype == np.int64
    assert_chi2(x, stats.rv_discrete(values=(np.arange(5), P5)), lo=0, hi=4)
    y = draws(f"np.random.choice(7, {N})")
    assert_chi2(y, stats.randint(0, 7), lo=0, hi=6)
    z = draws(f"np.random.choice(np.array([2.5, -1.0, 4.0]), ({N // 2}, 2))")
    assert z.shape == (N // 2, 2) and z.dtype == np.float64
    assert set(np.unique(z)) == {2.5, -1.0, 4.0}


def test_choice_without_replacement():
    x = draws("np.random.choice(9, (2, 3), replace=False)")
    assert x.shape == (2, 3) and len(set(x.ravel())) == 6
    # the first two draws without replacement, weighted: P(second = j) =
    # sum over i != j of p_i p_j / (1 - p_i)
    body = ("np.random.seed(seed)\nout = np.zeros((2000, 2), dtype=np.int64)\n"
            "for i in range(2000):\n"
            f"    out[i] = np.random.choice(5, 2, replace=False, p=np.array({P5}))\n"
            "return out")
    x = tessera.jit(numpy_body(body, "seed"))(11)
    assert np.all(x[:, 0] != x[:, 1])
    p = np.array(P5)
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(5) if i != j)
                       for j in range(5)])
    assert_chi2(x[:, 0], stats.rv_discrete(values=(np.arange(5), p)), lo=0, hi=4)
    assert_chi2(x[:, 1], stats.rv_discrete(values=(np.arange(5), second)), lo=0, hi=4)
    # unweighted: each position uniform over the population
    body = ("np.random.seed(seed)\nout = np.zeros((2000, 3), dtype=np.int64)\n"
            "for i in range(2000):\n"
            "    out[i] = np.random.choice(6, 3, replace=False)\n"
            "return out")
    y = tessera.jit(numpy_body(body, "seed"))(12)
    assert np.all((y[:, 0] != y[:, 1]) & (y[:, 1] != y[:, 2]) & (y[:, 0] != y[:, 2]))
    for col in range(3):
        assert_chi2(y[:, col], stats.randint(0, 6), lo=0, hi=5)


# --------------------------------------------------------------- signatures, shapes, dtypes

FORMS = [
    "exponential()", "exponential(2.0)", "exponential(2.0, 3)", "exponential(size=(2, 3))",
    "exponential(np.array([1.0, 2.0]))", "exponential(np.array([1.0, 2.0]), (3, 2))",
    "exponential(np.array(2.0))", "standard_exponential()", "standard_exponential((2, 2))",
    "laplace()", "laplace(np.zeros((2, 1)), np.ones(3))", "logistic(1.0, size=4)",
    "gumbel(scale=2.0)", "rayleigh(np.ones(2))", "weibull(1.5)", "weibull(0.0, 3)",
    "pareto(2.0, 3)", "power(np.array([1.0, 3.0]))", "triangular(0.0, 1.0, 2.0)",
    "triangular(0.0, np.array([0.5, 1.0]), 2.0, (4, 2))", "geometric(0.5)",
    "geometric(np.array([0.5, 1.0]))", "standard_cauchy(3)", "lognormal()",
    "lognormal(np.zeros(2), 1.0)", "wald(1.0, 2.0, 3)", "standard_gamma(2.0)",
    "standard_gamma(0.0, 2)", "gamma(2.0)", "gamma(np.array([1.0, 0.5]), 2.0)",
    "beta(1.0, 2.0)", "beta(np.ones(2), 2.0, (3, 2))", "chisquare(2.0)", "standard_t(3.0, 2)",
    "f(2.0, 3.0)", "f(2.0, np.array([3.0, 4.0]))", "dirichlet([1.0, 2.0])",
    "dirichlet(np.array([1.0, 2.0, 3.0]), (2, 2))", "poisson()", "poisson(3.0)",
    "poisson(0.0, 2)", "poisson(np.array([1.0, 30.0]))", "poisson(4, size=(2, 3))",
    "binomial(10, 0.5)", "binomial(10, 0.0, 3)", "binomial(0, 0.5)",
    "binomial(np.array([3, 4]), 1.0)", "negative_binomial(2, 0.5)",
    "negative_binomial(2.5, np.array([0.5, 1.0]))", "multinomial(5, [0.5, 0.5])",
    "multinomial(5, [0.2, 0.3, 0.5], (2, 2))", "hypergeometric(3, 4, 2)",
    "hypergeometric(3, 4, 7, 5)", "hypergeometric(np.array([3, 10]), 4, 2)",
    "multivariate_normal([0.0, 1.0], [[1.0, 0.0], [0.0, 1.0]])",
    "multivariate_normal(np.zeros(2), np.eye(2), (3, 4))",
    "multivariate_normal(np.zeros(2), np.eye(2), 3, check_valid='ignore', tol=1e-6)",
]
GENERATOR_ONLY = ["standard_exponential(dtype=np.float32)",
                  "standard_exponential(3, dtype=np.float32)",
                  "standard_gamma(2.0, dtype=np.float32)", "standard_gamma(2.0, (2,), np.float32)",
                  "standard_exponential(2, np.float64, 'inv')"]
LEGACY_ONLY = ["choice(5)", "choice(5, 3)", "choice([1.5, 2.5])", "choice(np.arange(4.0), (2, 2))",
               "choice(4, 3, False)", "choice(4, 2, True, [0.5, 0.0, 0.5, 0.0])",
               "choice(4, 0, replace=False)", "choice(np.array([7, 8]), p=[0.0, 1.0])"]


def _assert_like(got, want, text):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), (text, got)
        assert got.shape == want.shape and got.dtype == want.dtype, (text, got, want)
    elif type(want) is float:
        # a one-draw call with literal parameters gives a float64 scalar (a float subclass)
        legacy = text.startswith("np.random.")
        assert type(got) is float or (legacy and type(got) is np.float64), (text, got)
    else:
        assert type(got) is type(want) or (isinstance(want, np.generic) and
                                           np.asarray(got).dtype == want.dtype), (text, got, want)


@pytest.mark.parametrize("form", ["legacy", "generator"])
def test_shapes_dtypes_and_result_types_are_numpys(form):
    calls = [("np.random." if form == "legacy" else "rng.") + c for c in FORMS]
    if form == "legacy":
        calls += ["np.random." + c for c in LEGACY_ONLY]
    else:
        calls += ["rng." + c for c in GENERATOR_ONLY]
    text = "(" + ", ".join(calls) + ",)"
    got = draws(text)
    np.random.seed(3)
    rng = np.random.default_rng(3)  # noqa: F841 - read by eval
    for c, g in zip(calls, got):
        _assert_like(g, eval(c), c)


def test_choice_values_come_from_the_population():
    got = draws("(np.random.choice(np.array([7, 8]), p=[0.0, 1.0]), "
                "np.random.choice(4, 2, True, [0.5, 0.0, 0.5, 0.0]))")
    assert got[0] == 8
    assert set(got[1]) <= {0, 2}


# --------------------------------------------------------------------------------- errors


def bad(expr):
    return numpy_body("np.random.seed(1)\nrng = np.random.default_rng(1)\nreturn " + expr,
                      "x")


ERRORS = [
    "np.random.exponential(-1.0)", "rng.exponential(np.array([1.0, -2.0]))",
    "np.random.exponential(size=-1)", "np.random.exponential(np.ones(3), size=2)",
    "np.random.laplace(0.0, -1.0)", "np.random.laplace(0.0, -1.0, 3)",
    "np.random.gamma(np.array([1.0, -1.0]))", "rng.poisson(np.array([-1.0]))",
    "np.random.beta(np.ones(2), 0.0)", "rng.standard_t(np.zeros(2))",
    "np.random.gumbel(scale=-1.0)", "np.random.rayleigh(-1.0)",
    "np.random.weibull(-1.0)", "np.random.pareto(0.0)", "rng.power(0.0)",
    "np.random.triangular(1.0, 0.0, 2.0)", "np.random.triangular(0.0, 3.0, 2.0)",
    "np.random.triangular(1.0, 1.0, 1.0)", "np.random.geometric(0.0)", "rng.geometric(1.5)",
    "np.random.lognormal(0.0, -1.0)", "np.random.wald(0.0, 1.0)", "np.random.wald(1.0, 0.0)",
    "np.random.standard_gamma(-1.0)", "np.random.gamma(1.0, -1.0)", "np.random.beta(0.0, 1.0)",
    "np.random.beta(1.0, -2.0)", "np.random.chisquare(0.0)", "np.random.standard_t(0.0)",
    "np.random.f(0.0, 1.0)", "np.random.f(1.0, -1.0)", "np.random.dirichlet([0.0, 1.0])",
    "rng.dirichlet([-1.0, 1.0])", "np.random.poisson(-1.0)", "rng.poisson(np.nan)",
    "np.random.binomial(-1, 0.5)", "np.random.binomial(np.inf, 0.5)",
    "np.random.hypergeometric(np.nan, 2, 1)", "np.random.binomial(3, 1.5)", "rng.binomial(3, -0.5)",
    "np.random.negative_binomial(0, 0.5)", "np.random.multinomial(-1, [0.5, 0.5])",
    "np.random.multinomial(3, [0.7, 0.7, 0.0])", "np.random.hypergeometric(-1, 3, 2)",
    "np.random.hypergeometric(3, -1, 2)", "np.random.hypergeometric(3, 3, 0)",
    "np.random.hypergeometric(3, 3, 7)",
    "np.random.multivariate_normal([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]], check_valid='raise')",
    "np.random.multivariate_normal([0.0, 0.0], np.eye(2), check_valid='no')",
    "np.random.multivariate_normal(np.zeros(3), np.eye(2))", "np.random.choice(0)",
    "np.random.choice([])", "np.random.choice(3, p=[0.5, 0.6, 0.0])",
    "np.random.choice(3, p=[0.5, 0.5])", "np.random.choice(3, p=[1.5, -0.5, 0.0])",
    "np.random.choice(3, 4, replace=False)", "np.random.choice(np.ones((2, 2)))",
    "np.random.choice(3, 2, replace=False, p=[1.0, 0.0, 0.0])",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_invalid_parameters_are_numpys_error_at_the_callers_line(expr):
    f = bad(expr)
    with pytest.raises(Exception) as want:
        f(None)
    with pytest.raises(want.type) as got:
        tessera.jit(f)(None)
    message = str(got.value)
    assert str(want.value).replace("'a'", "a").split(".")[0].lower().replace("'", "") in \
        message.replace("'a'", "a").lower().replace("'", ""), (message, str(want.value))
    assert f"{f.__code__.co_filename.rsplit('/', 1)[1]}:{f.__code__.co_firstlineno + 3}" \
        in message
    assert "np.random." in message or "Generator." in message


def test_a_wrong_argument_is_pythons_type_error():
    f = bad("np.random.exponential(1.0, 2, 3)")
    with pytest.raises(TypeError, match="exponential"):
        tessera.jit(f)(None)
    g = bad("rng.poisson(lam=1.0, mean=2.0)")
    with pytest.raises(TypeError, match="Generator.poisson"):
        tessera.jit(g)(None)


@pytest.mark.parametrize("expr", ["np.random.zipf(2.0)", "np.random.logseries(0.5)",
                                  "np.random.vonmises(0.0, 1.0)", "rng.noncentral_f(1, 2, 3)",
                                  "np.random.noncentral_chisquare(1.0, 2.0)",
                                  "rng.shuffle(x)"])
def test_untranslated_distributions_are_refused_by_name(expr):
    name = expr.split("(")[0].split(".")[-1]
    with pytest.raises(tessera.UnsupportedError, match=name):
        tessera.jit(bad(expr))(np.arange(3.0))


# ----------------------------------------------------------- threads, seeds, loops


def test_same_values_for_the_same_seed_at_1_and_2_threads():
    call = ("(np.random.gamma(0.7, 2.0, 2000), rng.poisson(np.array([2.0, 40.0]), (1500, 2)), "
            "np.random.binomial(30, 0.6, 500), rng.beta(2.0, 3.0, 700), "
            "np.random.choice(6, 4, replace=False, p=[0.1, 0.2, 0.3, 0.1, 0.2, 0.1]), "
            "rng.multivariate_normal(np.zeros(2), np.eye(2), 40), "
            "np.random.hypergeometric(20, 30, 25, 300))")
    one = draws(call, seed=8, threads=1)
    two = draws(call, seed=8, threads=2)
    again = draws(call, seed=8, threads=2)
    other = draws(call, seed=9, threads=2)
    for a, b, c, d in zip(one, two, again, other):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(b, c)
        assert not np.array_equal(a, d)


def monte_carlo(seed, n):
    # a scalar loop drawing one exponential and one Poisson value a turn
    np.random.seed(seed)
    rng = np.random.default_rng(seed)
    s = 0.0
    k = 0
    out = np.zeros(n)
    for i in range(n):
        e = np.random.exponential(2.0)
        s += e
        k += rng.poisson(3.0)
        out[i] = e
    return s / n, k / n, out


def test_draws_inside_a_compiled_loop():
    mean_e, mean_k, out = tessera.jit(monte_carlo)(4, 4000)
    assert isinstance(mean_e, float)
    assert abs(mean_e - 2.0) < Z * 2.0 / math.sqrt(4000)
    assert abs(mean_k - 3.0) < Z * math.sqrt(3.0 / 4000)
    lim = math.sqrt(-math.log(ALPHA / 2) / 2 / 4000)
    assert stats.kstest(out, stats.expon(scale=2.0).cdf).statistic < lim
    assert np.sum(out) / 4000 == pytest.approx(mean_e, rel=1e-12)


_LOOP_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import inspect
import tessera
from jit_check import numpy_body
body = {body!r}
f = numpy_body(body, "seed, n")
for threads in (1, 2):
    r = tessera.jit(f, threads=threads)(4, 200)
    print(repr(r[0]), repr(r[1]), r[2].tolist())
"""


def test_loop_draws_are_the_general_evaluations():
    # the loop on the fast path and on the general evaluation draw the same values
    # monte_carlo's body, run without importing this module (scipy) in the new processes
    lines = inspect.getsource(monte_carlo).splitlines()[2:]
    body = "\n".join(line[4:] for line in lines)
    script = _LOOP_SCRIPT.replace("{body!r}", repr(body).replace("{", "{{").replace("}", "}}"))
    general, _ = run_script(script, TESSERA_FAST_LOOPS="0")
    fast = ""
    for threads in (1, 2):
        r = tessera.jit(monte_carlo, threads=threads)(4, 200)
        fast += f"{r[0]!r} {r[1]!r} {r[2].tolist()}\n"
    assert fast == general
    lines = fast.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]


def shuffles(x, seed):
    rng = np.random.default_rng(seed)
    rng.shuffle(x)
    y = np.arange(12.0).reshape(3, 4)
    rng.shuffle(y, axis=1)
    xs = [1, 2, 3, 4, 5]
    rng.shuffle(xs)
    z = np.arange(10).reshape(2, 5)
    rng.shuffle(z[1])
    return y, xs, z


def test_generator_shuffle_in_place():
    x = np.arange(7.0)
    y, xs, z = tessera.jit(shuffles)(x, 3)
    assert sorted(x) == list(range(7)) and not np.array_equal(x, np.arange(7.0))  # the caller's
    order = y[0].astype(int)  # one permutation of the columns for every row
    assert sorted(order) == [0, 1, 2, 3]
    assert np.array_equal(y, np.arange(12.0).reshape(3, 4)[:, order])
    assert sorted(xs) == [1, 2, 3, 4, 5] and isinstance(xs, list)
    assert np.array_equal(z[0], np.arange(5)) and sorted(z[1]) == [5, 6, 7, 8, 9]


def test_generator_shuffle_is_uniform_over_the_orders():
    body = ("rng = np.random.default_rng(seed)\nout = np.zeros(2400, dtype=np.int64)\n"
            "for i in range(2400):\n    v = np.arange(3)\n    rng.shuffle(v)\n"
            "    out[i] = v[0] * 9 + v[1] * 3 + v[2]\nreturn out")
    codes = tessera.jit(numpy_body(body, "seed"))(5)
    orders = [0 * 9 + 1 * 3 + 2, 0 * 9 + 2 * 3 + 1, 1 * 9 + 0 * 3 + 2, 1 * 9 + 2 * 3 + 0,
              2 * 9 + 0 * 3 + 1, 2 * 9 + 1 * 3 + 0]
    counts = np.array([np.sum(codes == c) for c in orders])
    assert counts.sum() == 2400
    stat = np.sum((counts - 400.0) ** 2 / 400.0)
    assert stat < stats.chi2.ppf(1 - ALPHA, 5), counts


def test_generator_shuffle_errors():
    f = numpy_body("rng = np.random.default_rng(1)\nrng.shuffle(x, axis=2)\nreturn x", "x")
    with pytest.raises(IndexError, match=r"Generator.shuffle\] axis 2 is out of bounds .*:6\)"):
        tessera.jit(f)(np.arange(3.0))
    with pytest.raises(tessera.UnsupportedError, match="rng.shuffle"):
        tessera.jit(bad("rng.shuffle(x) or 1"))(np.arange(3.0))


FAST = [
    ("exponential(2.5)", stats.expon(scale=2.5)),
    ("standard_exponential()", stats.expon()),
    ("laplace(1.0, 2.0)", stats.laplace(1.0, 2.0)),
    ("logistic(-1.0, scale=0.5)", stats.logistic(-1.0, 0.5)),
    ("gumbel(0.5, 2.0)", stats.gumbel_r(0.5, 2.0)),
    ("rayleigh(1.5)", stats.rayleigh(scale=1.5)),
    ("weibull(1.7)", stats.weibull_min(1.7)),
    ("pareto(3.5)", stats.lomax(3.5)),
    ("power(2.5)", stats.powerlaw(2.5)),
    ("lognormal(0.3, 0.6)", stats.lognorm(0.6, scale=math.exp(0.3))),
    ("standard_cauchy()", stats.cauchy()),
    ("standard_gamma(0.4)", stats.gamma(0.4)),
    ("gamma(3.2, 0.5)", stats.gamma(3.2, scale=0.5)),
    ("beta(0.7, 2.5)", stats.beta(0.7, 2.5)),
    ("chisquare(3.0)", stats.chi2(3.0)),
    ("standard_t(5.0)", stats.t(5.0)),
]
FAST_DISCRETE = [("poisson(3.5)", stats.poisson(3.5), None), ("poisson()", stats.poisson(1.0), None)]
FAST_BODY = ("np.random.seed(seed)\nout = np.zeros(({k}, {m}))\nfor i in range({m}):\n{lines}"
             "return out")


def fast_loop(m):
    calls = [c for c, _ in FAST] + [c for c, _, _ in FAST_DISCRETE]
    lines = "".join(f"    out[{j}, i] = np.random.{c}\n" for j, c in enumerate(calls))
    return numpy_body(FAST_BODY.format(k=len(calls), m=m, lines=lines), "seed")


def test_literal_parameters_draw_in_native_loops_with_the_same_distributions():
    # np.random.NAME(literals): the one-draw forms written for native loops
    m = 4000
    x = tessera.jit(fast_loop(m))(13)
    lim = math.sqrt(-math.log(ALPHA / 2) / 2) / math.sqrt(m)
    for j, (c, dist) in enumerate(FAST):
        assert stats.kstest(x[j], dist.cdf).statistic < lim, c
    for j, (c, dist, lo) in enumerate(FAST_DISCRETE):
        assert_chi2(x[len(FAST) + j], dist, lo=lo)
        assert_mean(x[len(FAST) + j], dist)


_NATIVE_SCRIPT = """
import sys
sys.path.insert(0, {here!r})
import tessera
import test_jit_random_dists as t
print(repr(tessera.jit(t.fast_loop(300))(13).tolist()))
"""


def test_literal_parameter_loops_compile_to_native_code():
    native, log = run_script(_NATIVE_SCRIPT, TESSERA_FAST_LOOPS="debug")
    assert "native code compiled" in log or "native code loaded" in log, log
    general, _ = run_script(_NATIVE_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == general
