# Modeled on keras-io examples/vision/3D_image_classification.py; written for tessera.
# Keras 3 form: `keras.optimizers.schedules.ExponentialDecay` and `keras.callbacks` for
# tf.keras's, the checkpoint as `.weights.h5` (Keras 3 saves weights to that suffix); the
# rotation and blur augmentations written with NumPy (np.rot90 of a quarter turn in place of
# scipy's small-angle ndimage.rotate, a 3-tap mean in place of gaussian_filter) and applied by
# a keras.utils.PyDataset in place of tf.data and tf.numpy_function.
import random

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
import matplotlib.pyplot as plt

# In place of the MosMedData CT scans (nibabel reading .nii.gz downloads, resized to
# 128x128x64): volumes in Hounsfield units of a shrunk size, with a dense "lesion" in the
# right or the left half of the lungs. The example's 40 scans, 28 for training.
depth, width, height = 32, 32, 16  # the example: 128 x 128 x 64
rng = np.random.default_rng(0)


def make_scans(n, side):
    scans = rng.normal(-700, 150, (n, depth, width, height))
    for s in scans:
        x = rng.integers(2, depth // 2 - 6) + (depth // 2 if side == "right" else 0)
        y, z = rng.integers(4, width - 10), rng.integers(2, height - 8)
        s[x:x + 6, y:y + 6, z:z + 6] = rng.normal(200, 50, (6, 6, 6))
    return scans


right_scans = make_scans(20, "right")
left_scans = make_scans(20, "left")

# The scans with a lesion on the right are labelled 1, on the left 0.
right_labels = np.array([1 for _ in range(len(right_scans))])
left_labels = np.array([0 for _ in range(len(left_scans))])

# Split 70-30 for training and testing.
x_train = np.concatenate((right_scans[:14], left_scans[:14]), axis=0)
y_train = np.concatenate((right_labels[:14], left_labels[:14]), axis=0)
x_test = np.concatenate((right_scans[14:], left_scans[14:]), axis=0)
y_test = np.concatenate((right_labels[14:], left_labels[14:]), axis=0)
print("Number of samples in train and test are %d and %d." % (x_train.shape[0], x_test.shape[0]))


def normalize(volume):
    min = -1000
    max = 400
    volume = (volume - min) / (max - min)
    volume[volume > 1] = 1.0
    volume[volume < 0] = 0.0
    volume = np.expand_dims(volume, axis=3)
    return volume.astype("float32")


def rotate(volume):
    # A quarter turn in the (width, height) plane's square part, either way.
    k = random.choice([-1, 1])
    out = volume.copy()
    out[:, :height, :height] = np.rot90(volume[:, :height, :height], k, axes=(1, 2))
    return out


def blur(volume):
    # A mean over each voxel and its neighbours along every axis.
    out = volume.copy()
    for axis in range(3):
        out = (np.roll(out, 1, axis) + out + np.roll(out, -1, axis)) / 3
    return out


class ScanDataset(keras.utils.PyDataset):
    """Batches of scans, each augmented on the fly (training) and normalized."""

    def __init__(self, x, y, batch_size, augment, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size, self.augment = x, y, batch_size, augment
        self.order = np.random.permutation(len(x))

    def __len__(self):
        return len(self.x) // self.batch_size

    def __getitem__(self, idx):
        batch = self.order[idx * self.batch_size:(idx + 1) * self.batch_size]
        volumes = []
        for i in batch:
            volume = self.x[i]
            if self.augment:
                augmentation = random.choice(["rotate", "blur", "normal"])
                if augmentation == "rotate":
                    volume = rotate(volume)
                elif augmentation == "blur":
                    volume = blur(volume)
            volumes.append(normalize(volume))
        return np.stack(volumes), self.y[batch].astype("float32")

    def on_epoch_end(self):
        self.order = np.random.permutation(len(self.x))


batch_size = 2
train_dataset = ScanDataset(x_train, y_train, batch_size, augment=True)
test_dataset = ScanDataset(x_test, y_test, batch_size, augment=False)

images, labels = train_dataset[0]
image = images[0]
print("Dimension of the CT scan is:", image.shape)
plt.imshow(np.squeeze(image[:, :, 8]), cmap="gray")
plt.savefig("slice.png")  # the example: shown, and a montage of 100 slices


def get_model(width=128, height=128, depth=64):
    """A 3D convolutional neural network."""
    inputs = keras.Input((width, height, depth, 1))

    # Filters 8, 16, 32 (16, 32, 64, 128 there: a fourth block does not fit the shrunk scans)
    x = layers.Conv3D(filters=8, kernel_size=3, activation="relu")(inputs)
    x = layers.MaxPool3D(pool_size=2)(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv3D(filters=16, kernel_size=3, activation="relu")(x)
    x = layers.MaxPool3D(pool_size=2)(x)
    x = layers.BatchNormalization()(x)

    x = layers.Conv3D(filters=32, kernel_size=3, activation="relu", padding="same")(x)
    x = layers.MaxPool3D(pool_size=2)(x)
    x = layers.BatchNormalization()(x)

    x = layers.Flatten()(x)
    x = layers.Dense(units=64, activation="relu")(x)  # 256 there
    x = layers.Dropout(0.3)(x)

    outputs = layers.Dense(units=1, activation="sigmoid")(x)

    model = keras.Model(inputs, outputs, name="3dcnn")
    return model


model = get_model(width=depth, height=width, depth=height)
model.summary()

initial_learning_rate = 0.001  # the example: 0.0001 over 100 epochs
lr_schedule = keras.optimizers.schedules.ExponentialDecay(
    initial_learning_rate, decay_steps=100000, decay_rate=0.96, staircase=True
)
model.compile(
    loss="binary_crossentropy",
    optimizer=keras.optimizers.Adam(learning_rate=lr_schedule),
    metrics=["acc"],
)

checkpoint_cb = keras.callbacks.ModelCheckpoint(
    "3d_image_classification.weights.h5", save_best_only=True, save_weights_only=True
)
early_stopping_cb = keras.callbacks.EarlyStopping(monitor="val_acc", patience=15)

epochs = 6  # the example: 100
model.fit(
    train_dataset,
    validation_data=test_dataset,
    epochs=epochs,
    shuffle=True,
    verbose=2,
    callbacks=[checkpoint_cb, early_stopping_cb],
)

fig, ax = plt.subplots(1, 2, figsize=(20, 3))
ax = ax.ravel()
for i, met in enumerate(["acc", "loss"]):
    ax[i].plot(model.history.history[met])
    ax[i].plot(model.history.history["val_" + met])
    ax[i].set_title("Model {}".format(met))
    ax[i].set_xlabel("epochs")
    ax[i].set_ylabel(met)
    ax[i].legend(["train", "val"])
fig.savefig("history.png")

model.load_weights("3d_image_classification.weights.h5")
prediction = model.predict(np.expand_dims(normalize(x_test[0]), axis=0))[0]
scores = [1 - prediction[0], prediction[0]]

CLASS_NAMES = ["left", "right"]
for score, name in zip(scores, CLASS_NAMES):
    print("This model is %.2f percent confident that cancer is in the %s side" % ((100 * score), name))
