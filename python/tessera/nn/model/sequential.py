"""Sequential: a stack of layers, a Model built from them in turn."""

from __future__ import annotations

from typing import Optional, Sequence

from ..call_defaults import signature_training
from ..functional import path_scope
from ..layers import Layer
from ..layers.base import _auto_name
from ..layers.preprocessing import _Preprocessing
from ..symbolic import Input, KerasTensor
from .core import Model


class Sequential(Model):
    """A stack of layers, like keras.Sequential.

        model = Sequential([Conv1D(64, 3, activation="relu", input_shape=(128, 9)), Flatten(),
                            Dense(6, activation="softmax")])
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=64, epochs=5, validation_split=0.1)
    """

    kind = "Sequential"

    def __init__(self, layers: Sequence[Layer] = (), input_shape=None, seed=None,
                 dtype=None, name: Optional[str] = None, trainable: bool = True):
        super().__init__(name=name, seed=seed, dtype=dtype, trainable=trainable)
        self._stack: list = []
        self._declared_input = None  # one sample's shape (None: a variable-length axis)
        self._declared_dtype = None
        if layers is None:
            layers = ()
        if not isinstance(layers, (list, tuple)):
            raise TypeError(f"[Sequential] layers must be a list of layers, got "
                            f"{type(layers).__name__}")
        for i, layer in enumerate(layers):
            if getattr(layer, "is_input_layer", False):  # keras.layers.InputLayer
                layer = layer.output
            if isinstance(layer, KerasTensor) and layer.op == "input" and i == 0:
                self._declared_input = layer.shape[1:]
                self._declared_dtype = layer.dtype
                self._declared_batch = getattr(layer, "fixed_batch", None)
                continue
            if not isinstance(layer, Layer):
                raise TypeError(f"[Sequential] layer {i} is not a tessera.nn layer: {layer!r}")
            self._stack.append(layer)
        self.layers = list(self._stack)
        if input_shape is None and self._stack and self._stack[0].declared_input_shape:
            # Keras: on the first layer, one sample's shape (None: unknown length)
            input_shape = (None,) + tuple(self._stack[0].declared_input_shape)
        if input_shape is None and self._declared_input is not None and self._stack:
            # (Sequential([Input(...)]) alone, as Keras's: built by the first add)
            input_shape = (getattr(self, "_declared_batch", None),) + tuple(self._declared_input)
        if input_shape is not None:
            self.build(tuple(input_shape))

    @property
    def layers(self) -> list:
        """The stack's layers, without its input (as Keras lists them; a
        user's layer as itself)."""
        top = self.__dict__.get("_top_layers")
        return list(self._layers if top is None else top)

    @layers.setter
    def layers(self, layers) -> None:
        self._layers = list(layers)
        self.__dict__["_top_layers"] = None

    def add(self, layer, rebuild: bool = True):
        """Appends a layer, as Keras's: `add(nn.Input(shape))` first gives
        the input; once the input shape is known the model is built (again)
        after each add, the layers already built keeping their weights (the
        optimizer state and the compiled programs start over)."""
        if getattr(layer, "is_input_layer", False):  # keras.layers.InputLayer
            layer = layer.output
        if isinstance(layer, KerasTensor) and layer.op == "input":
            if self._stack:
                raise ValueError("[Sequential.add] an Input can only come first, before the "
                                 f"layers; the model has {len(self._stack)} already")
            self._declared_input = layer.shape[1:]
            self._declared_dtype = layer.dtype
            self._declared_batch = getattr(layer, "fixed_batch", None)
            return
        if not isinstance(layer, Layer):
            raise TypeError(f"[Sequential.add] not a tessera.nn layer: {layer!r}")
        self._stack.append(layer)
        self.layers = list(self._stack)
        if rebuild:
            self._rebuild("Sequential.add")

    def pop(self, rebuild: bool = True):
        """Removes the last layer and returns it, as Keras's (the model is
        built again without it when its input shape is known)."""
        if not self._stack:
            raise IndexError("[Sequential.pop] the model has no layers")
        layer = self._stack.pop()
        self.layers = list(self._stack)
        if self.built:
            self.built, self._inputs, self._outputs = False, [], []
        if rebuild and self._stack:
            self._rebuild("Sequential.pop")
        return layer

    def _rebuild(self, where):
        """Builds the model when its input shape is known (on the Input
        given first, the first layer's input_shape, or the built model's)."""
        shape = self._declared_input
        if shape is None and self._stack and self._stack[0].declared_input_shape:
            shape = self._stack[0].declared_input_shape
        if shape is None and self._inputs:
            shape = self._inputs[0].shape[1:]
        if shape is None:
            return
        shape = (None,) + tuple(shape)  # build takes the batch axis first, as Keras's
        try:
            self.build(shape)
        except ValueError as e:
            # the new layer does not fit: the model as it was
            layer = self._stack.pop()
            self.layers = list(self._stack)
            if self._stack:
                self.build(shape)
            raise ValueError(f"[{where}] {type(layer).__name__} '{layer.name}' cannot follow "
                             f"the model's layers: {e}") from None

    def __call__(self, *args, **kwargs):
        # Called on arrays, a stack holding a layer that runs only eagerly (RandomCrop, the
        # lookups, ...) runs layer by layer, as Keras runs any Sequential on tensors
        # (convmixer's data_augmentation(images)); training= reaches each layer
        # Given no training, Keras's layers take their own call's default: the random image
        # layers augment (training=True) while Dropout and BatchNormalization infer, which
        # a call as one program in one mode cannot do (masked_image_modeling's
        # augmentation_model(images), semantic_image_clustering's preview)
        if args and not _symbolic(args[0]) and set(kwargs) <= {"training"} and (
                any(_eager_only(layer) for layer in self._stack) or (
                    kwargs.get("training") is None and
                    any(_augments_by_default(layer) for layer in self._stack))):
            x = args[0]
            for layer in self._stack:
                x = layer(x, **kwargs) if kwargs.get("training") is not None else layer(x)
            return x
        return super().__call__(*args, **kwargs)

    def build(self, input_shape=None):
        """Fixes every layer's shapes and creates the parameters (seeded)."""
        if input_shape is None:
            sample = self._declared_input or (
                self._stack[0].declared_input_shape if self._stack else None)
            input_shape = None if sample is None else (None,) + tuple(sample)
        if input_shape is None:
            raise ValueError("[Sequential.build] input_shape is required")
        shape = tuple(input_shape)
        batch = None
        if shape and shape[0] is None:
            shape = shape[1:]
        elif len(shape) > 1 and getattr(self, "_declared_batch", None) == shape[0]:
            batch, shape = shape[0], shape[1:]  # Input(batch_shape=...): kept (stateful layers)
        if not self._stack:
            raise ValueError("[Sequential.build] the model has no layers")
        inputs = Input(shape, batch_size=batch, dtype=self._declared_dtype or self.dtype)
        # Keras's Sequential builds a functional model inside, which takes a name
        # ("functional", then "functional_1" for the user's next Model(...))
        _auto_name("Functional")
        h = inputs
        with path_scope(self):  # Keras: "sequential/dense/kernel"
            for i, layer in enumerate(self._stack):
                try:
                    h = layer(h)
                except ValueError as e:
                    raise ValueError(f"layer {i} ({layer.kind}): {e}") from None
                if isinstance(h, list):
                    raise ValueError(f"[Sequential] layer {i} ({layer.kind}) has several "
                                     "outputs; use the functional API")
        self._init_graph(inputs, h)
        self._layers = [l for l in self._layers if l is not self]
        if self.__dict__.get("_top_layers") is not None:
            self._top_layers = [l for l in self._top_layers if l is not self]
        return self


def _augments_by_default(layer) -> bool:
    """A layer whose call runs in training mode when given no training (Keras's random
    image layers), or a Sequential holding one."""
    if isinstance(layer, Sequential):
        return any(_augments_by_default(inner) for inner in layer._stack)
    return signature_training(layer.call) is True


def _eager_only(layer) -> bool:
    """A preprocessing layer that cannot compile into a model's program."""
    return isinstance(layer, _Preprocessing) and not layer._graph_ok()


def _symbolic(x) -> bool:
    if isinstance(x, (list, tuple)):
        return any(_symbolic(v) for v in x)
    if isinstance(x, dict):
        return any(_symbolic(v) for v in x.values())
    return isinstance(x, KerasTensor)
