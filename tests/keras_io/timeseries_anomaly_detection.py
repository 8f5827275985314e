# Modeled on keras-io examples/timeseries/timeseries_anomaly_detection.py; written
# for tessera. A convolutional autoencoder (Conv1D down, Conv1DTranspose up)
# learns to rebuild windows of a daily-periodic signal; windows of a signal with
# a jump rebuild worse than any training window and are flagged.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

STEPS_PER_DAY = 288  # one value every 5 minutes
TIME_STEPS = 288
rng = np.random.default_rng(0)


def daily_signal(days, jump_at=None):
    """The NAB art_daily series replaced by a generated one: a daily pattern
    with small noise (and a block of high values from `jump_at` for one day)."""
    t = np.arange(days * STEPS_PER_DAY)
    phase = (t % STEPS_PER_DAY) / STEPS_PER_DAY
    v = 20.0 + 60.0 * (phase > 0.4) * (phase < 0.7) + rng.normal(0, 2.0, t.size)
    if jump_at is not None:
        v[jump_at:jump_at + STEPS_PER_DAY // 4] += 80.0
    return v[:, None]


train_values = daily_signal(6)  # 14 days in the guide
mean, std = train_values.mean(), train_values.std()
print("Number of training samples:", len(train_values))


def windows(values, size=TIME_STEPS):
    return np.stack([values[i:i + size] for i in range(len(values) - size + 1)])


x_train = windows((train_values - mean) / std)[::4]  # every 4th window: fewer samples
print("Training input shape:", x_train.shape)

model = keras.Sequential([
    layers.Input(shape=(x_train.shape[1], x_train.shape[2])),
    layers.Conv1D(filters=32, kernel_size=7, padding="same", strides=2, activation="relu"),
    layers.Dropout(rate=0.2),
    layers.Conv1D(filters=16, kernel_size=7, padding="same", strides=2, activation="relu"),
    layers.Conv1DTranspose(filters=16, kernel_size=7, padding="same", strides=2,
                           activation="relu"),
    layers.Dropout(rate=0.2),
    layers.Conv1DTranspose(filters=32, kernel_size=7, padding="same", strides=2,
                           activation="relu"),
    layers.Conv1DTranspose(filters=1, kernel_size=7, padding="same"),
])
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
model.summary()
history = model.fit(x_train, x_train, epochs=4, batch_size=128, validation_split=0.1,
                    callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=5,
                                                             mode="min")])
print("losses:", [round(v, 4) for v in history.history["loss"]],
      [round(v, 4) for v in history.history["val_loss"]])

x_train_pred = model.predict(x_train)
train_mae_loss = np.mean(np.abs(x_train_pred - x_train), axis=1)
threshold = np.max(train_mae_loss)
print("Reconstruction error threshold:", threshold)

test_values = daily_signal(4, jump_at=2 * STEPS_PER_DAY + 100)
x_test = windows((test_values - mean) / std)
x_test_pred = model.predict(x_test)
test_mae_loss = np.mean(np.abs(x_test_pred - x_test), axis=1).reshape((-1))
anomalies = test_mae_loss > threshold
print("Number of anomaly samples:", np.sum(anomalies))
anomalous_data_indices = [i for i in range(TIME_STEPS - 1, len(test_values) - TIME_STEPS + 1)
                          if np.all(anomalies[i - TIME_STEPS + 1:i])]
print("anomalous data points:", len(anomalous_data_indices))
