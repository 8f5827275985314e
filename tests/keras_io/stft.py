# Modeled on keras-io examples/audio/stft.py (Keras 3 form); written for tessera. In place of
# the ESC-10 download, pandas and scipy: 5-second clips generated at 4 kHz (16 kHz there, so the
# frames hold 4x fewer samples), each of 10 classes a chirp from its own pitch under noise and a
# random envelope; 160 training, 40 validation and 40 test clips; the 1-D model's filters and
# units / 8; in place of the ImageNet MobileNet (a download) a small convolutional base;
# learning rates 1e-3 (1e-5 and 1e-4 there, for 200 epochs); 4 epochs each (200 there, with
# the same EarlyStopping restoring the best weights).
import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers

keras.utils.set_random_seed(41)

BATCH_SIZE = 16
NUM_CLASSES = 10
EPOCHS = 4
SAMPLE_RATE = 4000
SECONDS = 5

rng = np.random.default_rng(41)
pitches = 150.0 * 1.25 ** np.arange(NUM_CLASSES)


def generated_clips(n):
    """Waves of shape (n, SECONDS * SAMPLE_RATE, 1) in [-1, 1], as the example's read_wav_file
    gives, and their classes."""
    targets = rng.integers(0, NUM_CLASSES, n)
    t = np.arange(SECONDS * SAMPLE_RATE) / SAMPLE_RATE
    glide = rng.uniform(0.9, 1.1, (n, 1))
    phase = 2 * np.pi * pitches[targets][:, None] * t * (1 + 0.05 * glide * t)
    envelope = np.abs(np.sin(np.pi * t * rng.uniform(0.2, 1.0, (n, 1))))
    wav = 0.8 * envelope * np.sin(phase) + rng.normal(0, 0.1, (n, t.size))
    return np.clip(wav, -1, 1)[..., None].astype(np.float32), targets


def plot_single_spectrogram(sample_wav_data):
    spectrogram = layers.STFTSpectrogram(
        mode="log",
        frame_length=SAMPLE_RATE * 20 // 1000,
        frame_step=SAMPLE_RATE * 5 // 1000,
        fft_length=256,
        trainable=False,
    )(sample_wav_data[None, ...])[0, ...]

    plt.imshow(spectrogram.T, origin="lower")
    plt.title("Single Channel Spectrogram")
    plt.xlabel("Time")
    plt.ylabel("Frequency")
    plt.show()
    return spectrogram


def plot_multi_bandwidth_spectrogram(sample_wav_data):
    # The same fft_length, frame_step and padding="same" align the three spectrograms.
    spectrograms = np.concatenate(
        [
            layers.STFTSpectrogram(
                mode="log",
                frame_length=SAMPLE_RATE * x // 1000,
                frame_step=SAMPLE_RATE * 5 // 1000,
                fft_length=256,
                padding="same",
                expand_dims=True,
            )(sample_wav_data[None, ...])[0, ...]
            for x in [5, 10, 20]
        ],
        axis=-1,
    ).transpose([1, 0, 2])

    mn = spectrograms.min(axis=(0, 1), keepdims=True)
    mx = spectrograms.max(axis=(0, 1), keepdims=True)
    spectrograms = (spectrograms - mn) / (mx - mn)

    plt.imshow(spectrograms, origin="lower")
    plt.title("Multi-bandwidth Spectrogram")
    plt.xlabel("Time")
    plt.ylabel("Frequency")
    plt.show()
    return spectrograms


train_x, train_y = generated_clips(160)
valid_x, valid_y = generated_clips(40)
test_x, test_y = generated_clips(40)

sample_wav_data = train_x[5]
plt.plot(sample_wav_data[:, 0])
plt.show()
single = plot_single_spectrogram(sample_wav_data)
multi = plot_multi_bandwidth_spectrogram(sample_wav_data)
print("spectrograms:", single.shape, multi.shape)

model1d = keras.Sequential(
    [
        layers.InputLayer((None, 1)),
        layers.STFTSpectrogram(
            mode="log",
            frame_length=SAMPLE_RATE * 40 // 1000,
            frame_step=SAMPLE_RATE * 15 // 1000,
            trainable=False,
        ),
        layers.Conv1D(8, 64, activation="relu"),
        layers.Conv1D(16, 16, activation="relu"),
        layers.LayerNormalization(),
        layers.MaxPooling1D(4),
        layers.Conv1D(16, 8, activation="relu"),
        layers.Conv1D(32, 8, activation="relu"),
        layers.Conv1D(64, 4, activation="relu"),
        layers.LayerNormalization(),
        layers.Dropout(0.5),
        layers.GlobalMaxPooling1D(),
        layers.Dense(32, activation="relu"),
        layers.Dense(32, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(NUM_CLASSES, activation="softmax"),
    ],
    name="model_1d_non_trainble_stft",
)
model1d.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)
model1d.summary()

history_model1d = model1d.fit(
    train_x,
    train_y,
    batch_size=BATCH_SIZE,
    validation_data=(valid_x, valid_y),
    epochs=EPOCHS,
    callbacks=[
        keras.callbacks.EarlyStopping(
            monitor="val_loss",
            patience=EPOCHS,
            restore_best_weights=True,
        )
    ],
)

input = layers.Input((None, 1))
spectrograms = [
    layers.STFTSpectrogram(
        mode="log",
        frame_length=SAMPLE_RATE * frame_size // 1000,
        frame_step=SAMPLE_RATE * 15 // 1000,
        fft_length=256,
        padding="same",
        expand_dims=True,
    )(input)
    for frame_size in [30, 40, 50]
]

multi_spectrograms = layers.Concatenate(axis=-1)(spectrograms)

img_model = keras.Sequential(
    [
        layers.Conv2D(8, 3, strides=2, activation="relu"),
        layers.Conv2D(16, 3, strides=2, activation="relu"),
        layers.Conv2D(32, 3, strides=2, activation="relu"),
        layers.GlobalMaxPooling2D(),
    ],
    name="image_base",
)
output = img_model(multi_spectrograms)

output = layers.Dropout(0.5)(output)
output = layers.Dense(32, activation="relu")(output)
output = layers.Dense(32, activation="relu")(output)
output = layers.Dense(NUM_CLASSES, activation="softmax")(output)
model2d = keras.Model(input, output, name="model_2d_trainble_stft")

model2d.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)
model2d.summary()

history_model2d = model2d.fit(
    train_x,
    train_y,
    batch_size=BATCH_SIZE,
    validation_data=(valid_x, valid_y),
    epochs=EPOCHS,
    callbacks=[
        keras.callbacks.EarlyStopping(
            monitor="val_loss",
            patience=EPOCHS,
            restore_best_weights=True,
        )
    ],
)

epochs_range = range(EPOCHS)
plt.figure(figsize=(14, 5))
plt.subplot(1, 2, 1)
plt.plot(epochs_range, history_model1d.history["accuracy"], label="1D, non-trainable STFT")
plt.plot(epochs_range, history_model1d.history["val_accuracy"], label="1D, validation")
plt.plot(epochs_range, history_model2d.history["accuracy"], label="2D, trainable STFT")
plt.plot(epochs_range, history_model2d.history["val_accuracy"], label="2D, validation")
plt.legend(loc="lower right")
plt.subplot(1, 2, 2)
plt.plot(epochs_range, history_model1d.history["loss"], label="1D, non-trainable STFT")
plt.plot(epochs_range, history_model1d.history["val_loss"], label="1D, validation")
plt.plot(epochs_range, history_model2d.history["loss"], label="2D, trainable STFT")
plt.plot(epochs_range, history_model2d.history["val_loss"], label="2D, validation")
plt.legend(loc="upper right")
plt.show()

_, test_acc = model1d.evaluate(test_x, test_y)
print(f"1D model wit non-trainable STFT -> Test Accuracy: {test_acc * 100:.2f}%")

_, test_acc = model2d.evaluate(test_x, test_y)
print(f"2D model with trainable STFT -> Test Accuracy: {test_acc * 100:.2f}%")
