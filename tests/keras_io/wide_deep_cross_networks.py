# Modeled on keras-io examples/structured_data/wide_deep_cross_networks.py (Keras 3 form: a
# dict of scalar Inputs, ops.expand_dims on the graph's tensors, the sparse and dense
# encodings, the Wide & Deep and Deep & Cross models); written for tessera. In place of the
# Covertype download, pandas and tf.data's make_csv_dataset: a dict of 4,000 generated rows
# with the 10 numeric (standardized: Covertype's raw ones span 0 to 7,000) and 2 categorical
# columns (40 soil types, 4 wilderness areas), each cover type of 7 the argmax of a fixed
# linear score of the numbers and the categories' own weights; the arrays given to fit and
# evaluate in batches of 265. The categories come as integer ids: StringLookup (TensorFlow
# under Keras) is replaced by the ids themselves, CategoryEncoding(one_hot) for the lookup's
# one-hot ("binary") encoding and Embedding for its "int" one; 6 epochs per model (50 there).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

NUMERIC_FEATURE_NAMES = [
    "Aspect",
    "Elevation",
    "Hillshade_3pm",
    "Hillshade_9am",
    "Hillshade_Noon",
    "Horizontal_Distance_To_Fire_Points",
    "Horizontal_Distance_To_Hydrology",
    "Horizontal_Distance_To_Roadways",
    "Slope",
    "Vertical_Distance_To_Hydrology",
]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    "Soil_Type": [f"soil_type_{idx + 1}" for idx in range(40)],
    "Wilderness_Area": [f"area_type_{idx + 1}" for idx in range(4)],
}
CATEGORICAL_FEATURE_NAMES = list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + CATEGORICAL_FEATURE_NAMES
TARGET_FEATURE_LABELS = ["0", "1", "2", "3", "4", "5", "6"]
NUM_CLASSES = len(TARGET_FEATURE_LABELS)

rng = np.random.default_rng(0)
numeric_weights = rng.normal(size=(len(NUMERIC_FEATURE_NAMES), NUM_CLASSES))
category_weights = {name: rng.normal(size=(len(vocab), NUM_CLASSES))
                    for name, vocab in CATEGORICAL_FEATURES_WITH_VOCABULARY.items()}


def covertype(n):
    standard = rng.normal(size=(n, len(NUMERIC_FEATURE_NAMES)))
    data = {name: standard[:, i].astype("float32") for i, name in enumerate(NUMERIC_FEATURE_NAMES)}
    score = standard @ numeric_weights
    for name, vocab in CATEGORICAL_FEATURES_WITH_VOCABULARY.items():
        ids = rng.integers(0, len(vocab), n)
        data[name] = ids.astype("int32")
        score += category_weights[name][ids]
    return data, np.argmax(score, axis=1)


train_data, train_labels = covertype(3400)
test_data, test_labels = covertype(600)
print(f"Train split size: {len(train_labels)}")
print(f"Test split size: {len(test_labels)}")

learning_rate = 0.001
dropout_rate = 0.1
batch_size = 265
num_epochs = 6

hidden_units = [32, 32]


def run_experiment(model):
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )

    print("Start training the model...")
    history = model.fit(train_data, train_labels, batch_size=batch_size, epochs=num_epochs)
    print("Model training finished")

    _, accuracy = model.evaluate(test_data, test_labels, batch_size=batch_size, verbose=0)

    print(f"Test accuracy: {round(accuracy * 100, 2)}%")


def create_model_inputs():
    inputs = {}
    for feature_name in FEATURE_NAMES:
        if feature_name in NUMERIC_FEATURE_NAMES:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="float32")
        else:
            inputs[feature_name] = layers.Input(name=feature_name, shape=(), dtype="int32")
    return inputs


def encode_inputs(inputs, use_embedding=False):
    encoded_features = []
    for feature_name in inputs:
        if feature_name in CATEGORICAL_FEATURE_NAMES:
            vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
            if use_embedding:
                embedding_dims = int(math.sqrt(len(vocabulary)))
                embedding = layers.Embedding(input_dim=len(vocabulary), output_dim=embedding_dims)
                encoded_feature = embedding(inputs[feature_name])
            else:
                one_hot = layers.CategoryEncoding(num_tokens=len(vocabulary),
                                                  output_mode="one_hot")
                encoded_feature = one_hot(ops.expand_dims(inputs[feature_name], -1))
        else:
            encoded_feature = ops.expand_dims(inputs[feature_name], -1)

        encoded_features.append(encoded_feature)

    all_features = layers.concatenate(encoded_features)
    return all_features


def create_baseline_model():
    inputs = create_model_inputs()
    features = encode_inputs(inputs)

    for units in hidden_units:
        features = layers.Dense(units)(features)
        features = layers.BatchNormalization()(features)
        features = layers.ReLU()(features)
        features = layers.Dropout(dropout_rate)(features)

    outputs = layers.Dense(units=NUM_CLASSES, activation="softmax")(features)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


baseline_model = create_baseline_model()
baseline_model.summary()
run_experiment(baseline_model)


def create_wide_and_deep_model():
    inputs = create_model_inputs()
    wide = encode_inputs(inputs)
    wide = layers.BatchNormalization()(wide)

    deep = encode_inputs(inputs, use_embedding=True)
    for units in hidden_units:
        deep = layers.Dense(units)(deep)
        deep = layers.BatchNormalization()(deep)
        deep = layers.ReLU()(deep)
        deep = layers.Dropout(dropout_rate)(deep)

    merged = layers.concatenate([wide, deep])
    outputs = layers.Dense(units=NUM_CLASSES, activation="softmax")(merged)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


wide_and_deep_model = create_wide_and_deep_model()
wide_and_deep_model.summary()
run_experiment(wide_and_deep_model)


def create_deep_and_cross_model():
    inputs = create_model_inputs()
    x0 = encode_inputs(inputs, use_embedding=True)

    cross = x0
    for _ in hidden_units:
        units = cross.shape[-1]
        x = layers.Dense(units)(cross)
        cross = x0 * x + cross
    cross = layers.BatchNormalization()(cross)

    deep = x0
    for units in hidden_units:
        deep = layers.Dense(units)(deep)
        deep = layers.BatchNormalization()(deep)
        deep = layers.ReLU()(deep)
        deep = layers.Dropout(dropout_rate)(deep)

    merged = layers.concatenate([cross, deep])
    outputs = layers.Dense(units=NUM_CLASSES, activation="softmax")(merged)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


deep_and_cross_model = create_deep_and_cross_model()
deep_and_cross_model.summary()
run_experiment(deep_and_cross_model)
