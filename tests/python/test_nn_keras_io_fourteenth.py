"""Keras features met by the keras-io scripts of issue 30's fourteenth pass (tests/keras_io:
gat_node_classification, gnn_citations), against Keras 3 on JAX with the same weights and
data: graph models holding the node features and edge list as attributes, called on a batch
of node indices."""

import numpy as np

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
