# Modeled on keras-io examples/vision/autoencoder.py; written for tessera.
# A convolutional autoencoder learns to rebuild digits, then to denoise them.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers


def preprocess(array):
    """Scales uint8 images to [0, 1] floats of shape (n, 28, 28, 1)."""
    array = array.astype("float32") / 255.0
    array = np.reshape(array, (len(array), 28, 28, 1))
    return array


def noise(array):
    """The images with Gaussian noise added, clipped back to [0, 1]."""
    noise_factor = 0.4
    noisy_array = array + noise_factor * np.random.normal(loc=0.0, scale=1.0, size=array.shape)
    return np.clip(noisy_array, 0.0, 1.0)


def display(array1, array2, name):
    """Ten random images of each array, one row each (written to a file)."""
    n = 10
    indices = np.random.randint(len(array1), size=n)
    images1 = array1[indices, :]
    images2 = array2[indices, :]
    plt.figure(figsize=(20, 4))
    for i, (image1, image2) in enumerate(zip(images1, images2)):
        ax = plt.subplot(2, n, i + 1)
        plt.imshow(image1.reshape(28, 28))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)
        ax = plt.subplot(2, n, i + 1 + n)
        plt.imshow(image2.reshape(28, 28))
        plt.gray()
        ax.get_xaxis().set_visible(False)
        ax.get_yaxis().set_visible(False)
    plt.savefig(os.path.join(tempfile.gettempdir(), name + ".png"))
    plt.close()


# In place of mnist.load_data() (only the images are used): dark uint8 images of the
# same shape, shrunk, each with a bright bar (something to rebuild).
rng = np.random.default_rng(0)


def digits(n):
    x = rng.integers(0, 40, (n, 28, 28), dtype=np.uint8)
    rows = 4 + 2 * rng.integers(0, 10, n)
    x[np.arange(n)[:, None], rows[:, None] + np.arange(3), 6:22] = 255
    return x


train_data = preprocess(digits(1024))
test_data = preprocess(digits(256))

noisy_train_data = noise(train_data)
noisy_test_data = noise(test_data)
display(train_data, noisy_train_data, "noisy")

# The autoencoder, in the functional API.
input = layers.Input(shape=(28, 28, 1))

# Encoder
x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(input)
x = layers.MaxPooling2D((2, 2), padding="same")(x)
x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(x)
x = layers.MaxPooling2D((2, 2), padding="same")(x)

# Decoder
x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)

autoencoder = keras.Model(input, x)
autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
autoencoder.summary()

# Clean images in, the same images out (50 epochs in the example).
autoencoder.fit(
    x=train_data,
    y=train_data,
    epochs=1,
    batch_size=128,
    shuffle=True,
    validation_data=(test_data, test_data),
)
predictions = autoencoder.predict(test_data)
display(test_data, predictions, "rebuilt")

# Noisy images in, clean ones out: the autoencoder learns to denoise (100 epochs there).
autoencoder.fit(
    x=noisy_train_data,
    y=train_data,
    epochs=2,
    batch_size=128,
    shuffle=True,
    validation_data=(noisy_test_data, test_data),
)
predictions = autoencoder.predict(noisy_test_data)
display(noisy_test_data, predictions, "denoised")
print("denoised mean abs error:", float(np.mean(np.abs(predictions - test_data))),
      "noisy:", float(np.mean(np.abs(noisy_test_data - test_data))))
