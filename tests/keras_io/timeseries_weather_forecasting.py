# Modeled on keras-io examples/timeseries/timeseries_weather_forecasting.py; written for
# tessera. An LSTM reads 5 days of hourly weather and predicts the temperature 12 hours on.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras

# In place of the Jena climate CSV (a download read with pandas): 14 features every 10
# minutes, generated (a daily and a slow cycle, noise; the temperature follows pressure
# and the daily cycle with a lag), as a NumPy table of the same columns, shrunk.
titles = [
    "Pressure", "Temperature", "Temperature in Kelvin", "Temperature (dew point)",
    "Relative Humidity", "Saturation vapor pressure", "Vapor pressure",
    "Vapor pressure deficit", "Specific humidity", "Water vapor concentration", "Airtight",
    "Wind speed", "Maximum wind speed", "Wind direction in degrees",
]
feature_keys = [
    "p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)",
    "VPact (mbar)", "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)", "rho (g/m**3)",
    "wv (m/s)", "max. wv (m/s)", "wd (deg)",
]
rng = np.random.default_rng(0)
rows = 10000  # 420,551 in the data set
t = np.arange(rows)
day = np.sin(2 * np.pi * t / 144)
slow = np.sin(2 * np.pi * t / 3000)
pressure = 990 + 8 * slow + rng.normal(0, 0.5, rows)
temperature = 10 + 6 * np.roll(day, 30) + 0.8 * (pressure - 990) + rng.normal(0, 0.5, rows)
columns = {"p (mbar)": pressure, "T (degC)": temperature, "Tpot (K)": temperature + 273.15}
for k, key in enumerate(feature_keys):
    if key not in columns:
        columns[key] = (k + 1) * (0.3 * day + 0.2 * slow) + rng.normal(0, 1, rows)
data = np.stack([columns[key] for key in feature_keys], axis=1).astype("float32")
print("data shape:", data.shape)


def show_heatmap(data):
    plt.matshow(np.corrcoef(data.T))
    plt.xticks(range(data.shape[1]), feature_keys, fontsize=8, rotation=90)
    plt.gca().xaxis.tick_bottom()
    plt.yticks(range(data.shape[1]), feature_keys, fontsize=8)
    plt.colorbar()
    plt.title("Feature Correlation Heatmap", fontsize=14)
    plt.savefig(os.path.join(tempfile.gettempdir(), "heatmap.png"))
    plt.close()


show_heatmap(data)

split_fraction = 0.715
train_split = int(split_fraction * int(data.shape[0]))
step = 6

past = 720
future = 72
learning_rate = 0.001
batch_size = 256
epochs = 2  # 10 in the example


def normalize(data, train_split):
    data_mean = data[:train_split].mean(axis=0)
    data_std = data[:train_split].std(axis=0)
    return (data - data_mean) / data_std


print(
    "The selected parameters are:",
    ", ".join([titles[i] for i in [0, 1, 5, 7, 8, 10, 11]]),
)
features = data[:, [0, 1, 5, 7, 8, 10, 11]]
features = normalize(features, train_split)

train_data = features[0:train_split]
val_data = features[train_split:]

# The labels start 792 rows (720 + 72) after the first input.
start = past + future
end = start + train_split

x_train = train_data[:, :7]
y_train = features[start:end][:, [1]]

sequence_length = int(past / step)

dataset_train = keras.preprocessing.timeseries_dataset_from_array(
    x_train,
    y_train,
    sequence_length=sequence_length,
    sampling_rate=step,
    batch_size=batch_size,
)

# The validation windows stop 792 rows before the end (their labels would lie past it).
x_end = len(val_data) - past - future
label_start = train_split + past + future

x_val = val_data[:x_end][:, :7]
y_val = features[label_start:][:, [1]]

dataset_val = keras.preprocessing.timeseries_dataset_from_array(
    x_val,
    y_val,
    sequence_length=sequence_length,
    sampling_rate=step,
    batch_size=batch_size,
)

for batch in dataset_train.take(1):
    inputs, targets = batch

print("Input shape:", np.asarray(inputs).shape)
print("Target shape:", np.asarray(targets).shape)

inputs = keras.layers.Input(shape=(inputs.shape[1], inputs.shape[2]))
lstm_out = keras.layers.LSTM(32)(inputs)
outputs = keras.layers.Dense(1)(lstm_out)

model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), loss="mse")
model.summary()

path_checkpoint = "model_checkpoint.weights.h5"
es_callback = keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=0, patience=5)

modelckpt_callback = keras.callbacks.ModelCheckpoint(
    monitor="val_loss",
    filepath=path_checkpoint,
    verbose=1,
    save_weights_only=True,
    save_best_only=True,
)

history = model.fit(
    dataset_train,
    epochs=epochs,
    validation_data=dataset_val,
    callbacks=[es_callback, modelckpt_callback],
)


def visualize_loss(history, title):
    loss = history.history["loss"]
    val_loss = history.history["val_loss"]
    epochs = range(len(loss))
    plt.figure()
    plt.plot(epochs, loss, "b", label="Training loss")
    plt.plot(epochs, val_loss, "r", label="Validation loss")
    plt.title(title)
    plt.xlabel("Epochs")
    plt.ylabel("Loss")
    plt.legend()
    plt.savefig(os.path.join(tempfile.gettempdir(), "loss.png"))
    plt.close()


visualize_loss(history, "Training and Validation Loss")

for x, y in dataset_val.take(5):
    prediction = model.predict(x)[0]
    print("history:", np.asarray(x[0][:, 1])[-3:], "true future:", np.asarray(y[0]),
          "prediction:", prediction)
