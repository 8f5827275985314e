# Modeled on keras-io examples/structured_data/classification_with_grn_and_vsn.py (Keras 3,
# backend-agnostic form: a dict of scalar Inputs, int64 categorical and float32 numeric; a
# GatedLinearUnit, a GatedResidualNetwork (elu Dense, Dropout, a projection when the width
# changes, LayerNormalization) and a VariableSelection layer holding dicts of Embedding and
# Dense layers and a list of GRNs, called on the dict of Inputs, clipping the ids with
# ops.clip, a softmax over the features' weights and ops.stack; a `build(self)` that only sets
# `self.built`; Adam, BinaryCrossentropy with the rows' instance weights, EarlyStopping
# restoring the best weights); written for tessera. In place of the UCI census-income (KDD)
# download, pandas, the CSV files, StringLookup and tf.data's make_csv_dataset: 2,000 + 400 +
# 400 generated rows with the data set's 7 numeric columns and 10 of its 34 categorical ones
# (as vocabulary ids, sizes of the census's vocabularies), a positive instance weight (scaled
# to mean 1) and the label the top fifth of a fixed score; a keras.utils.PyDataset of
# (features, target, weight) batches. The example's last step, written per backend (jnp.sum /
# torch.sum / tf.matmul of the feature weights and the GRNs' outputs), is here its
# backend-agnostic meaning: ops.sum(v * x, axis=1). 4 epochs (1).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers

TARGET_FEATURE_NAME = "income_level"
WEIGHT_COLUMN_NAME = "instance_weight"
NUMERIC_FEATURE_NAMES = ["age", "wage_per_hour", "capital_gains", "capital_losses",
                         "dividends_from_stocks", "num_persons_worked_for_employer",
                         "weeks_worked_in_year"]
VOCABULARY_SIZES = {"class_of_worker": 9, "education": 17, "marital_stat": 7,
                    "major_industry_code": 24, "major_occupation_code": 15, "race": 5,
                    "sex": 2, "tax_filer_stat": 6, "citizenship": 5, "year": 2}
CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    name: [f"v={i}" for i in range(size)] for name, size in VOCABULARY_SIZES.items()}
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())

rng = np.random.default_rng(11)
numeric_weights = rng.normal(size=len(NUMERIC_FEATURE_NAMES))
category_weights = {name: 1.5 * rng.normal(size=size) for name, size in VOCABULARY_SIZES.items()}


def census(n):
    numbers = rng.normal(size=(n, len(NUMERIC_FEATURE_NAMES)))
    rows = {name: numbers[:, i].astype("float32") for i, name in enumerate(NUMERIC_FEATURE_NAMES)}
    score = numbers @ numeric_weights
    for name, size in VOCABULARY_SIZES.items():
        ids = rng.integers(0, size, n)
        rows[name] = ids.astype("int64")
        score = score + category_weights[name][ids]
    rows[WEIGHT_COLUMN_NAME] = rng.lognormal(0.0, 0.3, n).astype("float32")
    target = (score > np.quantile(score, 0.8)).astype("float32")
    return rows, target


data, data_target = census(2400)
test_data, test_target = census(400)
print(f"Data shape: {(len(data_target), len(data) + 1)}")
print(f"Test data shape: {(len(test_target), len(test_data) + 1)}")

random_selection = np.random.rand(len(data_target)) <= 0.85
train_data = {name: column[random_selection] for name, column in data.items()}
train_target = data_target[random_selection]
valid_data = {name: column[~random_selection] for name, column in data.items()}
valid_target = data_target[~random_selection]


class CensusBatches(keras.utils.PyDataset):
    """(features, target, weight) batches, as the example's tf.data pipeline gives."""

    def __init__(self, rows, target, batch_size, shuffle=False, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.target = rows, target
        self.batch_size, self.shuffle = batch_size, shuffle
        self.order = np.arange(len(target))

    def __len__(self):
        return math.ceil(len(self.target) / self.batch_size)

    def __getitem__(self, idx):
        take = self.order[idx * self.batch_size:(idx + 1) * self.batch_size]
        features = {name: self.rows[name][take] for name in FEATURE_NAMES}
        return features, self.target[take], self.rows[WEIGHT_COLUMN_NAME][take]

    def on_epoch_end(self):
        if self.shuffle:
            np.random.shuffle(self.order)


def get_dataset(rows, target, shuffle=False, batch_size=128):
    return CensusBatches(rows, target, batch_size, shuffle=shuffle)


def create_model_inputs():
    inputs = {}
    for feature_name in FEATURE_NAMES:
        if feature_name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="int64")
        else:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
    return inputs


class GatedLinearUnit(layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.linear = layers.Dense(units)
        self.sigmoid = layers.Dense(units, activation="sigmoid")

    def call(self, inputs):
        return self.linear(inputs) * self.sigmoid(inputs)


class GatedResidualNetwork(layers.Layer):
    def __init__(self, units, dropout_rate):
        super().__init__()
        self.units = units
        self.elu_dense = layers.Dense(units, activation="elu")
        self.linear_dense = layers.Dense(units)
        self.dropout = layers.Dropout(dropout_rate)
        self.gated_linear_unit = GatedLinearUnit(units)
        self.layer_norm = layers.LayerNormalization()
        self.project = layers.Dense(units)

    def call(self, inputs):
        x = self.elu_dense(inputs)
        x = self.linear_dense(x)
        x = self.dropout(x)
        if inputs.shape[-1] != self.units:
            inputs = self.project(inputs)
        x = inputs + self.gated_linear_unit(x)
        x = self.layer_norm(x)
        return x


class VariableSelection(layers.Layer):
    def __init__(self, num_features, units, dropout_rate):
        super().__init__()
        self.units = units
        self.embeddings = dict()
        for input_ in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[input_]
            self.embeddings[input_] = layers.Embedding(input_dim=len(vocabulary),
                                                       output_dim=self.units, name=input_)

        self.proj_layer = dict()
        for input_ in NUMERIC_FEATURE_NAMES:
            self.proj_layer[input_] = layers.Dense(units=self.units)

        self.grns = list()
        for idx in range(num_features):
            self.grns.append(GatedResidualNetwork(units, dropout_rate))
        self.grn_concat = GatedResidualNetwork(units, dropout_rate)
        self.softmax = layers.Dense(units=num_features, activation="softmax")

    def call(self, inputs):
        concat_inputs = []
        for input_ in inputs:
            if input_ in CATEGORICAL_FEATURES_WITH_VOCABULARY:
                max_index = self.embeddings[input_].input_dim - 1
                embedded_feature = self.embeddings[input_](
                    keras.ops.clip(inputs[input_], 0, max_index))
                concat_inputs.append(embedded_feature)
            else:
                proj_feature = keras.ops.expand_dims(inputs[input_], -1)
                proj_feature = self.proj_layer[input_](proj_feature)
                concat_inputs.append(proj_feature)

        v = layers.concatenate(concat_inputs)
        v = self.grn_concat(v)
        v = keras.ops.expand_dims(self.softmax(v), axis=-1)
        x = []
        for idx, input in enumerate(concat_inputs):
            x.append(self.grns[idx](input))
        x = keras.ops.stack(x, axis=1)
        return keras.ops.sum(v * x, axis=1)

    def build(self):
        self.built = True


def create_model(encoding_size):
    inputs = create_model_inputs()
    num_features = len(inputs)
    features = VariableSelection(num_features, encoding_size, dropout_rate)(inputs)
    outputs = layers.Dense(units=1, activation="sigmoid")(features)
    return keras.Model(inputs=inputs, outputs=outputs)


learning_rate = 0.001
dropout_rate = 0.15
batch_size = 265
num_epochs = 4
encoding_size = 16

model = create_model(encoding_size)
model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
    loss=keras.losses.BinaryCrossentropy(),
    metrics=[keras.metrics.BinaryAccuracy(name="accuracy")],
)

early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=5,
                                               restore_best_weights=True)

print("Start training the model...")
train_dataset = get_dataset(train_data, train_target, shuffle=True, batch_size=batch_size)
valid_dataset = get_dataset(valid_data, valid_target, batch_size=batch_size)
model.fit(train_dataset, epochs=num_epochs, validation_data=valid_dataset,
          callbacks=[early_stopping])
print("Model training finished.")

print("Evaluating model performance...")
test_dataset = get_dataset(test_data, test_target, batch_size=batch_size)
_, accuracy = model.evaluate(test_dataset)
print(f"Test accuracy: {round(accuracy * 100, 2)}%")

# Checks (not in the example): the selection weights are a distribution over the features,
# and the model holds the layers it was built from (17 per-feature GRNs, their projections unused
# and so never built, and one on the concatenation).
selection = model.layers[-2]
assert len(selection.grns) == len(FEATURE_NAMES)
assert len(model.trainable_weights) == (len(VOCABULARY_SIZES) + 2 * len(NUMERIC_FEATURE_NAMES)
                                        + 17 * 10 + 12 + 2 + 2), len(model.trainable_weights)
