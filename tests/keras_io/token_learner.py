# Modeled on keras-io examples/vision/token_learner.py (Keras 3 form); written for tessera.
# In place of CIFAR-10 and tf.data: uint8 arrays of its per-sample shape, each image tinted by a
# colour of its class, given to fit in batches of 64 (256 there); 320 training, 64 validation
# and 64 test images; projection 32 (128 there), 2 heads (4), 2 epochs (20).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

BATCH_SIZE = 64
INPUT_SHAPE = (32, 32, 3)
NUM_CLASSES = 10

LEARNING_RATE = 1e-3
WEIGHT_DECAY = 1e-4
EPOCHS = 2

IMAGE_SIZE = 48  # Input images are resized to this size.
PATCH_SIZE = 6
NUM_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2

LAYER_NORM_EPS = 1e-6
PROJECTION_DIM = 32
NUM_HEADS = 2
NUM_LAYERS = 4
MLP_UNITS = [PROJECTION_DIM * 2, PROJECTION_DIM]

NUM_TOKENS = 4

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
colours = rng.integers(0, 256, (NUM_CLASSES, 3))


def cifar(n):
    labels = rng.integers(0, NUM_CLASSES, (n, 1)).astype(np.uint8)
    tint = colours[labels[:, 0]][:, None, None] * 2 // 3
    images = rng.integers(0, 256, (n,) + INPUT_SHAPE) // 3 + tint
    return images.astype(np.uint8), labels


(x_train, y_train), (x_test, y_test) = cifar(384), cifar(64)
(x_train, y_train), (x_val, y_val) = (x_train[:320], y_train[:320]), (x_train[320:], y_train[320:])
print(f"Training samples: {len(x_train)}")
print(f"Validation samples: {len(x_val)}")
print(f"Testing samples: {len(x_test)}")

data_augmentation = keras.Sequential(
    [
        layers.Rescaling(1 / 255.0),
        layers.Resizing(INPUT_SHAPE[0] + 20, INPUT_SHAPE[0] + 20),
        layers.RandomCrop(IMAGE_SIZE, IMAGE_SIZE),
        layers.RandomFlip("horizontal"),
    ],
    name="data_augmentation",
)


class PatchEncoder(layers.Layer):
    def __init__(self, num_patches, projection_dim):
        super().__init__()
        self.num_patches = num_patches
        self.position_embedding = layers.Embedding(input_dim=num_patches,
                                                   output_dim=projection_dim)

    def call(self, patch):
        positions = ops.expand_dims(ops.arange(start=0, stop=self.num_patches, step=1), axis=0)
        return patch + self.position_embedding(positions)

    def get_config(self):
        config = super().get_config()
        config.update({"num_patches": self.num_patches})
        return config


def mlp(x, dropout_rate, hidden_units):
    for units in hidden_units:
        x = layers.Dense(units, activation=ops.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def token_learner(inputs, number_of_tokens=NUM_TOKENS):
    x = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(inputs)  # (B, H, W, C)
    # Single-channel attention maps from a small conv stack: (B, num_tokens, H*W).
    convs = [layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation=ops.gelu,
                           padding="same", use_bias=False) for _ in range(3)]
    attention_maps = keras.Sequential(
        convs + [
            layers.Conv2D(filters=number_of_tokens, kernel_size=(3, 3), activation="sigmoid",
                          padding="same", use_bias=False),
            layers.Reshape((-1, number_of_tokens)),  # (B, H*W, num_of_tokens)
            layers.Permute((2, 1)),
        ]
    )(x)
    num_filters = inputs.shape[-1]
    inputs = layers.Reshape((1, -1, num_filters))(inputs)  # (B, 1, H*W, C)
    attended_inputs = ops.expand_dims(attention_maps, axis=-1) * inputs  # (B, tokens, H*W, C)
    return ops.mean(attended_inputs, axis=2)  # (B, num_tokens, C)


def transformer(encoded_patches):
    x1 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(encoded_patches)
    attention_output = layers.MultiHeadAttention(num_heads=NUM_HEADS, key_dim=PROJECTION_DIM,
                                                 dropout=0.1)(x1, x1)
    x2 = layers.Add()([attention_output, encoded_patches])
    x3 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x2)
    x4 = mlp(x3, hidden_units=MLP_UNITS, dropout_rate=0.1)
    return layers.Add()([x4, x2])


def create_vit_classifier(use_token_learner=True, token_learner_units=NUM_TOKENS):
    inputs = layers.Input(shape=INPUT_SHAPE)
    augmented = data_augmentation(inputs)
    projected_patches = layers.Conv2D(filters=PROJECTION_DIM,
                                      kernel_size=(PATCH_SIZE, PATCH_SIZE),
                                      strides=(PATCH_SIZE, PATCH_SIZE), padding="VALID")(augmented)
    _, h, w, c = projected_patches.shape
    projected_patches = layers.Reshape((h * w, c))(projected_patches)
    encoded_patches = PatchEncoder(num_patches=NUM_PATCHES,
                                   projection_dim=PROJECTION_DIM)(projected_patches)
    encoded_patches = layers.Dropout(0.1)(encoded_patches)
    for i in range(NUM_LAYERS):
        encoded_patches = transformer(encoded_patches)
        # The TokenLearner halfway through: (B, h*h, c) -> (B, num_tokens, c).
        if use_token_learner and i == NUM_LAYERS // 2:
            _, hh, c = encoded_patches.shape
            h = int(math.sqrt(hh))
            encoded_patches = layers.Reshape((h, h, c))(encoded_patches)
            encoded_patches = token_learner(encoded_patches, token_learner_units)
    representation = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(encoded_patches)
    representation = layers.GlobalAvgPool1D()(representation)
    outputs = layers.Dense(NUM_CLASSES, activation="softmax")(representation)
    return keras.Model(inputs=inputs, outputs=outputs)


def run_experiment(model):
    optimizer = keras.optimizers.AdamW(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    model.compile(
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy"),
        ],
    )
    checkpoint_filepath = "checkpoint.weights.h5"
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath, monitor="val_accuracy", save_best_only=True,
        save_weights_only=True)
    _ = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=EPOCHS,
                  validation_data=(x_val, y_val), callbacks=[checkpoint_callback])
    model.load_weights(checkpoint_filepath)
    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, batch_size=BATCH_SIZE)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(f"Test top 5 accuracy: {round(top_5_accuracy * 100, 2)}%")


vit_token_learner = create_vit_classifier()
vit_token_learner.summary()
run_experiment(vit_token_learner)
