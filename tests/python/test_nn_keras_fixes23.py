"""Issue 30's twenty-third pass, against Keras 3 on JAX with the same weights and data:
sample weights given per output (a list, a tuple, a dict by key; None for an output left
unweighted; one array for several outputs) reach a model's train_step, test_step,
compute_loss and compute_metrics overrides in the structure Keras gives them
(`x, y, sample_weight = data`); `super().compute_loss(...)` and `super().compute_metrics(...)`
weight each output by its own entry, and the step logs each output's loss ("a_loss") as
Keras's compiled loss does; structures Keras cannot take are refused by name."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both
from keras_check import close as _close, same_logs as _same_logs

RNG = np.random.default_rng(23)
N = 8
HERE = r"\(at .*test_nn_keras_fixes23\.py:\d+\)"
X = RNG.normal(size=(N, 4)).astype("float32")
YA = RNG.normal(size=(N, 2)).astype("float32")
YB = RNG.normal(size=(N, 1)).astype("float32")
WA = RNG.uniform(0.2, 2.0, N).astype("float32")
WB = RNG.uniform(0.2, 2.0, N).astype("float32")

# (sample_weight, the model's outputs as a dict, labels as a tuple)
CASES = [([WA, WB], False, False), ([WA, None], False, False), ([None, WB], False, False),
         ((WA, WB), False, True), ({"a": WA, "b": None}, True, False), (WA, False, False),
         ([WA[:, None], WB], False, False)]
IDS = ["list", "list-None", "None-list", "tuple", "dict-None", "one-array", "list-(n,1)"]


def _describe(v):
    """A structure of weights by kind and each entry's shape but the batch axis."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_describe(u) for u in v])
    if isinstance(v, dict):
        return ("dict", {k: _describe(u) for k, u in sorted(v.items())})
    return tuple(v.shape[1:])


def _two(lib, base, keyed=False, **kw):
    """Outputs "a" (n, 2) with mse and "b" (n, 1) with mae, as a list or a dict."""
    inp = lib.Input((4,))
    h = lib.layers.Dense(5, activation="tanh")(inp)
    a, b = lib.layers.Dense(2, name="a")(h), lib.layers.Dense(1, name="b")(h)
    model = base(inp, {"a": a, "b": b} if keyed else [a, b])
    per = {"a": ["mse"], "b": ["mae"]} if keyed else [["mse"], ["mae"]]
    model.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss={"a": "mse", "b": "mae"} if keyed else ["mse", "mae"],
                  weighted_metrics=per, **kw)
    return model


def _labels(keyed, as_tuple):
    return {"a": YA, "b": YB} if keyed else (YA, YB) if as_tuple else [YA, YB]


def _tessera_step_model(seen):
    """A train_step and test_step as TensorFlow's guides write them, passing the weights
    on as they come: compute_loss, the loss tracker, then compute_metrics."""
    class Stepped(tn.Model):
        def train_step(self, data):
            x, y, sw = tn.utils.unpack_x_y_sample_weight(data)
            seen.append(repr(("train_step", len(data), _describe(sw))))
            with tn.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sw)
            grads = tape.gradient(loss, self.trainable_weights)
            self.optimizer.apply(grads, self.trainable_weights)
            next(m for m in self.metrics if m.name == "loss").update_state(loss)
            return self.compute_metrics(x, y, y_pred, sw)

        def test_step(self, data):
            x, y, sw = data
            seen.append(repr(("test_step", len(data), _describe(sw))))
            y_pred = self(x, training=False)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sw)
            next(m for m in self.metrics if m.name == "loss").update_state(loss)
            return self.compute_metrics(x, y, y_pred, sw)
    return Stepped


def _keras_step_model(keras, seen):
    """Keras on JAX: its stateless train_step(state, data) and test_step record the data
    they get, then run Keras's own steps."""
    class Stepped(keras.Model):
        def train_step(self, state, data):
            seen.append(repr(("train_step", len(data),
                         _describe(keras.utils.unpack_x_y_sample_weight(data)[2]))))
            return super().train_step(state, data)

        def test_step(self, state, data):
            seen.append(repr(("test_step", len(data), _describe(data[2]))))
            return super().test_step(state, data)
    return Stepped


@pytest.mark.parametrize("sw, keyed, as_tuple", CASES, ids=IDS)
def test_train_and_test_step_get_the_weights_as_keras(keras, sw, keyed, as_tuple):
    """The data's weights in the structure Keras's steps get (a list stays a list, a
    tuple a tuple, a dict a dict by key, None entries kept; one array for two outputs
    given to each), and fit's logs each epoch (each output's loss, the weighted metrics),
    the weights after it and evaluate's logs as Keras's."""
    t_seen, k_seen = [], []
    tm = _two(tn, _tessera_step_model(t_seen), keyed)
    km = _two(keras, _keras_step_model(keras, k_seen), keyed)
    _same_weights(tm, km)
    y = _labels(keyed, as_tuple)
    hist = [m.fit(X, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False,
                  verbose=0).history for m in (tm, km)]
    _same_logs(*hist)
    assert "a_loss" in hist[0] and "b_mae" in hist[0]
    for a, b in zip(tm.get_weights(), km.get_weights()):
        _close(a, b, 1e-4)
    _same_logs(tm.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True),
               km.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True))
    # tessera traces each step once; Keras's jit traces it once too
    assert sorted(set(t_seen)) == sorted(set(k_seen))


def test_the_weights_change_the_step(keras):
    """(The test can fail: an output's weights move its loss, not the other's.)"""
    logs = []
    for sw in ([WA, WB], [None, WB]):
        tm = _two(tn, _tessera_step_model([]))
        tm.set_weights([np.full(w.shape, 0.1, "float32") for w in tm.get_weights()])
        logs.append(tm.evaluate(X, [YA, YB], sample_weight=sw, verbose=0, return_dict=True))
    assert abs(logs[0]["a_loss"] - logs[1]["a_loss"]) > 1e-3
    _close(logs[0]["b_loss"], logs[1]["b_loss"])


def _metrics_override(lib):
    class Overridden(lib.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return super().compute_loss(x, y, y_pred, sample_weight, training)

        def compute_metrics(self, x, y, y_pred, sample_weight=None):
            return super().compute_metrics(x, y, y_pred, sample_weight)
    return Overridden


@pytest.mark.parametrize("sw, keyed, as_tuple", CASES, ids=IDS)
def test_compute_loss_and_compute_metrics_overrides_as_keras(keras, sw, keyed, as_tuple):
    """compute_loss and compute_metrics overrides calling super() with the weights they
    get (Keras on JAX runs both): each output weighted by its own, logs as Keras's."""
    tm, km = _two(tn, _metrics_override(tn), keyed), _two(keras, _metrics_override(keras),
                                                          keyed)
    _same_weights(tm, km)
    y = _labels(keyed, as_tuple)
    _same_logs(*[m.fit(X, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False,
                       verbose=0).history for m in (tm, km)])
    _same_logs(tm.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True),
               km.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True))


def _own_loss(lib, keyed):
    """A compute_loss reading the first output's weights itself (sample_weight[0], or
    ["a"]) and passing the second's on to super() in a structure of its own."""
    ops = lib.ops

    class Own(lib.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            k = "a" if keyed else 0
            w = sample_weight[k]
            own = ops.mean(w * ops.mean(ops.square(y[k] - y_pred[k]), axis=-1))
            other = {"a": None, "b": sample_weight["b"]} if keyed else \
                [None, sample_weight[1]]
            return 0.5 * own + super().compute_loss(x, y, y_pred, other, training)
    return Own


@pytest.mark.parametrize("sw, keyed", [([WA, WB], False), ([WA, None], False), (WA, False),
                                       ({"a": WA, "b": WB}, True)],
                         ids=["list", "list-None", "one-array", "dict"])
def test_compute_loss_indexing_the_weights_as_keras(keras, sw, keyed):
    tm, km = _two(tn, _own_loss(tn, keyed), keyed), _two(keras, _own_loss(keras, keyed),
                                                          keyed)
    _same_weights(tm, km)
    y = _labels(keyed, False)
    _same_logs(*[m.fit(X, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False,
                       verbose=0).history for m in (tm, km)])
    for a, b in zip(tm.get_weights(), km.get_weights()):
        _close(a, b, 1e-4)
    _same_logs(tm.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True),
               km.evaluate(X, y, sample_weight=sw, verbose=0, return_dict=True))


def _passing_on(lib, how):
    class Passing(lib.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            if how == "short":
                sample_weight = sample_weight[:1]
            elif how == "dict":
                sample_weight = {"a": sample_weight[0], "b": sample_weight[1]}
            elif how == "list":
                sample_weight = [sample_weight["a"], sample_weight["b"]]
            return super().compute_loss(x, y, y_pred, sample_weight, training)
    return Passing


@pytest.mark.parametrize("how, keyed, message", [
    ("short", False, r"\[compute_loss\] sample_weight has 1 entries \[\(None,\)\] for a loss "
                     r"of 2 outputs \['a', 'b'\]: give one per output"),
    ("dict", False, r"\[compute_loss\] sample_weight is a dict \{'a': \(None,\), 'b': "
                    r"\(None,\)\} for the model's outputs \['a', 'b'\] \(a list\): give a list"),
    ("list", True, r"\[compute_loss\] sample_weight is a list of 2 entries .* for the model's "
                   r"outputs, a dict \['a', 'b'\]: give a dict by their keys")],
    ids=["too-few", "dict-for-list", "list-for-dict"])
def test_structures_keras_refuses_are_refused(keras, how, keyed, message):
    """super().compute_loss given weights of another structure than the outputs': Keras
    fails (an IndexError, a KeyError, a TypeError); tessera names the call, the
    structure's shapes and the override's line."""
    sw = {"a": WA, "b": WB} if keyed else [WA, WB]
    y = _labels(keyed, False)
    with pytest.raises(Exception):
        _two(keras, _passing_on(keras, how), keyed).evaluate(X, y, sample_weight=sw,
                                                             verbose=0)
    with pytest.raises(ValueError, match=rf"{message}.*{HERE}"):
        _two(tn, _passing_on(tn, how), keyed).evaluate(X, y, sample_weight=sw, verbose=0)


def test_run_eagerly_step_gets_the_weights_per_output(keras):
    """run_eagerly=True runs the train_step on each batch's values: the same logs."""
    seen = []
    tm = _two(tn, _tessera_step_model(seen))
    km = _two(keras, keras.Model)
    _same_weights(tm, km)
    tm.compile(optimizer=tn.optimizers.SGD(0.1), loss=["mse", "mse"],
               weighted_metrics=[["mse"], ["mae"]], run_eagerly=True)
    km.compile(optimizer=keras.optimizers.SGD(0.1), loss=["mse", "mse"],
               weighted_metrics=[["mse"], ["mae"]])
    _same_logs(*[m.fit(X, [YA, YB], sample_weight=[None, WB], batch_size=4, epochs=2,
                       shuffle=False, verbose=0).history for m in (tm, km)])


def test_sequence_weights_validation_and_batches_as_keras(keras):
    """One output of per-step losses weighted per step ((n, steps) weights), the other
    per sample, through the train_step and test_step overrides: fit with
    validation_data=(x, y, [w, None]), then a PyDataset's batches, as Keras's."""
    T = 3
    x = RNG.normal(size=(N, T, 2)).astype("float32")
    y = [RNG.normal(size=(N, T, 2)).astype("float32"), YB]
    sw = [RNG.uniform(0.0, 2.0, (N, T)).astype("float32"), WB]

    def model(lib, base):
        inp = lib.Input((T, 2))
        s = lib.layers.Dense(2, name="s")(inp)
        f = lib.layers.Dense(1, name="f")(lib.layers.Flatten()(inp))
        m = base(inp, [s, f])
        m.compile(optimizer=lib.optimizers.SGD(0.1), loss=["mse", "mae"],
                  weighted_metrics=[["mae"], ["mse"]])
        return m
    t_seen = []
    tm, km = model(tn, _tessera_step_model(t_seen)), model(keras, keras.Model)
    _same_weights(tm, km)
    hist = [m.fit(x, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False, verbose=0,
                  validation_data=(x, y, [sw[0], None])).history for m in (tm, km)]
    _same_logs(*hist)
    assert "val_s_loss" in hist[0]
    assert repr(("train_step", 3, ("list", [(T,), ()]))) in t_seen

    def batches(lib):
        class Batches(lib.utils.PyDataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                rows = slice(4 * i, 4 * i + 4)
                return x[rows], [y[0][rows], y[1][rows]], [None, WB[rows]]
        return Batches()
    _same_logs(tm.fit(batches(tn), epochs=1, shuffle=False, verbose=0).history,
               km.fit(batches(keras), epochs=1, shuffle=False, verbose=0).history)
    _same_logs(tm.evaluate(batches(tn), verbose=0, return_dict=True),
               km.evaluate(batches(keras), verbose=0, return_dict=True))


def test_dicts_passed_on_are_matched_by_key(keras):
    """super().compute_loss given y, y_pred and sample_weight as dicts in another key order
    than the outputs': each matched by key, as Keras's."""
    def reordered(lib):
        class Reordered(lib.Model):
            def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                             training=True):
                def flip(d):
                    return {"b": d["b"], "a": d["a"]}
                return super().compute_loss(x, flip(y), flip(y_pred), flip(sample_weight),
                                            training)
        return Reordered
    tm, km = _two(tn, reordered(tn), True), _two(keras, reordered(keras), True)
    _same_weights(tm, km)
    y, sw = _labels(True, False), {"a": WA, "b": None}
    _same_logs(*[m.fit(X, y, sample_weight=sw, batch_size=4, epochs=2, shuffle=False,
                       verbose=0).history for m in (tm, km)])
