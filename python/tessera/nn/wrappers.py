"""keras.wrappers: Keras's scikit-learn estimators (SKLearnClassifier,
SKLearnRegressor, SKLearnTransformer), with Keras's arguments. They need
scikit-learn, which is not a dependency of tessera: without it each raises
an ImportError naming it, as Keras's do; with it, an error saying that
tessera's wrappers are not built yet (rather than estimators that would
behave differently from Keras's)."""

from __future__ import annotations

import importlib.util

__all__ = ["SKLearnClassifier", "SKLearnRegressor", "SKLearnTransformer"]


class _SKLearnWrapper:
    def __init__(self, model, warm_start=False, model_kwargs=None, fit_kwargs=None):
        kind = type(self).__name__
        if importlib.util.find_spec("sklearn") is None:
            raise ImportError(f"[{kind}] requires scikit-learn, which is not installed (it is "
                              "not a dependency of tessera): pip install scikit-learn")
        raise NotImplementedError(f"[{kind}] tessera's scikit-learn wrappers are not built yet; "
                                  "train the model with fit and call predict directly")


class SKLearnClassifier(_SKLearnWrapper):
    """Keras's scikit-learn classifier of a model (see the module doc)."""


class SKLearnRegressor(_SKLearnWrapper):
    """Keras's scikit-learn regressor of a model (see the module doc)."""


class SKLearnTransformer(_SKLearnWrapper):
    """Keras's scikit-learn transformer of a model (see the module doc)."""
