# Modeled on keras-io examples/nlp/text_classification_from_scratch.py; written for tessera.
import re
import string
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

# In place of the aclImdb download and text_dataset_from_directory: a NumPy array of
# strings (with the <br /> tags the reviews have) and binary labels, shrunk.
rng = np.random.default_rng(0)
words = ["movie", "film", "great", "bad", "plot", "actor", "boring", "loved", "hated", "the", "a", "was"]
tone = [["bad", "boring", "hated"], ["great", "loved", "fine"]]  # what tells a label, to learn
def review(label):
    return " ".join(rng.choice(words + 3 * tone[label], rng.integers(5, 40))) + "<br /><br />The End."
labels = rng.integers(0, 2, 320)
texts = np.array([review(label) for label in labels])
raw_train_x, raw_train_y = texts[:256], labels[:256]
raw_val_x, raw_val_y = texts[256:], labels[256:]


def custom_standardization(input_data):
    lowercase = np.char.lower(input_data)
    stripped_html = np.char.replace(lowercase, "<br />", " ")
    # elementwise, any shape, as tf.strings.regex_replace
    return np.array([re.sub(f"[{re.escape(string.punctuation)}]", "", s)
                     for s in stripped_html.ravel()]).reshape(stripped_html.shape)


max_features = 20000
embedding_dim = 128
sequence_length = 500

vectorize_layer = keras.layers.TextVectorization(
    standardize=custom_standardization,
    max_tokens=max_features,
    output_mode="int",
    output_sequence_length=sequence_length,
)
vectorize_layer.adapt(raw_train_x)

x_train = vectorize_layer(raw_train_x)
x_val = vectorize_layer(raw_val_x)

inputs = keras.Input(shape=(None,), dtype="int64")
x = layers.Embedding(max_features, embedding_dim)(inputs)
x = layers.Dropout(0.5)(x)
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(x)
x = layers.GlobalMaxPooling1D()(x)
x = layers.Dense(128, activation="relu")(x)
x = layers.Dropout(0.5)(x)
predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
model = keras.Model(inputs, predictions)
model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, raw_train_y, validation_data=(x_val, raw_val_y), epochs=1)
model.evaluate(x_val, raw_val_y)

# The end-to-end model: strings in, probabilities out.
inputs = keras.Input(shape=(1,), dtype="string")
indices = vectorize_layer(inputs)
outputs = model(indices)
end_to_end_model = keras.Model(inputs, outputs)
end_to_end_model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
end_to_end_model.evaluate(raw_val_x[:, None], raw_val_y)
