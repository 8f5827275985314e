# Modeled on keras-io examples/vision/mixup.py; written for tessera. Keras 3 form:
# `keras.random.gamma` for `tf.random.gamma`, `ops.one_hot`/`ops.reshape`/`ops.shape` for
# tf's, a keras.utils.PyDataset pairing two shuffled orders of the training set in place of
# `tf.data.Dataset.zip` of two shuffled datasets mapped by mix_up; the initial weights kept
# with `.weights.h5` (Keras 3's suffix for save_weights).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

# In place of keras.datasets.fashion_mnist.load_data(): uint8 images of the same shape,
# shrunk: dim noise with a bright block whose column and height tell the class.
rng = np.random.default_rng(0)


def make(n):
    x = rng.integers(0, 90, (n, 28, 28)).astype(np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    for img, c in zip(x, y):
        r = 3 + 2 * (c % 5) * 2
        col = 4 if c < 5 else 16
        img[r:r + 4, col:col + 8] = 255
    return x, y


(x_train, y_train), (x_test, y_test) = make(2400), make(400)

x_train = x_train.astype("float32") / 255.0
x_train = np.reshape(x_train, (-1, 28, 28, 1))
y_train = ops.one_hot(y_train, 10)

x_test = x_test.astype("float32") / 255.0
x_test = np.reshape(x_test, (-1, 28, 28, 1))
y_test = ops.one_hot(y_test, 10)

BATCH_SIZE = 64
EPOCHS = 3  # the example: 10

# Put aside a few samples to create the validation set.
val_samples = 400  # the example: 2000
x_val, y_val = x_train[:val_samples], y_train[:val_samples]
new_x_train, new_y_train = x_train[val_samples:], y_train[val_samples:]


def sample_beta_distribution(size, concentration_0=0.2, concentration_1=0.2):
    gamma_1_sample = keras.random.gamma(shape=[size], alpha=concentration_1)
    gamma_2_sample = keras.random.gamma(shape=[size], alpha=concentration_0)
    return gamma_1_sample / (gamma_1_sample + gamma_2_sample)


def mix_up(ds_one, ds_two, alpha=0.2):
    # Unpack two datasets
    images_one, labels_one = ds_one
    images_two, labels_two = ds_two
    batch_size = ops.shape(images_one)[0]

    # Sample lambda and reshape it to do the mixup
    l = sample_beta_distribution(batch_size, alpha, alpha)
    x_l = ops.reshape(l, (batch_size, 1, 1, 1))
    y_l = ops.reshape(l, (batch_size, 1))

    # Perform mixup on both images and labels by combining a pair of images/labels
    # (one from each dataset) into one image/label
    images = images_one * x_l + images_two * (1 - x_l)
    labels = labels_one * y_l + labels_two * (1 - y_l)
    return (images, labels)


class Batches(keras.utils.PyDataset):
    """The training set in batches; with mix_up, each batch mixed with a batch of a second
    shuffled order of it (the example zips two shuffled tf.data datasets)."""

    def __init__(self, x, y, mix, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.mix = x, np.asarray(y), mix
        self.on_epoch_end()

    def __len__(self):
        return -(-len(self.x) // BATCH_SIZE)

    def __getitem__(self, idx):
        one = self.one[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        if not self.mix:
            return self.x[one], self.y[one]
        two = self.two[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        images, labels = mix_up((self.x[one], self.y[one]), (self.x[two], self.y[two]))
        return np.asarray(images), np.asarray(labels)

    def on_epoch_end(self):
        self.one = np.random.permutation(len(self.x))
        self.two = np.random.permutation(len(self.x))


train_ds_mu = Batches(new_x_train, new_y_train, mix=True)
train_ds_one = Batches(new_x_train, new_y_train, mix=False)

# Preview 9 samples of the mixed dataset.
sample_images, sample_labels = train_ds_mu[0]
plt.figure(figsize=(10, 10))
for i, (image, label) in enumerate(zip(sample_images[:9], sample_labels[:9])):
    ax = plt.subplot(3, 3, i + 1)
    plt.imshow(image.squeeze())
    print(label.tolist())
    plt.axis("off")
plt.savefig("mixed.png")
# Each mixed label is a convex mixture: its entries sum to 1.
assert np.allclose(np.sum(sample_labels, axis=1), 1.0, atol=1e-5)


def get_training_model():
    model = keras.Sequential(
        [
            layers.Conv2D(16, (5, 5), activation="relu", input_shape=(28, 28, 1)),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(32, (5, 5), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Dropout(0.2),
            layers.GlobalAvgPool2D(),
            layers.Dense(128, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    return model


# The initial random weights, kept so that both trainings start from them.
initial_model = get_training_model()
initial_model.save_weights("initial_weights.weights.h5")

# 1. Train the model with the mixed up dataset
model = get_training_model()
model.load_weights("initial_weights.weights.h5")
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds_mu, validation_data=(x_val, y_val), epochs=EPOCHS)
_, test_acc = model.evaluate(x_test, y_test, batch_size=BATCH_SIZE)
print("Test accuracy: {:.2f}%".format(test_acc * 100))

# 2. Train the model *without* the mixed up dataset
model = get_training_model()
model.load_weights("initial_weights.weights.h5")
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds_one, validation_data=(x_val, y_val), epochs=EPOCHS)
_, test_acc = model.evaluate(x_test, y_test, batch_size=BATCH_SIZE)
print("Test accuracy: {:.2f}%".format(test_acc * 100))
