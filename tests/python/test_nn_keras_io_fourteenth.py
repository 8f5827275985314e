"""Keras features met by the keras-io scripts of issue 30's fourteenth pass (tests/keras_io:
gat_node_classification, gnn_citations), against Keras 3 on JAX with the same weights and
data: graph models holding the node features and edge list as attributes, called on a batch
of node indices."""

import numpy as np
import pytest

import tessera.nn as tn
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)
NODES = RNG.normal(size=(9, 4)).astype("float32")
EDGES = np.stack([RNG.integers(0, 9, 20), RNG.integers(0, 9, 20)], axis=1).astype("int32")


def _graph_model(lib, seen=None):
    """gat_node_classification's pattern: a layer called on [node_states, edges] (one
    symbolic tensor, one constant array) reads its kernel's size from input_shape[0][-1];
    a Sequential called on the held node features (a constant); the model takes node
    indices and gathers their rows with ops.take."""
    ops, layers = lib.ops, lib.layers

    class Aggregate(layers.Layer):
        def build(self, input_shape):
            if seen is not None:
                seen.append(input_shape)
            self.kernel = self.add_weight(shape=(input_shape[0][-1], 3), name="kernel")

        def call(self, inputs):
            nodes, edges = inputs
            messages = ops.take(ops.matmul(nodes, self.kernel), edges[:, 1], axis=0)
            return ops.segment_sum(messages, edges[:, 0], num_segments=ops.shape(nodes)[0])

    class Net(lib.Model):
        def __init__(self):
            super().__init__()
            self.node_states, self.edges = NODES, EDGES
            self.pre = lib.Sequential([layers.Dense(5, activation="relu")], name="pre")
            self.agg = Aggregate()
            self.out = layers.Dense(2)

        def call(self, indices):
            x = self.agg([self.pre(self.node_states), self.edges])
            return ops.take(self.out(x), indices, axis=0)

    return Net()


def test_build_gets_the_shapes_of_a_list_holding_a_constant(keras):
    shapes = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        seen = []
        _graph_model(lib, seen)(np.array([0, 3]))
        shapes[name] = [tuple(s) for s in seen[0]]
    assert shapes["tessera"] == shapes["keras"] == [(9, 5), EDGES.shape]


def test_graph_model_predicts_and_trains_as_keras(keras):
    """Built by its first call on integer node indices (int32 inputs, as Keras traces
    it), then one fit step from the same weights."""
    tm, km = _graph_model(tn), _graph_model(keras)
    idx = np.array([0, 2, 4, 8, 1])
    tm(idx), km(idx)
    _same_weights(tm, km)
    np.testing.assert_allclose(tm.predict(idx, verbose=0), np.asarray(km.predict(idx, verbose=0)),
                               rtol=1e-5, atol=1e-5)
    y = RNG.integers(0, 2, len(idx))
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.fit(idx, y, batch_size=len(idx), epochs=1, shuffle=False, verbose=0)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)


def test_subclassed_model_built_by_fit_on_integer_indices(keras):
    """Not called before fit: fit builds it on its integer arrays (ops.take needs integer
    indices; tessera traced it on float32 stand-ins and stopped)."""
    tm = _graph_model(tn)
    tm.compile(optimizer="sgd", loss=tn.losses.SparseCategoricalCrossentropy(from_logits=True))
    idx = np.arange(9)
    tm.fit(idx, RNG.integers(0, 2, 9), epochs=1, verbose=0)
    assert tm.predict(idx, verbose=0).shape == (9, 2)
    assert tm.inputs[0].dtype == "int32"


# ------------------------------------------- gnn_citations: training= in a subclassed model's fit
def _gnn_model(lib):
    """gnn_citations' pattern, small: FFN blocks (Sequentials of BatchNormalization,
    Dropout(0.5) and gelu Dense) on the held node features, a graph layer averaging
    prepared neighbour messages, the model's call taking node indices (no `training`)."""
    ops, layers = lib.ops, lib.layers

    def ffn(name=None):
        return lib.Sequential([layers.BatchNormalization(), layers.Dropout(0.5),
                               layers.Dense(5, activation=lib.activations.gelu)], name=name)

    class Conv(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.prepare, self.update = ffn(), ffn()

        def call(self, inputs):
            x, edges = inputs
            messages = self.prepare(ops.take(x, edges[1], axis=0))
            total = ops.segment_sum(messages, edges[0], num_segments=x.shape[0])
            return self.update(ops.concatenate([x, total], axis=1))

    class GNN(lib.Model):
        def __init__(self):
            super().__init__()
            self.node_features, self.edges = NODES, EDGES.T
            self.pre, self.conv, self.logits = ffn("pre"), Conv(), layers.Dense(3)

        def call(self, indices):
            x = self.pre(self.node_features)
            x = self.conv((x, self.edges)) + x
            return self.logits(ops.take(x, indices, axis=0))

    return GNN()


def _moving(m):
    return [np.asarray(v) for v in m.weights if "moving" in v.path]


def _same_bn_weights(tm, km):
    """_same_weights with positive moving variances (a BatchNormalization in inference
    divides by their square roots)."""
    _same_weights(tm, km)
    ws = [np.abs(w) + 0.5 if "moving_variance" in v.path else np.asarray(w)
          for w, v in zip(km.get_weights(), km.weights)]
    km.set_weights(ws)
    tm.set_weights(ws)


def test_subclassed_models_fit_runs_its_layers_in_inference_as_keras(keras):
    """gnn_citations learned under Keras and not under tessera: Keras's JAX trainer calls a
    subclassed model's `call` itself (stateless_call), so the layers it calls without
    `training` take their own default (None): Dropout off and BatchNormalization on its
    moving statistics, which stay. tessera ran them in training mode (Dropout 0.5 in 9
    places). The same weights and moving statistics as Keras after 2 steps."""
    tm, km = _gnn_model(tn), _gnn_model(keras)
    idx = np.array([0, 2, 4, 8, 1, 5])
    y = RNG.integers(0, 3, len(idx))
    tm(idx), km(idx)
    _same_bn_weights(tm, km)
    np.testing.assert_allclose(tm.predict(idx, verbose=0), np.asarray(km.predict(idx, verbose=0)),
                               rtol=1e-5, atol=1e-5)
    before = _moving(km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
        for _ in range(2):
            m.train_on_batch(idx, y)
    for a, b in zip(_moving(tm), before):  # (Keras's stay: the test can fail)
        np.testing.assert_array_equal(a, b)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)


def _bn_case(lib, case):
    """A model with one BatchNormalization reached as `case` says; Dense(3) on it."""
    layers = lib.layers
    if case in ("functional", "functional_given_false"):
        i = layers.Input((4,))
        h = layers.BatchNormalization()(i, training=False) if case.endswith("false") else \
            layers.BatchNormalization()(i)
        return lib.Model(i, layers.Dense(3)(h))

    class Block(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.bn = layers.BatchNormalization()

        def call(self, x):
            return self.bn(x)

    class M(lib.Model):
        def __init__(self):
            super().__init__()
            self.out = layers.Dense(3)
            if case == "base_given_false":
                i = layers.Input((4,))
                self.base = lib.Model(i, layers.BatchNormalization()(i))
            else:
                self.block = Block()

        def call(self, x, training=None):
            if case == "passed_on":  # the model's own training, given to the layer
                return self.out(self.block.bn(x, training=training))
            if case == "given_true":  # a user layer given training=True passes it on
                return self.out(self.block(x, training=True))
            if case == "base_given_false":
                return self.out(self.base(x, training=False))
            return self.out(self.block(x))  # "not_given"

    return M()


@pytest.mark.parametrize("case", ["not_given", "passed_on", "given_true", "base_given_false",
                                  "functional", "functional_given_false"])
def test_training_reaching_batch_normalization_in_fit_as_keras(keras, case):
    """Which BatchNormalization trains in fit, as Keras 3 on JAX: in a subclassed model's
    call, the one given the call's `training` or training=True (through a user layer's call
    too); not one called without it, nor a functional base given training=False there; in a
    functional graph all of them, even one recorded with training=False (Keras's
    Functional.call passes its own training over it). The moving mean after one step and the
    weights, from the same weights."""
    x = (RNG.normal(size=(16, 4)) * 2 + 1).astype("float32")
    y = RNG.integers(0, 3, 16)
    tm, km = _bn_case(tn, case), _bn_case(keras, case)
    tm(x[:2]), km(x[:2])  # built
    _same_bn_weights(tm, km)
    for m, lib in ((tm, tn), (km, keras)):
        m.compile(optimizer=lib.optimizers.SGD(0.1),
                  loss=lib.losses.SparseCategoricalCrossentropy(from_logits=True))
        m.train_on_batch(x, y)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)
