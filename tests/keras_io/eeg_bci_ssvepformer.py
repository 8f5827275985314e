# Modeled on keras-io examples/timeseries/eeg_bci_ssvepformer.py; written for tessera.
import os

from tessera.nn import backend as K
from tessera.nn import layers
import tessera.nn as keras

import matplotlib.pyplot as plt
import numpy as np
from scipy.signal import butter, filtfilt

K.set_image_data_format("channels_first")
keras.utils.set_random_seed(42)

# In place of the Nakanishi et al. download (cca_ssvep.zip, scipy's loadmat): each subject's
# "eeg" array generated in the .mat file's layout (targets, channels, samples, blocks), 8
# channels at 256 Hz, 1114 samples, each trial the flicker of its target (9.25-14.75 Hz in
# 0.5 Hz steps, phases 0-1.5 pi by row) and its second harmonic in noise after a 38-sample
# lead-in. 4 subjects of 4 blocks (10 of 15 there).
N_SUBJECTS, N_BLOCKS, N_TARGETS, N_ELECS, N_RAW = 4, 4, 12, 8, 1114
rng = np.random.default_rng(0)
freqs = 9.25 + 0.5 * np.arange(N_TARGETS)
phases = 0.5 * np.pi * (np.arange(N_TARGETS) // 3)


def load_subject(subj):
    t = np.arange(N_RAW) / 256.0
    gain = rng.uniform(0.5, 1.5, N_ELECS)  # per subject and electrode
    eeg = rng.normal(0.0, 4.0, (N_TARGETS, N_ELECS, N_RAW, N_BLOCKS))
    for k in range(N_TARGETS):
        wave = (np.sin(2 * np.pi * freqs[k] * t + phases[k])
                + 0.5 * np.sin(4 * np.pi * freqs[k] * t + phases[k]))
        wave[:38] = 0.0
        eeg[k] += 3.0 * gain[:, None, None] * wave[None, :, None]
    return {"eeg": eeg.astype(np.float32)}


SUBJECTS = [load_subject(s) for s in range(1, N_SUBJECTS + 1)]


def raw_signal(fs=256, duration=1.0, onset=0.135):
    """A 1-second segment of subject 1's raw EEG."""
    onset = 38 + int(onset * fs)
    end = int(duration * fs)
    eeg = SUBJECTS[0]["eeg"].transpose((2, 1, 3, 0))  # samples, channels, blocks, targets
    return eeg[onset : onset + end, :, :, :]


def filter_eeg(data, fs=256, band=[5.0, 45.0], order=4):
    """A zero-phase IIR band-pass filter."""
    B, A = butter(order, np.array(band) / (fs / 2), btype="bandpass")
    return filtfilt(B, A, data, axis=0)


def segment_eeg(elecs=None, fs=256, duration=1.0, band=[5.0, 45.0], order=4, onset=0.135):
    """Every subject's EEG filtered and cut to the trials' segments."""
    onset = 38 + int(onset * fs)
    end = int(duration * fs)
    X, Y = [], []
    for subj in range(N_SUBJECTS):
        eeg = SUBJECTS[subj]["eeg"].transpose((2, 1, 3, 0))
        eeg = filter_eeg(eeg, fs=fs, band=band, order=order)
        eeg = eeg[onset : onset + end, :, :, :]
        samples, channels, blocks, targets = eeg.shape
        y = np.tile(np.arange(1, targets + 1), (blocks, 1))
        y = y.reshape((1, blocks * targets), order="F")
        X.append(eeg.reshape((samples, channels, blocks * targets), order="F"))
        Y.append(y)
    X = np.array(X, dtype=np.float32, order="F")
    Y = np.array(Y, dtype=np.float32).squeeze()
    return X, Y


band = [8, 64]
order = 4
fs = 256
duration = 1.0

X_raw = raw_signal(fs=fs, duration=duration)
print(f"A single subject raw EEG (X_raw) shape: {X_raw.shape} "
      "[Samples x Channels x Blocks x Targets]")
X, Y = segment_eeg(band=band, order=order, fs=fs, duration=duration)
print(f"Full training data (X) shape: {X.shape} [Subject x Samples x Channels x Trials]")
print(f"data labels (Y) shape:        {Y.shape} [Subject x Trials]")

samples = X.shape[1]
time = np.linspace(0.0, samples / fs, samples) * 1000

elec = 6  # Oz
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(time, X_raw[:, elec, 0, 0], "r-")
ax1.set_xlabel("Time (ms)")
ax1.set_ylabel("Voltage (uV)")
ax1.set_title("Raw EEG : 1 second at Oz ")
ax2.plot(time, X[0, :, elec, 0], "b-")
ax2.set_xlabel("Time (ms)")
ax2.set_ylabel("Voltage (uV)")
ax2.set_title("Filtered EEG between 8-64 Hz: 1 second at Oz")
plt.tight_layout()
plt.savefig("eeg.png")
plt.close()


class ComplexSpectrum(keras.layers.Layer):
    def __init__(self, nfft=512, fft_start=8, fft_end=64):
        super().__init__()
        self.nfft = nfft
        self.fft_start = fft_start
        self.fft_end = fft_end

    def call(self, x):
        samples = x.shape[-1]
        x = keras.ops.rfft(x, fft_length=self.nfft)
        real = x[0] / samples
        imag = x[1] / samples
        real = real[:, :, self.fft_start : self.fft_end]
        imag = imag[:, :, self.fft_start : self.fft_end]
        return keras.ops.concatenate((real, imag), axis=-1)


def small_normal():
    return keras.initializers.RandomNormal(mean=0.0, stddev=0.01, seed=None)


class ChannelComb(keras.layers.Layer):
    def __init__(self, n_channels, drop_rate=0.5):
        super().__init__()
        self.conv = layers.Conv1D(2 * n_channels, 1, padding="same",
                                  kernel_initializer=small_normal())
        self.normalization = layers.LayerNormalization()
        self.activation = layers.Activation(activation="gelu")
        self.drop = layers.Dropout(drop_rate)

    def call(self, x):
        x = self.conv(x)
        x = self.normalization(x)
        x = self.activation(x)
        return self.drop(x)


class ConvAttention(keras.layers.Layer):
    def __init__(self, n_channels, drop_rate=0.5):
        super().__init__()
        self.norm = layers.LayerNormalization()
        self.conv = layers.Conv1D(2 * n_channels, 31, padding="same",
                                  kernel_initializer=small_normal())
        self.activation = layers.Activation(activation="gelu")
        self.drop = layers.Dropout(drop_rate)

    def call(self, x):
        input = x
        x = self.norm(x)
        x = self.conv(x)
        x = self.activation(x)
        x = self.drop(x)
        return x + input


class ChannelMLP(keras.layers.Layer):
    def __init__(self, n_features, drop_rate=0.5):
        super().__init__()
        self.norm = layers.LayerNormalization()
        self.mlp = layers.Dense(2 * n_features, kernel_initializer=small_normal())
        self.activation = layers.Activation(activation="gelu")
        self.drop = layers.Dropout(drop_rate)
        self.cat = layers.Concatenate(axis=1)

    def call(self, x):
        input = x
        channels = x.shape[1]  # x: (batch, channels, features)
        x = self.norm(x)
        output_channels = []
        for i in range(channels):
            c = self.mlp(x[:, :, i])
            # (a layer made inside call, as the example does)
            c = layers.Reshape([1, -1])(c)
            output_channels.append(c)
        x = self.cat(output_channels)
        x = self.activation(x)
        x = self.drop(x)
        return x + input


class Encoder(keras.layers.Layer):
    def __init__(self, n_channels, n_features, drop_rate=0.5):
        super().__init__()
        self.attention1 = ConvAttention(n_channels, drop_rate=drop_rate)
        self.mlp1 = ChannelMLP(n_features, drop_rate=drop_rate)
        self.attention2 = ConvAttention(n_channels, drop_rate=drop_rate)
        self.mlp2 = ChannelMLP(n_features, drop_rate=drop_rate)

    def call(self, x):
        x = self.attention1(x)
        x = self.mlp1(x)
        x = self.attention2(x)
        return self.mlp2(x)


class MlpHead(keras.layers.Layer):
    def __init__(self, n_classes, drop_rate=0.5):
        super().__init__()
        self.flatten = layers.Flatten()
        self.drop = layers.Dropout(drop_rate)
        self.linear1 = layers.Dense(6 * n_classes, kernel_initializer=small_normal())
        self.norm = layers.LayerNormalization()
        self.activation = layers.Activation(activation="gelu")
        self.drop2 = layers.Dropout(drop_rate)
        self.linear2 = layers.Dense(n_classes, kernel_initializer=small_normal())

    def call(self, x):
        x = self.flatten(x)
        x = self.drop(x)
        x = self.linear1(x)
        x = self.norm(x)
        x = self.activation(x)
        x = self.drop2(x)
        return self.linear2(x)


def create_ssvepformer(input_shape, fs, resolution, fq_band, n_channels, n_classes, drop_rate):
    nfft = round(fs / resolution)
    fft_start = int(fq_band[0] / resolution)
    fft_end = int(fq_band[1] / resolution) + 1
    n_features = fft_end - fft_start
    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            ComplexSpectrum(nfft, fft_start, fft_end),
            ChannelComb(n_channels=n_channels, drop_rate=drop_rate),
            Encoder(n_channels=n_channels, n_features=n_features, drop_rate=drop_rate),
            Encoder(n_channels=n_channels, n_features=n_features, drop_rate=drop_rate),
            MlpHead(n_classes=n_classes, drop_rate=drop_rate),
            layers.Activation(activation="softmax"),
        ]
    )


BATCH_SIZE = 32  # 128 there
EPOCHS = 4  # 100 there
LR = 0.01  # 0.001 there, over 100 epochs
WD = 0.001
MOMENTUM = 0.9
DROP_RATE = 0.5
resolution = 0.5  # 0.25 there: half the spectrum's bins


def concatenate_subjects(x, y, fold):
    X = np.concatenate([x[idx] for idx in fold], axis=-1)
    Y = np.concatenate([y[idx] for idx in fold], axis=-1)
    X = X.transpose((2, 1, 0))  # trials x channels x samples
    return X, Y - 1


class Batches(keras.utils.PyDataset):
    """The arrays in order, in batches (the example's tf.data from_tensor_slices.batch)."""

    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


def evaluate_subject(x_train, y_train, x_val, y_val, fs=256, resolution=resolution,
                     band=[8, 64], channels=8, n_classes=12, drop_rate=DROP_RATE):
    train_dataset = Batches(x_train, y_train, BATCH_SIZE)
    test_dataset = Batches(x_val, y_val, BATCH_SIZE)
    model = create_ssvepformer(input_shape, fs, resolution, band, channels, n_classes,
                               drop_rate)
    sgd = keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM, weight_decay=WD)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=sgd,
                  metrics=["accuracy"], jit_compile=True)
    model.fit(train_dataset, batch_size=BATCH_SIZE, epochs=EPOCHS,
              validation_data=test_dataset, verbose=0)
    # what the comparison with Keras reads: the loss over the training trials before and
    # after one more epoch on arrays
    model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=1, verbose=0)
    loss, acc = model.evaluate(test_dataset)
    return acc * 100


channels = X.shape[2]
samples = X.shape[1]
input_shape = (channels, samples)
n_classes = 12

model = create_ssvepformer(input_shape, fs, resolution, band, channels, n_classes, DROP_RATE)
model.summary()

accs = np.zeros(2)  # the first 2 leave-one-subject-out folds (10 there)
for subject in range(2):
    print(f"Testing subject: {subject + 1}")
    folds = np.delete(np.arange(N_SUBJECTS), subject)
    x_train, y_train = concatenate_subjects(X, Y, folds)
    x_val, y_val = concatenate_subjects(X, Y, [subject])
    accs[subject] = evaluate_subject(x_train, y_train, x_val, y_val)

print(f"\nAccuracy Across Subjects: {accs.mean()} % std: {np.std(accs)}")
