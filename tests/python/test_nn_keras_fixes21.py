"""Issue 30's silent differences fixed in its twenty-first pass, against Keras 3 on JAX with
the same weights and data: the shapes of sample weights that Keras's losses take (a loss
object called on arrays, fit/evaluate/train_on_batch, class_weight, the reductions), a Metric
subclass compiled into fit given temporal weights, and the name a subclassed model's
per-output losses are logged under."""

import re

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both
from keras_check import close as _close, same_logs as _same_logs

RNG = np.random.default_rng(21)
N, T, C = 6, 4, 3  # (T differs from every batch size used: no coincidental broadcasting)
HERE = r"\(at .*test_nn_keras_fixes21\.py:\d+\)"


# ------------------------------------------------------ a loss object called on arrays
_PREDS = {"ntc": (N, T, C), "n1": (N, 1), "nc": (N, C)}
_LOSS_CASES = [("MeanSquaredError", "ntc"), ("MeanSquaredError", "n1"),
               ("SparseCategoricalCrossentropy", "ntc"), ("CategoricalCrossentropy", "ntc"),
               ("SparseCategoricalCrossentropy", "nc")]
_WEIGHTS = [(N,), (N, 1), (N, T), (N, T, 1), (N, T, C), (N + 1,), (), (N, 1, 1), (N, T, 1, 1),
            (T,), (1, T)]


def _labels(cls, shape):
    if cls.startswith("Sparse"):
        return RNG.integers(0, shape[-1], shape[:-1])
    if cls.startswith("Categorical"):
        return np.eye(shape[-1], dtype="float32")[RNG.integers(0, shape[-1], shape[:-1])]
    return RNG.normal(size=shape).astype("float32")


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight",
                                       None])
@pytest.mark.parametrize("cls,pred", _LOSS_CASES)
def test_loss_object_weights_of_every_shape_as_keras(keras, cls, pred, reduction):
    """loss(y, p, sample_weight=w): the values Keras gives (its squeeze of a last axis of
    1, then NumPy's broadcasting: (T,) weights weigh the steps of every sample, (n, T, 1, 1)
    an outer product), or an error where Keras raises ((n,) for losses of (n, T))."""
    p = RNG.normal(size=_PREDS[pred]).astype("float32")
    y = _labels(cls, _PREDS[pred])
    kw = {"from_logits": True} if "Cross" in cls else {}
    tl = getattr(tn.losses, cls)(reduction=reduction, **kw)
    kl = getattr(keras.losses, cls)(reduction=reduction, **kw)
    for shape in _WEIGHTS:
        w = RNG.uniform(0.5, 2.0, shape).astype("float32")
        try:
            want = np.asarray(kl(y, p, sample_weight=w))
        except (ValueError, TypeError):  # (JAX: a TypeError for ranks that agree)
            with pytest.raises(ValueError, match=rf"\[{cls}\] sample_weight of shape "
                                                 rf"{re.escape(str(shape))} does not "
                                                 rf"broadcast to the losses of shape .*{HERE}"):
                tl(y, p, sample_weight=w)
            continue
        got = np.asarray(tl(y, p, sample_weight=w))
        assert got.shape == want.shape, shape
        _close(got, want, 1e-5)


# -------------------------------------------- fit / evaluate / train_on_batch, one output
def _seq_model(lib, loss, metrics=("mse",)):
    inp = lib.Input((T, 2))
    model = lib.Model(inp, lib.layers.Dense(C)(inp))
    model.compile(optimizer=lib.optimizers.SGD(0.1), loss=loss,
                  weighted_metrics=list(metrics) if metrics else None)
    return model


def _pair(keras, loss, metrics=("mse",)):
    tm = _seq_model(tn, loss(tn) if callable(loss) else loss, metrics)
    km = _seq_model(keras, loss(keras) if callable(loss) else loss, metrics)
    _same_weights(tm, km)
    return tm, km


X = RNG.normal(size=(N, T, 2)).astype("float32")
Y_SEQ = RNG.normal(size=(N, T, C)).astype("float32")
Y_SPARSE = RNG.integers(0, C, (N, T))


@pytest.mark.parametrize("shape", [(N, 1), (N, T), (N, T, 1), (N, 1, 1)])
def test_temporal_weights_of_the_shapes_keras_takes(keras, shape):
    """evaluate, train_on_batch and a fit of two epochs (batches of 4 over 6 rows): the
    loss and the weighted metric as Keras's, for each shape Keras multiplies the per-step
    losses by."""
    w = RNG.uniform(0.5, 2.0, shape).astype("float32")
    tm, km = _pair(keras, "mse")
    _same_logs(tm.evaluate(X, Y_SEQ, sample_weight=w, batch_size=4, verbose=0, return_dict=True),
               km.evaluate(X, Y_SEQ, sample_weight=w, batch_size=4, verbose=0, return_dict=True))
    _same_logs(tm.train_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True),
               km.train_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True))
    ht = tm.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hk = km.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    _same_logs(ht.history, hk.history)


def test_sample_weight_mode_is_keras_2s(keras):
    """Keras 2's compile(sample_weight_mode="temporal") is gone from Keras 3 (temporal
    weights are given by their shape): a TypeError naming the argument in both."""
    for lib in (tn, keras):
        inp = lib.Input((T, 2))
        model = lib.Model(inp, lib.layers.Dense(C)(inp))
        with pytest.raises(TypeError, match="unexpected keyword argument 'sample_weight_mode'"):
            model.compile("sgd", "mse", sample_weight_mode="temporal")


@pytest.mark.parametrize("shape", [(N,), (N, T, C), (N, T + 1)])
def test_weights_keras_refuses_for_a_per_step_loss(keras, shape):
    """(n,) weights for losses of (n, T) (Keras broadcasts (n,) against the steps and
    raises), one weight per class, the wrong number of steps: a ValueError in Keras and in
    tessera, which names the call, both shapes and the user's line."""
    w = np.ones(shape, "float32")
    tm, km = _pair(keras, lambda lib: lib.losses.SparseCategoricalCrossentropy(
        from_logits=True), metrics=None)
    for call in ("fit", "evaluate", "train_on_batch"):
        def run(m, call=call):
            if call == "fit":
                return m.fit(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0)
            if call == "evaluate":
                return m.evaluate(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0)
            return m.train_on_batch(X, Y_SPARSE, sample_weight=w)
        with pytest.raises((ValueError, TypeError)):  # (JAX's TypeError for (n, T + 1))
            run(km)
        with pytest.raises(ValueError, match=rf"\[{call}\] sample_weight of shape "
                                             rf"{re.escape(str(shape))} does not broadcast to "
                                             r"the losses: output 0's SparseCategorical"
                                             r"Crossentropy has values of shape \(6, 4\); "
                                             rf"give one weight per sample, shape \(6, 1\).*"
                                             rf"{HERE}"):
            run(tm)


def test_scalar_weight_in_train_on_batch_as_keras(keras):
    """train_on_batch (and test_on_batch) take a scalar weight as Keras's step does (every
    value multiplied by it); fit and evaluate refuse it, as Keras's data adapter does."""
    tm, km = _pair(keras, "mse")
    for w in (np.float32(1.5), np.array([0.5], "float32")):
        _same_logs(tm.train_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True),
                   km.train_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True))
        _same_logs(tm.test_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True),
                   km.test_on_batch(X, Y_SEQ, sample_weight=w, return_dict=True))
    with pytest.raises((ValueError, IndexError)):
        km.fit(X, Y_SEQ, sample_weight=np.float32(1.5), verbose=0)
    with pytest.raises(ValueError, match=r"\[fit\] sample_weight must have one weight per "
                                         rf"sample, shape \(6,\) .*got \(\) {HERE}"):
        tm.fit(X, Y_SEQ, sample_weight=np.float32(1.5), verbose=0)


@pytest.mark.parametrize("reduction", ["sum", "mean_with_sample_weight", None])
@pytest.mark.parametrize("shape", [(N, 1), (N, T)])
def test_reductions_with_temporal_weights_as_keras(keras, reduction, shape):
    """A compiled loss's reduction with weights per sample or per step: "sum", and
    "mean_with_sample_weight" over the weights as given ((n, 1): one per sample, so the
    steps are not counted), None (evaluate only: Keras cannot take its gradient)."""
    w = RNG.uniform(0.5, 2.0, shape).astype("float32")
    tm, km = _pair(keras, lambda lib: lib.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=reduction), metrics=("accuracy",))
    _same_logs(tm.evaluate(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0,
                           return_dict=True),
               km.evaluate(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0,
                           return_dict=True))
    if reduction is not None:
        ht = tm.fit(X, Y_SPARSE, sample_weight=w, batch_size=4, epochs=2, shuffle=False,
                    verbose=0)
        hk = km.fit(X, Y_SPARSE, sample_weight=w, batch_size=4, epochs=2, shuffle=False,
                    verbose=0)
        _same_logs(ht.history, hk.history)


@pytest.mark.parametrize("cls", ["Dice", "Tversky"])
def test_weights_of_a_loss_of_one_value_for_the_batch(keras, cls):
    """Dice and Tversky (axis=None) give one value for the whole batch, which Keras
    broadcasts to the weights: the loss times their mean, for (n,), (n, 1) and (n, T)."""
    y = (RNG.uniform(size=(N, T, C)) > 0.5).astype("float32")

    def model(lib):
        inp = lib.Input((T, 2))
        m = lib.Model(inp, lib.layers.Dense(C, activation="sigmoid")(inp))
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss=getattr(lib.losses, cls)())
        return m
    for shape in ((N,), (N, 1), (N, T)):
        w = RNG.uniform(0.5, 2.0, shape).astype("float32")
        tm, km = model(tn), model(keras)
        _same_weights(tm, km)
        _close(tm.evaluate(X, y, sample_weight=w, batch_size=4, verbose=0),
               km.evaluate(X, y, sample_weight=w, batch_size=4, verbose=0), 1e-5)
        if len(shape) == 2 and shape[1] == T:  # (the training step's gradient too)
            ht = tm.fit(X, y, sample_weight=w, batch_size=4, epochs=2, shuffle=False,
                        verbose=0)
            hk = km.fit(X, y, sample_weight=w, batch_size=4, epochs=2, shuffle=False,
                        verbose=0)
            _same_logs(ht.history, hk.history)


@pytest.mark.parametrize("shape", [(N,), (N, 1), (N, T, 1)])
def test_weights_of_a_py_dataset_as_keras(keras, shape):
    """A PyDataset's (x, y, sample_weight) batches: their weights checked and taken as
    arrays' are ((n,) for per-step losses raises in both)."""
    w = RNG.uniform(0.5, 2.0, shape).astype("float32")

    def batches(lib):
        class Batches(lib.utils.PyDataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                rows = slice(3 * i, 3 * i + 3)
                return X[rows], Y_SPARSE[rows], w[rows]
        return Batches()
    tm, km = _pair(keras, lambda lib: lib.losses.SparseCategoricalCrossentropy(
        from_logits=True), metrics=("accuracy",))
    if shape == (N,):
        with pytest.raises(ValueError):
            km.fit(batches(keras), epochs=1, verbose=0)
        with pytest.raises(ValueError, match=r"\[fit\] the dataset's sample_weight \(a batch\) "
                                             r"of shape \(3,\) does not broadcast to the "
                                             rf"losses: .* shape \(3, 4\).*{HERE}"):
            tm.fit(batches(tn), epochs=1, verbose=0)
        return
    ht = tm.fit(batches(tn), epochs=2, shuffle=False, verbose=0)
    hk = km.fit(batches(keras), epochs=2, shuffle=False, verbose=0)
    _same_logs(ht.history, hk.history)
    _close(tm.evaluate(batches(tn), verbose=0), km.evaluate(batches(keras), verbose=0), 1e-4)


# ------------------------------------------------------------------------- class_weight
def _flat_model(lib, loss):
    inp = lib.Input((2,))
    model = lib.Model(inp, lib.layers.Dense(C)(inp))
    model.compile(optimizer=lib.optimizers.SGD(0.1), loss=loss, weighted_metrics=["accuracy"])
    return model


def test_class_weight_gives_one_to_a_class_it_does_not_name(keras):
    """Keras weighs the samples of a class the dict leaves out by 1.0 (sparse labels, a
    column of them, one-hot labels)."""
    x = RNG.normal(size=(N, 2)).astype("float32")
    labels = RNG.integers(0, C, (N,))
    labels[:3] = [0, 1, 2]
    cw = {0: 0.5, 1: 2.0}
    for loss, y in (("sparse_categorical_crossentropy", labels),
                    ("sparse_categorical_crossentropy", labels[:, None]),
                    ("categorical_crossentropy", np.eye(C, dtype="float32")[labels])):
        tm, km = _flat_model(tn, loss), _flat_model(keras, loss)
        _same_weights(tm, km)
        ht = tm.fit(x, y, class_weight=cw, batch_size=4, epochs=2, shuffle=False, verbose=0)
        hk = km.fit(x, y, class_weight=cw, batch_size=4, epochs=2, shuffle=False, verbose=0)
        _same_logs(ht.history, hk.history)


def test_class_weight_of_sequence_labels_and_with_sample_weight_raise(keras):
    """A sequence's sparse labels (Keras takes the argmax over the steps, then its loss
    refuses the (n,) weights): ValueError; one-hot sequence labels: TypeError; class_weight
    and sample_weight together: ValueError, in both."""
    cw = {0: 0.5, 1: 2.0}
    onehot = np.eye(C, dtype="float32")[Y_SPARSE]
    loss = "sparse_categorical_crossentropy"
    tm, km = _seq_model(tn, loss, None), _seq_model(keras, loss, None)
    for err, y, kwargs, pattern in (
            (ValueError, Y_SPARSE, {}, r"\[fit\] class_weight's weights of shape \(6,\) does "
                                       r"not broadcast to the losses"),
            (ValueError, Y_SPARSE, {"sample_weight": np.ones(N)},
             r"\[fit\] sample_weight and class_weight cannot be given together")):
        with pytest.raises(err):
            km.fit(X, y, class_weight=cw, verbose=0, **kwargs)
        with pytest.raises(err, match=pattern + f".*{HERE}"):
            tm.fit(X, y, class_weight=cw, verbose=0, **kwargs)
    tm, km = (_seq_model(lib, "categorical_crossentropy", None) for lib in (tn, keras))
    with pytest.raises(TypeError):
        km.fit(X, onehot, class_weight=cw, verbose=0)
    with pytest.raises(TypeError, match=r"\[fit\] class_weight needs one class per sample, "
                                        rf"got labels of shape \(6, 4, 3\).*{HERE}"):
        tm.fit(X, onehot, class_weight=cw, verbose=0)


def test_one_weight_array_for_several_outputs_is_one_per_sample(keras):
    """Keras gives one sample_weight array to every output and takes it of shape (n,) or
    (n, 1) only: per-step weights for a model of two outputs raise in both."""
    def two(lib):
        inp = lib.Input((T, 2))
        a, b = lib.layers.Dense(C, name="a")(inp), lib.layers.Dense(1, name="b")(inp)
        model = lib.Model(inp, [a, b])
        model.compile(optimizer=lib.optimizers.SGD(0.1), loss=["mse", "mse"])
        return model
    tm, km = two(tn), two(keras)
    _same_weights(tm, km)
    y = [Y_SEQ, RNG.normal(size=(N, T, 1)).astype("float32")]
    w = RNG.uniform(0.5, 2.0, (N, 1)).astype("float32")
    _same_logs(tm.evaluate(X, y, sample_weight=w, verbose=0, return_dict=True),
               km.evaluate(X, y, sample_weight=w, verbose=0, return_dict=True))
    with pytest.raises(ValueError):
        km.fit(X, y, sample_weight=np.ones((N, T)), verbose=0)
    with pytest.raises(ValueError, match=r"\[fit\] a model of 2 outputs with losses takes one "
                                         r"sample_weight array of one weight per sample, "
                                         rf"shape \(6,\) or \(6, 1\).*got \(6, 4\) {HERE}"):
        tm.fit(X, y, sample_weight=np.ones((N, T)), verbose=0)
    # one array per output (per step here), as Keras (test_nn_keras_fixes22.py)
    per_output = [RNG.uniform(0.5, 2.0, (N, T)), RNG.uniform(0.5, 2.0, (N, T, 1))]
    _same_logs(tm.evaluate(X, y, sample_weight=per_output, verbose=0, return_dict=True),
               km.evaluate(X, y, sample_weight=per_output, verbose=0, return_dict=True))


# --------------------------------------- a Metric subclass given temporal sample weights
def _weighted_mae_class(lib):
    ops = lib.ops

    class WeightedMAE(lib.metrics.Metric):
        """A user's metric written for the weights it is given: the steps' errors times
        the weights, over the weights' sum."""

        def __init__(self, name="wmae", **kwargs):
            super().__init__(name=name, **kwargs)
            self.total = self.add_variable(shape=(), initializer="zeros", name="total")
            self.count = self.add_variable(shape=(), initializer="zeros", name="count")

        def update_state(self, y_true, y_pred, sample_weight=None):
            err = ops.mean(ops.abs(y_true - y_pred), axis=-1)
            if sample_weight is None:
                self.count.assign_add(ops.cast(ops.size(err), "float32"))
            else:
                sw = ops.cast(sample_weight, err.dtype)
                err = err * sw
                self.count.assign_add(ops.sum(sw))
            self.total.assign_add(ops.sum(err))

        def result(self):
            return self.total / self.count

    return WeightedMAE


@pytest.mark.parametrize("shape", [(N, T), (N, 1)])
def test_metric_subclass_with_temporal_weights_logs_as_keras(keras, shape):
    """The subclass as a weighted metric (given the weights as Keras gives them: (n, 1)
    stays (n, 1), so its weight sum counts each sample once) and as a plain one, beside
    built-in MeanSquaredError and MeanAbsoluteError: each epoch's logs and evaluate's."""
    w = RNG.uniform(0.0, 2.0, shape).astype("float32")

    def model(lib):
        cls = _weighted_mae_class(lib)
        inp = lib.Input((T, 2))
        m = lib.Model(inp, lib.layers.Dense(C)(inp))
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse", metrics=[cls(name="plain")],
                  weighted_metrics=[cls(), lib.metrics.MeanSquaredError(),
                                    lib.metrics.MeanAbsoluteError()])
        return m
    tm, km = model(tn), model(keras)
    _same_weights(tm, km)
    # (validation weights of the other shape: each program keeps its own)
    other = (N, 1) if shape == (N, T) else (N, T)
    val = (X, Y_SEQ, RNG.uniform(0.0, 2.0, other).astype("float32"))
    ht = tm.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0,
                validation_data=val)
    hk = km.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0,
                validation_data=val)
    _same_logs(ht.history, hk.history)
    assert "val_wmae" in hk.history
    _same_logs(tm.evaluate(X, Y_SEQ, sample_weight=w, batch_size=4, verbose=0, return_dict=True),
               km.evaluate(X, Y_SEQ, sample_weight=w, batch_size=4, verbose=0, return_dict=True))
    # (a test that can fail: the weighted and the plain metric differ)
    assert not np.allclose(hk.history["wmae"], hk.history["plain"])


def _mean_subclasses(lib):
    ops = lib.ops

    class AbsMean(lib.metrics.Mean):
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(ops.abs(y_true - y_pred), sample_weight=sample_weight)

    class StepMean(lib.metrics.Mean):
        def update_state(self, y_true, y_pred, sample_weight=None):
            return super().update_state(ops.mean(ops.abs(y_true - y_pred), axis=-1),
                                        sample_weight=sample_weight)

    return AbsMean, StepMean


@pytest.mark.parametrize("shape", [(N, 1), (N, T), (N, T, 1)])
def test_mean_subclasses_with_temporal_weights_log_as_keras(keras, shape):
    """Subclasses of the built-in Mean passing values of (batch, steps, classes) or
    (batch, steps) with the weights to Mean.update_state (Keras squeezes (batch, steps, 1)
    weights, then averages the values down to their rank), weighted and plain."""
    w = RNG.uniform(0.0, 2.0, shape).astype("float32")

    def model(lib):
        abs_mean, step_mean = _mean_subclasses(lib)
        inp = lib.Input((T, 2))
        m = lib.Model(inp, lib.layers.Dense(C)(inp))
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mae",
                  metrics=[abs_mean(name="plain")],
                  weighted_metrics=[abs_mean(name="abs"), step_mean(name="step"),
                                    lib.metrics.MeanSquaredError()])
        return m
    tm, km = model(tn), model(keras)
    _same_weights(tm, km)
    ht = tm.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hk = km.fit(X, Y_SEQ, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    _same_logs(ht.history, hk.history)


@pytest.mark.parametrize("name", ["MeanSquaredError", "SparseCategoricalAccuracy",
                                  "CategoricalAccuracy", "Mean"])
def test_builtin_metrics_called_with_temporal_weights_as_keras(keras, name):
    """A built-in mean metric's update_state called on a sequence's arrays: weights per
    sample or per step ((n, T), (n, T, 1)) as Keras's reduce_to_samplewise_values takes
    them; one per class or of another length a ValueError in both."""
    p = RNG.normal(size=(N, T, C)).astype("float32")
    labels = {"MeanSquaredError": Y_SEQ, "SparseCategoricalAccuracy": Y_SPARSE,
              "CategoricalAccuracy": np.eye(C, dtype="float32")[Y_SPARSE], "Mean": None}[name]
    for shape in ((N,), (N, 1), (N, T), (N, T, 1), (N, T, C), (N + 1,)):
        w = RNG.uniform(0.0, 2.0, shape).astype("float32")
        tm, km = getattr(tn.metrics, name)(), getattr(keras.metrics, name)()
        args = (p,) if labels is None else (labels, p)
        try:
            km.update_state(*args, sample_weight=w)
        except ValueError:
            with pytest.raises(ValueError):
                tm.update_state(*args, sample_weight=w)
            continue
        tm.update_state(*args, sample_weight=w)
        _close(tm.result(), km.result(), 1e-5)


# ------------------------------------------- compute_loss overrides given the weights
def _override_model(lib, own, run_eagerly=False):
    class Super(lib.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return super().compute_loss(x, y, y_pred, sample_weight, training)

    class Own(lib.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.fn = lib.losses.SparseCategoricalCrossentropy(from_logits=True)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return self.fn(y, y_pred, sample_weight)

    inp = lib.Input((T, 2))
    model = (Own if own else Super)(inp, lib.layers.Dense(C)(inp))
    model.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True),
                  run_eagerly=run_eagerly)
    return model


@pytest.mark.parametrize("own,shape,run_eagerly", [
    (False, (N, 1), False), (False, (N, T), False), (False, (N, T, 1), False),
    (True, (N, 1), False), (True, (N, T), False), (True, (N, T, 1), False),
    (False, (N, T, 1), True), (True, (N, 1), True)])
def test_compute_loss_override_gets_the_weights_as_given(keras, own, shape, run_eagerly):
    """A compute_loss override gets sample_weight in the shape given (a loss object it
    calls multiplies them as Keras's) or passes them to super().compute_loss: fit's and
    evaluate's losses as Keras's, compiled or run eagerly (evaluate after an eager fit)."""
    w = RNG.uniform(0.5, 2.0, shape).astype("float32")
    tm = _override_model(tn, own, run_eagerly)
    km = _override_model(keras, own, run_eagerly)
    _same_weights(tm, km)
    ht = tm.fit(X, Y_SPARSE, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hk = km.fit(X, Y_SPARSE, sample_weight=w, batch_size=4, epochs=2, shuffle=False, verbose=0)
    _same_logs(ht.history, hk.history)
    _close(tm.evaluate(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0),
           km.evaluate(X, Y_SPARSE, sample_weight=w, batch_size=4, verbose=0), 1e-4)


# ------------------------------------------------- the names of the per-output losses
def _two_outputs(lib, kind, override):
    class Override(lib.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            return super().compute_loss(x, y, y_pred, sample_weight, training)

    base = Override if override else lib.Model
    if kind == "functional":
        inp = lib.Input((3,))
        return base(inp, [lib.layers.Dense(2, name="a")(inp), lib.layers.Dense(1, name="b")(inp)])

    class Two(base):
        def __init__(self):
            super().__init__()
            self.a, self.b = lib.layers.Dense(2), lib.layers.Dense(1)

        def call(self, x):
            return self.a(x), self.b(x)

    model = Two()
    model(np.zeros((1, 3), "float32"))
    return model


@pytest.mark.parametrize("kind", ["functional", "subclassed"])
@pytest.mark.parametrize("override", [False, True])
@pytest.mark.parametrize("losses", ["mse", ("mse", "mae"), "objects"])
def test_per_output_loss_names_as_keras(keras, kind, override, losses):
    """A functional model logs each output's loss by its output's name (a_loss); a
    subclassed one (no output_names) by its loss's name as given ("mse_loss", twice: one
    key, the later output's value), or the Loss object's (mean_squared_error_loss,
    my_mae_loss), with or without a compute_loss override calling super()."""
    x = RNG.normal(size=(8, 3)).astype("float32")
    y = [RNG.normal(size=(8, 2)).astype("float32"), RNG.normal(size=(8, 1)).astype("float32")]
    tm, km = _two_outputs(tn, kind, override), _two_outputs(keras, kind, override)
    _same_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        if losses == "objects":
            loss = [lib.losses.MeanSquaredError(), lib.losses.MeanAbsoluteError(name="my_mae")]
        else:
            loss = list(losses) if isinstance(losses, tuple) else losses
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss=loss)
    ht = tm.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    hk = km.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    _same_logs(ht.history, hk.history)
    _same_logs(tm.evaluate(x, y, verbose=0, return_dict=True),
               km.evaluate(x, y, verbose=0, return_dict=True))
    assert [m.name for m in tm.metrics] == [m.name for m in km.metrics]
