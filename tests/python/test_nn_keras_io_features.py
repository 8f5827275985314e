"""Keras features met by the keras-io scripts of issue 30's third pass
(tests/keras_io), against Keras 3 on JAX with the same weights: Conv1D/Conv2D's
convolution_op (called from a subclass's call, or overridden: Conv2D's; Keras's
Conv1D never calls it), summary() naming a user's subclass of a built-in layer by
its class, and keras.preprocessing (Keras 3's aliases of utils, image.smart_resize)."""

import io

import numpy as np
import pytest

import tessera.nn as tn


def _standardized(lib, base, how):
    """A subclass of lib.layers.<base> that standardizes its kernel, by `how`:
    "override" (convolution_op overridden) or "call" (call uses convolution_op)."""
    ops = lib.ops

    def standardize(kernel):
        kernel = ops.convert_to_tensor(kernel)
        axes = list(range(len(kernel.shape) - 1))
        mean, var = ops.moments(kernel, axes=axes, keepdims=True)
        return (kernel - mean) / ops.sqrt(var + 1e-10)

    if how == "override":
        class Std(getattr(lib.layers, base)):
            def convolution_op(self, inputs, kernel):
                return ops.conv(inputs, standardize(kernel), padding=self.padding,
                                strides=list(self.strides))
    else:
        class Std(getattr(lib.layers, base)):
            def call(self, inputs):
                result = self.convolution_op(inputs, standardize(self.kernel))
                if self.use_bias:
                    result = result + self.bias
                return result
    return Std


CASES = [("Conv2D", "override", (7, 6, 3), dict(kernel_size=3, activation="relu")),
         ("Conv2D", "call", (7, 6, 3), dict(kernel_size=(3, 2), strides=2)),
         ("Conv1D", "call", (9, 2), dict(kernel_size=2, use_bias=False, activation="tanh"))]


@pytest.mark.parametrize("base,how,shape,kw", CASES)
def test_convolution_op_subclasses_match_keras(keras, base, how, shape, kw):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4,) + shape).astype("float32")
    y = rng.normal(size=(4, 3)).astype("float32")
    results = []
    for lib in (keras, tn):
        keras.utils.set_random_seed(0)
        inp = lib.Input(shape=shape)
        h = _standardized(lib, base, how)(5, **kw)(inp)
        out = lib.layers.Dense(3)(lib.layers.Flatten()(h))
        m = lib.Model(inp, out)
        if lib is keras:
            first = [np.asarray(a) for a in m.get_weights()]
            if kw.get("use_bias", True):
                first[1] = rng.normal(size=first[1].shape).astype("float32")  # a bias that shows
        m.set_weights(first)
        pred = np.asarray(m(x) if lib is keras else m.predict(x, verbose=0))
        # one SGD step: the gradient flows through the standardization
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse")
        m.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
        results.append((pred, [np.asarray(a) for a in m.get_weights()]))
    (kp, kw_), (tp, tw) = results
    np.testing.assert_allclose(tp, kp, atol=1e-4)
    for a, b in zip(kw_, tw):
        np.testing.assert_allclose(b, a, atol=1e-4)


def test_convolution_op_is_the_plain_convolution(keras):
    x = np.random.default_rng(2).normal(size=(2, 6, 5, 3)).astype("float32")
    outs = []
    for lib in (keras, tn):
        layer = lib.layers.Conv2D(4, 3, strides=(1, 2), padding="same", dilation_rate=1,
                                  activation="relu")
        layer.build((None, 6, 5, 3))
        if lib is keras:
            kernel = np.asarray(layer.kernel)
        outs.append(np.asarray(layer.convolution_op(x, kernel)))  # no bias, no activation
    np.testing.assert_allclose(outs[1], outs[0], atol=1e-5)
    assert (outs[0] < 0).any()  # the activation was not applied
    for name in ("Conv1D", "Conv2D", "Conv1DTranspose", "Conv2DTranspose"):
        assert hasattr(getattr(tn.layers, name)(2, 3), "convolution_op") == \
            hasattr(getattr(keras.layers, name)(2, 3), "convolution_op"), name


def test_conv1d_ignores_an_overridden_convolution_op_as_keras(keras):
    # Keras 3's Conv1D.call convolves itself (ops.conv, for causal padding): a
    # subclass's convolution_op is not called there, so not here either
    x = np.random.default_rng(3).normal(size=(2, 8, 2)).astype("float32")
    outs = []
    for lib in (keras, tn):
        std = _standardized(lib, "Conv1D", "override")(3, 3, padding="same")
        plain = lib.layers.Conv1D(3, 3, padding="same")
        for layer in (std, plain):
            layer.build((None, 8, 2))
            layer.set_weights([np.linspace(-1, 1, 18).reshape(3, 2, 3).astype("float32"),
                               np.zeros(3, "float32")])
        outs.append([np.asarray(std(x)), np.asarray(plain(x))])
    np.testing.assert_allclose(outs[0][0], outs[0][1], atol=1e-6)  # Keras: no effect
    np.testing.assert_allclose(outs[1][0], outs[0][0], atol=1e-5)


def test_summary_names_a_subclass_by_its_class(keras):
    texts = []
    for lib in (keras, tn):
        std = _standardized(lib, "Conv2D", "override")
        m = lib.Sequential([lib.Input(shape=(5, 5, 1)), std(2, 3, name="std")])
        lines = []
        m.summary(print_fn=lambda s, **_: lines.append(s))
        texts.append("\n".join(lines))
    for text in texts:
        assert "std (Std)" in text, text


# ------------------------------------------------------ keras.preprocessing
def test_preprocessing_namespace_holds_keras_names(keras):
    for kmod, tmod in ((keras.preprocessing, tn.preprocessing),
                       (keras.preprocessing.image, tn.preprocessing.image),
                       (keras.preprocessing.sequence, tn.preprocessing.sequence)):
        names = [n for n in dir(kmod) if not n.startswith("_")]
        assert names and all(hasattr(tmod, n) for n in names), (kmod.__name__, names)
    assert tn.preprocessing.timeseries_dataset_from_array is tn.utils.timeseries_dataset_from_array
    assert tn.preprocessing.sequence.pad_sequences is tn.utils.pad_sequences


@pytest.mark.parametrize("shape,size,fmt", [((17, 25, 3), (8, 8), "channels_last"),
                                            ((2, 12, 7, 1), (5, 9), "channels_last"),
                                            ((3, 10, 14), (6, 4), "channels_first")])
def test_smart_resize_matches_keras(keras, shape, size, fmt):
    x = np.random.default_rng(4).uniform(0, 255, size=shape).astype("float32")
    k = np.asarray(keras.preprocessing.image.smart_resize(x, size, data_format=fmt))
    t = tn.preprocessing.image.smart_resize(x, size, data_format=fmt)
    assert isinstance(t, np.ndarray) and t.shape == k.shape
    np.testing.assert_allclose(t, k, rtol=1e-5, atol=1e-3)


def test_smart_resize_errors_are_named():
    x = np.zeros((4, 4, 3), "float32")
    with pytest.raises(ValueError, match=r"smart_resize\].*size must be.*\(4,\)"):
        tn.preprocessing.image.smart_resize(x, (4,))
    with pytest.raises(ValueError, match=r"smart_resize\].*got shape \(4, 4\)"):
        tn.preprocessing.image.smart_resize(x[..., 0], (2, 2))
    with pytest.raises(TypeError, match=r"smart_resize\].*unexpected keyword.*'antialias'"):
        tn.preprocessing.image.smart_resize(x, (2, 2), antialias=True)
    with pytest.raises(ValueError, match="test_nn_keras_io_features.py"):
        tn.preprocessing.image.smart_resize(x, (0, 2))


# ------------------------------------------------ Model step hooks: predict_step traced
def test_overridden_predict_step_is_traced_or_refused_by_name():
    # Keras's predict calls it: tessera traces it into predict's program (values against
    # Keras: test_nn_predict_step.py); what it cannot trace is an error naming it, never
    # silently ignored
    class Distiller(tn.Model):
        def __init__(self):
            super().__init__()
            self.student = tn.layers.Dense(2)

        def call(self, x):
            return self.student(x)

    Distiller.predict_step = lambda self, *a, **k: None
    model = Distiller()
    model.compile(optimizer="adam", loss="mse")
    x, y = np.ones((4, 3), "float32"), np.ones((4, 2), "float32")
    with pytest.raises(TypeError, match=r"\[predict\] Distiller\.predict_step returns its "
                                        r"result of type NoneType"):
        model.predict(x, verbose=0)
    model.fit(x, y, verbose=0)  # fit and evaluate are not concerned
    model.evaluate(x, y, verbose=0)
    Distiller.predict_step = lambda self, data: self(data) * 3.0
    np.testing.assert_allclose(model.predict(x, verbose=0), 3.0 * np.asarray(model(x)),
                               rtol=1e-6)
