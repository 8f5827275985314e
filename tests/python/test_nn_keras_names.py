"""Keras's namespaces on tessera.nn, for scripts written as Keras documents
them (`import tessera.nn as keras; from tessera.nn import layers`)."""

import numpy as np
import pytest

import tessera
import tessera.nn as keras
from tessera.nn import layers

nn = keras  # tessera.nn (tests taking the `keras` fixture see Keras itself under that name)


def test_layers_module_offers_every_layer():
    from tessera.nn.layers import LSTM, Add, MultiHeadAttention, concatenate  # noqa: F401

    assert layers.LSTM is keras.LSTM and layers.GRU is keras.GRU
    assert layers.SimpleRNN is keras.SimpleRNN
    assert layers.MultiHeadAttention is keras.MultiHeadAttention
    for name in ("Add", "Average", "Concatenate", "Dot", "Maximum", "Minimum", "Multiply",
                 "Subtract", "add", "average", "concatenate", "maximum", "minimum", "multiply",
                 "subtract"):
        assert getattr(layers, name) is getattr(keras, name)
    assert layers.Input is keras.Input
    assert "LSTM" in dir(layers)
    with pytest.raises(AttributeError, match="no attribute 'Bogus'"):
        layers.Bogus  # noqa: B018


def test_optimizers_models_utils():
    # Keras's meaning of weight decay (decoupled) over tessera.optim's PyTorch one
    assert issubclass(keras.optimizers.Adam, tessera.optim.Adam)
    assert keras.optimizers.Adam().tessera_config()["decoupled"] is True
    assert issubclass(keras.optimizers.RMSprop, tessera.optim.RMSprop)  # with Keras's arguments
    s = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5,
                                                    staircase=True)
    assert s(10) == pytest.approx(0.05)
    assert isinstance(keras.optimizers.get("adam"), tessera.optim.Adam)
    opt = keras.optimizers.deserialize(keras.optimizers.serialize(keras.optimizers.SGD(0.5)))
    assert opt.learning_rate(0) == 0.5
    assert keras.models.Model is keras.Model and keras.models.Sequential is keras.Sequential
    assert keras.models.load_model is keras.load_model

    y = keras.utils.to_categorical(np.array([[2], [0], [1]]))
    np.testing.assert_array_equal(y, np.eye(3, dtype=np.float32)[[2, 0, 1]])
    assert y.dtype == np.float64  # as Keras's NumPy result
    assert keras.utils.to_categorical([1.0, 3.0], num_classes=5).shape == (2, 5)
    with pytest.raises(ValueError, match="label 5 is out of range"):
        keras.utils.to_categorical([5], num_classes=3)


def test_set_random_seed_repeats_unseeded_initializers():
    init = keras.initializers.get("glorot_uniform")
    keras.utils.set_random_seed(3)
    a = init((4, 4))
    keras.utils.set_random_seed(3)
    np.testing.assert_array_equal(a, init((4, 4)))


def test_save_and_load_model_through_keras_names(tmp_path):
    inputs = keras.Input(shape=(4,))
    outputs = layers.Dense(3, activation="softmax")(layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)  # float labels holding classes, as Keras's guide
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    keras.models.save_model(model, path)
    with pytest.raises(FileExistsError):
        keras.models.save_model(model, path, overwrite=False)
    again = keras.models.load_model(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_fashion_mnist_load_data_has_keras_arrays():
    try:
        (x, y), (xt, yt) = keras.datasets.fashion_mnist.load_data()
    except FileNotFoundError:
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8 and y.dtype == np.uint8
    assert xt.shape == (10000, 28, 28) and yt.shape == (10000,)
    assert x.max() == 255 and set(np.unique(y)) == set(range(10))
    xf, _ = tessera.data.load_fashion_mnist("test")
    np.testing.assert_array_equal(xt, np.rint(xf[..., 0] * 255).astype(np.uint8))


def test_optimizer_learning_rate_is_a_float_as_in_keras():
    # Keras: float(opt.learning_rate), np.array(opt.learning_rate), opt.learning_rate = x.
    opt = keras.optimizers.Adam(0.5)
    assert float(opt.learning_rate) == 0.5 and float(np.array(opt.learning_rate)) == 0.5
    opt.learning_rate = 0.25
    assert opt.learning_rate == 0.25 and opt.learning_rate(7) == 0.25
    with pytest.raises(ValueError, match="learning_rate"):
        opt.learning_rate = -1.0
    sched = keras.optimizers.schedules.ExponentialDecay(1.0, decay_steps=1, decay_rate=0.5)
    opt = keras.optimizers.SGD(sched)
    assert opt.learning_rate(2) == pytest.approx(0.25)
    with pytest.raises(TypeError, match="schedule"):
        opt.learning_rate = 0.1
    # After fit, the current rate is the one of the latest update, as Keras's.
    model = keras.Sequential([keras.Input((2,)), layers.Dense(1)])
    model.compile(opt, "mse")
    model.fit(np.ones((8, 2), "float32"), np.ones((8, 1), "float32"), batch_size=2, verbose=0)
    assert float(model.optimizer.learning_rate) == pytest.approx(sched(3))


def test_layer_aliases_and_base_classes_under_keras_names(keras):
    """keras.layers.Convolution2D & co are Keras's aliases of Conv2D & co (the same
    classes, saved under the class name); keras.Loss, Metric, Optimizer, Regularizer
    and Initializer are the base classes."""
    for alias, cls in (("Convolution1D", "Conv1D"), ("Convolution2D", "Conv2D"),
                       ("Convolution1DTranspose", "Conv1DTranspose"),
                       ("Convolution2DTranspose", "Conv2DTranspose")):
        assert getattr(keras.layers, alias) is getattr(keras.layers, cls)
        assert getattr(nn.layers, alias) is getattr(nn.layers, cls)
    layer = nn.layers.Convolution2D(3, 2, name="c")
    x = np.random.default_rng(0).normal(size=(1, 5, 5, 2)).astype(np.float32)
    ours = layer(x)
    theirs = keras.layers.Convolution2D(3, 2)
    theirs.build(x.shape)
    theirs.set_weights(layer.get_weights())
    np.testing.assert_allclose(ours, np.asarray(theirs(x)), rtol=1e-5, atol=1e-5)
    assert issubclass(nn.losses.Dice, nn.Loss) and issubclass(nn.metrics.AUC, nn.Metric)
    assert issubclass(nn.optimizers.Adam, nn.Optimizer)
    assert issubclass(nn.regularizers.L2, nn.Regularizer)
    assert issubclass(nn.initializers.HeNormal, nn.Initializer)


def test_version_and_device():
    assert nn.version() == tessera.__version__
    with nn.device("cpu"), nn.device("/device:CPU:0"):
        pass
    with pytest.raises(ValueError, match=r"\[device\] tessera runs on the CPU only, got device "
                                         r"'gpu:0'"):
        with nn.device("gpu:0"):
            pass
