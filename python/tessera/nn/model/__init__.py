"""Models: functional (`Model(inputs, outputs)`), `Sequential`, and
subclassed (`class M(Model)` with `call`), with Keras's compile, fit,
evaluate, predict, summary, weights and saving.

    core.py        Model: the graph, building, weights, summary, saving
    compile.py     compile() and the checks of fit/evaluate/predict's data
    training.py    fit: the training loop
    inference.py   evaluate, predict
    sequential.py  Sequential

The lowest modules of the package know the model only through the registry
(registry.model_class): a layer called on arrays, load_model and clone_model
build models without importing this package.
"""

from ..callbacks import History
from ..registry import register_model_class
from .core import Model
from .sequential import Sequential

__all__ = ["Model", "Sequential", "History"]

register_model_class("Model", Model)
register_model_class("Sequential", Sequential)
