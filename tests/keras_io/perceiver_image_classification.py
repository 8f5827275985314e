# Modeled on keras-io examples/vision/perceiver_image_classification.py, in its Keras 3 form
# (ops.image.extract_patches, ops.reshape, ops.arange and ops.expand_dims for the tf.* calls,
# keras.optimizers.Lamb for TensorFlow Addons' LAMB); written for tessera. In place of CIFAR-100:
# uint8 arrays of its per-sample shape, each image tinted by a colour of its class, 10 classes;
# 384 training and 64 test images; images kept at 32 (resized to 64 there), patches of 4 (2),
# a latent array of 16 x 32 (256 x 256), 2 heads (8), 2 transformer blocks (4), 6 epochs (50).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

num_classes = 10
input_shape = (32, 32, 3)

rng = np.random.default_rng(0)
colours = rng.integers(0, 256, (num_classes, 3))


def tinted_images(n):
    labels = rng.integers(0, num_classes, (n, 1)).astype(np.uint8)
    tint = colours[labels[:, 0]][:, None, None] * 2 // 3
    return (rng.integers(0, 256, (n,) + input_shape) // 3 + tint).astype(np.uint8), labels


(x_train, y_train), (x_test, y_test) = tinted_images(384), tinted_images(64)
print(f"x_train shape: {x_train.shape} - y_train shape: {y_train.shape}")
print(f"x_test shape: {x_test.shape} - y_test shape: {y_test.shape}")

learning_rate = 0.001
weight_decay = 0.0001
batch_size = 64
num_epochs = 6
dropout_rate = 0.2
image_size = 32  # We'll resize input images to this size.
patch_size = 4  # Size of the patches to be extract from the input images.
num_patches = (image_size // patch_size) ** 2  # Size of the data array.
latent_dim = 16  # Size of the latent array.
projection_dim = 32  # Embedding size of each element in the data and latent arrays.
num_heads = 2  # Number of Transformer heads.
ffn_units = [projection_dim, projection_dim]  # Size of the Transformer Feedforward network.
num_transformer_blocks = 2
num_iterations = 2  # Repetitions of the cross-attention and Transformer modules.
classifier_units = [projection_dim, num_classes]

print(f"Image size: {image_size} X {image_size} = {image_size ** 2}")
print(f"Patch size: {patch_size} X {patch_size} = {patch_size ** 2} ")
print(f"Patches per image: {num_patches}")
print(f"Elements per patch (3 channels): {(patch_size ** 2) * 3}")
print(f"Latent array shape: {latent_dim} X {projection_dim}")
print(f"Data array shape: {num_patches} X {projection_dim}")

data_augmentation = keras.Sequential(
    [
        layers.Normalization(),
        layers.Resizing(image_size, image_size),
        layers.RandomFlip("horizontal"),
        layers.RandomZoom(height_factor=0.2, width_factor=0.2),
    ],
    name="data_augmentation",
)
# Compute the mean and the variance of the training data for normalization.
data_augmentation.layers[0].adapt(x_train)


def create_ffn(hidden_units, dropout_rate):
    ffn_layers = []
    for units in hidden_units[:-1]:
        ffn_layers.append(layers.Dense(units, activation=keras.activations.gelu))

    ffn_layers.append(layers.Dense(units=hidden_units[-1]))
    ffn_layers.append(layers.Dropout(dropout_rate))

    ffn = keras.Sequential(ffn_layers)
    return ffn


class Patches(layers.Layer):
    def __init__(self, patch_size):
        super().__init__()
        self.patch_size = patch_size

    def call(self, images):
        batch_size = ops.shape(images)[0]
        patches = ops.image.extract_patches(images=images, size=(self.patch_size, self.patch_size))
        patch_dims = patches.shape[-1]
        patches = ops.reshape(patches, [batch_size, -1, patch_dims])
        return patches


class PatchEncoder(layers.Layer):
    def __init__(self, num_patches, projection_dim):
        super().__init__()
        self.num_patches = num_patches
        self.projection = layers.Dense(units=projection_dim)
        self.position_embedding = layers.Embedding(
            input_dim=num_patches, output_dim=projection_dim
        )

    def call(self, patches):
        positions = ops.arange(start=0, stop=self.num_patches, step=1)
        encoded = self.projection(patches) + self.position_embedding(positions)
        return encoded


def create_cross_attention_module(latent_dim, data_dim, projection_dim, ffn_units, dropout_rate):
    inputs = {
        # The latent array, of shape [1, latent_dim, projection_dim].
        "latent_array": layers.Input(shape=(latent_dim, projection_dim)),
        # The encoded image, of shape [batch_size, data_dim, projection_dim].
        "data_array": layers.Input(shape=(data_dim, projection_dim)),
    }

    latent_array = layers.LayerNormalization(epsilon=1e-6)(inputs["latent_array"])
    data_array = layers.LayerNormalization(epsilon=1e-6)(inputs["data_array"])

    query = layers.Dense(units=projection_dim)(latent_array)
    key = layers.Dense(units=projection_dim)(data_array)
    value = layers.Dense(units=projection_dim)(data_array)

    # [batch_size, latent_dim, projection_dim].
    attention_output = layers.Attention(use_scale=True, dropout=0.1)(
        [query, key, value], return_attention_scores=False
    )
    attention_output = layers.Add()([attention_output, latent_array])

    attention_output = layers.LayerNormalization(epsilon=1e-6)(attention_output)
    ffn = create_ffn(hidden_units=ffn_units, dropout_rate=dropout_rate)
    outputs = ffn(attention_output)
    outputs = layers.Add()([outputs, attention_output])

    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


def create_transformer_module(latent_dim, projection_dim, num_heads, num_transformer_blocks,
                              ffn_units, dropout_rate):
    inputs = layers.Input(shape=(latent_dim, projection_dim))

    x0 = inputs
    for _ in range(num_transformer_blocks):
        x1 = layers.LayerNormalization(epsilon=1e-6)(x0)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=projection_dim, dropout=0.1
        )(x1, x1)
        x2 = layers.Add()([attention_output, x0])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        ffn = create_ffn(hidden_units=ffn_units, dropout_rate=dropout_rate)
        x3 = ffn(x3)
        x0 = layers.Add()([x3, x2])

    model = keras.Model(inputs=inputs, outputs=x0)
    return model


class Perceiver(keras.Model):
    def __init__(self, patch_size, data_dim, latent_dim, projection_dim, num_heads,
                 num_transformer_blocks, ffn_units, dropout_rate, num_iterations,
                 classifier_units):
        super().__init__()

        self.latent_dim = latent_dim
        self.data_dim = data_dim
        self.patch_size = patch_size
        self.projection_dim = projection_dim
        self.num_heads = num_heads
        self.num_transformer_blocks = num_transformer_blocks
        self.ffn_units = ffn_units
        self.dropout_rate = dropout_rate
        self.num_iterations = num_iterations
        self.classifier_units = classifier_units

    def build(self, input_shape):
        self.latent_array = self.add_weight(
            shape=(self.latent_dim, self.projection_dim),
            initializer="random_normal",
            trainable=True,
        )
        self.patcher = Patches(self.patch_size)
        self.patch_encoder = PatchEncoder(self.data_dim, self.projection_dim)
        self.cross_attention = create_cross_attention_module(
            self.latent_dim,
            self.data_dim,
            self.projection_dim,
            self.ffn_units,
            self.dropout_rate,
        )
        self.transformer = create_transformer_module(
            self.latent_dim,
            self.projection_dim,
            self.num_heads,
            self.num_transformer_blocks,
            self.ffn_units,
            self.dropout_rate,
        )
        self.global_average_pooling = layers.GlobalAveragePooling1D()
        self.classification_head = create_ffn(
            hidden_units=self.classifier_units, dropout_rate=self.dropout_rate
        )
        super().build(input_shape)

    def call(self, inputs):
        augmented = data_augmentation(inputs)
        patches = self.patcher(augmented)
        encoded_patches = self.patch_encoder(patches)
        cross_attention_inputs = {
            "latent_array": ops.expand_dims(self.latent_array, 0),
            "data_array": encoded_patches,
        }
        # The cross-attention and the Transformer modules, applied iteratively (shared weights).
        for _ in range(self.num_iterations):
            latent_array = self.cross_attention(cross_attention_inputs)
            latent_array = self.transformer(latent_array)
            cross_attention_inputs["latent_array"] = latent_array

        representation = self.global_average_pooling(latent_array)
        logits = self.classification_head(representation)
        return logits


def run_experiment(model):
    optimizer = keras.optimizers.Lamb(learning_rate=learning_rate, weight_decay=weight_decay)

    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="acc"),
            keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5-acc"),
        ],
    )

    reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=3)
    early_stopping = keras.callbacks.EarlyStopping(
        monitor="val_loss", patience=15, restore_best_weights=True
    )

    history = model.fit(
        x=x_train,
        y=y_train,
        batch_size=batch_size,
        epochs=num_epochs,
        validation_split=0.1,
        callbacks=[early_stopping, reduce_lr],
    )

    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(f"Test top 5 accuracy: {round(top_5_accuracy * 100, 2)}%")
    return history


perceiver_classifier = Perceiver(
    patch_size,
    num_patches,
    latent_dim,
    projection_dim,
    num_heads,
    num_transformer_blocks,
    ffn_units,
    dropout_rate,
    num_iterations,
    classifier_units,
)

history = run_experiment(perceiver_classifier)
