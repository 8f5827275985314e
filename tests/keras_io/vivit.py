# Modeled on keras-io examples/vision/vivit.py; written for tessera. Keras 3 form:
# `ops.arange` for `tf.range`, `keras.activations.gelu` for `tf.nn.gelu`; the arrays in
# batches of 32 (shuffled by fit) in place of the tf.data pipeline; GIFs written by Pillow
# in place of imageio and notebook widgets.
import os

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
from PIL import Image

SEED = 42
os.environ["TF_CUDNN_DETERMINISTIC"] = "1"
keras.utils.set_random_seed(SEED)

# DATA
BATCH_SIZE = 32
INPUT_SHAPE = (28, 28, 28, 1)
NUM_CLASSES = 11

# OPTIMIZER
LEARNING_RATE = 1e-3  # the example: 1e-4 over 60 epochs
WEIGHT_DECAY = 1e-5

# TRAINING
EPOCHS = 3  # the example: 60

# TUBELET EMBEDDING
PATCH_SIZE = (8, 8, 8)
NUM_PATCHES = (INPUT_SHAPE[0] // PATCH_SIZE[0]) ** 2

# ViViT ARCHITECTURE
LAYER_NORM_EPS = 1e-6
PROJECTION_DIM = 32  # the example: 128
NUM_HEADS = 4  # 8
NUM_LAYERS = 2  # 8


# In place of OrganMNIST3D (medmnist's download): uint8 volumes of the same shape and 11
# classes, shrunk: dim noise with a bright slab across frames at a depth given by the class.
def prepare_dataset(n, rng):
    videos = rng.integers(0, 60, (n, 28, 28, 28)).astype(np.uint8)
    labels = rng.integers(0, NUM_CLASSES, (n, 1)).astype(np.uint8)
    rows = 2 * labels[:, 0].astype(int) + 3
    videos[np.arange(n)[:, None], :, rows[:, None] + np.arange(2)] = 230
    return videos, labels.flatten()


rng = np.random.default_rng(0)
(train_videos, train_labels) = prepare_dataset(352, rng)
(valid_videos, valid_labels) = prepare_dataset(64, rng)
(test_videos, test_labels) = prepare_dataset(64, rng)


def preprocess(frames, label):
    """The frames as floats in [0, 1] with a channel axis, the labels as floats."""
    frames = frames[..., np.newaxis].astype("float32") / 255.0
    label = label.astype("float32")
    return frames, label


train_x, train_y = preprocess(train_videos, train_labels)
valid_x, valid_y = preprocess(valid_videos, valid_labels)
test_x, test_y = preprocess(test_videos, test_labels)


class TubeletEmbedding(layers.Layer):
    def __init__(self, embed_dim, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.projection = layers.Conv3D(
            filters=embed_dim,
            kernel_size=patch_size,
            strides=patch_size,
            padding="VALID",
        )
        self.flatten = layers.Reshape(target_shape=(-1, embed_dim))

    def call(self, videos):
        projected_patches = self.projection(videos)
        flattened_patches = self.flatten(projected_patches)
        return flattened_patches


class PositionalEncoder(layers.Layer):
    def __init__(self, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim

    def build(self, input_shape):
        _, num_tokens, _ = input_shape
        self.position_embedding = layers.Embedding(input_dim=num_tokens, output_dim=self.embed_dim)
        self.positions = ops.arange(start=0, stop=num_tokens, step=1)

    def call(self, encoded_tokens):
        # Encode the positions and add them to the encoded tokens.
        encoded_positions = self.position_embedding(self.positions)
        encoded_tokens = encoded_tokens + encoded_positions
        return encoded_tokens


def create_vivit_classifier(
    tubelet_embedder,
    positional_encoder,
    input_shape=INPUT_SHAPE,
    transformer_layers=NUM_LAYERS,
    num_heads=NUM_HEADS,
    embed_dim=PROJECTION_DIM,
    layer_norm_eps=LAYER_NORM_EPS,
    num_classes=NUM_CLASSES,
):
    inputs = layers.Input(shape=input_shape)
    patches = tubelet_embedder(inputs)
    encoded_patches = positional_encoder(patches)

    for _ in range(transformer_layers):
        # Layer normalization and MHSA
        x1 = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim // num_heads, dropout=0.1
        )(x1, x1)

        # Skip connection
        x2 = layers.Add()([attention_output, encoded_patches])

        # Layer Normalization and MLP
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = keras.Sequential(
            [
                layers.Dense(units=embed_dim, activation=keras.activations.gelu),
                layers.Dense(units=embed_dim, activation=keras.activations.gelu),
            ]
        )(x3)

        # Skip connection
        encoded_patches = layers.Add()([x3, x2])

    # Layer normalization and global average pooling.
    representation = layers.LayerNormalization(epsilon=layer_norm_eps)(encoded_patches)
    representation = layers.GlobalAvgPool1D()(representation)

    # Classify outputs.
    outputs = layers.Dense(units=num_classes, activation="softmax")(representation)

    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


def run_experiment():
    model = create_vivit_classifier(
        tubelet_embedder=TubeletEmbedding(embed_dim=PROJECTION_DIM, patch_size=PATCH_SIZE),
        positional_encoder=PositionalEncoder(embed_dim=PROJECTION_DIM),
    )

    optimizer = keras.optimizers.Adam(learning_rate=LEARNING_RATE)
    model.compile(
        optimizer=optimizer,
        loss="sparse_categorical_crossentropy",
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy"),
        ],
    )

    _ = model.fit(train_x, train_y, batch_size=BATCH_SIZE, epochs=EPOCHS,
                  validation_data=(valid_x, valid_y))

    _, accuracy, top_5_accuracy = model.evaluate(test_x, test_y, batch_size=BATCH_SIZE)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(f"Test top 5 accuracy: {round(top_5_accuracy * 100, 2)}%")

    return model


model = run_experiment()
model.summary()

NUM_SAMPLES_VIZ = 5
testsamples, labels = test_x[:NUM_SAMPLES_VIZ], test_y[:NUM_SAMPLES_VIZ]

ground_truths = []
preds = []
for i, (testsample, label) in enumerate(zip(testsamples, labels)):
    # A GIF of the video's frames
    frames = [Image.fromarray((f[..., 0] * 255).astype("uint8")) for f in testsample]
    frames[0].save(f"video_{i}.gif", save_all=True, append_images=frames[1:], duration=200)

    output = model.predict(ops.expand_dims(testsample, axis=0), verbose=0)[0]
    pred = np.argmax(output, axis=0)

    ground_truths.append(label.astype("int"))
    preds.append(pred)

for t, p in zip(ground_truths, preds):
    print(f"T: {t} | P: {p}")
