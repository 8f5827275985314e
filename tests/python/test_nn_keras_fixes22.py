"""Issue 30's twenty-second pass, against Keras 3 on JAX with the same weights and data:
sample weights given per output (a list or tuple in the outputs' order, None for an output
left unweighted, a dict by key for a dict-output model) in fit, evaluate, train_on_batch,
test_on_batch, validation data and Dataset / PyDataset batches; each output's weights
checked against its own loss (per-step weights for one output, per-sample for another);
the errors Keras raises (a wrong count, a dict for a list of outputs, class_weight)."""

import numpy as np
import pytest

import tessera.data as td
import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both
from keras_check import close as _close, same_logs as _same_logs

RNG = np.random.default_rng(22)
N, T = 8, 3
HERE = r"\(at .*test_nn_keras_fixes22\.py:\d+\)"
X = RNG.normal(size=(N, 4)).astype("float32")
YA = RNG.normal(size=(N, 2)).astype("float32")
YB = RNG.normal(size=(N, 1)).astype("float32")
WA = RNG.uniform(0.2, 2.0, N).astype("float32")
WB = RNG.uniform(0.2, 2.0, N).astype("float32")


def _two(lib, keyed=False, **compile_kw):
    """A model of two outputs, "a" (n, 2) and "b" (n, 1), as a list or a dict."""
    inp = lib.Input((4,))
    h = lib.layers.Dense(5, activation="tanh")(inp)
    a, b = lib.layers.Dense(2, name="a")(h), lib.layers.Dense(1, name="b")(h)
    model = lib.Model(inp, {"a": a, "b": b} if keyed else [a, b])
    kw = {"loss": {"a": "mse", "b": "mae"} if keyed else ["mse", "mae"]}
    kw.update(compile_kw)
    model.compile(optimizer=lib.optimizers.SGD(0.1), **kw)
    return model


def _pair(keras, **kw):
    tm, km = _two(tn, **kw), _two(keras, **kw)
    _same_weights(tm, km)
    return tm, km


def _eval(m, sw, y=None, **kw):
    return m.evaluate(X, [YA, YB] if y is None else y, sample_weight=sw, batch_size=4,
                      verbose=0, return_dict=True, **kw)


@pytest.mark.parametrize("sw", [[WA, WB], [WA, None], [None, WB], [WA[:, None], WB],
                                [None, None]])
def test_evaluate_with_one_array_per_output_as_keras(keras, sw):
    """Each output's loss (and the logged a_loss, b_loss), its weighted metrics and the
    total with loss_weights, weighted by its own array; None: that output unweighted."""
    kw = {"loss_weights": [0.5, 2.0], "metrics": [["mae"], ["mse"]],
          "weighted_metrics": [["mse"], ["mae"]]}
    tm, km = _pair(keras, **kw)
    _same_logs(_eval(tm, sw), _eval(km, sw))
    # the weights do change the values (the test could fail)
    if sw[0] is not None:
        assert abs(_eval(tm, sw)["a_loss"] - _eval(tm, None)["a_loss"]) > 1e-3


def test_a_tuple_is_taken_as_a_list(keras):
    """A tuple of arrays is the outputs' weights as a list is (Keras's fit and evaluate
    want the structure of y: a tuple for tuple labels, as here)."""
    tm, km = _pair(keras)
    _same_logs(_eval(tm, (WA, WB)), _eval(km, (WA, WB), y=(YA, YB)))
    _same_logs(_eval(tm, (WA, WB)), _eval(tm, [WA, WB]))


def test_fit_with_validation_as_keras(keras):
    """fit's logs each epoch, the weights after it, with validation_data=(x, y, [w, w])
    and validation_split (the split weights go with the split samples)."""
    for extra in ({"validation_data": (X, [YA, YB], [WB, WA])}, {"validation_split": 0.25}):
        tm, km = _pair(keras, weighted_metrics=[["mse"], ["mse"]])
        hist = [m.fit(X, [YA, YB], sample_weight=[WA, None], batch_size=4, epochs=2,
                      shuffle=False, verbose=0, **extra).history for m in (tm, km)]
        _same_logs(*hist)
        assert "val_a_loss" in hist[1]
        for a, b in zip(tm.get_weights(), km.get_weights()):
            _close(a, b, 1e-4)


def test_train_and_test_on_batch_as_keras(keras):
    tm, km = _pair(keras, weighted_metrics=[["mse"], []])
    for m_t, m_k in ((tm.train_on_batch, km.train_on_batch),
                     (tm.test_on_batch, km.test_on_batch)):
        for sw in ([WA, WB], [None, WB]):
            _same_logs(m_t(X, [YA, YB], sample_weight=sw, return_dict=True),
                       m_k(X, [YA, YB], sample_weight=sw, return_dict=True))


def test_dict_output_model_takes_a_dict_by_key(keras):
    """A dict-output model: sample_weight a dict by its keys (None: unweighted) or one
    array; a list, or a dict missing a key, is refused as Keras refuses it."""
    tm, km = _pair(keras, keyed=True)
    y = {"a": YA, "b": YB}
    for sw in ({"a": WA, "b": WB}, {"b": WB, "a": None}, WA):
        _same_logs(_eval(tm, sw, y=y), _eval(km, sw, y=y))
    with pytest.raises(ValueError, match="one `sample_weight` array per output"):
        _eval(km, {"a": WA}, y=y)
    with pytest.raises(ValueError, match=r"\[evaluate\] sample_weight is a dict \(\{'a': "
                                         r"\(8,\)\}\) but the model's outputs are \['a', 'b'\]: "
                                         rf"missing \['b'\], unknown \[\].*{HERE}"):
        _eval(tm, {"a": WA}, y=y)
    with pytest.raises(ValueError, match="one `sample_weight` array per output"):
        _eval(km, [WA, WB], y=y)
    with pytest.raises(ValueError, match=r"\[evaluate\] sample_weight is a list \(\[\(8,\), "
                                         r"\(8,\)\]\) but the model's outputs are a dict: give "
                                         rf"a dict by the outputs' keys \['a', 'b'\].*{HERE}"):
        _eval(tm, [WA, WB], y=y)


def test_dict_output_model_with_loss_weights_by_key_fits_as_keras(keras):
    kw = {"keyed": True, "loss_weights": {"a": 0.5, "b": 3.0},
          "weighted_metrics": {"a": ["mae"], "b": ["mse"]}}
    tm, km = _pair(keras, **kw)
    y = {"a": YA, "b": YB}
    _same_logs(_eval(tm, {"a": WA, "b": WB}, y=y), _eval(km, {"a": WA, "b": WB}, y=y))
    _same_logs(*[m.fit(X, y, sample_weight={"a": None, "b": WB}, batch_size=4, epochs=2,
                       shuffle=False, verbose=0).history for m in (tm, km)])
    with pytest.raises(ValueError, match="one `sample_weight` array per output"):
        _eval(km, {"a": WA, "b": WB, "c": WB}, y=y)
    with pytest.raises(ValueError, match=rf"missing \[\], unknown \['c'\].*{HERE}"):
        _eval(tm, {"a": WA, "b": WB, "c": WB}, y=y)


def test_an_output_without_a_loss_as_keras(keras):
    """loss=["mse", None]: the second output's weights reach its weighted metrics only, and
    the logged loss is Keras's for either weights of the first."""
    tm, km = _pair(keras, loss=["mse", None], weighted_metrics=[[], ["mae"]])
    for sw in ([WA, WB], [WA, None], [None, WB]):
        _same_logs(_eval(tm, sw), _eval(km, sw))


def test_a_dict_for_a_list_of_outputs_is_refused_as_keras(keras):
    tm, km = _pair(keras)
    for y in ([YA, YB], {"a": YA, "b": YB}):
        with pytest.raises((ValueError, KeyError)):
            _eval(km, {"a": WA, "b": WB}, y=y)
        with pytest.raises(ValueError, match=r"\[evaluate\] sample_weight is a dict .* but "
                                             r"the model's outputs are a list: give a list in "
                                             rf"the outputs' order \['a', 'b'\].*{HERE}"):
            _eval(tm, {"a": WA, "b": WB}, y=y)


@pytest.mark.parametrize("sw", [[WA], [WA, WB, WB]])
def test_a_wrong_count_raises_as_keras(keras, sw):
    tm, km = _pair(keras)
    with pytest.raises(ValueError, match="You should provide one `sample_weight` array per "
                                         "output in `y`"):
        km.fit(X, [YA, YB], sample_weight=sw, verbose=0)
    got = ", ".join(["\\(8,\\)"] * len(sw))
    with pytest.raises(ValueError, match=rf"\[fit\] the model has 2 outputs \['a', 'b'\], got "
                                         rf"{len(sw)} sample_weight arrays \(a list of shapes "
                                         rf"\[{got}\]\).*per output in `y`.*{HERE}"):
        tm.fit(X, [YA, YB], sample_weight=sw, verbose=0)


def test_wrong_rows_or_bad_values_name_the_output(keras):
    tm, km = _pair(keras)
    with pytest.raises(ValueError):
        _eval(km, [WA, WB[:5]])
    with pytest.raises(ValueError, match=r"\[evaluate\] sample_weight\[1\] must have one weight "
                                         rf"per sample, shape \(8,\).*got \(5,\) {HERE}"):
        _eval(tm, [WA, WB[:5]])
    bad = WB.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match=rf"\[evaluate\] sample_weight\[1\]\[3\] is nan.*{HERE}"):
        _eval(tm, [WA, bad])


def test_class_weight_with_several_outputs_raises_as_keras(keras):
    tm, km = _pair(keras)
    with pytest.raises(ValueError, match="only supported for Models with a single output"):
        km.fit(X, [YA, YB], class_weight={0: 1.0, 1: 2.0}, verbose=0)
    with pytest.raises(ValueError, match=r"\[fit\] class_weight works with one output only, "
                                         rf"as Keras.*the model has 2.*{HERE}"):
        tm.fit(X, [YA, YB], class_weight={0: 1.0, 1: 2.0}, verbose=0)


def _steps_and_flat(lib):
    """Output "s" of per-step losses (n, T, 2), output "f" of one per sample (n, 1)."""
    inp = lib.Input((T, 2))
    s = lib.layers.Dense(2, name="s")(inp)
    f = lib.layers.Dense(1, name="f")(lib.layers.Flatten()(inp))
    model = lib.Model(inp, [s, f])
    model.compile(optimizer=lib.optimizers.SGD(0.1), loss=["mse", "mse"],
                  loss_weights=[0.5, 2.0], weighted_metrics=[["mae"], ["mse"]])
    return model


def test_temporal_weights_for_one_output_per_sample_for_the_other(keras):
    """(n, T) weights for the output of per-step losses, (n,) for the other: each checked
    against its own output's loss; the other way round raises in both."""
    x = RNG.normal(size=(N, T, 2)).astype("float32")
    y = [RNG.normal(size=(N, T, 2)).astype("float32"), YB]
    wt = RNG.uniform(0.2, 2.0, (N, T)).astype("float32")
    tm, km = _steps_and_flat(tn), _steps_and_flat(keras)
    _same_weights(tm, km)
    for sw in ([wt, WB], [wt[..., None], None]):
        _same_logs(tm.evaluate(x, y, sample_weight=sw, verbose=0, return_dict=True),
                   km.evaluate(x, y, sample_weight=sw, verbose=0, return_dict=True))
    hist = [m.fit(x, y, sample_weight=[wt, WB], batch_size=4, epochs=2, shuffle=False,
                  verbose=0).history for m in (tm, km)]
    _same_logs(*hist)
    # the same weights in a Dataset's batches: (x, (ys, yf), (wt, wb))
    ds = td.Dataset.from_tensor_slices((x, tuple(y), (wt, WB))).batch(4)
    _same_logs(tm.evaluate(ds, verbose=0, return_dict=True),
               km.evaluate(x, y, sample_weight=[wt, WB], batch_size=4, verbose=0,
                           return_dict=True))
    bad = td.Dataset.from_tensor_slices((x, tuple(y), (WA, WB))).batch(4)
    with pytest.raises(ValueError, match=r"\[evaluate\] the dataset's sample_weight for output "
                                         r"'s' \(a batch\) of shape \(4,\) does not broadcast"):
        tm.evaluate(bad, verbose=0)
    with pytest.raises(ValueError):
        km.evaluate(x, y, sample_weight=[wt, wt], verbose=0)
    with pytest.raises(ValueError, match=r"\[evaluate\] sample_weight\[1\] of shape \(8, 3\) "
                                         r"does not broadcast to the losses: output 1's "
                                         rf".*values of shape \(8,\).*{HERE}"):
        tm.evaluate(x, y, sample_weight=[wt, wt], verbose=0)


def test_dataset_batches_of_weights_per_output(keras):
    """A tessera Dataset of (x, (ya, yb), (wa, wb)) trains as Keras's arrays (unshuffled,
    the same batches); a PyDataset's (x, [ya, yb], [wa, None]) batches as Keras's."""
    tm, km = _pair(keras, weighted_metrics=[["mae"], ["mae"]])
    ds = td.Dataset.from_tensor_slices((X, (YA, YB), (WA, WB[:, None]))).batch(4)
    ht = tm.fit(ds, epochs=2, verbose=0).history
    hk = km.fit(X, [YA, YB], sample_weight=[WA, WB[:, None]], batch_size=4, epochs=2,
                shuffle=False, verbose=0).history
    _same_logs(ht, hk)
    _same_logs(tm.evaluate(ds, verbose=0, return_dict=True),
               km.evaluate(X, [YA, YB], sample_weight=[WA, WB], batch_size=4, verbose=0,
                           return_dict=True))

    def batches(lib):
        class Batches(lib.utils.PyDataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                rows = slice(4 * i, 4 * i + 4)
                return X[rows], [YA[rows], YB[rows]], [WA[rows], None]
        return Batches()
    _same_logs(tm.evaluate(batches(tn), verbose=0, return_dict=True),
               km.evaluate(batches(keras), verbose=0, return_dict=True))
    _same_logs(tm.fit(batches(tn), epochs=1, shuffle=False, verbose=0).history,
               km.fit(batches(keras), epochs=1, shuffle=False, verbose=0).history)


def test_metric_subclass_gets_each_outputs_weights_as_given(keras):
    """A Metric subclass in weighted_metrics gets its own output's weights in the shape
    given, as Keras gives them: (n, T) for the sequence output, (n, 1) kept (n, 1) for the
    other (its weight sum counts each sample once)."""
    from test_nn_keras_fixes21 import _weighted_mae_class  # a user's metric reading weights

    def model(lib):
        cls = _weighted_mae_class(lib)
        inp = lib.Input((T, 2))
        s = lib.layers.Dense(2, name="s")(inp)
        f = lib.layers.Dense(1, name="f")(lib.layers.Flatten()(inp))
        m = lib.Model(inp, [s, f])
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss=["mse", "mse"],
                  weighted_metrics=[[cls(name="s_w")], [cls(name="f_w")]])
        return m
    x = RNG.normal(size=(N, T, 2)).astype("float32")
    y = [RNG.normal(size=(N, T, 2)).astype("float32"), YB]
    sw = [RNG.uniform(0.0, 2.0, (N, T)).astype("float32"), WB[:, None]]
    tm, km = model(tn), model(keras)
    _same_weights(tm, km)
    hist = [m.fit(x, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False,
                  verbose=0).history for m in (tm, km)]
    _same_logs(*hist)
    _same_logs(tm.evaluate(x, y, sample_weight=[None, sw[1]], verbose=0, return_dict=True),
               km.evaluate(x, y, sample_weight=[None, sw[1]], verbose=0, return_dict=True))


def test_one_output_takes_a_list_of_one_array(keras):
    """A model of one output given [w] (one array per output) or (w,), as Keras takes it."""
    def one(lib):
        inp = lib.Input((4,))
        m = lib.Model(inp, lib.layers.Dense(2)(inp))
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss="mse", weighted_metrics=["mae"])
        return m
    tm, km = one(tn), one(keras)
    _same_weights(tm, km)
    for sw in ([WA], (WA,)):
        _same_logs(tm.evaluate(X, YA, sample_weight=sw, verbose=0, return_dict=True),
                   km.evaluate(X, YA, sample_weight=sw, verbose=0, return_dict=True))
    _same_logs(tm.train_on_batch(X, YA, sample_weight=[WA], return_dict=True),
               km.train_on_batch(X, YA, sample_weight=[WA], return_dict=True))
    assert tm.evaluate(X, YA, sample_weight=[WA], verbose=0) != \
        tm.evaluate(X, YA, verbose=0)  # (the weights count: the test can fail)
