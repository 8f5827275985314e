"""Keras features met by the keras-io scripts of issue 30's sixth pass (tests/keras_io:
image_classification_from_scratch, eanet, pointnet, memory_efficient_embeddings,
eeg_signal_classification, multi_label_classification), against Keras 3 on JAX with the
same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn


def test_constant_initializer_takes_an_array_as_keras(keras):
    """PointNet's T-net starts its bias at the identity: Constant(np.eye(k).flatten())."""
    value = np.arange(6, dtype="float64").reshape(2, 3)
    for shape in [(2, 3), (4, 2, 3)]:
        want = np.asarray(keras.initializers.Constant(value)(shape, "float32"))
        got = tn.initializers.Constant(value)(shape, "float32")
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    eye = np.eye(3).flatten()
    got = [tn.layers.Dense(9, bias_initializer=tn.initializers.Constant(eye))
           for _ in range(1)][0]
    m = tn.Sequential([tn.Input((4,)), got])
    np.testing.assert_array_equal(m.get_weights()[1], eye.astype("float32"))
    # a config holds the array as a list, and rebuilds the same initializer
    config = tn.initializers.serialize(tn.initializers.Constant(value))
    again = tn.initializers.deserialize(config)
    np.testing.assert_array_equal(again((2, 3)), value.astype("float32"))
    # a scalar stays a number
    assert tn.initializers.Constant(2).get_config()["value"] == 2.0
    with pytest.raises(ValueError, match=r"\[Constant\] a value of shape \(2, 3\) does not "
                                         r"broadcast to the weight's shape \(3, 2\)"):
        tn.initializers.Constant(value)((3, 2))
    with pytest.raises(ValueError, match=r"\[Constant\] value must be a finite number"):
        tn.initializers.Constant([1.0, np.nan])
    with pytest.raises(ValueError, match=r"\[Constant\] value must be a finite number"):
        tn.initializers.Constant(["a", "b"])


def _orthogonal(lib, k):
    """PointNet's regularizer: a Regularizer subclass computing with ops."""
    ops = lib.ops

    class Orthogonal(lib.regularizers.Regularizer):
        def __init__(self, num_features, l2reg=0.01):
            self.num_features, self.l2reg = num_features, l2reg
            self.eye = ops.eye(num_features)

        def __call__(self, x):
            x = ops.reshape(x, (-1, self.num_features, self.num_features))
            xxt = ops.tensordot(x, x, axes=(2, 2))
            xxt = ops.reshape(xxt, (-1, self.num_features, self.num_features))
            return ops.sum(self.l2reg * ops.square(xxt - self.eye))

    return Orthogonal(k)


def _regularized_model(lib, regularizer, w):
    inp = lib.Input((5,))
    h = lib.layers.Dense(4, activation="tanh", activity_regularizer=regularizer)(inp)
    out = lib.layers.Dense(3, activation="softmax")(h)
    m = lib.Model(inp, out)
    m.set_weights(w)
    m.compile(lib.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return m


@pytest.mark.parametrize("which", ["l2", "l1_l2_object", "user_subclass", "function"])
def test_activity_regularizer_adds_its_penalty_over_the_batch_as_keras(keras, which):
    """Dense(activity_regularizer=...): the penalty of the output, divided by the batch
    size (Keras 3), is added to the loss of fit and evaluate; built-in, a user's
    Regularizer subclass written with ops (PointNet's), or a plain function."""
    rng = np.random.default_rng(1)
    w = [rng.normal(size=(5, 4)), rng.normal(size=(4,)), rng.normal(size=(4, 3)),
         np.zeros(3)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(24, 5)).astype("float32")
    y = rng.integers(0, 3, 24)
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        reg = {"l2": "l2", "l1_l2_object": lib.regularizers.L1L2(l1=0.02, l2=0.05),
               "user_subclass": _orthogonal(lib, 2),
               "function": lambda t: 0.3 * lib.ops.sum(lib.ops.abs(t))}[which]
        m = _regularized_model(lib, reg, w)
        before = m.evaluate(x, y, batch_size=8, verbose=0)
        plain = _regularized_model(lib, None, w).evaluate(x, y, batch_size=8, verbose=0)
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        got[name] = (before, plain, h.history["loss"], m.get_weights())
    t, k = got["tessera"], got["keras"]
    assert k[0] > k[1] + 0.005  # the penalty counts (the test can fail)
    np.testing.assert_allclose(t[0], k[0], rtol=1e-5)
    np.testing.assert_allclose(t[1], k[1], rtol=1e-5)
    np.testing.assert_allclose(t[2], k[2], rtol=1e-4)
    for a, b in zip(t[3], k[3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_activity_regularizer_argument_checked():
    with pytest.raises(ValueError, match=r"\[Dense\] activity_regularizer: .*unknown "
                                         r"regularizer 'l3'"):
        tn.layers.Dense(2, activity_regularizer="l3")
    with pytest.raises(TypeError, match=r"\[Dense\] activity_regularizer: .*expected a "
                                        r"regularizer"):
        tn.layers.Dense(2, activity_regularizer=3)


def _mlp(lib, w):
    inp = lib.Input((6,))
    h = lib.layers.Dense(5, activation="relu")(inp)
    m = lib.Model(inp, lib.layers.Dense(3)(h))
    m.set_weights(w)
    return m


@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_amsgrad_updates_as_keras(keras, kind):
    """Adam(amsgrad=True) (the EEG example's optimizer) and AdamW's: the step divides by
    the largest second moment met so far; weights after 12 steps equal Keras's (a
    gradient that shrinks, with beta_2 0.5, makes v_hat differ from v: the test can fail)."""
    rng = np.random.default_rng(2)
    w = [rng.normal(size=(6, 5)), rng.normal(size=(5,)), rng.normal(size=(5, 3)),
         rng.normal(size=(3,))]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(48, 6)).astype("float32")
    y = (x[:, :3] * 2.0).astype("float32")
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        results = []
        for amsgrad in (True, False):
            m = _mlp(lib, w)
            kwargs = {"weight_decay": 0.05} if kind == "AdamW" else {}
            opt = getattr(lib.optimizers, kind)(learning_rate=0.05, beta_2=0.5,
                                                amsgrad=amsgrad, **kwargs)
            m.compile(opt, loss="mse")
            h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
            results.append((h.history["loss"], m.get_weights()))
        got[name] = results
    for (t_loss, t_w), (k_loss, k_w) in zip(got["tessera"], got["keras"]):
        np.testing.assert_allclose(t_loss, k_loss, rtol=1e-4)
        for a, b in zip(t_w, k_w):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # AMSGrad changes the result (else the comparison above proves nothing)
    assert not np.allclose(got["keras"][0][1][0], got["keras"][1][1][0], atol=1e-4)


def test_amsgrad_config_and_argument():
    opt = tn.optimizers.Adam(amsgrad=True)
    again = tn.optimizers.deserialize(tn.optimizers.serialize(opt))
    assert again.amsgrad is True and tn.optimizers.Adam().amsgrad is False
    with pytest.raises(TypeError, match=r"\[Adam\] amsgrad must be True or False, got 'yes'"):
        tn.optimizers.Adam(amsgrad="yes")


def test_class_weight_with_one_hot_labels_and_eeg_metrics_as_keras(keras):
    """The EEG example: one-hot labels with a class_weight dict (Keras weighs each sample by
    the class of its label's argmax), TopKCategoricalAccuracy(k=3), AUC, Precision and
    Recall on the softmax of 5 classes; losses and every metric equal Keras's."""
    rng = np.random.default_rng(3)
    w = [rng.normal(size=(6, 5)).astype("float32"), np.zeros(5, "float32")]
    x = rng.normal(size=(40, 6)).astype("float32")
    labels = rng.integers(0, 5, 40)
    y = np.eye(5, dtype="float32")[labels]
    class_weight = {0: 0.2, 1: 0.9, 2: 0.5, 3: 1.0, 4: 0.7}
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        inp = lib.Input((6,))
        m = lib.Model(inp, lib.layers.Dense(5, activation="softmax")(inp))
        m.set_weights(w)
        m.compile(lib.optimizers.SGD(0.1), loss=lib.losses.CategoricalCrossentropy(),
                  metrics=[lib.metrics.TopKCategoricalAccuracy(k=3), lib.metrics.AUC(),
                           lib.metrics.Precision(), lib.metrics.Recall()])
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  class_weight=class_weight)
        got[name] = ({k: v for k, v in h.history.items()}, m.evaluate(x, y, verbose=0))
    t, k = got["tessera"], got["keras"]
    assert sorted(t[0]) == sorted(k[0])
    for key in k[0]:
        np.testing.assert_allclose(t[0][key], k[0][key], rtol=2e-4, atol=1e-5, err_msg=key)
    np.testing.assert_allclose(t[1], k[1], rtol=2e-4, atol=1e-5)


def test_user_regularizer_subclass_as_kernel_regularizer_as_keras(keras):
    """Keras's way to write a regularizer, a Regularizer subclass computing with ops in
    __call__, on a kernel (it stopped with a bare NotImplementedError): fit and evaluate
    add its penalty of the weight, as Keras."""
    rng = np.random.default_rng(4)
    w = [rng.normal(size=(4, 3)).astype("float32"), np.zeros(3, "float32")]
    x = rng.normal(size=(16, 4)).astype("float32")
    y = rng.normal(size=(16, 3)).astype("float32")
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        ops = lib.ops

        class Gram(lib.regularizers.Regularizer):
            def __call__(self, k):
                return 0.05 * ops.sum(ops.square(ops.matmul(ops.transpose(k), k)
                                                 - ops.eye(3)))

        inp = lib.Input((4,))
        m = lib.Model(inp, lib.layers.Dense(3, kernel_regularizer=Gram())(inp))
        m.set_weights(w)
        m.compile(lib.optimizers.SGD(0.01), loss="mse")
        before = m.evaluate(x, y, verbose=0)
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        got[name] = (before, h.history["loss"], m.get_weights()[0])
    t, k = got["tessera"], got["keras"]
    np.testing.assert_allclose(t[0], k[0], rtol=1e-5)
    np.testing.assert_allclose(t[1], k[1], rtol=1e-4)
    np.testing.assert_allclose(t[2], k[2], rtol=1e-4, atol=1e-6)

    class NoCall(tn.regularizers.Regularizer):
        pass

    with pytest.raises(NotImplementedError, match=r"\[NoCall\] a Regularizer subclass must "
                                                  r"define __call__"):
        NoCall()(np.ones(3))


def test_input_names_its_input_layer_when_made_as_keras(keras):
    """EANet's model: an Input, then a Sequential without Input called on it (it builds
    its own InputLayer): the model's InputLayer is "input_layer" as in Keras (tessera
    named it when the model was made, after the Sequential's: "input_layer_1")."""
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        lib.backend.clear_session()
        aug = lib.Sequential([lib.layers.Normalization(), lib.layers.Dense(2)], name="aug")
        aug.layers[0].adapt(np.random.default_rng(0).normal(size=(8, 3)).astype("float32"))
        inp = lib.Input((3,))
        first = lib.Model(inp, aug(inp))
        inp2 = lib.Input((3,), name="given")
        second = lib.Model(inp2, lib.layers.Dense(1)(inp2))
        inp3 = lib.Input((3,))
        third = lib.Model(inp3, lib.layers.Dense(1)(inp3))
        got[name] = [m.layers[0].name for m in (first, second, third)]
    assert got["tessera"] == got["keras"], got


@pytest.mark.parametrize("make", [lambda L: L.RandomRotation(0.2), lambda L: L.RandomZoom(0.3),
                                  lambda L: L.RandomTranslation(0.2, 0.2),
                                  lambda L: L.RandomContrast(0.5)])
def test_unseeded_random_image_layers_repeat_after_set_random_seed_as_keras(keras, make):
    """image_classification_from_scratch augments eagerly with unseeded RandomRotation:
    its images differed from run to run although set_random_seed(0) was called (the layer
    drew from the OS's entropy). As Keras, an unseeded layer's draws repeat after
    set_random_seed, and successive calls still draw anew."""
    x = np.random.default_rng(5).uniform(0, 255, (4, 12, 12, 3)).astype("float32")
    for lib in (tn, keras):
        runs = []
        for _ in range(2):
            lib.utils.set_random_seed(0)
            layer = make(lib.layers)
            runs.append([np.asarray(layer(x, training=True)) for _ in range(2)])
        np.testing.assert_array_equal(runs[0][0], runs[1][0])
        np.testing.assert_array_equal(runs[0][1], runs[1][1])
        assert not np.array_equal(runs[0][0], runs[0][1])  # each call draws anew
