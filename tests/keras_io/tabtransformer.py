# Modeled on keras-io examples/structured_data/tabtransformer.py (Keras 3: a dict of scalar
# float32 Inputs, categorical ones fed as float ids to Embedding, ops.expand_dims and
# ops.stack on the graph's tensors, MLPs built as Sequentials from a normalization class or a
# functools.partial of one, gelu and selu activations, MultiHeadAttention blocks with named
# Add/LayerNormalization layers, an optional column embedding of ops.arange added to the
# graph's tensor, AdamW, BinaryCrossentropy with the census rows' sample weights); written for
# tessera. In place of the UCI census download, pandas, the CSV files, StringLookup and
# tf.data's make_csv_dataset: 2,400 + 600 generated rows with the data set's 5 numeric
# (standardized) and 8 categorical columns (as vocabulary ids, the sizes of the census's
# vocabularies), a positive `fnlwgt` weight column (scaled to mean 1: the census's raw weights
# of ~1e5 would only scale the loss), the label the top quarter of a fixed score; a
# keras.utils.PyDataset of (features, target, weights) batches in place of the tf.data
# pipeline; embedding 8 (16), 2 transformer blocks (3), 3 epochs per model (15).
import math
from functools import partial

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
WEIGHT_COLUMN_NAME = "fnlwgt"
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
TARGET_LABELS = [" <=50K", " >50K"]

rng = np.random.default_rng(3)
numeric_weights = rng.normal(size=len(NUMERIC_FEATURE_NAMES))
category_weights = {name: 1.5 * rng.normal(size=size) for name, size in VOCABULARY_SIZES.items()}


def census(n):
    numbers = rng.normal(size=(n, len(NUMERIC_FEATURE_NAMES)))
    rows = {name: numbers[:, i].astype("float32") for i, name in enumerate(NUMERIC_FEATURE_NAMES)}
    score = numbers @ numeric_weights
    for name, size in VOCABULARY_SIZES.items():
        ids = rng.integers(0, size, n)
        rows[name] = ids.astype("float32")
        score = score + category_weights[name][ids]
    rows[WEIGHT_COLUMN_NAME] = rng.lognormal(0.0, 0.4, n).astype("float32")
    target = (score > np.quantile(score, 0.75)).astype("float32")
    return rows, target


train_data, train_target = census(2400)
test_data, test_target = census(600)
print(f"Train dataset shape: {(len(train_target), len(train_data) + 1)}")
print(f"Test dataset shape: {(len(test_target), len(test_data) + 1)}")

LEARNING_RATE = 0.001
WEIGHT_DECAY = 0.0001
DROPOUT_RATE = 0.2
BATCH_SIZE = 265
NUM_EPOCHS = 3

NUM_TRANSFORMER_BLOCKS = 2
NUM_HEADS = 4
EMBEDDING_DIMS = 8
MLP_HIDDEN_UNITS_FACTORS = [2, 1]
NUM_MLP_BLOCKS = 2


class CensusBatches(keras.utils.PyDataset):
    """(features, target, weights) batches, as the example's tf.data pipeline gives."""

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


def run_experiment(model, num_epochs, learning_rate, weight_decay, batch_size):
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)

    model.compile(
        optimizer=optimizer,
        loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.BinaryAccuracy(name="accuracy")],
    )

    train_dataset = CensusBatches(train_data, train_target, batch_size, shuffle=True)
    validation_dataset = CensusBatches(test_data, test_target, batch_size)

    print("Start training the model...")
    history = model.fit(train_dataset, epochs=num_epochs, validation_data=validation_dataset)
    print("Model training finished")

    _, accuracy = model.evaluate(validation_dataset, verbose=0)

    print(f"Validation accuracy: {round(accuracy * 100, 2)}%")

    return history


def create_model_inputs():
    inputs = {}
    for feature_name in FEATURE_NAMES:
        inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
    return inputs


def encode_inputs(inputs, embedding_dims):
    encoded_categorical_feature_list = []
    numerical_feature_list = []

    for feature_name in inputs:
        if feature_name in CATEGORICAL_FEATURE_NAMES:
            vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
            embedding = layers.Embedding(input_dim=len(vocabulary), output_dim=embedding_dims)
            encoded_categorical_feature_list.append(embedding(inputs[feature_name]))
        else:
            numerical_feature_list.append(ops.expand_dims(inputs[feature_name], -1))

    return encoded_categorical_feature_list, numerical_feature_list


def create_mlp(hidden_units, dropout_rate, activation, normalization_layer, name=None):
    mlp_layers = []
    for units in hidden_units:
        mlp_layers.append(normalization_layer())
        mlp_layers.append(layers.Dense(units, activation=activation))
        mlp_layers.append(layers.Dropout(dropout_rate))

    return keras.Sequential(mlp_layers, name=name)


def create_baseline_model(embedding_dims, num_mlp_blocks, mlp_hidden_units_factors,
                          dropout_rate):
    inputs = create_model_inputs()
    encoded_categorical_feature_list, numerical_feature_list = encode_inputs(
        inputs, embedding_dims)
    features = layers.concatenate(encoded_categorical_feature_list + numerical_feature_list)
    feedforward_units = [features.shape[-1]]

    for layer_idx in range(num_mlp_blocks):
        features = create_mlp(
            hidden_units=feedforward_units,
            dropout_rate=dropout_rate,
            activation=keras.activations.gelu,
            normalization_layer=layers.LayerNormalization,
            name=f"feedforward_{layer_idx}",
        )(features)

    mlp_hidden_units = [factor * features.shape[-1] for factor in mlp_hidden_units_factors]
    features = create_mlp(
        hidden_units=mlp_hidden_units,
        dropout_rate=dropout_rate,
        activation=keras.activations.selu,
        normalization_layer=layers.BatchNormalization,
        name="MLP",
    )(features)

    outputs = layers.Dense(units=1, activation="sigmoid", name="sigmoid")(features)
    return keras.Model(inputs=inputs, outputs=outputs)


baseline_model = create_baseline_model(
    embedding_dims=EMBEDDING_DIMS,
    num_mlp_blocks=NUM_MLP_BLOCKS,
    mlp_hidden_units_factors=MLP_HIDDEN_UNITS_FACTORS,
    dropout_rate=DROPOUT_RATE,
)

print("Total model weights:", baseline_model.count_params())
history = run_experiment(baseline_model, NUM_EPOCHS, LEARNING_RATE, WEIGHT_DECAY, BATCH_SIZE)


def create_tabtransformer_classifier(num_transformer_blocks, num_heads, embedding_dims,
                                     mlp_hidden_units_factors, dropout_rate,
                                     use_column_embedding=False):
    inputs = create_model_inputs()
    encoded_categorical_feature_list, numerical_feature_list = encode_inputs(
        inputs, embedding_dims)
    encoded_categorical_features = ops.stack(encoded_categorical_feature_list, axis=1)
    numerical_features = layers.concatenate(numerical_feature_list)

    if use_column_embedding:
        num_columns = encoded_categorical_features.shape[1]
        column_embedding = layers.Embedding(input_dim=num_columns, output_dim=embedding_dims)
        column_indices = ops.arange(start=0, stop=num_columns, step=1)
        encoded_categorical_features = encoded_categorical_features + column_embedding(
            column_indices)

    for block_idx in range(num_transformer_blocks):
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads,
            key_dim=embedding_dims,
            dropout=dropout_rate,
            name=f"multihead_attention_{block_idx}",
        )(encoded_categorical_features, encoded_categorical_features)
        x = layers.Add(name=f"skip_connection1_{block_idx}")(
            [attention_output, encoded_categorical_features])
        x = layers.LayerNormalization(name=f"layer_norm1_{block_idx}", epsilon=1e-6)(x)
        feedforward_output = create_mlp(
            hidden_units=[embedding_dims],
            dropout_rate=dropout_rate,
            activation=keras.activations.gelu,
            normalization_layer=partial(layers.LayerNormalization, epsilon=1e-6),
            name=f"feedforward_{block_idx}",
        )(x)
        x = layers.Add(name=f"skip_connection2_{block_idx}")([feedforward_output, x])
        encoded_categorical_features = layers.LayerNormalization(
            name=f"layer_norm2_{block_idx}", epsilon=1e-6)(x)

    categorical_features = layers.Flatten()(encoded_categorical_features)
    numerical_features = layers.LayerNormalization(epsilon=1e-6)(numerical_features)
    features = layers.concatenate([categorical_features, numerical_features])

    mlp_hidden_units = [factor * features.shape[-1] for factor in mlp_hidden_units_factors]
    features = create_mlp(
        hidden_units=mlp_hidden_units,
        dropout_rate=dropout_rate,
        activation=keras.activations.selu,
        normalization_layer=layers.BatchNormalization,
        name="MLP",
    )(features)

    outputs = layers.Dense(units=1, activation="sigmoid", name="sigmoid")(features)
    return keras.Model(inputs=inputs, outputs=outputs)


# The column embedding is the example's option (off in its run): built and called here so
# that its path runs too.
with_columns = create_tabtransformer_classifier(
    num_transformer_blocks=1, num_heads=NUM_HEADS, embedding_dims=EMBEDDING_DIMS,
    mlp_hidden_units_factors=MLP_HIDDEN_UNITS_FACTORS, dropout_rate=DROPOUT_RATE,
    use_column_embedding=True)
print("With column embedding:", with_columns.count_params(), "weights,",
      with_columns.predict(CensusBatches(test_data, test_target, BATCH_SIZE), verbose=0).shape)

tabtransformer_model = create_tabtransformer_classifier(
    num_transformer_blocks=NUM_TRANSFORMER_BLOCKS,
    num_heads=NUM_HEADS,
    embedding_dims=EMBEDDING_DIMS,
    mlp_hidden_units_factors=MLP_HIDDEN_UNITS_FACTORS,
    dropout_rate=DROPOUT_RATE,
)

print("Total model weights:", tabtransformer_model.count_params())
history = run_experiment(tabtransformer_model, NUM_EPOCHS, LEARNING_RATE, WEIGHT_DECAY,
                         BATCH_SIZE)
