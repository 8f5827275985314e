# Modeled on keras-io examples/audio/speaker_recognition_using_cnn.py (Keras 3 form); written
# for tessera. In place of the Kaggle download, the wav decoding and ffmpeg: 1-second clips
# generated at 2 kHz (16 kHz there), 5 speakers each a voice of its own pitch and formant with
# 3 harmonics, vibrato and a random loudness, and background noise cut into 1-second chunks
# from 3 longer generated recordings (6 files of 354 chunks there); 400 clips (7,500 there), a
# tenth for validation as the example's VALID_SPLIT; a `keras.utils.PyDataset` of batches in
# place of the tf.data pipeline (shuffled, the noise added by `add_noise` to the training
# batches, both mapped by `audio_to_fft`, written with `keras.ops.fft` for `tf.signal.fft`);
# filters / 2 (8-64 in place of 16-128), Dense 64 and 32 (256 and 128); batches of 32 (128);
# 2 epochs (1 there, 100 for a real run) with the example's EarlyStopping and ModelCheckpoint.
import os

import numpy as np
import tessera.nn as keras

VALID_SPLIT = 0.1
SHUFFLE_SEED = 43
SAMPLING_RATE = 2000
SCALE = 0.5
BATCH_SIZE = 32
EPOCHS = 2

rng = np.random.default_rng(SHUFFLE_SEED)
class_names = ["Benjamin_Netanyau", "Jens_Stoltenberg", "Julia_Gillard", "Magaret_Tarcher",
               "Nelson_Mandela"]
pitches = np.array([110.0, 122.0, 134.0, 146.0, 158.0])
formants = np.array([520.0, 560.0, 480.0, 600.0, 540.0])
print("Our class names: {}".format(class_names))

# Noise preparation: recordings longer than a second, split into 1-second chunks.
t_long = np.arange(SAMPLING_RATE * 30) / SAMPLING_RATE
recordings = [
    rng.normal(0, 0.3, t_long.size),  # hiss
    0.4 * np.sin(2 * np.pi * 50 * t_long) + rng.normal(0, 0.05, t_long.size),  # hum
    np.convolve(rng.normal(0, 1, t_long.size), np.ones(8) / 8, mode="same"),  # rumble
]
noises = []
for sample in recordings:
    slices = int(sample.shape[0] / SAMPLING_RATE)
    noises.extend(np.split(sample[: slices * SAMPLING_RATE, None], slices))
noises = np.stack(noises).astype("float32")
print("{} noise files were split into {} noise samples where each is {} sec. long".format(
    len(recordings), noises.shape[0], noises.shape[1] // SAMPLING_RATE))


def speech(label):
    """One second of a speaker's voice, shaped (SAMPLING_RATE, 1) as decode_wav gives."""
    t = np.arange(SAMPLING_RATE) / SAMPLING_RATE
    f0 = pitches[label] * rng.uniform(0.96, 1.04)
    phase = 2 * np.pi * f0 * (t + 0.002 * np.sin(2 * np.pi * 5 * t))
    wave = sum(np.sin(k * phase) / k for k in (1, 2, 3))
    wave = wave + 0.5 * np.sin(2 * np.pi * formants[label] * t)
    envelope = np.abs(np.sin(np.pi * t * rng.uniform(1, 4)))
    return (rng.uniform(0.3, 0.9) * envelope * wave)[:, None].astype("float32")


labels = list(rng.integers(0, len(class_names), 400))
audio = [speech(label) for label in labels]
print("Found {} files belonging to {} classes.".format(len(audio), len(class_names)))

# Shuffle
order = np.random.RandomState(SHUFFLE_SEED).permutation(len(audio))
audio = np.stack(audio)[order]
labels = np.array(labels)[order]

# Split into training and validation
num_val_samples = int(VALID_SPLIT * len(audio))
print("Using {} files for training.".format(len(audio) - num_val_samples))
train_audio, train_labels = audio[:-num_val_samples], labels[:-num_val_samples]
print("Using {} files for validation.".format(num_val_samples))
valid_audio, valid_labels = audio[-num_val_samples:], labels[-num_val_samples:]


def add_noise(audio, noises=None, scale=0.5):
    if noises is not None:
        # A random noise chunk per sample, scaled by the amplitude proportion.
        rnd = rng.integers(0, noises.shape[0], (audio.shape[0],))
        noise = noises[rnd]
        prop = np.max(audio, axis=1) / np.max(noise, axis=1)
        prop = np.repeat(np.expand_dims(prop, axis=1), audio.shape[1], axis=1)
        audio = audio + noise * prop * scale
    return audio


def audio_to_fft(audio):
    # ops.fft takes the real and imaginary parts and transforms the innermost axis
    audio = keras.ops.squeeze(audio, axis=-1)
    real, imag = keras.ops.fft((audio, keras.ops.zeros_like(audio)))
    fft = keras.ops.sqrt(keras.ops.square(real) + keras.ops.square(imag))
    fft = keras.ops.expand_dims(fft, axis=-1)
    # The absolute value of the first half: the positive frequencies
    return keras.ops.convert_to_numpy(fft[:, : (audio.shape[1] // 2), :])


class AudioBatches(keras.utils.PyDataset):
    """The example's tf.data pipeline: shuffled batches, noise, FFT."""

    def __init__(self, audio, labels, batch_size, noises=None, **kwargs):
        super().__init__(**kwargs)
        self.audio, self.labels, self.batch_size, self.noises = audio, labels, batch_size, noises
        self.order = np.arange(len(audio))

    def __len__(self):
        return -(-len(self.audio) // self.batch_size)

    def __getitem__(self, idx):
        rows = self.order[idx * self.batch_size:(idx + 1) * self.batch_size]
        x = add_noise(self.audio[rows], self.noises, scale=SCALE)
        return audio_to_fft(x.astype("float32")), self.labels[rows]

    def on_epoch_end(self):
        rng.shuffle(self.order)


train_ds = AudioBatches(train_audio, train_labels, BATCH_SIZE, noises)
valid_ds = AudioBatches(valid_audio, valid_labels, 32)


def residual_block(x, filters, conv_num=3, activation="relu"):
    # Shortcut
    s = keras.layers.Conv1D(filters, 1, padding="same")(x)
    for i in range(conv_num - 1):
        x = keras.layers.Conv1D(filters, 3, padding="same")(x)
        x = keras.layers.Activation(activation)(x)
    x = keras.layers.Conv1D(filters, 3, padding="same")(x)
    x = keras.layers.Add()([x, s])
    x = keras.layers.Activation(activation)(x)
    return keras.layers.MaxPool1D(pool_size=2, strides=2)(x)


def build_model(input_shape, num_classes):
    inputs = keras.layers.Input(shape=input_shape, name="input")
    x = residual_block(inputs, 8, 2)
    x = residual_block(x, 16, 2)
    x = residual_block(x, 32, 3)
    x = residual_block(x, 64, 3)
    x = residual_block(x, 64, 3)
    x = keras.layers.AveragePooling1D(pool_size=3, strides=3)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    outputs = keras.layers.Dense(num_classes, activation="softmax", name="output")(x)
    return keras.models.Model(inputs=inputs, outputs=outputs)


model = build_model((SAMPLING_RATE // 2, 1), len(class_names))
model.summary()

# Compile the model using Adam's default learning rate
model.compile(optimizer="Adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

model_save_filename = "model.keras"
earlystopping_cb = keras.callbacks.EarlyStopping(patience=10, restore_best_weights=True)
mdlcheckpoint_cb = keras.callbacks.ModelCheckpoint(
    model_save_filename, monitor="val_accuracy", save_best_only=True)

history = model.fit(train_ds, epochs=EPOCHS, validation_data=valid_ds,
                    callbacks=[earlystopping_cb, mdlcheckpoint_cb])
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})

print(model.evaluate(valid_ds))
assert os.path.exists(model_save_filename)

# Demonstration: noisy validation samples, predicted and compared with the speaker.
SAMPLES_TO_DISPLAY = 10
x = add_noise(valid_audio[:SAMPLES_TO_DISPLAY], noises, scale=SCALE).astype("float32")
y_pred = np.argmax(model.predict(audio_to_fft(x)), axis=-1)
for index in range(SAMPLES_TO_DISPLAY):
    print("Speaker:\33{} {}\33[0m\tPredicted:\33{} {}\33[0m".format(
        "[92m" if y_pred[index] == valid_labels[index] else "[91m",
        class_names[valid_labels[index]],
        "[92m" if y_pred[index] == valid_labels[index] else "[91m",
        class_names[y_pred[index]]))
