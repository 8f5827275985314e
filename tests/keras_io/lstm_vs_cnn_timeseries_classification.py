# Modeled on keras-io examples/timeseries/lstm_vs_cnn_timeseries_classification.py; written
# for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
import matplotlib.pyplot as plt

# In place of readucr() on FordA's TSV download: z-normalized univariate series with labels
# -1/1, shrunk (400 training and 160 test series of 64 steps; 3601 and 1320 of 500 there).
# A fault (label 1) adds a faster oscillation to the engine's hum.
rng = np.random.default_rng(0)


def make_series(n, steps=64):
    y = np.where(rng.random(n) < 0.5, -1, 1)
    t = np.arange(steps)
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    x = np.sin(2 * np.pi * t / 25 + phase) + 0.8 * rng.normal(size=(n, steps))
    x += (y[:, None] == 1) * 0.9 * np.sin(2 * np.pi * t / 6 + phase)
    x = (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)
    return x.astype(np.float32), y.astype(int)


x_train, y_train = make_series(400)
x_test, y_test = make_series(160)

classes = np.unique(np.concatenate((y_train, y_test), axis=0))
plt.figure(figsize=(8, 4))
for c in classes:
    c_x_train = x_train[y_train == c]
    plt.plot(c_x_train[0], label=f"class {c}")
plt.title("Sample Time Series from Each Class")
plt.xlabel("Timestep")
plt.ylabel("Amplitude")
plt.legend(loc="best")
plt.savefig("samples.png")
plt.close()

x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))
y_train = np.where(y_train == -1, 0, y_train)
y_test = np.where(y_test == -1, 0, y_test)
idx = np.random.permutation(len(x_train))
x_train = x_train[idx]
y_train = y_train[idx]
num_classes = len(np.unique(y_train))

# Widths / 4 of the example's (LSTM 64 and 32, filters 64 and 128; Dense 16 kept).
# BatchNormalization momentum 0.9 (0.99 there): 40 steps leave 0.99's moving statistics near
# their start, and the model's inference-mode loss with them (under Keras as under tessera).


def build_lstm_model(input_shape, num_classes):
    return keras.Sequential([
        layers.Input(shape=input_shape),
        layers.LSTM(16, return_sequences=True, dropout=0.3, recurrent_dropout=0.3),
        layers.LSTM(8, dropout=0.3, recurrent_dropout=0.3),
        layers.Dense(16, activation="relu"),
        layers.Dense(num_classes, activation="softmax"),
    ])


def build_cnn_model(input_shape, num_classes):
    return keras.Sequential([
        layers.Input(shape=input_shape),
        layers.Conv1D(filters=16, kernel_size=7, padding="same", activation="relu"),
        layers.BatchNormalization(momentum=0.9),
        layers.MaxPooling1D(pool_size=2),
        layers.Dropout(0.3),
        layers.Conv1D(filters=32, kernel_size=5, padding="same", activation="relu"),
        layers.BatchNormalization(momentum=0.9),
        layers.MaxPooling1D(pool_size=2),
        layers.Dropout(0.3),
        layers.GlobalAveragePooling1D(),
        layers.Dense(16, activation="relu"),
        layers.Dense(num_classes, activation="softmax"),
    ])


input_shape = x_train.shape[1:]
lstm_model = build_lstm_model(input_shape, num_classes)
cnn_model = build_cnn_model(input_shape, num_classes)

epochs = 4  # 100 there, with EarlyStopping(patience=20)
batch_size = 32


def train_model(model, model_name, x_train, y_train, x_test, y_test):
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"])
    history = model.fit(
        x_train, y_train, epochs=epochs, batch_size=batch_size, validation_split=0.2,
        callbacks=[
            keras.callbacks.ModelCheckpoint(f"best_{model_name}_model.keras",
                                            save_best_only=True, monitor="val_loss"),
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=20,
                                          restore_best_weights=True),
        ],
        verbose=1,
    )
    best_model = keras.models.load_model(f"best_{model_name}_model.keras")
    test_loss, test_acc = best_model.evaluate(x_test, y_test, verbose=0)
    print(f"{model_name} Test Accuracy: {test_acc:.4f}, Loss: {test_loss:.4f}")
    # check: the best checkpoint is the epoch of the lowest val_loss, which EarlyStopping
    # restored (it did not stop: patience 20)
    best = int(np.argmin(history.history["val_loss"]))
    restored = model.evaluate(x_train[-80:], y_train[-80:], verbose=0)[0]
    print(f"{model_name}: best epoch {best + 1}, val_loss {history.history['val_loss'][best]:.4f},"
          f" restored {restored:.4f}")
    assert abs(restored - history.history["val_loss"][best]) < 1e-4
    return history, test_acc, test_loss


print("Training LSTM model...")
lstm_history, lstm_test_acc, lstm_test_loss = train_model(lstm_model, "LSTM", x_train, y_train,
                                                          x_test, y_test)
print("Training CNN model...")
cnn_history, cnn_test_acc, cnn_test_loss = train_model(cnn_model, "CNN", x_train, y_train,
                                                       x_test, y_test)


def plot_training_metrics(histories, model_names):
    plt.figure(figsize=(12, 4))
    plt.subplot(1, 2, 1)
    for history, name in zip(histories, model_names):
        plt.plot(history.history["sparse_categorical_accuracy"], label=f"{name} Train")
        plt.plot(history.history["val_sparse_categorical_accuracy"], linestyle="--",
                 label=f"{name} Val")
    plt.title("Model Accuracy")
    plt.legend()
    plt.subplot(1, 2, 2)
    for history, name in zip(histories, model_names):
        plt.plot(history.history["loss"], label=f"{name} Train")
        plt.plot(history.history["val_loss"], linestyle="--", label=f"{name} Val")
    plt.title("Model Loss")
    plt.legend()
    plt.tight_layout()
    plt.savefig("metrics.png")
    plt.close()


plot_training_metrics([lstm_history, cnn_history], ["LSTM", "CNN"])
print("\nModel Comparison:")
print(f"LSTM Test Accuracy: {lstm_test_acc:.4f}, Loss: {lstm_test_loss:.4f}")
print(f"CNN Test Accuracy: {cnn_test_acc:.4f}, Loss: {cnn_test_loss:.4f}")
