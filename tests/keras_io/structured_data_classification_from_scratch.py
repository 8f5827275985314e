# Modeled on keras-io examples/structured_data/structured_data_classification_from_scratch.py
# (its backend-agnostic Keras 3 form: categorical columns multi-hot encoded in the data
# pipeline ("binary" lookups) and fed as int64 Inputs of their vocabulary's width; each numeric
# column an Input followed by a `Normalization` adapted on that column, whose OUTPUT is put
# in the dict given to `keras.Model` as the model's input (Keras takes such a tensor as a new
# input and cuts the graph there: the normalization is not part of the model, and the raw
# values go in); a `Classifier` user layer with a `build(self, input_shape)` that only sets
# `self.built`, concatenating the dict's int64 and float32 values; "adam",
# "binary_crossentropy", accuracy; predict on one patient's dict of one-element tensors);
# written for tessera. In place of the heart.csv download, pandas, tf.data and the
# IntegerLookup/StringLookup layers (TensorFlow under Keras): 303 generated rows with the
# CSV's columns and value ranges, the label a fixed function of them (so that a model can
# learn it), the 20% validation split drawn with NumPy, a keras.utils.PyDataset of batches of
# 32 of (dict, target) with each categorical column one-hot encoded in NumPy, Normalization
# adapted on the column's array; 20 epochs (50).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers

rng = np.random.default_rng(8)
n = 303
columns = {
    "age": rng.integers(29, 78, n), "sex": rng.integers(0, 2, n), "cp": rng.integers(0, 5, n),
    "trestbps": rng.integers(94, 201, n), "chol": rng.integers(126, 565, n),
    "fbs": rng.integers(0, 2, n), "restecg": rng.integers(0, 3, n),
    "thalach": rng.integers(71, 203, n), "exang": rng.integers(0, 2, n),
    "oldpeak": np.round(rng.uniform(0, 6.2, n), 1), "slope": rng.integers(1, 4, n),
    "ca": rng.integers(0, 4, n),
    "thal": rng.choice(np.array(["normal", "fixed", "reversible", "1", "2"]), n,
                       p=[0.5, 0.1, 0.36, 0.02, 0.02]),
}
risk = (0.04 * (columns["age"] - 54) + 0.8 * columns["sex"] + 0.5 * (columns["cp"] == 0)
        - 0.02 * (columns["thalach"] - 150) + 0.6 * columns["oldpeak"] + 0.7 * columns["ca"]
        + 1.2 * (columns["thal"] == "reversible") + 1.0 * columns["exang"])
columns["target"] = (risk + rng.normal(0, 0.5, n) > np.median(risk)).astype("int64")

COLUMN_NAMES = ["age", "sex", "cp", "trestbps", "chol", "fbs", "restecg", "thalach", "exang",
                "oldpeak", "slope", "ca", "thal", "target"]
TARGET_FEATURE_NAME = "target"
NUMERIC_FEATURE_NAMES = ["age", "trestbps", "thalach", "oldpeak", "slope", "chol"]
CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    name: sorted(int(v) if columns[name].dtype.kind == "i" else str(v)
                 for v in np.unique(columns[name]))
    for name in COLUMN_NAMES if name not in NUMERIC_FEATURE_NAMES + [TARGET_FEATURE_NAME]
}
FEATURE_NAMES = NUMERIC_FEATURE_NAMES + list(CATEGORICAL_FEATURES_WITH_VOCABULARY.keys())

val_rows = np.sort(rng.choice(n, int(0.2 * n), replace=False))
train_rows = np.setdiff1d(np.arange(n), val_rows)
print(f"Using {len(train_rows)} samples for training and {len(val_rows)} for validation")


def encode_categorical(features):
    """The example's lookups with output_mode="binary": each categorical column multi-hot."""
    out = {}
    for name, values in features.items():
        if name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[name]
            index = np.array([vocabulary.index(v.item() if hasattr(v, "item") else v)
                              for v in values])
            out[name] = np.eye(len(vocabulary), dtype="int64")[index]
        else:
            out[name] = values.astype("float32")
    return out


class HeartBatches(keras.utils.PyDataset):
    """Shuffled (features, target) batches of 32, as the example's tf.data pipeline."""

    def __init__(self, rows, **kwargs):
        super().__init__(**kwargs)
        self.rows = rng.permutation(rows)

    def __len__(self):
        return math.ceil(len(self.rows) / 32)

    def __getitem__(self, idx):
        take = self.rows[idx * 32:(idx + 1) * 32]
        features = encode_categorical({name: columns[name][take] for name in FEATURE_NAMES})
        return features, columns[TARGET_FEATURE_NAME][take]

    def on_epoch_end(self):
        self.rows = rng.permutation(self.rows)


train_ds = HeartBatches(train_rows)
val_ds = HeartBatches(val_rows)

x, y = train_ds[0]
print("Input:", {k: v[0] for k, v in x.items()})
print("Target:", y[0])


def encode_numerical_feature(feature, name, rows):
    normalizer = layers.Normalization()
    feature_values = np.expand_dims(columns[name][rows].astype("float32"), -1)
    normalizer.adapt(feature_values)
    return normalizer(feature)


def create_model_inputs():
    inputs = {}

    def create_input_helper(feature_name):
        num_categories = len(CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name])
        inputs[feature_name] = layers.Input(name=feature_name, shape=(num_categories,),
                                            dtype="int64")
        return inputs

    for feature_name in FEATURE_NAMES:
        if feature_name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
            create_input_helper(feature_name)
        else:
            feature_input = layers.Input(name=feature_name, shape=(1,), dtype="float32")
            inputs[feature_name] = encode_numerical_feature(feature_input, feature_name,
                                                            train_rows)
    return inputs


class Classifier(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense_1 = layers.Dense(32, activation="relu")
        self.dropout = layers.Dropout(0.5)
        self.dense_2 = layers.Dense(1, activation="sigmoid")

    def call(self, inputs):
        all_features = layers.concatenate(list(inputs.values()))
        x = self.dense_1(all_features)
        x = self.dropout(x)
        return self.dense_2(x)

    def build(self, input_shape):
        self.built = True


def create_model():
    all_inputs = create_model_inputs()
    output = Classifier()(all_inputs)
    return keras.Model(all_inputs, output)


model = create_model()
model.compile("adam", "binary_crossentropy", metrics=["accuracy"])

model.fit(train_ds, epochs=20, validation_data=val_ds)

sample = {"age": 60, "sex": 1, "cp": 1, "trestbps": 145, "chol": 233, "fbs": 1, "restecg": 2,
          "thalach": 150, "exang": 0, "oldpeak": 2.3, "slope": 3, "ca": 0, "thal": "fixed"}


def get_cat_encoding(cat, cat_value):
    encoding = [0] * len(cat)
    if cat_value in cat:
        encoding[cat.index(cat_value)] = 1
    return encoding


for name, value in sample.items():
    if name in CATEGORICAL_FEATURES_WITH_VOCABULARY:
        sample.update({name: get_cat_encoding(CATEGORICAL_FEATURES_WITH_VOCABULARY[name],
                                              sample[name])})
input_dict = {name: keras.ops.convert_to_tensor([value]) for name, value in sample.items()}
predictions = model.predict(input_dict)

print(f"This particular patient had a {100 * predictions[0][0]:.1f} percent probability of "
      "having a heart disease, as evaluated by our model.")

# Checks (not in the example), true under Keras as under tessera: the model's inputs are its
# 13 columns and no Normalization is among its layers (cut off with the graph before them),
# so a numeric column goes in as given.
assert len(model.inputs) == len(FEATURE_NAMES)
assert not [l for l in model.layers if isinstance(l, layers.Normalization)]
assert len(model.trainable_weights) == 4
