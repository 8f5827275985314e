# Modeled on keras-io examples/vision/patch_convnet.py; written for tessera. Keras 3 form:
# `ops` for tf's (`ops.repeat` of the class token by the symbolic batch size, `ops.concatenate`,
# `ops.squeeze`), the class token a `keras.Variable` made in `__init__`, sublayers made in
# `build` (a SqueezeExcite, a Trunk holding a list of Sequentials), MultiHeadAttention with
# `return_attention_scores=True` on a sliced query, a layer returning (logits, attention
# weights); a `WarmUpCosine` LearningRateSchedule subclass with AdamW (Keras 3's for
# TensorFlow Addons'). The example's `train_step`/`test_step` (tf.GradientTape and Keras 2's
# `compiled_loss`) as Keras 3 writes them: the augmentation picked by `call`'s `training`,
# `compute_loss` and `compute_metrics` overrides calling the base class's on the logits. A
# callback whose `__init__` skips the base class's, calling the model's parts eagerly and
# `layers.Reshape` on their output. Tinted 32x32 images of 10 classes in place of CIFAR-10.
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

SEED = 42
keras.utils.set_random_seed(SEED)

# DATA
BATCH_SIZE = 64  # the example: 128
INPUT_SHAPE = (32, 32, 3)
NUM_CLASSES = 10

# AUGMENTATION
IMAGE_SIZE = 32  # the example: 48

# ARCHITECTURE
DIMENSIONS = 32  # the example: 256
SE_RATIO = 8
TRUNK_DEPTH = 2

# OPTIMIZER
LEARNING_RATE = 5e-3  # the example: 1e-3
WEIGHT_DECAY = 1e-4

EPOCHS = 4  # the example: 50

# In place of keras.datasets.cifar10.load_data(): uint8 images of the same shape, each class
# a tint and a bright square in one of the image's corners or halves.
rng = np.random.default_rng(SEED)
TINTS = rng.uniform(40, 200, (NUM_CLASSES, 3))


def make(n):
    x = rng.uniform(0, 80, (n, 32, 32, 3))
    y = rng.integers(0, NUM_CLASSES, (n, 1))
    for img, (c,) in zip(x, y):
        img += TINTS[c] * 0.5
        r, q = divmod(int(c), 5)
        img[4 + 16 * r:12 + 16 * r, 2 + 6 * q:8 + 6 * q] = 255
    return np.clip(x, 0, 255).astype("uint8"), y.astype("uint8")


# 1600 training images (25 steps an epoch): with 640 (10 steps) the 4 epochs ended at the knee
# of the loss, where the framework's own draw (initial weights, augmentation, batch order)
# decided the accuracy (0.12 to 1.0 under tessera, 0.15 to 0.74 under Keras, 6 seeds each);
# with 1600 both pass it under every seed tried (tests/keras_io/README.md).
(x_train, y_train), (x_test, y_test) = make(1760), make(200)
(x_train, y_train), (x_val, y_val) = ((x_train[:1600], y_train[:1600]),
                                      (x_train[1600:], y_train[1600:]))
print(f"Training samples: {len(x_train)}")
print(f"Validation samples: {len(x_val)}")
print(f"Testing samples: {len(x_test)}")


class Batches(keras.utils.PyDataset):
    def __init__(self, x, y, shuffle, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.shuffle = x, y, shuffle
        self.order = np.arange(len(x))

    def __len__(self):
        return -(-len(self.x) // BATCH_SIZE)

    def __getitem__(self, idx):
        if idx == 0 and self.shuffle:
            self.order = rng.permutation(len(self.x))
        rows = self.order[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        return self.x[rows].astype("float32"), self.y[rows]


train_ds = Batches(x_train, y_train, shuffle=True)
val_ds = Batches(x_val, y_val, shuffle=False)
test_ds = Batches(x_test, y_test, shuffle=False)


def get_preprocessing():
    return keras.Sequential(
        [layers.Rescaling(1 / 255.0), layers.Resizing(IMAGE_SIZE, IMAGE_SIZE)],
        name="preprocessing")


def get_train_augmentation_model():
    return keras.Sequential(
        [
            layers.Rescaling(1 / 255.0),
            layers.Resizing(INPUT_SHAPE[0] + 8, INPUT_SHAPE[0] + 8),
            layers.RandomCrop(IMAGE_SIZE, IMAGE_SIZE),
            layers.RandomFlip("horizontal"),
        ],
        name="train_data_augmentation")


def build_convolutional_stem(dimensions):
    config = {"kernel_size": (3, 3), "strides": (2, 2), "activation": ops.gelu,
              "padding": "same"}
    return keras.Sequential(
        [layers.Conv2D(filters=dimensions // 2, **config),
         layers.Conv2D(filters=dimensions, **config)],
        name="convolutional_stem")


class SqueezeExcite(layers.Layer):
    """Squeeze and excitation of feature maps."""

    def __init__(self, ratio, **kwargs):
        super().__init__(**kwargs)
        self.ratio = ratio

    def get_config(self):
        config = super().get_config()
        config.update({"ratio": self.ratio})
        return config

    def build(self, input_shape):
        filters = input_shape[-1]
        self.squeeze = layers.GlobalAveragePooling2D(keepdims=True)
        self.reduction = layers.Dense(units=filters // self.ratio, activation="relu",
                                      use_bias=False)
        self.excite = layers.Dense(units=filters, activation="sigmoid", use_bias=False)
        self.multiply = layers.Multiply()

    def call(self, x):
        shortcut = x
        x = self.squeeze(x)
        x = self.reduction(x)
        x = self.excite(x)
        return self.multiply([shortcut, x])


class Trunk(layers.Layer):
    """Residual convolutional blocks, then the patches flattened."""

    def __init__(self, depth, dimensions, ratio, **kwargs):
        super().__init__(**kwargs)
        self.ratio = ratio
        self.dimensions = dimensions
        self.depth = depth

    def get_config(self):
        config = super().get_config()
        config.update({"ratio": self.ratio, "dimensions": self.dimensions, "depth": self.depth})
        return config

    def build(self, input_shape):
        config = {"filters": self.dimensions, "activation": ops.gelu, "padding": "same"}
        trunk_block = [
            layers.LayerNormalization(epsilon=1e-6),
            layers.Conv2D(kernel_size=(1, 1), **config),
            layers.Conv2D(kernel_size=(3, 3), **config),
            SqueezeExcite(ratio=self.ratio),
            layers.Conv2D(kernel_size=(1, 1), filters=self.dimensions, padding="same"),
        ]
        self.trunk_blocks = [keras.Sequential(trunk_block) for _ in range(self.depth)]
        self.add = layers.Add()
        self.flatten_spatial = layers.Reshape((-1, self.dimensions))

    def call(self, x):
        shortcut = x
        for trunk_block in self.trunk_blocks:
            output = trunk_block(x)
            shortcut = self.add([output, shortcut])
            x = shortcut
        return self.flatten_spatial(x)


class AttentionPooling(layers.Layer):
    """Attention of a trainable class token over the trunk's patches."""

    def __init__(self, dimensions, num_classes, **kwargs):
        super().__init__(**kwargs)
        self.dimensions = dimensions
        self.num_classes = num_classes
        self.cls = keras.Variable(ops.zeros((1, 1, dimensions)))

    def get_config(self):
        config = super().get_config()
        config.update({"dimensions": self.dimensions, "num_classes": self.num_classes})
        return config

    def build(self, input_shape):
        self.attention = layers.MultiHeadAttention(num_heads=1, key_dim=self.dimensions,
                                                   dropout=0.2)
        self.layer_norm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layer_norm2 = layers.LayerNormalization(epsilon=1e-6)
        self.layer_norm3 = layers.LayerNormalization(epsilon=1e-6)
        self.mlp = keras.Sequential([
            layers.Dense(units=self.dimensions, activation=ops.gelu),
            layers.Dropout(0.2),
            layers.Dense(units=self.dimensions, activation=ops.gelu),
        ])
        self.dense = layers.Dense(units=self.num_classes)
        self.flatten = layers.Flatten()

    def call(self, x):
        batch_size = ops.shape(x)[0]
        # The class token repeated batch-size times, put before the patches.
        class_token = ops.repeat(self.cls, repeats=batch_size, axis=0)
        x = ops.concatenate([class_token, x], axis=1)
        x = self.layer_norm1(x)
        x, viz_weights = self.attention(query=x[:, 0:1], key=x, value=x,
                                        return_attention_scores=True)
        class_token = class_token + x
        class_token = self.layer_norm2(class_token)
        class_token = self.flatten(class_token)
        class_token = self.layer_norm3(class_token)
        class_token = class_token + self.mlp(class_token)
        logits = self.dense(class_token)
        return logits, ops.squeeze(viz_weights)[..., 1:]


class PatchConvNet(keras.Model):
    def __init__(self, stem, trunk, attention_pooling, preprocessing_model,
                 train_augmentation_model, **kwargs):
        super().__init__(**kwargs)
        self.stem = stem
        self.trunk = trunk
        self.attention_pooling = attention_pooling
        self.train_augmentation_model = train_augmentation_model
        self.preprocessing_model = preprocessing_model

    def call(self, images, training=False):
        # Augmented in training, only preprocessed otherwise.
        if training:
            augmented_images = self.train_augmentation_model(images)
        else:
            augmented_images = self.preprocessing_model(images)
        x = self.stem(augmented_images)
        x = self.trunk(x)
        logits, viz_weights = self.attention_pooling(x)
        return logits, viz_weights

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        logits, _ = y_pred
        return super().compute_loss(x, y, logits, sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        logits, _ = y_pred
        return super().compute_metrics(x, y, logits, sample_weight)


# A batch of test images to follow the model's progress.
test_images, test_labels = test_ds[0]


class TrainMonitor(keras.callbacks.Callback):
    def __init__(self, epoch_interval=None):
        self.epoch_interval = epoch_interval

    def on_epoch_end(self, epoch, logs=None):
        if self.epoch_interval and epoch % self.epoch_interval == 1:
            test_augmented_images = self.model.preprocessing_model(test_images)
            test_x = self.model.stem(test_augmented_images)
            test_x = self.model.trunk(test_x)
            _, test_viz_weights = self.model.attention_pooling(test_x)
            num_patches = ops.shape(test_viz_weights)[-1]
            height = width = int(math.sqrt(num_patches))
            test_viz_weights = layers.Reshape((height, width))(test_viz_weights)
            index = np.random.randint(low=0, high=ops.shape(test_augmented_images)[0])
            selected_image = np.asarray(test_augmented_images[index])
            selected_weight = np.asarray(test_viz_weights[index])
            fig, ax = plt.subplots(nrows=1, ncols=2, figsize=(10, 5))
            ax[0].imshow(selected_image)
            ax[0].set_title(f"Original: {epoch:03d}")
            ax[0].axis("off")
            img = ax[1].imshow(selected_image)
            ax[1].imshow(selected_weight, cmap="inferno", alpha=0.6, extent=img.get_extent())
            ax[1].set_title(f"Attended: {epoch:03d}")
            ax[1].axis("off")
            plt.savefig(f"attended_{epoch:03d}.png")
            plt.close()
            self.seen = tuple(test_viz_weights.shape)


class WarmUpCosine(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warmup, then a cosine decay."""

    def __init__(self, lr_start, lr_max, warmup_steps, total_steps):
        super().__init__()
        self.lr_start = lr_start
        self.lr_max = lr_max
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.pi = np.pi

    def __call__(self, step):
        if self.total_steps < self.warmup_steps:
            raise ValueError("Total number of steps must be larger or equal to warmup steps.")
        step = ops.cast(step, "float32")
        cos_annealed_lr = ops.cos(self.pi * (step - self.warmup_steps)
                                  / float(self.total_steps - self.warmup_steps))
        learning_rate = 0.5 * self.lr_max * (1 + cos_annealed_lr)
        if self.warmup_steps > 0:
            if self.lr_max < self.lr_start:
                raise ValueError("lr_start must be smaller or equal to lr_max.")
            slope = (self.lr_max - self.lr_start) / self.warmup_steps
            warmup_rate = slope * step + self.lr_start
            learning_rate = ops.where(step < self.warmup_steps, warmup_rate, learning_rate)
        return ops.where(step > self.total_steps, 0.0, learning_rate)

    def get_config(self):
        return {"lr_start": self.lr_start, "lr_max": self.lr_max,
                "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


total_steps = int((len(x_train) / BATCH_SIZE) * EPOCHS)
warmup_epoch_percentage = 0.15
warmup_steps = int(total_steps * warmup_epoch_percentage)
scheduled_lrs = WarmUpCosine(lr_start=1e-5, lr_max=LEARNING_RATE, warmup_steps=warmup_steps,
                             total_steps=total_steps)
# The schedule, as the example plots it.
lrs = [float(scheduled_lrs(step)) for step in range(total_steps)]
plt.plot(lrs)
plt.savefig("schedule.png")
plt.close()
assert abs(max(lrs) - LEARNING_RATE) < 1e-4 and lrs[0] < lrs[warmup_steps]

train_callbacks = TrainMonitor(epoch_interval=2)
optimizer = keras.optimizers.AdamW(learning_rate=scheduled_lrs, weight_decay=WEIGHT_DECAY)

model = PatchConvNet(
    stem=build_convolutional_stem(dimensions=DIMENSIONS),
    trunk=Trunk(depth=TRUNK_DEPTH, dimensions=DIMENSIONS, ratio=SE_RATIO),
    attention_pooling=AttentionPooling(dimensions=DIMENSIONS, num_classes=NUM_CLASSES),
    train_augmentation_model=get_train_augmentation_model(),
    preprocessing_model=get_preprocessing(),
)
model.compile(
    optimizer=optimizer,
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
             keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy")],
)
history = model.fit(train_ds, epochs=EPOCHS, validation_data=val_ds,
                    callbacks=[train_callbacks])

loss, acc_top1, acc_top5 = model.evaluate(test_ds)
print(f"Loss: {loss:0.2f}")
print(f"Top 1 test accuracy: {acc_top1*100:0.2f}%")
print(f"Top 5 test accuracy: {acc_top5*100:0.2f}%")
assert train_callbacks.seen == (len(test_images), IMAGE_SIZE // 4, IMAGE_SIZE // 4)

# Attention maps of a few test images.
test_augmented_images = model.preprocessing_model(test_images)
test_x = model.stem(test_augmented_images)
test_x = model.trunk(test_x)
test_logits, test_viz_weights = model.attention_pooling(test_x)
test_viz_weights = np.asarray(test_viz_weights)[None, ...]
print("attention weights:", test_viz_weights.shape)
num_patches = test_viz_weights.shape[-1]
height = width = int(math.sqrt(num_patches))
assert height * width == num_patches
fig, axes = plt.subplots(nrows=2, ncols=4, figsize=(16, 8))
for i, ax in enumerate(axes.flat):
    img = ax.imshow(np.asarray(test_augmented_images[i]))
    ax.imshow(test_viz_weights[0, i].reshape(height, width), cmap="inferno", alpha=0.6,
              extent=img.get_extent())
    ax.axis("off")
plt.savefig("attention.png")
# The eager parts agree with the model's own prediction.
logits, _ = model.predict(test_images, verbose=0)
np.testing.assert_allclose(np.asarray(test_logits), logits, rtol=1e-3, atol=1e-3)
