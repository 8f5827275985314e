# Modeled on keras-io examples/vision/mlp_image_classification.py (its Keras 3 form, the
# MLP-Mixer part); written for tessera. CIFAR replaced by random images of its shape whose
# label is a function of their pixels; 512 images, 2 blocks of width 64, 2 epochs.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

num_classes = 10
input_shape = (32, 32, 3)
rng = np.random.default_rng(0)
x_train = rng.integers(0, 256, size=(512, 32, 32, 3)).astype("uint8")
y_train = (x_train[:, :16, :, 0].mean(axis=(1, 2)) // 13 % num_classes).astype("int64")[:, None]
x_test, y_test = x_train[:128], y_train[:128]
learning_rate = 0.005
weight_decay = 0.0001
batch_size = 128
num_epochs = 2
dropout_rate = 0.2
image_size = 32
patch_size = 8
num_patches = (image_size // patch_size) ** 2
embedding_dim = 64
num_blocks = 2

data_augmentation = keras.Sequential(
    [layers.Normalization(), layers.Resizing(image_size, image_size),
     layers.RandomFlip("horizontal"), layers.RandomZoom(height_factor=0.2, width_factor=0.2)],
    name="data_augmentation")
data_augmentation.layers[0].adapt(x_train)


class Patches(layers.Layer):
    def __init__(self, patch_size, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size

    def call(self, x):
        patches = keras.ops.image.extract_patches(x, self.patch_size)
        batch_size = keras.ops.shape(patches)[0]
        num_patches = keras.ops.shape(patches)[1] * keras.ops.shape(patches)[2]
        patch_dim = keras.ops.shape(patches)[3]
        out = keras.ops.reshape(patches, (batch_size, num_patches, patch_dim))
        return out


class MLPMixerLayer(layers.Layer):
    def __init__(self, num_patches, hidden_units, dropout_rate, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mlp1 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                      layers.Dense(units=num_patches),
                                      layers.Dropout(rate=dropout_rate)])
        self.mlp2 = keras.Sequential([layers.Dense(units=num_patches, activation="gelu"),
                                      layers.Dense(units=hidden_units),
                                      layers.Dropout(rate=dropout_rate)])
        self.normalize = layers.LayerNormalization(epsilon=1e-6)

    def build(self, input_shape):
        return super().build(input_shape)

    def call(self, inputs):
        x = self.normalize(inputs)
        x_channels = keras.ops.transpose(x, axes=(0, 2, 1))
        mlp1_outputs = self.mlp1(x_channels)
        mlp1_outputs = keras.ops.transpose(mlp1_outputs, axes=(0, 2, 1))
        x = mlp1_outputs + inputs
        x_patches = self.normalize(x)
        mlp2_outputs = self.mlp2(x_patches)
        x = x + mlp2_outputs
        return x


def build_classifier(blocks, positional_encoding=False):
    inputs = layers.Input(shape=input_shape)
    augmented = data_augmentation(inputs)
    patches = Patches(patch_size)(augmented)
    x = layers.Dense(units=embedding_dim)(patches)
    x = blocks(x)
    representation = layers.GlobalAveragePooling1D()(x)
    representation = layers.Dropout(rate=dropout_rate)(representation)
    logits = layers.Dense(num_classes)(representation)
    return keras.Model(inputs=inputs, outputs=logits)


def run_experiment(model):
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc"),
                           keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5-acc")])
    reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=5)
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10,
                                                   restore_best_weights=True)
    history = model.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs,
                        validation_split=0.1, callbacks=[early_stopping, reduce_lr], verbose=0)
    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%")
    print(f"Test top 5 accuracy: {round(top_5_accuracy * 100, 2)}%")
    return history


mlpmixer_blocks = keras.Sequential(
    [MLPMixerLayer(num_patches, embedding_dim, dropout_rate) for _ in range(num_blocks)])
learning_rate = 0.005
mlpmixer_classifier = build_classifier(mlpmixer_blocks)
history = run_experiment(mlpmixer_classifier)
print(history.history["loss"])
