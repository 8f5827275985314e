"""What a race against Keras on JAX sets before JAX is imported (its XLA thread pool is
fixed then): the Keras backend, tessera's disk cache off (its first step cold, as XLA's),
and, for ``--threads 1`` (the default), XLA on one thread too (its default is one per core).

    import keras_jax_setup
    keras_jax_setup.setup()   # first, before numpy/keras/jax
"""

import os
import sys


def threads_arg() -> int:
    """--threads N of the command line (1 when absent)."""
    for k, a in enumerate(sys.argv):
        if a == "--threads" and k + 1 < len(sys.argv):
            return int(sys.argv[k + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


def setup() -> None:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("TESSERA_CACHE_DIR", "0")
    if threads_arg() == 1:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                           "intra_op_parallelism_threads=1")
