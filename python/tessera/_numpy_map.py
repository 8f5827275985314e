"""Tables that map NumPy, ``math`` and builtin names onto tessera primitives.

The translator (``_translate.py``) consults these tables; they hold no logic
beyond the shape of each call: which primitive it becomes, which NumPy
parameter names its positional arguments carry, and which keywords are
renamed.  Everything numerical happens in the C++ core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The primitive names of the core (``tessera ops``), used when the compiled
# extension is not importable (translation-only tests).  When ``_core`` is
# available its own list is used instead, so new primitives are picked up.
STATIC_PRIMITIVES = frozenset(
    """
    abs absolute add arccos arccosh arcsin arcsinh arctan arctan2 arctanh astype ceil clip
    copysign cos cosh deg2rad divide exp exp2 expm1 floor floor_divide fmax fmin hypot isfinite
    isinf isnan log log10 log1p log2 maximum minimum mod multiply nan_to_num negative positive
    power rad2deg reciprocal remainder rint round sign sin sinh sqrt square subtract tan tanh
    trunc where allclose array_equal equal greater greater_equal isclose less less_equal
    logical_and logical_not logical_or logical_xor not_equal append assert concat is_nil len
    print range str type arange array copy diag empty empty_like eye full full_like identity
    linspace meshgrid ones ones_like tri tril triu zeros zeros_like getitem setitem slice take
    take_along_axis file_read_csv file_read_npy file_write_csv file_write_npy load save det dot
    inner inv kron matmul matrix_power norm outer solve tensordot trace vdot permutation
    random_integers random_normal random_uniform set_seed shuffle atleast_1d atleast_2d
    atleast_3d broadcast_to concatenate dstack expand_dims flatten flip hstack moveaxis ndim pad
    ravel repeat reshape roll shape size split squeeze stack swapaxes tile transpose vstack
    argsort argwhere bincount flatnonzero nonzero searchsorted sort unique all amax amin any
    argmax argmin average count_nonzero cumprod cumsum logsumexp max mean median min nanmean
    nansum prod ptp std sum var bitwise_and bitwise_or bitwise_xor bitwise_not invert left_shift
    right_shift percentile quantile nanpercentile nanquantile nanmedian nanprod nanvar nanstd
    nanmin nanmax nanargmin nanargmax nancumsum isin diff cross einsum ndindex default_rng
    rng_random rng_standard_normal rng_normal rng_uniform rng_integers rng_choice
    rng_permutation svd eigh eigvalsh eig eigvals qr cholesky lstsq pinv
    slogdet matrix_rank accumulate reduce_op at_op reduceat
    """.split()
)

# Names the language gives a meaning of its own: user variables with these
# names are renamed in the generated text.
LANGUAGE_WORDS = frozenset(
    """
    define lambda block parallel_block if while parallel_while for_each store list tuple dict break continue return
    true false nil inf nan argv
    """.split()
)

# The dtypes tessera supports, under the names NumPy and Python use for them.
DTYPE_NAMES = {
    "bool": "bool",
    "bool_": "bool",
    "int": "int64",
    "int_": "int64",
    "intp": "int64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "uint": "uint64",
    "uintp": "uint64",
    "float": "float64",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "single": "float32",
    "float64": "float64",
    "double": "float64",
    "bfloat16": "bfloat16",
    "complex": "complex128",
    "complex64": "complex64",
    "csingle": "complex64",
    "complex128": "complex128",
    "cdouble": "complex128",
}


@dataclass(frozen=True)
class Spec:
    """How one NumPy-style call becomes a primitive call.

    ``params`` are the NumPy parameter names in positional order (the first is
    the data argument).  The first ``positional`` of them are passed by
    position; the others by keyword, renamed by ``rename``.  Parameters in
    ``ignore_none`` are dropped when they are the literal None (``out=None``);
    any other value is unsupported.  ``varargs`` collects every positional
    argument after the fixed ones into one list argument (``x.reshape(2, 3)``).
    """

    prim: str
    params: tuple = ()
    positional: int = 1
    rename: dict = field(default_factory=dict)
    ignore_none: tuple = ("out",)
    varargs: str | None = None


def _reduce(prim, *extra):
    return Spec(prim, ("x", "axis") + extra, positional=1)


_R_DTYPE = ("dtype", "out", "keepdims")  # sum, prod, mean, cumsum
_R_PLAIN = ("out", "keepdims")  # max, min, any, all, argmax

# np.NAME(...) calls whose parameters differ from the primitive's (by
# position or name).  Any other ``np.NAME`` that is a primitive is passed
# through unchanged; anything else is unsupported.
NUMPY_SPECS = {
    "sum": _reduce("sum", *_R_DTYPE),
    "prod": _reduce("prod", *_R_DTYPE),
    "mean": _reduce("mean", *_R_DTYPE),
    "nansum": _reduce("nansum", *_R_DTYPE),
    "nanmean": _reduce("nanmean", *_R_DTYPE),
    "cumsum": _reduce("cumsum", "dtype", "out"),
    "cumprod": _reduce("cumprod", "dtype", "out"),
    "max": _reduce("max", *_R_PLAIN),
    "min": _reduce("min", *_R_PLAIN),
    "amax": _reduce("amax", *_R_PLAIN),
    "amin": _reduce("amin", *_R_PLAIN),
    "all": _reduce("all", *_R_PLAIN),
    "any": _reduce("any", *_R_PLAIN),
    "argmax": _reduce("argmax", *_R_PLAIN),
    "argmin": _reduce("argmin", *_R_PLAIN),
    "ptp": _reduce("ptp", *_R_PLAIN),
    "median": _reduce("median", *_R_PLAIN),
    "count_nonzero": Spec("count_nonzero", ("x", "axis", "keepdims")),
    "std": _reduce("std", "dtype", "out", "ddof", "keepdims"),
    "var": _reduce("var", "dtype", "out", "ddof", "keepdims"),
    "average": Spec("average", ("x", "axis", "weights", "returned", "keepdims")),
    "abs": Spec("abs", ("x",)),
    "absolute": Spec("absolute", ("x",)),
    "around": Spec("round", ("x", "decimals"), positional=2),
    "round": Spec("round", ("x", "decimals"), positional=2),
    "clip": Spec("clip", ("x", "a_min", "a_max"), positional=3,
                 rename={"min": "a_min", "max": "a_max"}),
    "reshape": Spec("reshape", ("x", "shape"), positional=2, rename={"newshape": "shape"}),
    "transpose": Spec("transpose", ("x", "axes"), positional=2),
    "where": Spec("where", ("condition", "x", "y"), positional=3),
    "linspace": Spec("linspace", ("start", "stop", "num", "endpoint", "retstep", "dtype"),
                     positional=2),
    "sort": Spec("sort", ("x", "axis", "kind"), positional=2),
    "argsort": Spec("argsort", ("x", "axis", "kind"), positional=2),
    "asarray": Spec("asarray", ("object", "dtype"), positional=1),
    "ascontiguousarray": Spec("ascontiguousarray", ("object", "dtype"), positional=1),
    "array": Spec("array", ("object", "dtype"), positional=1),
    "matrix_power": Spec("matrix_power", ("x", "n"), positional=2),
    "random_sample": Spec("random_uniform", ("shape",), positional=1),
    "eye": Spec("eye", ("N", "M", "k", "dtype"), positional=4, rename={"N": "n", "M": "m"}),
    "nanprod": _reduce("nanprod", *_R_DTYPE),
    "nancumsum": _reduce("nancumsum", "dtype", "out"),
    "nanmin": _reduce("nanmin", *_R_PLAIN),
    "nanmax": _reduce("nanmax", *_R_PLAIN),
    "nanargmin": _reduce("nanargmin", *_R_PLAIN),
    "nanargmax": _reduce("nanargmax", *_R_PLAIN),
    "nanmedian": _reduce("nanmedian", *_R_PLAIN),
    "nanstd": _reduce("nanstd", "dtype", "out", "ddof", "keepdims"),
    "nanvar": _reduce("nanvar", "dtype", "out", "ddof", "keepdims"),
    "percentile": Spec("percentile", ("x", "q", "axis", "out", "overwrite_input", "method",
                                      "keepdims"), positional=2),
    "quantile": Spec("quantile", ("x", "q", "axis", "out", "overwrite_input", "method",
                                  "keepdims"), positional=2),
    "nanpercentile": Spec("nanpercentile", ("x", "q", "axis", "out", "overwrite_input",
                                            "method", "keepdims"), positional=2),
    "nanquantile": Spec("nanquantile", ("x", "q", "axis", "out", "overwrite_input", "method",
                                        "keepdims"), positional=2),
    "isin": Spec("isin", ("element", "test_elements", "assume_unique", "invert"), positional=4),
    "diff": Spec("diff", ("x", "n", "axis", "prepend", "append"), positional=3),
    "cross": Spec("cross", ("a", "b", "axisa", "axisb", "axisc", "axis"), positional=6),
}

# np.percentile(...)'s keywords that do not change the result tessera gives.
QUANTILE_FUNCTIONS = {"percentile", "quantile", "nanpercentile", "nanquantile"}

# NumPy names that become a different primitive with the same arguments.
NUMPY_RENAMES = {
    "concat": "concatenate",
    "radians": "deg2rad",
    "degrees": "rad2deg",
    "row_stack": "vstack",
    "fabs": "abs",
    "true_divide": "divide",
    "pow": "power",
    "acos": "arccos",
    "asin": "arcsin",
    "atan": "arctan",
    "atan2": "arctan2",
    "fix": "trunc",
    "bitwise_invert": "invert",
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
}

# np.iinfo(dtype).NAME / np.finfo(dtype).NAME: constants at translation.
INFO_ATTRIBUTES = {"max", "min", "eps", "tiny", "bits", "resolution", "smallest_normal",
                   "epsneg", "precision"}

# np.random.NAME: how the legacy global-state API maps onto tessera's
# counter-based generator (the values differ from NumPy's; shapes, dtypes
# and ranges match).
RANDOM_SPECS = {
    "uniform": Spec("random_uniform", ("low", "high", "size"), positional=0,
                    rename={"size": "shape"}),
    "normal": Spec("random_normal", ("loc", "scale", "size"), positional=0,
                   rename={"size": "shape", "loc": "mean", "scale": "std"}),
    "randint": Spec("random_integers", ("low", "high", "size"), positional=0,
                    rename={"size": "shape"}),
    "random": Spec("random_uniform", ("size",), positional=0, rename={"size": "shape"}),
    "random_sample": Spec("random_uniform", ("size",), positional=0, rename={"size": "shape"}),
    "permutation": Spec("permutation", ("x",)),
    "seed": Spec("set_seed", ("seed",)),
    "default_rng": Spec("default_rng", ("seed",)),
}

# rng.NAME(...) for a generator made by np.random.default_rng (NumPy's
# Generator methods; the receiver becomes the first argument).
GENERATOR_SPECS = {
    "random": Spec("rng_random", ("rng", "size", "dtype", "out"), positional=3),
    "standard_normal": Spec("rng_standard_normal", ("rng", "size", "dtype", "out"),
                            positional=3),
    "normal": Spec("rng_normal", ("rng", "loc", "scale", "size"), positional=4),
    "uniform": Spec("rng_uniform", ("rng", "low", "high", "size"), positional=4),
    "integers": Spec("rng_integers", ("rng", "low", "high", "size", "dtype", "endpoint"),
                     positional=6),
    "choice": Spec("rng_choice", ("rng", "a", "size", "replace", "p", "axis", "shuffle"),
                   positional=7),
    "permutation": Spec("rng_permutation", ("rng", "x"), positional=2),
}

# x.NAME(...) methods of ndarray.  The receiver becomes the first argument.
METHOD_SPECS = {
    "sum": NUMPY_SPECS["sum"],
    "prod": NUMPY_SPECS["prod"],
    "mean": NUMPY_SPECS["mean"],
    "cumsum": NUMPY_SPECS["cumsum"],
    "cumprod": NUMPY_SPECS["cumprod"],
    "max": NUMPY_SPECS["max"],
    "min": NUMPY_SPECS["min"],
    "all": NUMPY_SPECS["all"],
    "any": NUMPY_SPECS["any"],
    "argmax": NUMPY_SPECS["argmax"],
    "argmin": NUMPY_SPECS["argmin"],
    "ptp": NUMPY_SPECS["ptp"],
    "std": NUMPY_SPECS["std"],
    "var": NUMPY_SPECS["var"],
    "round": NUMPY_SPECS["round"],
    "clip": NUMPY_SPECS["clip"],
    "argsort": NUMPY_SPECS["argsort"],
    "astype": Spec("astype", ("x", "dtype"), positional=2),
    "copy": Spec("copy", ("x",)),
    "conj": Spec("conj", ("x",)),
    "conjugate": Spec("conj", ("x",)),
    "flatten": Spec("flatten", ("x",)),
    "ravel": Spec("ravel", ("x",)),
    "squeeze": Spec("squeeze", ("x", "axis"), positional=2),
    "dot": Spec("dot", ("x", "y"), positional=2),
    "repeat": Spec("repeat", ("x", "repeats", "axis"), positional=3),
    "take": Spec("take", ("x", "indices", "axis"), positional=3),
    "nonzero": Spec("nonzero", ("x",)),
    "swapaxes": Spec("swapaxes", ("x", "axis1", "axis2"), positional=3),
    "trace": Spec("trace", ("x", "offset", "axis1", "axis2"), positional=4),
    "reshape": Spec("reshape", ("x",), varargs="shape"),
    "transpose": Spec("transpose", ("x",), varargs="axes"),
}

# Methods that change their receiver in place: ``x.sort()`` is emitted as
# ``define(x, sort(x))``.  Only allowed as statements on a variable.
INPLACE_METHODS = {"sort", "fill", "append", "extend"}

# Methods of lists and dicts that change them, as statements on a variable:
# the primitive giving the new value (xs.insert(0, v) is define(xs, insert(xs, 0, v))).
MUTATING_LIST_METHODS = {
    "insert": "insert",
    "reverse": "reverse",
    "update": "update",
    "remove": "remove",
    "clear": "clear",
}

# Methods of strings (the text family's str_NAME primitives).
STRING_METHODS = {
    "split": Spec("str_split", ("s", "sep", "maxsplit")),
    "join": Spec("str_join", ("sep", "items")),
    "strip": Spec("str_strip", ("s", "chars")),
    "lstrip": Spec("str_lstrip", ("s", "chars")),
    "rstrip": Spec("str_rstrip", ("s", "chars")),
    "upper": Spec("str_upper", ("s",)),
    "lower": Spec("str_lower", ("s",)),
    "startswith": Spec("str_startswith", ("s", "prefix")),
    "endswith": Spec("str_endswith", ("s", "suffix")),
    "replace": Spec("str_replace", ("s", "old", "new", "count")),
    "find": Spec("str_find", ("s", "sub")),
}

# Methods of lists, tuples, strings and dicts that give a value.
VALUE_METHODS = {
    "index": Spec("index", ("x", "item", "start", "stop")),
    "count": Spec("count", ("x", "item")),
    "get": Spec("get", ("dict", "key", "default")),
    "keys": Spec("keys", ("dict",)),
    "values": Spec("values", ("dict",)),
    "items": Spec("items", ("dict",)),
}

# math.NAME -> primitive (on scalars the primitives return Python scalars).
MATH_RENAMES = {
    "sqrt": "sqrt", "exp": "exp", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "expm1": "expm1", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
    "fabs": "abs", "pow": "power", "hypot": "hypot", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "copysign": "copysign", "degrees": "rad2deg", "radians": "deg2rad",
}
MATH_INT_RESULT = {"floor", "ceil", "trunc"}  # math.floor(x) is an int
# math.NAME written in Python (tessera/_numpy_apply_lib.py's _math_NAME): Python's
# integer functions among them (an int beyond int64 is an OverflowError).
MATH_LIBRARY = {"isclose", "erf", "erfc", "factorial", "perm", "comb", "gcd", "lcm", "isqrt"}
MATH_CONSTANTS = {"pi", "e", "inf", "nan", "tau"}


# Functions of Python's random module tessera.jit translates (the same
# distributions from tessera's own stream; random.shuffle only as a statement).
PYTHON_RANDOM = ("random", "uniform", "randint", "randrange", "choice", "gauss",
                 "normalvariate", "seed", "shuffle")

# Reductions whose where= and initial= tessera's NumPy library handles (_numpy_lib.py).
MASKED_REDUCTIONS = {"sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all"}

# np.fft.NAME -> the primitive of the same name (tessera/primitives/fft.cpp).
_FFT_1D = ("a", "n", "axis", "norm", "out")
_FFT_ND = ("a", "s", "axes", "norm", "out")
FFT_SPECS = {
    **{name: Spec(name, _FFT_1D, positional=4) for name in ("fft", "ifft", "rfft", "irfft")},
    **{name: Spec(name, _FFT_ND, positional=4)
       for name in ("fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2")},
    "fftfreq": Spec("fftfreq", ("n", "d"), positional=2),
    "rfftfreq": Spec("rfftfreq", ("n", "d"), positional=2),
    "fftshift": Spec("fftshift", ("x", "axes"), positional=2),
    "ifftshift": Spec("ifftshift", ("x", "axes"), positional=2),
}
