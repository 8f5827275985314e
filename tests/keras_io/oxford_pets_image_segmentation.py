# Modeled on keras-io examples/vision/oxford_pets_image_segmentation.py (its Keras 3 form);
# written for tessera. The Oxford Pets images and trimaps replaced by random 32x32 images
# whose per-pixel class (0, 1, 2: the trimap's values less one) is the band of a smoothed
# brightness; 192 images, served by a keras.utils.PyDataset as the example's loader serves
# files; the U-Net's filters divided by 4 (8 to 64); 2 epochs.
import os
import random
import tempfile

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from PIL import ImageOps

img_size = (32, 32)
num_classes = 3
batch_size = 16

rng = np.random.default_rng(0)
images = rng.integers(0, 256, size=(192,) + img_size + (3,)).astype("uint8")
smooth = images.astype("float32").mean(axis=-1)
smooth = (smooth + np.roll(smooth, 1, axis=1) + np.roll(smooth, 1, axis=2)
          + np.roll(smooth, -1, axis=1) + np.roll(smooth, -1, axis=2)) / 5
trimaps = (np.digitize(smooth, np.quantile(smooth, [1 / 3, 2 / 3])) + 1).astype("uint8")
input_img_ids = list(range(len(images)))
target_img_ids = list(range(len(images)))
print("Number of samples:", len(input_img_ids))


class OxfordPets(keras.utils.PyDataset):
    """Serves the (image, mask) batches of some samples, as the example's
    loader reads them from files."""

    def __init__(self, batch_size, img_size, input_img_ids, target_img_ids, **kwargs):
        super().__init__(**kwargs)
        self.batch_size = batch_size
        self.img_size = img_size
        self.input_img_ids = input_img_ids
        self.target_img_ids = target_img_ids

    def __len__(self):
        return len(self.target_img_ids) // self.batch_size

    def __getitem__(self, idx):
        i = idx * self.batch_size
        batch_input_ids = self.input_img_ids[i:i + self.batch_size]
        batch_target_ids = self.target_img_ids[i:i + self.batch_size]
        x = np.zeros((self.batch_size,) + self.img_size + (3,), dtype="float32")
        for j, k in enumerate(batch_input_ids):
            x[j] = images[k]
        y = np.zeros((self.batch_size,) + self.img_size + (1,), dtype="uint8")
        for j, k in enumerate(batch_target_ids):
            y[j] = np.expand_dims(trimaps[k], 2)
            # The trimap's labels are 1, 2, 3; less one, 0, 1, 2.
            y[j] -= 1
        return x, y


def get_model(img_size, num_classes):
    inputs = keras.Input(shape=img_size + (3,))

    # [First half of the network: downsampling inputs]

    # Entry block
    x = layers.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    # Blocks 1, 2, 3 are identical apart from the feature depth.
    for filters in [16, 32, 64]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(filters, 1, strides=2, padding="same")(
            previous_block_activation)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    # [Second half of the network: upsampling inputs]

    for filters in [64, 32, 16, 8]:
        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.UpSampling2D(2)(x)

        # Project residual
        residual = layers.UpSampling2D(2)(previous_block_activation)
        residual = layers.Conv2D(filters, 1, padding="same")(residual)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    # Add a per-pixel classification layer
    outputs = layers.Conv2D(num_classes, 3, activation="softmax", padding="same")(x)

    model = keras.Model(inputs, outputs)
    return model


# Free up RAM in case the model definition cells were run multiple times
keras.backend.clear_session()

model = get_model(img_size, num_classes)
model.summary()

# Split the samples into a training and a validation set
val_samples = 32
random.Random(1337).shuffle(input_img_ids)
random.Random(1337).shuffle(target_img_ids)
train_input_img_ids = input_img_ids[:-val_samples]
train_target_img_ids = target_img_ids[:-val_samples]
val_input_img_ids = input_img_ids[-val_samples:]
val_target_img_ids = target_img_ids[-val_samples:]

train_gen = OxfordPets(batch_size, img_size, train_input_img_ids, train_target_img_ids)
val_gen = OxfordPets(batch_size, img_size, val_input_img_ids, val_target_img_ids)

# The "sparse" categorical crossentropy: the targets are integers.
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")

out_dir = tempfile.mkdtemp()
callbacks = [
    keras.callbacks.ModelCheckpoint(os.path.join(out_dir, "oxford_segmentation.keras"),
                                    save_best_only=True)
]

epochs = 2
model.fit(train_gen, epochs=epochs, validation_data=val_gen, callbacks=callbacks, verbose=2)

# Predictions for all the images of the validation set.
val_gen = OxfordPets(batch_size, img_size, val_input_img_ids, val_target_img_ids)
val_preds = model.predict(val_gen)
assert val_preds.shape == (val_samples,) + img_size + (num_classes,)  # check


def display_mask(i):
    """A model's predicted mask, as an image (written to a file)."""
    mask = np.argmax(val_preds[i], axis=-1)
    mask = np.expand_dims(mask, axis=-1)
    img = ImageOps.autocontrast(keras.utils.array_to_img(mask))
    img.save(os.path.join(out_dir, f"mask_{i}.png"))


display_mask(10)

# The best model the checkpoint kept loads back and predicts as saved.
best = keras.models.load_model(os.path.join(out_dir, "oxford_segmentation.keras"))
assert best.predict(val_gen).shape == val_preds.shape  # check
