# Modeled on keras-io examples/structured_data/structured_data_classification_with_feature_space.py;
# written for tessera. Heart-disease classification from a table of mixed columns, every
# feature indexed, normalized, discretized, crossed and encoded by keras.utils.FeatureSpace.
import numpy as np
import tessera.nn as keras
from tessera.data import Dataset  # in place of tf.data.Dataset

# In place of the Cleveland heart-disease CSV (a download read into a pandas DataFrame):
# a dict of NumPy columns with the CSV's names and dtypes (int64 columns, float64 oldpeak,
# strings for thal), 303 generated patients. The target is a fixed noisy function of the
# features (chest pain, heart rate, ST depression, vessels, thal), so there is something
# to learn.
rng = np.random.default_rng(1337)
n = 303
table = {
    "age": rng.integers(29, 78, n),
    "sex": rng.integers(0, 2, n),
    "cp": rng.integers(0, 5, n),
    "trestbps": rng.integers(94, 201, n),
    "chol": rng.integers(126, 565, n),
    "fbs": (rng.random(n) < 0.15).astype("int64"),
    "restecg": rng.integers(0, 3, n),
    "thalach": rng.integers(71, 203, n),
    "exang": rng.integers(0, 2, n),
    "oldpeak": np.round(rng.gamma(1.2, 0.9, n), 1),
    "slope": rng.integers(1, 4, n),
    "ca": rng.integers(0, 4, n),
    "thal": rng.choice(["normal", "fixed", "reversible"], n, p=[0.55, 0.1, 0.35]),
}
score = (0.6 * (table["cp"] >= 3) - 0.02 * (table["thalach"] - 150) + 0.5 * table["oldpeak"]
         + 0.4 * table["ca"] + 0.8 * (table["thal"] == "reversible") + 0.5 * table["exang"]
         + rng.normal(0, 0.7, n))
table["target"] = (score > np.median(score)).astype("int64")

print((n, len(table)))

# The preview (dataframe.head()): the first 5 rows.
for name, column in table.items():
    print(f"{name:>9}", column[:5])

# The split: 20% of the rows, drawn at random, for validation.
val_rows = np.random.RandomState(1337).permutation(n)[: int(round(0.2 * n))]
val_mask = np.zeros(n, bool)
val_mask[val_rows] = True
val_table = {k: v[val_mask] for k, v in table.items()}
train_table = {k: v[~val_mask] for k, v in table.items()}

print(
    "Using %d samples for training and %d for validation"
    % (len(train_table["target"]), len(val_table["target"]))
)


def table_to_dataset(table):
    table = dict(table)
    labels = table.pop("target")
    ds = Dataset.from_tensor_slices((table, labels))
    ds = ds.shuffle(buffer_size=len(labels))
    return ds


train_ds = table_to_dataset(train_table)
val_ds = table_to_dataset(val_table)

for x, y in train_ds.take(1):
    print("Input:", x)
    print("Target:", y)

train_ds = train_ds.batch(32)
val_ds = val_ds.batch(32)

# Configuring a FeatureSpace by type names.
from tessera.nn.utils import FeatureSpace  # noqa: E402 (where the example imports it)

feature_space = FeatureSpace(
    features={
        # Categorical features encoded as integers
        "sex": "integer_categorical",
        "cp": "integer_categorical",
        "fbs": "integer_categorical",
        "restecg": "integer_categorical",
        "exang": "integer_categorical",
        "ca": "integer_categorical",
        # Categorical feature encoded as string
        "thal": "string_categorical",
        # Numerical features to discretize
        "age": "float_discretized",
        # Numerical features to normalize
        "trestbps": "float_normalized",
        "chol": "float_normalized",
        "thalach": "float_normalized",
        "oldpeak": "float_normalized",
        "slope": "float_normalized",
    },
    # hashed co-occurrences of these groups of features
    crosses=[("sex", "age"), ("thal", "ca")],
    crossing_dim=32,
    # one-hot encode the categorical features and concatenate everything
    output_mode="concat",
)

# Further customizing: no out-of-vocabulary index for the small categorical features, 30
# bins for age, a crossing space per cross.
feature_space = FeatureSpace(
    features={
        "sex": FeatureSpace.integer_categorical(num_oov_indices=0),
        "cp": FeatureSpace.integer_categorical(num_oov_indices=0),
        "fbs": FeatureSpace.integer_categorical(num_oov_indices=0),
        "restecg": FeatureSpace.integer_categorical(num_oov_indices=0),
        "exang": FeatureSpace.integer_categorical(num_oov_indices=0),
        "ca": FeatureSpace.integer_categorical(num_oov_indices=0),
        "thal": FeatureSpace.string_categorical(num_oov_indices=0),
        "age": FeatureSpace.float_discretized(num_bins=30),
        "trestbps": FeatureSpace.float_normalized(),
        "chol": FeatureSpace.float_normalized(),
        "thalach": FeatureSpace.float_normalized(),
        "oldpeak": FeatureSpace.float_normalized(),
        "slope": FeatureSpace.float_normalized(),
    },
    crosses=[
        FeatureSpace.cross(feature_names=("sex", "age"), crossing_dim=64),
        FeatureSpace.cross(feature_names=("thal", "ca"), crossing_dim=16),
    ],
    output_mode="concat",
)

# Adapt on the training features (no labels).
train_ds_with_no_labels = train_ds.map(lambda x, _: x)
feature_space.adapt(train_ds_with_no_labels)

for x, _ in train_ds.take(1):
    preprocessed_x = feature_space(x)
    print("preprocessed_x.shape:", preprocessed_x.shape)
    print("preprocessed_x.dtype:", preprocessed_x.dtype)

# Preprocessing in the data pipeline for training.
preprocessed_train_ds = train_ds.map(lambda x, y: (feature_space(x), y))
preprocessed_train_ds = preprocessed_train_ds.prefetch(2)

preprocessed_val_ds = val_ds.map(lambda x, y: (feature_space(x), y))
preprocessed_val_ds = preprocessed_val_ds.prefetch(2)

# Two models: one on the encoded features (training), one on the raw features (inference).
dict_inputs = feature_space.get_inputs()
encoded_features = feature_space.get_encoded_features()

x = keras.layers.Dense(32, activation="relu")(encoded_features)
x = keras.layers.Dropout(0.5)(x)
predictions = keras.layers.Dense(1, activation="sigmoid")(x)

training_model = keras.Model(inputs=encoded_features, outputs=predictions)
training_model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])

inference_model = keras.Model(inputs=dict_inputs, outputs=predictions)

training_model.fit(
    preprocessed_train_ds, epochs=20, validation_data=preprocessed_val_ds, verbose=2
)

# Inference on one new patient's raw values with the end-to-end model.
sample = {
    "age": 60,
    "sex": 1,
    "cp": 1,
    "trestbps": 145,
    "chol": 233,
    "fbs": 1,
    "restecg": 2,
    "thalach": 150,
    "exang": 0,
    "oldpeak": 2.3,
    "slope": 3,
    "ca": 0,
    "thal": "fixed",
}

input_dict = {name: np.array([value]) for name, value in sample.items()}
predictions = inference_model.predict(input_dict)

print(
    f"This particular patient had a {100 * predictions[0][0]:.2f}% probability "
    "of having a heart disease, as evaluated by our model."
)
