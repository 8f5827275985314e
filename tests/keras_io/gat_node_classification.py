# Modeled on keras-io examples/graph/gat_node_classification.py (its Keras 3 form: a
# GraphAttention layer whose build reads the kernel's size from `input_shape[0][-1]` of a
# [node_states, edges] list, `ops.take` of node rows by the edges' columns, `ops.leaky_relu`,
# `ops.clip`, `ops.exp`, `ops.segment_sum` with `num_segments` from `ops.shape`, a
# MultiHeadGraphAttention holding a list of heads (concatenated, or averaged with ops.stack /
# ops.mean), and a GraphAttentionNetwork Model subclass holding the whole graph (node features
# and the edge list) as attributes, whose `call` takes a batch of node indices; SGD with
# momentum, SparseCategoricalCrossentropy(from_logits=True), EarlyStopping on val_accuracy
# restoring the best weights, `ops.softmax` and `ops.convert_to_numpy` of predict's logits);
# written for tessera. In place of the Cora download and pandas: a generated citation graph
# of 600 papers (2,708) of 7 subjects with 200 binary word features (1,433) that tell the
# subject weakly, and 1,800 citations, 85% of them within the citing paper's subject (the
# graph is what a model must read); hidden units 16 (100), 4 heads (8), 2 layers (3),
# 20 epochs (100), batches of 64 (256), learning rate 0.05 (0.003).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

keras.utils.set_random_seed(2)

NUM_PAPERS, NUM_WORDS, NUM_CITATIONS = 600, 200, 1800
class_values = ["Case_Based", "Genetic_Algorithms", "Neural_Networks",
                "Probabilistic_Methods", "Reinforcement_Learning", "Rule_Learning", "Theory"]
class_idx = {name: i for i, name in enumerate(class_values)}

rng = np.random.default_rng(11)
subjects = rng.integers(0, len(class_values), NUM_PAPERS)
word_rates = np.full((len(class_values), NUM_WORDS), 0.02)
for c in range(len(class_values)):  # each subject uses its own few words a little more often
    word_rates[c, rng.choice(NUM_WORDS, 12, replace=False)] = 0.2
words = (rng.random((NUM_PAPERS, NUM_WORDS)) < word_rates[subjects]).astype("float32")

citing = rng.integers(0, NUM_PAPERS, NUM_CITATIONS)
cited = np.empty(NUM_CITATIONS, dtype="int64")
for i, paper in enumerate(citing):
    same = rng.random() < 0.85
    pool = np.flatnonzero(subjects == subjects[paper]) if same else np.arange(NUM_PAPERS)
    cited[i] = rng.choice(pool)
print("citations:", (NUM_CITATIONS, 2), "papers:", (NUM_PAPERS, NUM_WORDS + 2))

# 50/50 split
random_indices = np.random.permutation(range(NUM_PAPERS))
train_indices = random_indices[: NUM_PAPERS // 2]
test_indices = random_indices[NUM_PAPERS // 2:]
train_labels = subjects[train_indices]
test_labels = subjects[test_indices]

# [target, source] as the example's citations frame: the target is the cited paper
edges = ops.convert_to_tensor(np.stack([cited, citing], axis=1), dtype="int32")
node_states = ops.convert_to_tensor(words, dtype="float32")
print("Edges shape:\t\t", edges.shape)
print("Node features shape:", node_states.shape)


class GraphAttention(layers.Layer):
    def __init__(self, units, kernel_initializer="glorot_uniform", kernel_regularizer=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[0][-1], self.units), trainable=True,
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, name="kernel")
        self.kernel_attention = self.add_weight(shape=(self.units * 2, 1), trainable=True,
                                                initializer=self.kernel_initializer,
                                                regularizer=self.kernel_regularizer,
                                                name="kernel_attention")
        self.built = True

    def call(self, inputs):
        node_states, edges = inputs
        z = ops.matmul(node_states, self.kernel)
        source_indices = edges[:, 1]
        target_indices = edges[:, 0]
        z_target = ops.take(z, target_indices, axis=0)
        z_source = ops.take(z, source_indices, axis=0)
        z_concat = ops.concatenate([z_target, z_source], axis=-1)
        attention_scores = ops.leaky_relu(ops.matmul(z_concat, self.kernel_attention))
        attention_scores = ops.squeeze(attention_scores, -1)
        attention_scores = ops.exp(ops.clip(attention_scores, -2, 2))
        num_nodes = ops.shape(node_states)[0]
        attention_sum = ops.segment_sum(attention_scores, target_indices, num_segments=num_nodes)
        # each edge's score over the sum of its target's scores
        attention_sum_per_edge = ops.take(attention_sum, target_indices, axis=0)
        attention_norm = attention_scores / (attention_sum_per_edge + 1e-8)
        node_states_neighbors = ops.take(z, source_indices, axis=0)
        weighted_neighbors = node_states_neighbors * ops.expand_dims(attention_norm, axis=-1)
        return ops.segment_sum(weighted_neighbors, target_indices, num_segments=num_nodes)


class MultiHeadGraphAttention(layers.Layer):
    def __init__(self, units, num_heads=8, merge_type="concat", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.merge_type = merge_type
        self.attention_layers = [GraphAttention(units) for _ in range(num_heads)]

    def call(self, inputs):
        node_states, edges = inputs
        outputs = [layer([node_states, edges]) for layer in self.attention_layers]
        if self.merge_type == "concat":
            outputs = ops.concatenate(outputs, axis=-1)
        else:
            outputs = ops.mean(ops.stack(outputs, axis=0), axis=0)
        return ops.relu(outputs)


class GraphAttentionNetwork(keras.Model):
    def __init__(self, node_states, edges, hidden_units, num_heads, num_layers, output_dim,
                 **kwargs):
        super().__init__(**kwargs)
        self.node_states = node_states
        self.edges = edges
        self.preprocess = layers.Dense(hidden_units * num_heads, activation="relu")
        self.attention_layers = [MultiHeadGraphAttention(hidden_units, num_heads)
                                 for _ in range(num_layers)]
        self.output_layer = layers.Dense(output_dim)

    def call(self, inputs, training=False):
        indices = inputs  # the nodes whose predictions are wanted
        x = self.preprocess(self.node_states)
        for attention_layer in self.attention_layers:
            x = attention_layer([x, self.edges]) + x
        outputs = self.output_layer(x)
        return ops.take(outputs, indices, axis=0)


HIDDEN_UNITS = 16
NUM_HEADS = 4
NUM_LAYERS = 2
OUTPUT_DIM = len(class_values)

gat_model = GraphAttentionNetwork(node_states, edges, HIDDEN_UNITS, NUM_HEADS, NUM_LAYERS,
                                  OUTPUT_DIM)
gat_model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9),
                  metrics=["accuracy"])
gat_model.fit(x=train_indices, y=train_labels, validation_split=0.1, batch_size=64,
              epochs=20,
              callbacks=[keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=5,
                                                       restore_best_weights=True)],
              verbose=2)
_, test_accuracy = gat_model.evaluate(x=test_indices, y=test_labels, verbose=0)
print("--" * 38 + f"\nTest Accuracy {test_accuracy*100:.1f}%")

test_logits = gat_model.predict(x=test_indices)
test_probs = ops.softmax(test_logits)
test_probs_np = ops.convert_to_numpy(test_probs)
assert test_probs_np.shape == (len(test_indices), OUTPUT_DIM), test_probs_np.shape
np.testing.assert_allclose(test_probs_np.sum(axis=1), 1.0, rtol=1e-5)

# the model's layers and weights, as Keras names them
print([w.path for w in gat_model.weights][:6])
mapping = {v: k for (k, v) in class_idx.items()}
for i, (probs, label) in enumerate(zip(test_probs_np[:3], test_labels[:3])):
    print(f"Example {i+1}: {mapping[label]}")
    for j, c in zip(probs, class_idx.keys()):
        print(f"\tProbability of {c: <24} = {j*100:7.3f}%")
    print("---" * 20)
