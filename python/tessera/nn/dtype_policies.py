"""tessera.nn.dtype_policies (and mixed_precision): Keras 3's DTypePolicy,
a layer's ``dtype_policy`` / ``compute_dtype`` / ``variable_dtype`` and the
global policy. tessera computes in float32 or float64 (a model's dtype): those
policies work everywhere; "mixed_float16", "mixed_bfloat16", "float16" and
"bfloat16" can be named (a DTypePolicy object answers as Keras's) but are
refused, naming the policy, where they would decide a computation (a layer's
or model's dtype, set_global_policy): tessera has no half-precision kernels."""

from __future__ import annotations

import numpy as np

__all__ = ["DTypePolicy", "FloatDTypePolicy", "Policy", "deserialize", "dtype_policy", "get",
           "global_policy", "serialize", "set_dtype_policy", "set_global_policy"]

_MIXED = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
_HALF = ("float16", "bfloat16")
COMPUTED = ("float32", "float64")  # the dtypes a tessera model computes in


class DTypePolicy:
    """Keras's DTypePolicy: the dtype a layer computes in (compute_dtype) and
    keeps its weights in (variable_dtype), by name ("float32", "float64", or
    Keras's "mixed_float16" / "mixed_bfloat16", which tessera refuses to run)."""

    def __init__(self, name=None):
        if name is None:
            name = global_policy().name
        if isinstance(name, DTypePolicy):
            name = name.name
        if not isinstance(name, str):
            raise TypeError(f"[DTypePolicy] name must be a string such as 'float32', got "
                            f"{name!r} (of type {type(name).__name__})")
        self._name = name
        self._compute, self._variable = _parse(name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        return self._compute

    @property
    def variable_dtype(self) -> str:
        return self._variable

    @property
    def quantization_mode(self):
        return None

    def get_config(self) -> dict:
        return {"name": self._name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, DTypePolicy) and other.name == self.name

    def __hash__(self):
        return hash(("DTypePolicy", self._name))

    def __repr__(self):
        return f'<DTypePolicy "{self._name}">'


FloatDTypePolicy = DTypePolicy  # Keras 3's older name, an alias there too
Policy = DTypePolicy  # keras.mixed_precision.Policy


def _parse(name: str):
    if name in _MIXED:
        return _MIXED[name], "float32"
    try:
        dtype = str(np.dtype(name)) if name != "bfloat16" else name
    except TypeError:
        dtype = None
    if dtype is None or dtype != name:
        raise ValueError(f"[DTypePolicy] cannot convert {name!r} to a dtype policy: valid "
                         "policies are 'float32', 'float64' (the ones tessera computes in), "
                         "Keras's 'mixed_float16' and 'mixed_bfloat16', and dtype names")
    return dtype, dtype


def computed_name(value, where: str):
    """The dtype name (a string) a layer or model given dtype=`value` computes
    in (None stays None: the model's, or the global policy's): a string, a
    NumPy dtype, a DTypePolicy or its serialized form (a layer's config read
    from a Keras file). A half-precision policy is an error naming it."""
    if value is None:
        return None
    if isinstance(value, dict) and value.get("class_name") in ("DTypePolicy",
                                                               "FloatDTypePolicy"):
        value = DTypePolicy(**dict(value.get("config") or {}))
    name = value.name if isinstance(value, DTypePolicy) else value
    if not isinstance(name, str):
        try:
            name = str(np.dtype(name))
        except TypeError:
            raise TypeError(f"[{where}] dtype must be a dtype name or a DTypePolicy, got "
                            f"{value!r}") from None
    if name in _MIXED or name in _HALF:
        raise ValueError(f"[{where}] the dtype policy {name!r} is not supported: tessera "
                         "computes in float32 or float64 (it has no float16/bfloat16 kernels, "
                         "so mixed precision cannot run); use 'float32'")
    DTypePolicy(name)  # Keras's error for a name that is no dtype
    return name


def layer_dtype(value, where: str):
    """A layer's dtype= as the layer keeps it: a DTypePolicy (or its config)
    as its name, a half-precision policy refused (computed_name), anything
    else as given (a preprocessing layer's output dtype, a NumPy dtype)."""
    if isinstance(value, (DTypePolicy, dict)) or value in _MIXED or value in _HALF:
        return computed_name(value, where)
    return value


def policy_of(dtype, fallback=None) -> DTypePolicy:
    """The DTypePolicy of a layer whose dtype is `dtype` (None: `fallback`,
    the dtype of the model that built it, else the global policy)."""
    name = dtype if dtype is not None else fallback
    if name is None:
        return global_policy()
    try:
        return DTypePolicy(name if isinstance(name, str) else str(np.dtype(name)))
    except (TypeError, ValueError):
        return global_policy()


_global = {"policy": DTypePolicy("float32")}


def set_global_policy(policy):
    """Keras's mixed_precision.set_global_policy: the policy of layers and
    models made from now on without a dtype ("float32" or "float64"; a
    mixed or half-precision policy is refused, naming it)."""
    if policy is None:
        raise ValueError("[set_global_policy] expected a policy name (such as 'float32') or a "
                         "DTypePolicy, got None")
    name = computed_name(policy, "set_global_policy")
    if name not in COMPUTED:
        raise ValueError(f"[set_global_policy] the policy {name!r} is not one tessera computes "
                         f"models in: give one of {list(COMPUTED)}")
    _global["policy"] = DTypePolicy(name)


def global_policy() -> DTypePolicy:
    """The global DTypePolicy (float32 unless set_global_policy changed it)."""
    return _global["policy"]


set_dtype_policy = set_global_policy  # Keras's names in keras.mixed_precision
dtype_policy = global_policy


def get(identifier):
    """A DTypePolicy from a name, a DTypePolicy or its config (Keras's
    dtype_policies.get)."""
    if identifier is None:
        return global_policy()
    if isinstance(identifier, DTypePolicy):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        return DTypePolicy(identifier)
    raise ValueError(f"[dtype_policies.get] cannot interpret {identifier!r} as a DTypePolicy")


def serialize(policy) -> dict:
    """Keras's serialized form of a DTypePolicy."""
    return {"module": "keras", "class_name": "DTypePolicy",
            "config": get(policy).get_config(), "registered_name": None}


def deserialize(config, custom_objects=None) -> DTypePolicy:
    if not isinstance(config, dict) or config.get("class_name") not in ("DTypePolicy",
                                                                         "FloatDTypePolicy"):
        raise ValueError(f"[dtype_policies.deserialize] expected a serialized DTypePolicy "
                         f"(class_name 'DTypePolicy'), got {config!r}")
    return DTypePolicy(**dict(config.get("config") or {}))


def eager_inputs(layer_dtype, arrays) -> list:
    """An eager call's arrays as Keras's layer casts them: floating ones to the
    layer's compute dtype (its float policy, else the global policy's), the
    others (ints, bools, strings) as they are. A layer whose dtype is another
    (a preprocessing layer's output dtype) takes them as they are."""
    arrays = [np.asarray(a) for a in arrays]
    compute = eager_dtype(layer_dtype, arrays)
    if layer_dtype is not None and layer_dtype not in COMPUTED:
        return arrays
    return [a.astype(compute) if a.dtype.kind == "f" and a.dtype != compute else a
            for a in arrays]


def eager_dtype(layer_dtype, arrays) -> str:
    """The dtype an eager call's one-layer model computes in (eager_inputs)."""
    if layer_dtype in COMPUTED:
        return layer_dtype
    if layer_dtype is None:
        return global_policy().name
    first = np.asarray(arrays[0]).dtype if arrays else None
    return str(first) if first in (np.float32, np.float64) else "float32"

