# Modeled on keras-io examples/vision/cct.py (Keras 3 form); written for tessera.
import os
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers, ops

# Hyperparameters (channels and sizes shrunk: projection 64 in place of 128, 2 epochs).
positional_emb = True
conv_layers = 2
projection_dim = 64

num_heads = 2
transformer_units = [projection_dim, projection_dim]
transformer_layers = 2
stochastic_depth_rate = 0.1

learning_rate = 0.001
weight_decay = 0.0001
batch_size = 64
num_epochs = 2
image_size = 32

num_classes = 10
input_shape = (32, 32, 3)

# In place of keras.datasets.cifar10.load_data(): uint8 arrays of CIFAR's shapes, shrunk,
# each image tinted by a colour of its class (something to learn).
rng = np.random.default_rng(0)
colours = rng.integers(0, 256, (10, 3))
def cifar(n):
    labels = rng.integers(0, 10, (n, 1)).astype(np.uint8)
    images = rng.integers(0, 256, (n, 32, 32, 3)) // 4 + colours[labels[:, 0]][:, None, None] * 3 // 4
    return images.astype(np.uint8), labels
(x_train, y_train), (x_test, y_test) = cifar(320), cifar(64)

y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

print(f"x_train shape: {x_train.shape} - y_train shape: {y_train.shape}")
print(f"x_test shape: {x_test.shape} - y_test shape: {y_test.shape}")


class CCTTokenizer(layers.Layer):
    """Convolutions and poolings whose feature map, flattened, is the sequence of tokens."""

    def __init__(self, kernel_size=3, stride=1, padding=1, pooling_kernel_size=3,
                 pooling_stride=2, num_conv_layers=conv_layers, num_output_channels=[32, 64],
                 positional_emb=positional_emb, **kwargs):
        super().__init__(**kwargs)
        self.conv_model = keras.Sequential()
        for i in range(num_conv_layers):
            self.conv_model.add(
                layers.Conv2D(num_output_channels[i], kernel_size, stride, padding="valid",
                              use_bias=False, activation="relu", kernel_initializer="he_normal")
            )
            self.conv_model.add(layers.ZeroPadding2D(padding))
            self.conv_model.add(layers.MaxPooling2D(pooling_kernel_size, pooling_stride, "same"))
        self.positional_emb = positional_emb

    def call(self, images):
        outputs = self.conv_model(images)
        # the spatial axes flattened into a sequence
        reshaped = ops.reshape(
            outputs,
            (-1, ops.shape(outputs)[1] * ops.shape(outputs)[2], ops.shape(outputs)[-1]),
        )
        return reshaped


class PositionEmbedding(keras.layers.Layer):
    """A learned position embedding, sliced to the sequence's length."""

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if sequence_length is None:
            raise ValueError("`sequence_length` must be an Integer, received `None`.")
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def get_config(self):
        config = super().get_config()
        config.update({"sequence_length": self.sequence_length,
                       "initializer": keras.initializers.serialize(self.initializer)})
        return config

    def build(self, input_shape):
        feature_size = input_shape[-1]
        self.position_embeddings = self.add_weight(
            name="embeddings", shape=[self.sequence_length, feature_size],
            initializer=self.initializer, trainable=True,
        )
        super().build(input_shape)

    def call(self, inputs, start_index=0):
        shape = ops.shape(inputs)
        feature_length = shape[-1]
        sequence_length = shape[-2]
        # the weight as a tensor, sliced to the inputs' length
        position_embeddings = ops.convert_to_tensor(self.position_embeddings)
        position_embeddings = ops.slice(position_embeddings, (start_index, 0),
                                        (sequence_length, feature_length))
        return ops.broadcast_to(position_embeddings, shape)

    def compute_output_shape(self, input_shape):
        return input_shape


class SequencePooling(layers.Layer):
    """Attention pooling: a softmax over the sequence weighs its tokens."""

    def __init__(self):
        super().__init__()
        self.attention = layers.Dense(1)

    def call(self, x):
        attention_weights = ops.softmax(self.attention(x), axis=1)
        attention_weights = ops.transpose(attention_weights, axes=(0, 2, 1))
        weighted_representation = ops.matmul(attention_weights, x)
        return ops.squeeze(weighted_representation, -2)


class StochasticDepth(layers.Layer):
    """Drops a residual branch for whole samples, in training only."""

    def __init__(self, drop_prop, **kwargs):
        super().__init__(**kwargs)
        self.drop_prob = drop_prop
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, x, training=None):
        if training:
            keep_prob = 1 - self.drop_prob
            shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
            random_tensor = keep_prob + keras.random.uniform(shape, 0, 1,
                                                             seed=self.seed_generator)
            random_tensor = ops.floor(random_tensor)
            return (x / keep_prob) * random_tensor
        return x


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation=ops.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


data_augmentation = keras.Sequential(
    [
        layers.Rescaling(scale=1.0 / 255),
        layers.RandomCrop(image_size, image_size),
        layers.RandomFlip("horizontal"),
    ],
    name="data_augmentation",
)


def create_cct_model(image_size=image_size, input_shape=input_shape, num_heads=num_heads,
                     projection_dim=projection_dim, transformer_units=transformer_units):
    inputs = layers.Input(input_shape)
    augmented = data_augmentation(inputs)
    cct_tokenizer = CCTTokenizer()
    encoded_patches = cct_tokenizer(augmented)

    if positional_emb:
        sequence_length = encoded_patches.shape[1]
        encoded_patches += PositionEmbedding(sequence_length=sequence_length)(encoded_patches)

    # stochastic depth probabilities
    dpr = [x for x in np.linspace(0, stochastic_depth_rate, transformer_layers)]

    for i in range(transformer_layers):
        x1 = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=projection_dim, dropout=0.1
        )(x1, x1)
        attention_output = StochasticDepth(dpr[i])(attention_output)
        x2 = layers.Add()([attention_output, encoded_patches])
        x3 = layers.LayerNormalization(epsilon=1e-5)(x2)
        x3 = mlp(x3, hidden_units=transformer_units, dropout_rate=0.1)
        x3 = StochasticDepth(dpr[i])(x3)
        encoded_patches = layers.Add()([x3, x2])

    representation = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
    weighted_representation = SequencePooling()(representation)

    logits = layers.Dense(num_classes)(weighted_representation)
    model = keras.Model(inputs=inputs, outputs=logits)
    return model


def run_experiment(model):
    optimizer = keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
        metrics=[
            keras.metrics.CategoricalAccuracy(name="accuracy"),
            keras.metrics.TopKCategoricalAccuracy(5, name="top-5-accuracy"),
        ],
    )
    checkpoint_filepath = os.path.join(tempfile.mkdtemp(), "checkpoint.weights.h5")
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath, monitor="val_accuracy", save_best_only=True,
        save_weights_only=True,
    )
    history = model.fit(
        x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs,
        validation_split=0.1, callbacks=[checkpoint_callback],
    )
    model.load_weights(checkpoint_filepath)
    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(f"Test top 5 accuracy: {round(top_5_accuracy * 100, 2)}%")
    return history


cct_model = create_cct_model()
history = run_experiment(cct_model)

plt.plot(history.history["loss"], label="train_loss")
plt.plot(history.history["val_loss"], label="val_loss")
plt.xlabel("Epochs")
plt.ylabel("Loss")
plt.title("Train and Validation Losses Over Epochs", fontsize=14)
plt.legend()
plt.grid()
plt.savefig(os.path.join(tempfile.mkdtemp(), "losses.png"))
plt.close()
