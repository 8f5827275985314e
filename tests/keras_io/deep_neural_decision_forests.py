# Modeled on keras-io examples/structured_data/deep_neural_decision_forests.py (Keras 3: a
# dict of scalar Inputs, float32 numeric and int32 categorical ones, an Embedding per
# categorical column, ops.expand_dims and layers.concatenate on the graph's tensors,
# BatchNormalization, then a NeuralDecisionTree written as a keras.Model subclass: a feature
# mask made with ops.convert_to_tensor in __init__, leaf class weights from add_weight in
# __init__, a sigmoid routing Dense, ops.tile / ops.reshape / slicing down the levels of the
# tree with the batch size from ops.shape, a softmax of the leaves; a NeuralDecisionForest
# averaging a list of trees held by a Model; Adam, SparseCategoricalCrossentropy on
# probabilities, SparseCategoricalAccuracy); written for tessera. In place of the UCI census
# download, pandas, the CSV files, StringLookup and tf.data's make_csv_dataset: 2,000 + 500
# generated rows with the census's 5 numeric (standardized) and 8 categorical columns (as
# vocabulary ids, the census's vocabulary sizes), the label the top quarter of a fixed score,
# and a keras.utils.PyDataset of (features, target) batches. Each Embedding is sized by its
# own column's vocabulary (the example reads `lookup.vocabulary_size()` of the loop's last
# lookup for all of them). The tree: depth 6 (10); the forest: 10 trees (25) of depth 4 (5);
# batches of 265 as the example, 6 epochs each (10).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

NUMERIC_FEATURE_NAMES = ["age", "education_num", "capital_gain", "capital_loss",
                         "hours_per_week"]
VOCABULARY_SIZES = {"workclass": 9, "education": 16, "marital_status": 7, "occupation": 15,
                    "relationship": 6, "race": 5, "gender": 2, "native_country": 42}
CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    name: [f"{name}_{i}" for i in range(size)] for name, size in VOCABULARY_SIZES.items()}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
TARGET_LABELS = [" <=50K", " >50K"]

rng = np.random.default_rng(5)
numeric_weights = rng.normal(size=len(NUMERIC_FEATURE_NAMES))
category_weights = {name: 1.5 * rng.normal(size=size) for name, size in VOCABULARY_SIZES.items()}


def census(n):
    numbers = rng.normal(size=(n, len(NUMERIC_FEATURE_NAMES)))
    rows = {name: numbers[:, i].astype("float32") for i, name in enumerate(NUMERIC_FEATURE_NAMES)}
    score = numbers @ numeric_weights
    for name, size in VOCABULARY_SIZES.items():
        ids = rng.integers(0, size, n)
        rows[name] = ids.astype("int32")
        score = score + category_weights[name][ids]
    target = (score > np.quantile(score, 0.75)).astype("int32")
    return rows, target


train_data, train_target = census(2000)
test_data, test_target = census(500)
print(f"Train dataset shape: {(len(train_target), len(train_data) + 1)}")
print(f"Test dataset shape: {(len(test_target), len(test_data) + 1)}")


class CensusBatches(keras.utils.PyDataset):
    """(features, target) batches, as the example's make_csv_dataset pipeline gives."""

    def __init__(self, rows, target, batch_size, shuffle=False, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.target = rows, target
        self.batch_size, self.shuffle = batch_size, shuffle
        self.order = np.arange(len(target))

    def __len__(self):
        return math.ceil(len(self.target) / self.batch_size)

    def __getitem__(self, idx):
        take = self.order[idx * self.batch_size:(idx + 1) * self.batch_size]
        return {name: self.rows[name][take] for name in FEATURE_NAMES}, self.target[take]

    def on_epoch_end(self):
        if self.shuffle:
            np.random.shuffle(self.order)


def create_model_inputs():
    inputs = {}
    for feature_name in FEATURE_NAMES:
        if feature_name in NUMERIC_FEATURE_NAMES:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
        else:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="int32")
    return inputs


def encode_inputs(inputs):
    encoded_features = []
    for feature_name in inputs:
        if feature_name in CATEGORICAL_FEATURE_NAMES:
            vocabulary_size = len(CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name])
            embedding_dims = int(math.sqrt(vocabulary_size))
            embedding = layers.Embedding(input_dim=vocabulary_size, output_dim=embedding_dims)
            encoded_feature = embedding(inputs[feature_name])
        else:
            encoded_feature = inputs[feature_name]
            if inputs[feature_name].shape[-1] is None:
                encoded_feature = keras.ops.expand_dims(encoded_feature, -1)
        encoded_features.append(encoded_feature)

    return layers.concatenate(encoded_features)


class NeuralDecisionTree(keras.Model):
    def __init__(self, depth, num_features, used_features_rate, num_classes):
        super().__init__()
        self.depth = depth
        self.num_leaves = 2**depth
        self.num_classes = num_classes

        # A mask selecting a random subset of the features.
        num_used_features = int(num_features * used_features_rate)
        one_hot = np.eye(num_features)
        sampled_feature_indices = np.random.choice(np.arange(num_features), num_used_features,
                                                   replace=False)
        self.used_features_mask = ops.convert_to_tensor(one_hot[sampled_feature_indices],
                                                        dtype="float32")

        # The class weights of the leaves.
        self.pi = self.add_weight(initializer="random_normal",
                                  shape=[self.num_leaves, self.num_classes], dtype="float32",
                                  trainable=True)

        # The stochastic routing layer.
        self.decision_fn = layers.Dense(units=self.num_leaves, activation="sigmoid",
                                        name="decision")

    def call(self, features):
        batch_size = ops.shape(features)[0]

        features = ops.matmul(features, ops.transpose(self.used_features_mask))
        decisions = ops.expand_dims(self.decision_fn(features), axis=2)
        decisions = layers.concatenate([decisions, 1 - decisions], axis=2)

        mu = ops.ones([batch_size, 1, 1])

        begin_idx = 1
        end_idx = 2
        # Down the tree, breadth first.
        for level in range(self.depth):
            mu = ops.reshape(mu, [batch_size, -1, 1])
            mu = ops.tile(mu, (1, 1, 2))
            level_decisions = decisions[:, begin_idx:end_idx, :]
            mu = mu * level_decisions
            begin_idx = end_idx
            end_idx = begin_idx + 2 ** (level + 1)

        mu = ops.reshape(mu, [batch_size, self.num_leaves])
        probabilities = keras.activations.softmax(self.pi)
        return ops.matmul(mu, probabilities)


class NeuralDecisionForest(keras.Model):
    def __init__(self, num_trees, depth, num_features, used_features_rate, num_classes):
        super().__init__()
        self.ensemble = []
        for _ in range(num_trees):
            self.ensemble.append(
                NeuralDecisionTree(depth, num_features, used_features_rate, num_classes))

    def call(self, inputs):
        batch_size = ops.shape(inputs)[0]
        outputs = ops.zeros([batch_size, num_classes])

        for tree in self.ensemble:
            outputs += tree(inputs)
        outputs /= len(self.ensemble)
        return outputs


learning_rate = 0.01
batch_size = 265
num_epochs = 6


def run_experiment(model):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )

    print("Start training the model...")
    train_dataset = CensusBatches(train_data, train_target, batch_size, shuffle=True)
    model.fit(train_dataset, epochs=num_epochs)
    print("Model training finished")

    print("Evaluating the model on the test data...")
    test_dataset = CensusBatches(test_data, test_target, batch_size)
    _, accuracy = model.evaluate(test_dataset)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    return accuracy


num_trees = 10
depth = 6
used_features_rate = 1.0
num_classes = len(TARGET_LABELS)


def create_tree_model():
    inputs = create_model_inputs()
    features = encode_inputs(inputs)
    features = layers.BatchNormalization()(features)
    num_features = features.shape[1]

    tree = NeuralDecisionTree(depth, num_features, used_features_rate, num_classes)

    outputs = tree(features)
    return keras.Model(inputs=inputs, outputs=outputs)


tree_model = create_tree_model()
tree_accuracy = run_experiment(tree_model)

num_trees = 10
depth = 4
used_features_rate = 0.5


def create_forest_model():
    inputs = create_model_inputs()
    features = encode_inputs(inputs)
    features = layers.BatchNormalization()(features)
    num_features = features.shape[1]

    forest_model = NeuralDecisionForest(num_trees, depth, num_features, used_features_rate,
                                        num_classes)

    outputs = forest_model(features)
    return keras.Model(inputs=inputs, outputs=outputs)


forest_model = create_forest_model()
forest_accuracy = run_experiment(forest_model)

# Checks (not in the example): the tree's leaves and routing are weights of the model, and
# the forest's output rows are class distributions.
assert len(tree_model.trainable_weights) == 8 + 2 + 1 + 2, len(tree_model.trainable_weights)
probabilities = forest_model.predict({name: test_data[name][:8] for name in FEATURE_NAMES},
                                     verbose=0)
assert probabilities.shape == (8, num_classes)
np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
