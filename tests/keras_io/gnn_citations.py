# Modeled on keras-io examples/graph/gnn_citations.py, in a backend-agnostic Keras 3 form (the
# example's tf.gather / tf.math.unsorted_segment_* / tf.stack / tf.nn.l2_normalize as
# ops.take / ops.segment_sum / ops.segment_max / ops.stack / ops.normalize; the segment mean as
# a segment sum over a segment count): FFN blocks as named Sequentials of BatchNormalization,
# Dropout and gelu Dense layers; a baseline functional model of 5 FFN blocks with named Add skip
# connections; a GraphConvLayer (prepare, aggregate, update, with "gru" combination through a
# GRU over a stacked pair) called on a (node_representations, edges, edge_weights) tuple of one
# symbolic tensor and two constant arrays; a GNNNodeClassifier Model subclass holding the graph
# as attributes, called on a batch of node indices; then, after training, the model's
# node_features, edges and edge_weights replaced by a graph with new nodes and predict on them
# (the example's last step); SparseCategoricalCrossentropy(from_logits=True), EarlyStopping on
# val_acc restoring the best weights; written for tessera. In place of the Cora download,
# pandas and networkx: 500 generated papers (2,708) of 7 subjects with 150 binary word
# features (1,433), and 1,500 citations, 85% within the citing paper's subject; 12 epochs
# (300), batches of 64 (256).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

NUM_PAPERS, NUM_WORDS, NUM_CITATIONS = 500, 150, 1500
class_values = ["Case_Based", "Genetic_Algorithms", "Neural_Networks",
                "Probabilistic_Methods", "Reinforcement_Learning", "Rule_Learning", "Theory"]
class_idx = {name: i for i, name in enumerate(class_values)}
num_classes = len(class_values)

rng = np.random.default_rng(21)
subjects = rng.integers(0, num_classes, NUM_PAPERS)
word_rates = np.full((num_classes, NUM_WORDS), 0.03)
for c in range(num_classes):
    word_rates[c, rng.choice(NUM_WORDS, 10, replace=False)] = 0.2
words = (rng.random((NUM_PAPERS, NUM_WORDS)) < word_rates[subjects]).astype("int64")
citing = rng.integers(0, NUM_PAPERS, NUM_CITATIONS)
cited = np.array([rng.choice(np.flatnonzero(subjects == subjects[p])) if rng.random() < 0.85
                  else rng.integers(0, NUM_PAPERS) for p in citing])
print("Citations shape:", (NUM_CITATIONS, 2))
print("Papers shape:", (NUM_PAPERS, NUM_WORDS + 2))

# stratified split: about half of each subject for training
train_ids, test_ids = [], []
for c in range(num_classes):
    group = np.flatnonzero(subjects == c)
    selection = np.random.rand(len(group)) <= 0.5
    train_ids.append(group[selection])
    test_ids.append(group[~selection])
train_ids = np.random.permutation(np.concatenate(train_ids))
test_ids = np.random.permutation(np.concatenate(test_ids))
print("Train data shape:", (len(train_ids), NUM_WORDS + 2))
print("Test data shape:", (len(test_ids), NUM_WORDS + 2))

hidden_units = [32, 32]
learning_rate = 0.01
dropout_rate = 0.5
num_epochs = 12
batch_size = 64


def run_experiment(model, x_train, y_train):
    model.compile(optimizer=keras.optimizers.Adam(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")])
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_acc", patience=50,
                                                   restore_best_weights=True)
    return model.fit(x=x_train, y=y_train, epochs=num_epochs, batch_size=batch_size,
                     validation_split=0.15, callbacks=[early_stopping], verbose=0)


def create_ffn(hidden_units, dropout_rate, name=None):
    fnn_layers = []
    for units in hidden_units:
        fnn_layers.append(layers.BatchNormalization())
        fnn_layers.append(layers.Dropout(dropout_rate))
        fnn_layers.append(layers.Dense(units, activation=keras.activations.gelu))
    return keras.Sequential(fnn_layers, name=name)


num_features = NUM_WORDS
x_train = words[train_ids]
x_test = words[test_ids]
y_train = subjects[train_ids]
y_test = subjects[test_ids]


def create_baseline_model(hidden_units, num_classes, dropout_rate=0.2):
    inputs = layers.Input(shape=(num_features,), name="input_features")
    x = create_ffn(hidden_units, dropout_rate, name="ffn_block1")(inputs)
    for block_idx in range(4):
        x1 = create_ffn(hidden_units, dropout_rate, name=f"ffn_block{block_idx + 2}")(x)
        x = layers.Add(name=f"skip_connection{block_idx + 2}")([x, x1])
    logits = layers.Dense(num_classes, name="logits")(x)
    return keras.Model(inputs=inputs, outputs=logits, name="baseline")


baseline_model = create_baseline_model(hidden_units, num_classes, dropout_rate)
baseline_model.summary()
history = run_experiment(baseline_model, x_train, y_train)
_, test_accuracy = baseline_model.evaluate(x=x_test, y=y_test, verbose=0)
print(f"Test accuracy: {round(test_accuracy * 100, 2)}%")


def generate_random_instances(num_instances):
    token_probability = x_train.mean(axis=0)
    instances = []
    for _ in range(num_instances):
        probabilities = np.random.uniform(size=len(token_probability))
        instances.append((probabilities <= token_probability).astype(int))
    return np.array(instances)


def display_class_probabilities(probabilities):
    for instance_idx, probs in enumerate(probabilities):
        print(f"Instance {instance_idx + 1}:")
        for class_idx, prob in enumerate(probs):
            print(f"- {class_values[class_idx]}: {round(prob * 100, 2)}%")


new_instances = generate_random_instances(num_classes)
logits = baseline_model.predict(new_instances)
probabilities = ops.convert_to_numpy(keras.activations.softmax(ops.convert_to_tensor(logits)))
display_class_probabilities(probabilities[:2])

# the graph: edges [2, num_edges] (source: the citing paper, target: the cited one)
edges = np.stack([citing, cited])
edge_weights = ops.ones(shape=edges.shape[1])
node_features = ops.cast(words, dtype="float32")
graph_info = (node_features, edges, edge_weights)
print("Edges shape:", edges.shape)
print("Nodes shape:", node_features.shape)


class GraphConvLayer(layers.Layer):
    def __init__(self, hidden_units, dropout_rate=0.2, aggregation_type="mean",
                 combination_type="concat", normalize=False, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.aggregation_type = aggregation_type
        self.combination_type = combination_type
        self.normalize = normalize
        self.ffn_prepare = create_ffn(hidden_units, dropout_rate)
        if self.combination_type == "gru":
            self.update_fn = layers.GRU(units=hidden_units[-1], activation="tanh",
                                        recurrent_activation="sigmoid", dropout=dropout_rate,
                                        return_sequences=True, recurrent_dropout=dropout_rate)
        else:
            self.update_fn = create_ffn(hidden_units, dropout_rate)

    def prepare(self, node_repesentations, weights=None):
        messages = self.ffn_prepare(node_repesentations)
        if weights is not None:
            messages = messages * ops.expand_dims(weights, -1)
        return messages

    def aggregate(self, node_indices, neighbour_messages, node_repesentations):
        num_nodes = node_repesentations.shape[0]
        if self.aggregation_type == "sum":
            return ops.segment_sum(neighbour_messages, node_indices, num_segments=num_nodes)
        if self.aggregation_type == "mean":
            total = ops.segment_sum(neighbour_messages, node_indices, num_segments=num_nodes)
            count = ops.segment_sum(ops.ones_like(neighbour_messages[:, :1]), node_indices,
                                    num_segments=num_nodes)
            return total / ops.maximum(count, 1.0)
        if self.aggregation_type == "max":
            return ops.segment_max(neighbour_messages, node_indices, num_segments=num_nodes)
        raise ValueError(f"Invalid aggregation type: {self.aggregation_type}.")

    def update(self, node_repesentations, aggregated_messages):
        if self.combination_type == "gru":
            h = ops.stack([node_repesentations, aggregated_messages], axis=1)
        elif self.combination_type == "concat":
            h = ops.concatenate([node_repesentations, aggregated_messages], axis=1)
        elif self.combination_type == "add":
            h = node_repesentations + aggregated_messages
        else:
            raise ValueError(f"Invalid combination type: {self.combination_type}.")
        node_embeddings = self.update_fn(h)
        if self.combination_type == "gru":
            node_embeddings = ops.unstack(node_embeddings, axis=1)[-1]
        if self.normalize:
            node_embeddings = ops.normalize(node_embeddings, axis=-1)
        return node_embeddings

    def call(self, inputs):
        node_repesentations, edges, edge_weights = inputs
        node_indices, neighbour_indices = edges[0], edges[1]
        neighbour_repesentations = ops.take(node_repesentations, neighbour_indices, axis=0)
        neighbour_messages = self.prepare(neighbour_repesentations, edge_weights)
        aggregated_messages = self.aggregate(node_indices, neighbour_messages,
                                             node_repesentations)
        return self.update(node_repesentations, aggregated_messages)


class GNNNodeClassifier(keras.Model):
    def __init__(self, graph_info, num_classes, hidden_units, aggregation_type="sum",
                 combination_type="concat", dropout_rate=0.2, normalize=True, *args, **kwargs):
        super().__init__(*args, **kwargs)
        node_features, edges, edge_weights = graph_info
        self.node_features = node_features
        self.edges = edges
        self.edge_weights = edge_weights
        if self.edge_weights is None:
            self.edge_weights = ops.ones(shape=edges.shape[1])
        self.edge_weights = self.edge_weights / ops.sum(self.edge_weights)
        self.preprocess = create_ffn(hidden_units, dropout_rate, name="preprocess")
        self.conv1 = GraphConvLayer(hidden_units, dropout_rate, aggregation_type,
                                    combination_type, normalize, name="graph_conv1")
        self.conv2 = GraphConvLayer(hidden_units, dropout_rate, aggregation_type,
                                    combination_type, normalize, name="graph_conv2")
        self.postprocess = create_ffn(hidden_units, dropout_rate, name="postprocess")
        self.compute_logits = layers.Dense(units=num_classes, name="logits")

    def call(self, input_node_indices):
        x = self.preprocess(self.node_features)
        x1 = self.conv1((x, self.edges, self.edge_weights))
        x = x1 + x
        x2 = self.conv2((x, self.edges, self.edge_weights))
        x = x2 + x
        x = self.postprocess(x)
        node_embeddings = ops.take(x, input_node_indices, axis=0)
        return self.compute_logits(node_embeddings)


gnn_model = GNNNodeClassifier(graph_info=graph_info, num_classes=num_classes,
                              hidden_units=hidden_units, dropout_rate=dropout_rate,
                              name="gnn_model")
print("GNN output shape:", gnn_model(np.array([1, 10, 100])).shape)
gnn_model.summary()

x_train = train_ids
history = run_experiment(gnn_model, x_train, y_train)
print("val_acc:", [round(v, 3) for v in history.history["val_acc"]])
x_test = test_ids
_, test_accuracy = gnn_model.evaluate(x=x_test, y=y_test, verbose=0)
print(f"Test accuracy: {round(test_accuracy * 100, 2)}%")

# new papers, each citing 5 papers of one subject and 2 of any, added to the held graph
num_nodes = node_features.shape[0]
new_node_features = np.concatenate([ops.convert_to_numpy(node_features), new_instances])
new_node_indices = [i + num_nodes for i in range(num_classes)]
new_citations = []
for subject_idx in range(num_classes):
    subject_papers = list(np.flatnonzero(subjects == subject_idx))
    selected = np.concatenate([np.random.choice(subject_papers, 5),
                               np.random.choice(np.arange(NUM_PAPERS), 2)])
    for cited_paper_idx in selected:
        new_citations.append([new_node_indices[subject_idx], cited_paper_idx])
new_citations = np.array(new_citations).T
new_edges = np.concatenate([edges, new_citations], axis=1)

print("Original node_features shape:", gnn_model.node_features.shape)
print("Original edges shape:", gnn_model.edges.shape)
gnn_model.node_features = new_node_features
gnn_model.edges = new_edges
gnn_model.edge_weights = ops.ones(shape=new_edges.shape[1])
print("New node_features shape:", gnn_model.node_features.shape)
print("New edges shape:", gnn_model.edges.shape)

logits = gnn_model.predict(ops.convert_to_tensor(new_node_indices))
probabilities = ops.convert_to_numpy(keras.activations.softmax(ops.convert_to_tensor(logits)))
display_class_probabilities(probabilities[:2])
# the first predict reads the graph held now (its new nodes exist), as Keras's predict
# function traced at its first call
assert logits.shape == (num_classes, num_classes), logits.shape
print("subjects the new papers cite most, predicted:",
      int(np.sum(np.argmax(probabilities, axis=1) == np.arange(num_classes))), "of", num_classes)
