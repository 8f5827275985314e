# Modeled on keras-io examples/vision/convmixer.py (its Keras 3 form); written for tessera.
# CIFAR-10 replaced by random 32x32 images tinted by a colour of their class; 640 images;
# the tf.data pipeline by arrays, batches augmented by data_augmentation (random crops and
# flips) as the example's map does; ConvMixer-32/2 (32 filters, depth 2) in place of 256/8;
# learning rate 0.005, batches of 16, 3 epochs; BatchNormalization's momentum 0.9.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

learning_rate = 0.005
weight_decay = 0.0001
batch_size = 16
num_epochs = 3

rng = np.random.default_rng(0)
y_train = rng.integers(0, 10, size=(640, 1)).astype("int64")
tints = rng.uniform(-40, 40, size=(10, 3))  # each class tints its images
x_train = np.clip(rng.normal(128, 50, size=(640, 32, 32, 3)) + tints[y_train[:, 0], None, None],
                  0, 255).astype("uint8")
x_test, y_test = x_train[:128], y_train[:128]
val_split = 0.1

val_indices = int(len(x_train) * val_split)
new_x_train, new_y_train = x_train[val_indices:], y_train[val_indices:]
x_val, y_val = x_train[:val_indices], y_train[:val_indices]

print(f"Training data samples: {len(new_x_train)}")
print(f"Validation data samples: {len(x_val)}")
print(f"Test data samples: {len(x_test)}")

image_size = 32

data_augmentation = keras.Sequential(
    [layers.RandomCrop(image_size, image_size), layers.RandomFlip("horizontal")],
    name="data_augmentation",
)


def make_datasets(images, labels, is_train=False):
    """The example's tf.data pipeline on arrays: shuffled and augmented batches when
    training."""
    if is_train:
        order = np.random.permutation(len(images))
        images, labels = images[order], labels[order]
        images = np.concatenate(
            [np.asarray(data_augmentation(images[i:i + batch_size].astype("float32"),
                                          training=True))
             for i in range(0, len(images), batch_size)])
    return images, labels


train_dataset = make_datasets(new_x_train, new_y_train, is_train=True)
val_dataset = make_datasets(x_val, y_val)
test_dataset = make_datasets(x_test, y_test)


def activation_block(x):
    x = layers.Activation("gelu")(x)
    # momentum 0.9 (Keras's default: 0.99): over this run's ~100 steps the moving
    # statistics would stay near their initial values, and inference mode fail
    return layers.BatchNormalization(momentum=0.9)(x)


def conv_stem(x, filters: int, patch_size: int):
    x = layers.Conv2D(filters, kernel_size=patch_size, strides=patch_size)(x)
    return activation_block(x)


def conv_mixer_block(x, filters: int, kernel_size: int):
    # Depthwise convolution.
    x0 = x
    x = layers.Conv2D(filters, kernel_size=kernel_size, groups=filters, padding="same")(x)
    x = layers.Add()([activation_block(x), x0])  # Residual.

    # Pointwise convolution.
    x = layers.Conv2D(filters, kernel_size=1)(x)
    x = activation_block(x)
    return x


def get_conv_mixer_32_2(image_size=32, filters=32, depth=2, kernel_size=5, patch_size=2,
                        num_classes=10):
    """ConvMixer-32/2: the paper's ConvMixer-256/8 shrunk."""
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)

    # Extract patch embeddings.
    x = conv_stem(x, filters, patch_size)

    # ConvMixer blocks.
    for _ in range(depth):
        x = conv_mixer_block(x, filters, kernel_size)

    # Classification block.
    x = layers.GlobalAvgPool2D()(x)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)


out_dir = tempfile.mkdtemp()


def run_experiment(model):
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    checkpoint_filepath = os.path.join(out_dir, "checkpoint.weights.h5")
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath, monitor="val_accuracy", save_best_only=True,
        save_weights_only=True)
    history = model.fit(train_dataset[0], train_dataset[1], batch_size=batch_size,
                        validation_data=val_dataset, epochs=num_epochs,
                        callbacks=[checkpoint_callback], verbose=0)
    model.load_weights(checkpoint_filepath)
    _, accuracy = model.evaluate(test_dataset[0], test_dataset[1])
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(history.history)
    return history, model


conv_mixer_model = get_conv_mixer_32_2()
history, conv_mixer_model = run_experiment(conv_mixer_model)


def visualization_plot(weights, idx=1):
    # Min-max normalization of the weights, so that they are shown on one scale.
    p_min, p_max = weights.min(), weights.max()
    weights = (weights - p_min) / (p_max - p_min)

    # All the filters.
    n_filters = 32
    plt.figure(figsize=(8, 8))
    for i in range(n_filters):
        current_weight = weights[:, :, :, i]
        if current_weight.shape[-1] == 1:
            current_weight = current_weight.squeeze()
        ax = plt.subplot(6, 6, idx)
        ax.set_xticks([])
        ax.set_yticks([])
        plt.imshow(current_weight)
        idx += 1
    plt.savefig(os.path.join(out_dir, f"filters_{weights.shape[0]}.png"))
    plt.close()


# The patch embeddings: layers[0] is the InputLayer, [1] the Rescaling, [2] the stem's Conv2D.
patch_embeddings = conv_mixer_model.layers[2].get_weights()[0]
assert patch_embeddings.shape == (2, 2, 3, 32)  # check
visualization_plot(patch_embeddings)

# The indices of the convolution layers that are not pointwise.
depthwise = []
for i, layer in enumerate(conv_mixer_model.layers):
    if isinstance(layer, layers.Conv2D):
        if layer.get_config()["kernel_size"] == (5, 5):
            print(i, layer)
            depthwise.append(i)
assert depthwise == [5, 12]  # check

idx = depthwise[-1]  # a kernel of the last block
kernel = conv_mixer_model.layers[idx].get_weights()[0]
assert kernel.shape == (5, 5, 1, 32)  # check
visualization_plot(kernel)
