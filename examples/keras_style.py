"""Keras's guides, run on tessera: only the imports differ.

The code below the imports follows Keras 3's guides "The Functional API" and
"Training & evaluation with the built-in methods" (keras.io/guides), on
Fashion-MNIST (keras.datasets.fashion_mnist, which here reads Debian's
dataset-fashion-mnist package) instead of MNIST, which no package of the
machine ships. With Keras installed, replacing the two tessera imports by
`import keras` and `from keras import layers` runs the same script.

run: .venv/bin/python examples/keras_style.py [--epochs 2] [--quick]
"""

import argparse
import os
import shutil
import tempfile

import numpy as np

import tessera.nn as keras
from tessera.nn import layers

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--quick", action="store_true", help="train on 6000 images (CI)")
args = parser.parse_args()

# --- The Functional API guide ------------------------------------------------
inputs = keras.Input(shape=(784,))
dense = layers.Dense(64, activation="relu")
x = dense(inputs)
x = layers.Dense(64, activation="relu")(x)
outputs = layers.Dense(10)(x)
model = keras.Model(inputs=inputs, outputs=outputs, name="mnist_model")
model.summary()

(x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data()
x_train = x_train.reshape(60000, 784).astype("float32") / 255
x_test = x_test.reshape(10000, 784).astype("float32") / 255
if args.quick:
    x_train, y_train = x_train[:6000], y_train[:6000]

model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    optimizer=keras.optimizers.RMSprop(),
    metrics=["accuracy"],
)
history = model.fit(x_train, y_train, batch_size=64, epochs=args.epochs, validation_split=0.2)
test_scores = model.evaluate(x_test, y_test, verbose=2)
print("Test loss:", test_scores[0])
print("Test accuracy:", test_scores[1])

folder = tempfile.mkdtemp()
model.save(os.path.join(folder, "my_model.keras"))
del model
# Recreate the exact same model purely from the file:
model = keras.models.load_model(os.path.join(folder, "my_model.keras"))
again = model.evaluate(x_test, y_test, verbose=0)
print("Reloaded model, test accuracy:", again[1])
assert abs(again[1] - test_scores[1]) < 1e-6

# --- Training & evaluation with the built-in methods -------------------------
def get_uncompiled_model():
    inputs = keras.Input(shape=(784,), name="digits")
    x = layers.Dense(64, activation="relu", name="dense_1")(inputs)
    x = layers.Dense(64, activation="relu", name="dense_2")(x)
    outputs = layers.Dense(10, activation="softmax", name="predictions")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


def get_compiled_model():
    model = get_uncompiled_model()
    model.compile(
        optimizer=keras.optimizers.RMSprop(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


y_train = y_train.astype("float32")
y_test = y_test.astype("float32")
x_val = x_train[-10000:] if not args.quick else x_train[-1000:]
y_val = y_train[-10000:] if not args.quick else y_train[-1000:]
x_train = x_train[:-10000] if not args.quick else x_train[:-1000]
y_train = y_train[:-10000] if not args.quick else y_train[:-1000]

model = get_compiled_model()
print("Fit model on training data")
history = model.fit(
    x_train,
    y_train,
    batch_size=64,
    epochs=args.epochs,
    # We pass some validation for
    # monitoring validation loss and metrics
    # at the end of each epoch
    validation_data=(x_val, y_val),
)
print(history.history)

# Evaluate the model on the test data using `evaluate`
print("Evaluate on test data")
results = model.evaluate(x_test, y_test, batch_size=128)
print("test loss, test acc:", results)

# Generate predictions (probabilities -- the output of the last layer)
# on new data using `predict`
print("Generate predictions for 3 samples")
predictions = model.predict(x_test[:3])
print("predictions shape:", predictions.shape)

# Callbacks: early stopping, checkpoints, and a learning-rate schedule.
model = get_compiled_model()
callbacks = [
    keras.callbacks.EarlyStopping(
        # Stop training when `val_loss` is no longer improving
        monitor="val_loss",
        # "no longer improving" being defined as "no better than 1e-2 less"
        min_delta=1e-2,
        # "no longer improving" being further defined as "for at least 2 epochs"
        patience=2,
        verbose=1,
    ),
    keras.callbacks.ModelCheckpoint(
        # Path where to save the model
        filepath=os.path.join(folder, "mymodel_{epoch}.keras"),
        save_best_only=True,  # Only save a model if `val_loss` has improved.
        monitor="val_loss",
        verbose=1,
    ),
]
model.fit(
    x_train,
    y_train,
    epochs=args.epochs + 1,
    batch_size=64,
    callbacks=callbacks,
    validation_split=0.2,
)
print("checkpoints:", sorted(os.listdir(folder)))

initial_learning_rate = 0.1
lr_schedule = keras.optimizers.schedules.ExponentialDecay(
    initial_learning_rate, decay_steps=100000, decay_rate=0.96, staircase=True
)
optimizer = keras.optimizers.RMSprop(learning_rate=lr_schedule)

# One-hot labels and categorical crossentropy, a Sequential model.
model = keras.Sequential(
    [
        keras.Input(shape=(784,)),
        layers.Dense(64, activation="relu"),
        layers.Dropout(0.2),
        layers.Dense(10, activation="softmax"),
    ]
)
model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    loss=keras.losses.CategoricalCrossentropy(),
    metrics=[keras.metrics.CategoricalAccuracy()],
)
y_train_one_hot = keras.utils.to_categorical(y_train, num_classes=10)
model.fit(x_train, y_train_one_hot, batch_size=64, epochs=1, verbose=2)
loss, acc = model.evaluate(x_test, keras.utils.to_categorical(y_test, 10), verbose=0)
print(f"Sequential with one-hot labels, test accuracy: {acc:.4f}")
shutil.rmtree(folder)
print("ok" if acc > 0.7 else "FAILED")
raise SystemExit(0 if acc > 0.7 else 1)
