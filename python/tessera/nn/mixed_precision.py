"""tessera.nn.mixed_precision: Keras 3's keras.mixed_precision names. The
policies tessera computes in are "float32" and "float64"; a mixed or
half-precision policy is refused where it would decide a computation, naming
it (tessera.nn.dtype_policies)."""

from .dtype_policies import (DTypePolicy, Policy, dtype_policy, global_policy,
                             set_dtype_policy, set_global_policy)

__all__ = ["DTypePolicy", "Policy", "dtype_policy", "global_policy", "set_dtype_policy",
           "set_global_policy"]
