# Modeled on keras-io examples/vision/image_classification_from_scratch.py (Keras 3 form);
# written for tessera. In place of the Cats vs Dogs download and image_dataset_from_directory:
# 48x48 RGB images (180x180 there) of noise with a bright blob in the upper ("cat", 0) or lower
# ("dog", 1) half (a horizontal flip keeps the class), served in batches by a
# keras.utils.PyDataset that applies the augmentation layers, as the example's
# `train_ds.map(lambda img, label: (data_augmentation(img), label))`; the small Xception's
# widths divided by 8 (16-91 in place of 128-728, 128 in place of 1024); 256 + 64 images,
# 2 epochs. The inference image is written to a PNG file and read back with load_img.
import os
import tempfile

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from PIL import Image

image_size = (48, 48)
batch_size = 32

rng = np.random.default_rng(0)


def pet_images(n):
    labels = rng.integers(0, 2, n)
    images = rng.uniform(0, 120, (n,) + image_size + (3,))
    rows = np.arange(image_size[0])[:, None]
    cols = np.arange(image_size[1])[None, :]
    for i, label in enumerate(labels):
        cy = rng.integers(6, 18) + 24 * label
        cx = rng.integers(8, 40)
        blob = (rows - cy) ** 2 + (cols - cx) ** 2 < 36
        images[i][blob] = 240
    return images.astype("float32"), labels.astype("int32")


train_images, train_labels = pet_images(256)
val_images, val_labels = pet_images(64)
print("Number of training images:", len(train_images), "validation:", len(val_images))

data_augmentation_layers = [
    layers.RandomFlip("horizontal"),
    layers.RandomRotation(0.1),
]


def data_augmentation(images):
    for layer in data_augmentation_layers:
        images = layer(images)
    return images


class PetImages(keras.utils.PyDataset):
    """The (images, labels) batches of some samples, augmented when asked, as the
    example's dataset pipeline serves them."""

    def __init__(self, images, labels, augment, **kwargs):
        super().__init__(**kwargs)
        self.images, self.labels, self.augment = images, labels, augment

    def __len__(self):
        return len(self.images) // batch_size

    def __getitem__(self, idx):
        sl = slice(idx * batch_size, (idx + 1) * batch_size)
        images = self.images[sl]
        if self.augment:
            images = data_augmentation(images)
        return images, self.labels[sl]


# The augmentation applied again and again to one batch: the first image changes.
augmented = [np.asarray(data_augmentation(train_images[:8]))[0] for _ in range(3)]
print("augmented images:", [a.shape for a in augmented],
      "differ:", not np.allclose(augmented[0], augmented[1]))

train_ds = PetImages(train_images, train_labels, augment=True)
val_ds = PetImages(val_images, val_labels, augment=False)


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)

    # Entry block
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(16, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    for size in [16, 32, 64, 91]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    x = layers.SeparableConv2D(128, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    x = layers.GlobalAveragePooling2D()(x)
    if num_classes == 2:
        units = 1
    else:
        units = num_classes

    x = layers.Dropout(0.25)(x)
    # We specify activation=None so as to return logits
    outputs = layers.Dense(units, activation=None)(x)
    return keras.Model(inputs, outputs)


model = make_model(input_shape=image_size + (3,), num_classes=2)
model.summary()

epochs = 2
workdir = tempfile.mkdtemp()
callbacks = [
    keras.callbacks.ModelCheckpoint(os.path.join(workdir, "save_at_{epoch}.keras")),
]
model.compile(
    optimizer=keras.optimizers.Adam(3e-3),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy(name="acc")],
)
history = model.fit(train_ds, epochs=epochs, callbacks=callbacks, validation_data=val_ds)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
assert sorted(os.listdir(workdir)) == ["save_at_1.keras", "save_at_2.keras"]

# Run inference on new data: one image written to a file and read back.
image_path = os.path.join(workdir, "pet.png")
Image.fromarray(val_images[0].astype("uint8")).save(image_path)
img = keras.utils.load_img(image_path, target_size=image_size)
img_array = keras.utils.img_to_array(img)
img_array = keras.ops.expand_dims(img_array, 0)  # Create batch axis

predictions = model.predict(img_array)
score = float(keras.ops.sigmoid(predictions[0][0]))
print(f"This image is {100 * (1 - score):.2f}% cat and {100 * score:.2f}% dog.")
print("label:", int(val_labels[0]))

reloaded = keras.models.load_model(os.path.join(workdir, "save_at_2.keras"))
np.testing.assert_allclose(np.asarray(reloaded.predict(img_array)), np.asarray(predictions),
                           rtol=1e-4, atol=1e-5)
