# Modeled on keras-io examples/timeseries/timeseries_classification_from_scratch.py; written for tessera.
import os, tempfile
import numpy as np
import tessera.nn as keras

# In place of the FordA download (500-step univariate series, labels -1/1), shrunk.
rng = np.random.default_rng(0)
y_train = rng.choice([-1, 1], 256)
y_test = rng.choice([-1, 1], 64)
wave = np.sin(np.linspace(0, 40, 500))  # the class: the sign of a wave in the noise, to learn
x_train = (rng.normal(size=(256, 500)) + 0.5 * y_train[:, None] * wave).astype("float32")
x_test = (rng.normal(size=(64, 500)) + 0.5 * y_test[:, None] * wave).astype("float32")

x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))
num_classes = len(np.unique(y_train))
idx = np.random.permutation(len(x_train))
x_train = x_train[idx]
y_train = y_train[idx]
y_train[y_train == -1] = 0
y_test[y_test == -1] = 0


def make_model(input_shape):
    input_layer = keras.layers.Input(input_shape)
    conv1 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)
    conv2 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)
    conv3 = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)
    gap = keras.layers.GlobalAveragePooling1D()(conv3)
    output_layer = keras.layers.Dense(num_classes, activation="softmax")(gap)
    return keras.models.Model(inputs=input_layer, outputs=output_layer)


model = make_model(input_shape=x_train.shape[1:])
keras.utils.plot_model(model, to_file=os.path.join(tempfile.mkdtemp(), "model.png"), show_shapes=True)

epochs = 1
batch_size = 32
best = os.path.join(tempfile.mkdtemp(), "best_model.keras")
callbacks = [
    keras.callbacks.ModelCheckpoint(best, save_best_only=True, monitor="val_loss"),
    keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=20, min_lr=0.0001),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=50, verbose=1),
]
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"])
history = model.fit(
    x_train, y_train, batch_size=batch_size, epochs=epochs, callbacks=callbacks, validation_split=0.2, verbose=1
)
model = keras.models.load_model(best)
test_loss, test_acc = model.evaluate(x_test, y_test)
print("Test accuracy", test_acc)
print("Test loss", test_loss)
metric = "sparse_categorical_accuracy"
print(history.history[metric], history.history["val_" + metric])
