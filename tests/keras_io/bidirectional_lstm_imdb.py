# Modeled on keras-io examples/nlp/bidirectional_lstm_imdb.py; written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

max_features = 20000
maxlen = 100  # shrunk from 200

inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(max_features, 128)(inputs)
x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
x = layers.Bidirectional(layers.LSTM(64))(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)
model.summary()

# In place of keras.datasets.imdb.load_data(num_words=max_features), shrunk.
rng = np.random.default_rng(0)
def review(label):  # a fifth of the words tell the label (ids 1-10 or 11-20), to learn
    ids = rng.integers(21, max_features, rng.integers(20, 300))
    tell = rng.random(len(ids)) < 0.2
    ids[tell] = rng.integers(1, 11, tell.sum()) + 10 * label
    return list(ids)
y_train = rng.integers(0, 2, 64)
x_train = [review(label) for label in y_train]
y_val = rng.integers(0, 2, 16)
x_val = [review(label) for label in y_val]
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
x_train = keras.utils.pad_sequences(x_train, maxlen=maxlen)
x_val = keras.utils.pad_sequences(x_val, maxlen=maxlen)

model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=32, epochs=1, validation_data=(x_val, y_val))
