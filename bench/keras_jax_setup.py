"""What the races of a tessera fit against Keras on JAX share. setup(), before JAX is
imported (its XLA thread pool is fixed then): the Keras backend, tessera's disk cache off (its
first step cold, as XLA's), and, for ``--threads 1`` (the default), XLA on one thread too (its
default is one per core). race_epochs(): each side's first epoch timed apart, then interleaved
rounds, printed as a table.

    import keras_jax_setup
    keras_jax_setup.setup()   # first, before numpy/keras/jax
"""

import os
import sys

import fair


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


def race_epochs(t_epoch, k_epoch, args) -> None:
    """Times an epoch of tessera's fit (t_epoch) and of Keras-JAX's jitted stateless step
    (k_epoch): first epochs apart, then args.rounds interleaved rounds; prints the table."""
    first = {"tessera": fair.first_call(t_epoch, "tessera's first epoch"),
             "keras-jax": fair.first_call(k_epoch, "Keras-JAX's first epoch")}
    times = fair.interleave({"tessera": t_epoch, "keras-jax": k_epoch}, args.rounds, warmup=1)
    print(f"load average at end: {fair.load_average()}")
    print("| side | first epoch (trace, compile) s | epoch s (median, range) | per step ms |")
    print("| --- | --- | --- | --- |")
    label = {"tessera": f"tessera fit ({args.threads} thread(s))",
             "keras-jax": f"Keras-JAX, one jax.jit stateless step (XLA {args.threads} thread(s))"}
    for name in ("tessera", "keras-jax"):
        ts = times[name]
        print(f"| {label[name]} | {first[name]:.2f} | {fair.med(ts):.3f} ({fair.spread(ts)}) | "
              f"{1000 * fair.med(ts) / args.batches:.1f} |")
    print(f"tessera/Keras-JAX = {fair.med(times['tessera']) / fair.med(times['keras-jax']):.2f}")
