# Modeled on keras-io examples/vision/cutmix.py; written for tessera. Keras 3 form: the beta
# draw from two `keras.random.gamma` draws, the box from `keras.random.uniform`, `ops.sqrt`,
# `ops.cast`, `ops.clip` (Python `if` on the scalar sizes, as the example), the patch cut with
# `ops.image.crop_images` and put back with `ops.image.pad_images` (their keyword arguments:
# Keras 3's 4th and 5th positional ones are the bottom/right margins), `ops.one_hot` labels.
# The concentrations are scalars (Keras on JAX refuses the example's `[0.25]` lists, whose
# sample it reads as `[0][0]`). CutMix of one image pair at a time costs an XLA compilation
# per box size under Keras on JAX (about a second each): the ops run on the 9 previewed
# pairs, and the training batches mix with the same rule in NumPy, in a keras.utils.PyDataset
# pairing two shuffled orders for `tf.data.Dataset.zip`. A small ResNet (3 stages of 1 residual
# block, 8-16-32 filters) made in the script in place of the downloaded ResNet-20; its initial
# weights saved and loaded into both models (as the example does). Tinted 32x32 images of 10
# classes in place of CIFAR-10.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

keras.utils.set_random_seed(42)

rng = np.random.default_rng(42)
TINTS = rng.uniform(40, 200, (10, 3))


def make(n):
    """CIFAR-10-shaped uint8 images: a class's tint, a bright bar at a class's height."""
    x = rng.uniform(0, 90, (n, 32, 32, 3))
    y = rng.integers(0, 10, (n, 1))
    for img, (c,) in zip(x, y):
        img += TINTS[c] * 0.5
        img[3 * c:3 * c + 3, 4:28] = 255
    return np.clip(x, 0, 255).astype("uint8"), y.astype("uint8")


(x_train, y_train), (x_test, y_test) = make(480), make(160)
y_train = np.asarray(ops.one_hot(y_train.reshape(-1), 10))
y_test = np.asarray(ops.one_hot(y_test.reshape(-1), 10))
print(x_train.shape, y_train.shape, x_test.shape, y_test.shape)

class_names = ["Airplane", "Automobile", "Bird", "Cat", "Deer", "Dog", "Frog", "Horse",
               "Ship", "Truck"]

AUTO = None  # (tf.data.AUTOTUNE)
BATCH_SIZE = 32
IMG_SIZE = 32


def preprocess_image(image, label):
    image = np.asarray(ops.image.resize(image, (IMG_SIZE, IMG_SIZE)))
    image = image.astype("float32") / 255.0
    return image, label


def sample_beta_distribution(size, concentration_0=0.2, concentration_1=0.2):
    gamma_1_sample = keras.random.gamma(shape=[size], alpha=concentration_1)
    gamma_2_sample = keras.random.gamma(shape=[size], alpha=concentration_0)
    return gamma_1_sample / (gamma_1_sample + gamma_2_sample)


def get_box(lambda_value):
    cut_rat = ops.sqrt(1.0 - lambda_value)

    cut_w = IMG_SIZE * cut_rat  # rw
    cut_w = ops.cast(cut_w, "int32")

    cut_h = IMG_SIZE * cut_rat  # rh
    cut_h = ops.cast(cut_h, "int32")

    cut_x = keras.random.uniform((1,), minval=0, maxval=IMG_SIZE)  # rx
    cut_x = ops.cast(cut_x, "int32")
    cut_y = keras.random.uniform((1,), minval=0, maxval=IMG_SIZE)  # ry
    cut_y = ops.cast(cut_y, "int32")

    boundaryx1 = ops.clip(cut_x[0] - cut_w // 2, 0, IMG_SIZE)
    boundaryy1 = ops.clip(cut_y[0] - cut_h // 2, 0, IMG_SIZE)
    bbx2 = ops.clip(cut_x[0] + cut_w // 2, 0, IMG_SIZE)
    bby2 = ops.clip(cut_y[0] + cut_h // 2, 0, IMG_SIZE)

    target_h = bby2 - boundaryy1
    if target_h == 0:
        target_h += 1

    target_w = bbx2 - boundaryx1
    if target_w == 0:
        target_w += 1

    return boundaryx1, boundaryy1, target_h, target_w


def cutmix(train_ds_one, train_ds_two):
    (image1, label1), (image2, label2) = train_ds_one, train_ds_two

    alpha = 0.25
    beta = 0.25

    # A sample of the beta distribution, and the box it gives.
    lambda_value = sample_beta_distribution(1, alpha, beta)
    lambda_value = lambda_value[0]
    boundaryx1, boundaryy1, target_h, target_w = get_box(lambda_value)

    # The patch of the second image, padded back to the image's size.
    crop2 = ops.image.crop_images(image2, top_cropping=boundaryy1, left_cropping=boundaryx1,
                                  target_height=target_h, target_width=target_w)
    image2 = ops.image.pad_images(crop2, top_padding=boundaryy1, left_padding=boundaryx1,
                                  target_height=IMG_SIZE, target_width=IMG_SIZE)
    # The same patch of the first image.
    crop1 = ops.image.crop_images(image1, top_cropping=boundaryy1, left_cropping=boundaryx1,
                                  target_height=target_h, target_width=target_w)
    img1 = ops.image.pad_images(crop1, top_padding=boundaryy1, left_padding=boundaryx1,
                                target_height=IMG_SIZE, target_width=IMG_SIZE)

    # The first image without its patch, plus the second's.
    image1 = image1 - img1
    image = image1 + image2

    # The label mixed by the patch's area.
    lambda_value = 1 - (target_w * target_h) / (IMG_SIZE * IMG_SIZE)
    lambda_value = ops.cast(lambda_value, "float32")
    label = lambda_value * label1 + (1 - lambda_value) * label2
    return image, label


def cutmix_numpy(image1, label1, image2, label2):
    """cutmix's rule on arrays (NumPy's beta and uniform draws): the training batches'."""
    lam = rng.beta(0.25, 0.25)
    cut = np.sqrt(1.0 - lam)
    cut_w = cut_h = int(IMG_SIZE * cut)
    cx, cy = rng.integers(0, IMG_SIZE, 2)
    x1, y1 = np.clip(cx - cut_w // 2, 0, IMG_SIZE), np.clip(cy - cut_h // 2, 0, IMG_SIZE)
    x2, y2 = np.clip(cx + cut_w // 2, 0, IMG_SIZE), np.clip(cy + cut_h // 2, 0, IMG_SIZE)
    h, w = max(y2 - y1, 1), max(x2 - x1, 1)
    image = image1.copy()
    image[y1:y1 + h, x1:x1 + w] = image2[y1:y1 + h, x1:x1 + w]
    lam = 1 - (w * h) / (IMG_SIZE * IMG_SIZE)
    return image, np.float32(lam) * label1 + np.float32(1 - lam) * label2


train_images = np.stack([preprocess_image(i, None)[0] for i in x_train])
test_images = np.stack([preprocess_image(i, None)[0] for i in x_test])


class Batches(keras.utils.PyDataset):
    """Batches of the training set; with mix, each image cut-mixed with the image of a
    second shuffled order (the example zips two shuffled datasets and maps cutmix)."""

    def __init__(self, x, y, mix, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.mix = x, y, mix
        self.one = self.two = np.arange(len(x))

    def __len__(self):
        return -(-len(self.x) // BATCH_SIZE)

    def __getitem__(self, idx):
        if idx == 0:
            self.one, self.two = rng.permutation(len(self.x)), rng.permutation(len(self.x))
        one = self.one[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        if not self.mix:
            return self.x[one], self.y[one]
        two = self.two[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        pairs = [cutmix_numpy(self.x[i], self.y[i], self.x[j], self.y[j])
                 for i, j in zip(one, two)]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


train_ds_cmu = Batches(train_images, y_train, mix=True)
train_ds_simple = Batches(train_images, y_train, mix=False)
test_ds = (test_images, y_test)

# A preview of 9 images cut-mixed by the ops, as the example plots them.
plt.figure(figsize=(10, 10))
for i in range(9):
    image, label = cutmix((train_images[i], y_train[i]), (train_images[-1 - i], y_train[-1 - i]))
    image, label = np.asarray(image), np.asarray(label)
    assert image.shape == (IMG_SIZE, IMG_SIZE, 3)
    assert abs(float(label.sum()) - 1.0) < 1e-5  # a mixture of two one-hot labels
    # each pixel is the first image's or the second's
    from_one = np.isclose(image, train_images[i]).all(-1)
    from_two = np.isclose(image, train_images[-1 - i]).all(-1)
    assert (from_one | from_two).all()
    plt.subplot(3, 3, i + 1)
    plt.imshow(image)
    plt.title(class_names[int(np.argmax(label))])
    plt.axis("off")
plt.savefig("cutmix.png")
plt.close()


def resnet_layer(x, filters, strides=1, activation="relu"):
    x = layers.Conv2D(filters, 3, strides=strides, padding="same",
                      kernel_initializer="he_normal",
                      kernel_regularizer=keras.regularizers.l2(1e-4))(x)
    x = layers.BatchNormalization()(x)
    return layers.Activation(activation)(x) if activation else x


def resnet_v20(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = resnet_layer(inputs, 8)
    for stage, filters in enumerate((8, 16, 32)):
        strides = 1 if stage == 0 else 2
        y = resnet_layer(x, filters, strides)
        y = resnet_layer(y, filters, activation=None)
        if stage > 0:  # a projection to the new shape
            x = resnet_layer(x, filters, strides, activation=None)
        x = layers.Activation("relu")(layers.add([x, y]))
    x = layers.AveragePooling2D(pool_size=8)(x)
    x = layers.Flatten()(x)
    outputs = layers.Dense(num_classes, activation="softmax",
                           kernel_initializer="he_normal")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def training_model():
    return resnet_v20((32, 32, 3), 10)


initial_model = training_model()
initial_model.save_weights("initial_weights.weights.h5")

# 1. Trained with CutMix.
model = training_model()
model.load_weights("initial_weights.weights.h5")
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds_cmu, validation_data=test_ds, epochs=2)  # the example: 15
test_loss, test_accuracy = model.evaluate(*test_ds)
print("Test accuracy: {:.2f}%".format(test_accuracy * 100))

# 2. Trained without it.
model = training_model()
model.load_weights("initial_weights.weights.h5")
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds_simple, validation_data=test_ds, epochs=2)  # the example: 15
test_loss, test_accuracy = model.evaluate(*test_ds)
print("Test accuracy: {:.2f}%".format(test_accuracy * 100))
