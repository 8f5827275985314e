"""Run one script of this folder with each `fit` cut to at most N epochs.

Usage: python _capped.py N SCRIPT.py

For the run-only checks (tests/python/test_keras_io_scripts.py, `run_all.py
--max-epochs N`): whether a script runs through is decided in its first epochs
(every program is built and run there), and the rest of its epochs only cost
time. Learning is checked by `run_all.py --compare`, which never caps. A fit
that starts at `initial_epoch` keeps N epochs after it.
"""
import os
import runpy
import sys

import tessera.nn as keras


def capped_fit(fit, limit):
    def fit_at_most(self, *args, **kwargs):
        first = kwargs.get("initial_epoch", args[11] if len(args) > 11 else 0) or 0
        if len(args) > 3:
            args = list(args)
            args[3] = min(args[3], first + limit)
        elif "epochs" in kwargs:
            kwargs["epochs"] = min(kwargs["epochs"], first + limit)
        return fit(self, *args, **kwargs)
    fit_at_most.__wrapped__ = fit
    return fit_at_most


def main():
    limit, script = int(sys.argv[1]), os.path.abspath(sys.argv[2])
    keras.Model.fit = capped_fit(keras.Model.fit, limit)
    sys.argv = [script] + sys.argv[3:]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT.py` would have it
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
