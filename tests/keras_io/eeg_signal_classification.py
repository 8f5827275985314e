# Modeled on keras-io examples/timeseries/eeg_signal_classification.py (Keras 3 form);
# written for tessera. In place of the Kaggle CSV, pandas and scikit-learn: 700 signals of 512
# samples (600 for training, 100 held out) of 8 imbalanced stimulus classes, each class a sine
# of its own frequency in noise, min-max scaled into [0, 1] per signal as the example's
# MinMaxScaler does; the arrays in batches of 64 in place of the tf.data pipeline; the
# convolutions' filters divided by 8 (4-128 in place of 32-1024) and the dense layers by 16;
# 3 epochs (30 there).
import os
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers

QUALITY_THRESHOLD = 128
BATCH_SIZE = 64

rng = np.random.default_rng(0)
label_names = ["blink", "colorRound", "math", "music", "readyRound", "relax", "thinkOfItems",
               "video"]
num_classes = len(label_names)
class_probabilities = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.07, 0.05, 0.03])
labels = rng.choice(num_classes, 700, p=class_probabilities)
t = np.arange(512)
raw_values = (np.sin(2 * np.pi * (labels[:, None] + 2) * t / 128 + rng.uniform(0, 6, (700, 1)))
              * rng.uniform(50, 150, (700, 1)) + rng.normal(0, 60, (700, 512)))
print(raw_values.shape)

# Min-max scaling of each signal, as the example's MinMaxScaler per series.
lo, hi = raw_values.min(axis=1, keepdims=True), raw_values.max(axis=1, keepdims=True)
series_list = (raw_values - lo) / (hi - lo)

x_train, x_test = series_list[:600], series_list[600:]
y_train, y_test = labels[:600], labels[600:]
print(f"Length of x_train : {len(x_train)}\nLength of x_test : {len(x_test)}\n"
      f"Length of y_train : {len(y_train)}\nLength of y_test : {len(y_test)}")

x_train = np.asarray(x_train).astype(np.float32).reshape(-1, 512, 1)
y_train = np.asarray(y_train).astype(np.float32).reshape(-1, 1)
y_train = keras.utils.to_categorical(y_train)

x_test = np.asarray(x_test).astype(np.float32).reshape(-1, 512, 1)
y_test = np.asarray(y_test).astype(np.float32).reshape(-1, 1)
y_test = keras.utils.to_categorical(y_test)

# Class weights by the naive method: 1 - (samples of the class / all samples).
vals_dict = {}
for i in labels:
    if i in vals_dict.keys():
        vals_dict[i] += 1
    else:
        vals_dict[i] = 1
total = sum(vals_dict.values())
weight_dict = {int(k): (1 - (v / total)) for k, v in vals_dict.items()}
print(weight_dict)


def plot_history_metrics(history):
    total_plots = len(history.history)
    cols = total_plots // 2
    rows = total_plots // cols
    if total_plots % cols != 0:
        rows += 1
    pos = range(1, total_plots + 1)
    plt.figure(figsize=(15, 10))
    for i, (key, value) in enumerate(history.history.items()):
        plt.subplot(rows, cols, pos[i])
        plt.plot(range(len(value)), value)
        plt.title(str(key))
    plt.close()


def create_model():
    input_layer = keras.Input(shape=(512, 1))

    x = layers.Conv1D(filters=4, kernel_size=3, strides=2, activation="relu",
                      padding="same")(input_layer)
    x = layers.BatchNormalization()(x)

    x = layers.Conv1D(filters=8, kernel_size=3, strides=2, activation="relu",
                      padding="same")(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv1D(filters=16, kernel_size=5, strides=2, activation="relu",
                      padding="same")(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv1D(filters=32, kernel_size=5, strides=2, activation="relu",
                      padding="same")(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv1D(filters=64, kernel_size=7, strides=2, activation="relu",
                      padding="same")(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv1D(filters=128, kernel_size=7, strides=2, activation="relu",
                      padding="same")(x)
    x = layers.BatchNormalization()(x)

    x = layers.Dropout(0.2)(x)

    x = layers.Flatten()(x)

    x = layers.Dense(256, activation="relu")(x)
    x = layers.Dropout(0.2)(x)

    x = layers.Dense(128, activation="relu", kernel_regularizer=keras.regularizers.L2())(x)
    x = layers.Dropout(0.2)(x)

    x = layers.Dense(64, activation="relu", kernel_regularizer=keras.regularizers.L2())(x)
    x = layers.Dropout(0.2)(x)
    x = layers.Dense(32, activation="relu", kernel_regularizer=keras.regularizers.L2())(x)
    output_layer = layers.Dense(num_classes, activation="softmax")(x)

    return keras.Model(inputs=input_layer, outputs=output_layer)


conv_model = create_model()
conv_model.summary()

epochs = 3
workdir = tempfile.mkdtemp()
callbacks = [
    keras.callbacks.ModelCheckpoint(os.path.join(workdir, "best_model.keras"),
                                    save_best_only=True, monitor="loss"),
    keras.callbacks.ReduceLROnPlateau(
        monitor="val_top_k_categorical_accuracy",
        factor=0.2,
        patience=2,
        min_lr=0.000001,
    ),
]

optimizer = keras.optimizers.Adam(amsgrad=True, learning_rate=0.001)
loss = keras.losses.CategoricalCrossentropy()

conv_model.compile(
    optimizer=optimizer,
    loss=loss,
    metrics=[
        keras.metrics.TopKCategoricalAccuracy(k=3),
        keras.metrics.AUC(),
        keras.metrics.Precision(),
        keras.metrics.Recall(),
    ],
)

conv_model_history = conv_model.fit(
    x_train,
    y_train,
    batch_size=BATCH_SIZE,
    epochs=epochs,
    callbacks=callbacks,
    validation_data=(x_test, y_test),
    class_weight=weight_dict,
)
print(sorted(conv_model_history.history))
plot_history_metrics(conv_model_history)

loss, accuracy, auc, precision, recall = conv_model.evaluate(x_test, y_test,
                                                             batch_size=BATCH_SIZE)
print(f"Loss : {loss}")
print(f"Top 3 Categorical Accuracy : {accuracy}")
print(f"Area under the Curve (ROC) : {auc}")
print(f"Precision : {precision}")
print(f"Recall : {recall}")

best = keras.models.load_model(os.path.join(workdir, "best_model.keras"))
predicted_labels = np.argmax(best.predict(x_test[:12], verbose=0), axis=1)
for original, predicted in zip(np.argmax(y_test[:12], axis=1), predicted_labels):
    print(f"original: {label_names[original]}, predicted: {label_names[predicted]}")
