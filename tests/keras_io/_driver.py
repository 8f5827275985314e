"""Runs one script of this folder under Keras or tessera.nn and records its training.

Usage: python tests/keras_io/_driver.py {keras,tessera} SCRIPT.py OUT.json

The script's source is run as written for tessera (`import tessera.nn as keras`,
`from tessera.nn import ...`); with `keras` those two import forms are turned back
into Keras's (`import keras`, `from keras import ...`, on the JAX backend), which is
the only difference between the two runs. Both start from the same seeds (Python's
random, NumPy's global generator, the framework's own: `keras.utils.set_random_seed(0)`),
so the data a script draws is the same array in both; the initial weights are each
framework's own draws.

`Model.fit` and `Model.evaluate` of the chosen module are wrapped to record, for every
call, the batch logs' loss (a running mean over the epoch in both frameworks: the first
one is the loss of the first batch at the initial weights), each epoch's logs, and what
`evaluate` returned; and the loss over the first 256 training samples just before and
just after each `fit` (with `evaluate`, when the data are arrays and no class_weight is
given, or the class_weight is one weight per integer label: then as sample weights;
what tells whether the model learned). OUT.json gets {"fits": [...], "evaluates": [...], "error": str|null}.
"""
import json
import math
import os
import re
import sys
import traceback

import numpy as np


def keras_source(text):
    """The script as a Keras user writes it: only the two import forms change."""
    text = re.sub(r"^import tessera\.nn as keras$", "import keras", text, flags=re.M)
    # (`from tessera.nn.optimizers import RMSprop`: `from keras.optimizers import RMSprop`)
    return re.sub(r"^from tessera\.nn(\.\w+)? import ", r"from keras\1 import ", text, flags=re.M)


def _number(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _numbers(logs):
    out = {}
    for k, v in (logs or {}).items():
        f = _number(v)
        if f is not None:
            out[k] = f
    return out


PROBE = 256  # samples of the training data whose loss is taken before and after fit


def _head(data, n):
    """The first n samples of arrays, lists/tuples or dicts of arrays; None for
    None, False for anything else (a Dataset, a generator: no probe)."""
    if data is None:
        return None
    if hasattr(data, "shape") and hasattr(data, "__getitem__") and len(getattr(data, "shape", ())) > 0:
        return data[:n]
    if isinstance(data, (list, tuple)) and data and all(hasattr(d, "shape") for d in data):
        return type(data)(d[:n] for d in data)
    if isinstance(data, dict) and data and all(hasattr(d, "shape") for d in data.values()):
        return {k: d[:n] for k, d in data.items()}
    return False


def probe_data(args, kwargs):
    """(x, y, sample_weight) of fit's first PROBE training samples, a class_weight
    turned into sample weights; None when the data is not arrays or the class_weight
    cannot be (one-hot labels, or beside sample weights)."""
    names = ["x", "y", "batch_size", "epochs", "verbose", "callbacks", "validation_split",
             "validation_data", "shuffle", "class_weight", "sample_weight"]
    given = dict(zip(names, args), **kwargs)
    x, y, w = (_head(given.get(k), PROBE) for k in ("x", "y", "sample_weight"))
    if x is None or x is False or y is False or w is False:
        return None
    cw = given.get("class_weight")
    if cw is not None:  # the loss fit minimizes: each sample weighed by its class's weight
        if w is not None or not hasattr(y, "shape") or y.ndim > 2 or y.ndim == 2 and y.shape[1] != 1:
            return None
        w = np.array([cw[int(c)] for c in np.asarray(y).reshape(-1)], dtype="float32")
    return x, y, w


def instrument(module, record):
    """Wraps module.Model.fit / evaluate to append what they saw to `record`."""
    base = module.callbacks.Callback

    class Recorder(base):
        def __init__(self, fit):
            super().__init__()
            self.fit = fit

        def on_train_batch_end(self, batch, logs=None):
            loss = _number((logs or {}).get("loss"))
            if loss is not None:
                self.fit["batch_losses"].append(loss)

        def on_epoch_end(self, epoch, logs=None):
            self.fit["epochs"].append(_numbers(logs))

    fit0, evaluate0 = module.Model.fit, module.Model.evaluate
    inside_fit = []  # fit's validation calls evaluate: not the script's call

    def probe_loss(model, probe):
        if probe is None:
            return None
        x, y, w = probe
        try:
            out = evaluate0(model, x, y, sample_weight=w, batch_size=PROBE, verbose=0,
                            return_dict=True)
        except Exception as e:  # noqa: BLE001 - then the batch logs alone tell
            return f"{type(e).__name__}: {e}"[:300]
        return _number(out.get("loss"))

    def fit(self, *args, **kwargs):
        entry = {"model": type(self).__name__, "batch_losses": [], "epochs": []}
        record["fits"].append(entry)
        cbs = kwargs.get("callbacks")
        kwargs["callbacks"] = list(cbs or []) + [Recorder(entry)]
        probe = probe_data(args, kwargs)
        entry["probe_before"] = probe_loss(self, probe)
        inside_fit.append(True)
        try:
            out = fit0(self, *args, **kwargs)
        finally:
            inside_fit.pop()
        entry["probe_after"] = probe_loss(self, probe)
        return out

    def evaluate(self, *args, **kwargs):
        out = evaluate0(self, *args, **kwargs)
        if inside_fit:
            return out
        vals = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else [out]
        record["evaluates"].append([_number(v) for v in vals])
        return out

    module.Model.fit, module.Model.evaluate = fit, evaluate


def reseed(module, seed):
    """With KERAS_IO_SEED set (run_all.py --seed N), every `keras.utils.set_random_seed`
    call of the script seeds the framework with N instead of its own seed: the
    framework's draws (initial weights, dropout, augmentation, a PyDataset's batch
    order) change, the data the script draws from its own NumPy generators do not.
    How much a script's result owes to those draws (tests/keras_io/README.md,
    patch_convnet's gap)."""
    if seed is None:
        return
    seed0 = module.utils.set_random_seed

    def set_random_seed(_seed):
        seed0(int(seed))

    module.utils.set_random_seed = set_random_seed


def main(argv):
    framework, script, out = argv
    record = {"framework": framework, "fits": [], "evaluates": [], "error": None}
    with open(script, encoding="utf-8") as f:
        text = f.read()
    if framework == "keras":
        os.environ["KERAS_BACKEND"] = "jax"
        import keras as module
        text = keras_source(text)
    elif framework == "tessera":
        import tessera.nn as module
    else:
        sys.exit(f"_driver: framework must be keras or tessera, got {framework!r}")
    module.utils.set_random_seed(0)
    instrument(module, record)
    reseed(module, os.environ.get("KERAS_IO_SEED"))
    code = compile(text, script, "exec")
    status = 0
    try:
        exec(code, {"__name__": "__main__", "__file__": script})
    except BaseException:  # noqa: BLE001 - the record says how the script ended
        record["error"] = traceback.format_exc(limit=-3)
        status = 1
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, out)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
