# Modeled on keras-io examples/vision/mobilevit.py (Keras 3 form: keras.activations.swish for
# tf.nn.swish, Python comparisons for tf.math.equal); written for tessera. In place of tf_flowers
# and tf.data: 72x72 uint8 images of 5 classes, each tinted by a colour of its class, randomly
# cropped to 64x64 and flipped in NumPy (the example's map), one-hot labels; image size 64 (256
# there), transformer blocks 1, 1, 1 (2, 4, 3), 320 training and 64 validation images, batches
# of 16, 4 epochs (30), BatchNormalization momentum 0.9 (0.99 leaves the moving statistics
# unconverged over 80 steps, under Keras as under tessera); the checkpoint written as a
# .weights.h5 file and the model saved as .keras; the TFLite conversion left
# out (TensorFlow's).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

patch_size = 4  # 2x2, the Transformer blocks read patches of this area
image_size = 64
expansion_factor = 2  # expansion factor of the MobileNetV2 blocks


def conv_block(x, filters=16, kernel_size=3, strides=2):
    conv_layer = layers.Conv2D(filters, kernel_size, strides=strides,
                               activation=keras.activations.swish, padding="same")
    return conv_layer(x)


def correct_pad(inputs, kernel_size):
    """The zero padding a strided depthwise convolution with "valid" padding needs."""
    img_dim = 2 if keras.backend.image_data_format() == "channels_first" else 1
    input_size = inputs.shape[img_dim: (img_dim + 2)]
    if isinstance(kernel_size, int):
        kernel_size = (kernel_size, kernel_size)
    if input_size[0] is None:
        adjust = (1, 1)
    else:
        adjust = (1 - input_size[0] % 2, 1 - input_size[1] % 2)
    correct = (kernel_size[0] // 2, kernel_size[1] // 2)
    return ((correct[0] - adjust[0], correct[0]), (correct[1] - adjust[1], correct[1]))


def inverted_residual_block(x, expanded_channels, output_channels, strides=1):
    m = layers.Conv2D(expanded_channels, 1, padding="same", use_bias=False)(x)
    m = layers.BatchNormalization(momentum=0.9)(m)
    m = keras.activations.swish(m)
    if strides == 2:
        m = layers.ZeroPadding2D(padding=correct_pad(m, 3))(m)
    m = layers.DepthwiseConv2D(3, strides=strides, padding="same" if strides == 1 else "valid",
                               use_bias=False)(m)
    m = layers.BatchNormalization(momentum=0.9)(m)
    m = keras.activations.swish(m)
    m = layers.Conv2D(output_channels, 1, padding="same", use_bias=False)(m)
    m = layers.BatchNormalization(momentum=0.9)(m)
    if x.shape[-1] == output_channels and strides == 1:
        return layers.Add()([m, x])
    return m


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation=keras.activations.swish)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def transformer_block(x, transformer_layers, projection_dim, num_heads=2):
    for _ in range(transformer_layers):
        x1 = layers.LayerNormalization(epsilon=1e-6)(x)
        attention_output = layers.MultiHeadAttention(num_heads=num_heads,
                                                     key_dim=projection_dim,
                                                     dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, x])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = mlp(x3, hidden_units=[x.shape[-1] * 2, x.shape[-1]], dropout_rate=0.1)
        x = layers.Add()([x3, x2])
    return x


def mobilevit_block(x, num_blocks, projection_dim, strides=1):
    # Local features from convolutions.
    local_features = conv_block(x, filters=projection_dim, strides=strides)
    local_features = conv_block(local_features, filters=projection_dim, kernel_size=1,
                                strides=strides)
    # Unfolded into (patch area, patches, channels) for the Transformers.
    num_patches = int((local_features.shape[1] * local_features.shape[2]) / patch_size)
    non_overlapping_patches = layers.Reshape((patch_size, num_patches, projection_dim))(
        local_features)
    global_features = transformer_block(non_overlapping_patches, num_blocks, projection_dim)
    # Folded back into a feature map, concatenated with the input, fused by a convolution.
    folded_feature_map = layers.Reshape((*local_features.shape[1:-1], projection_dim))(
        global_features)
    folded_feature_map = conv_block(folded_feature_map, filters=x.shape[-1], kernel_size=1,
                                    strides=strides)
    local_global_features = layers.Concatenate(axis=-1)([x, folded_feature_map])
    return conv_block(local_global_features, filters=projection_dim, strides=strides)


def create_mobilevit(num_classes=5):
    inputs = keras.Input((image_size, image_size, 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = conv_block(x, filters=16)
    x = inverted_residual_block(x, expanded_channels=16 * expansion_factor, output_channels=16)
    x = inverted_residual_block(x, expanded_channels=16 * expansion_factor, output_channels=24,
                                strides=2)
    x = inverted_residual_block(x, expanded_channels=24 * expansion_factor, output_channels=24)
    x = inverted_residual_block(x, expanded_channels=24 * expansion_factor, output_channels=24)
    x = inverted_residual_block(x, expanded_channels=24 * expansion_factor, output_channels=48,
                                strides=2)
    x = mobilevit_block(x, num_blocks=1, projection_dim=64)
    x = inverted_residual_block(x, expanded_channels=64 * expansion_factor, output_channels=64,
                                strides=2)
    x = mobilevit_block(x, num_blocks=1, projection_dim=80)
    x = inverted_residual_block(x, expanded_channels=80 * expansion_factor, output_channels=80,
                                strides=2)
    x = mobilevit_block(x, num_blocks=1, projection_dim=96)
    x = conv_block(x, filters=320, kernel_size=1, strides=1)
    x = layers.GlobalAvgPool2D()(x)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)


keras.utils.set_random_seed(0)
mobilevit_xxs = create_mobilevit()
mobilevit_xxs.summary()

batch_size = 16
resize_bigger = 72
num_classes = 5
rng = np.random.default_rng(0)
colours = rng.integers(0, 256, (num_classes, 3))


def flowers(n, is_training):
    labels = rng.integers(0, num_classes, n)
    tint = colours[labels][:, None, None] * 2 // 3
    images = (rng.integers(0, 256, (n, resize_bigger, resize_bigger, 3)) // 3 + tint)
    if is_training:  # random crops, flipped left-right at random
        dy, dx = rng.integers(0, resize_bigger - image_size + 1, (2, n))
        images = np.stack([im[y:y + image_size, x:x + image_size]
                           for im, y, x in zip(images, dy, dx)])
        flip = rng.random(n) < 0.5
        images[flip] = images[flip, :, ::-1]
    else:
        images = images[:, :image_size, :image_size]
    return images.astype("float32"), keras.utils.to_categorical(labels, num_classes)


train_x, train_y = flowers(320, True)
val_x, val_y = flowers(64, False)
print(f"Number of training examples: {len(train_x)}")
print(f"Number of validation examples: {len(val_x)}")

learning_rate = 0.002
label_smoothing_factor = 0.1
epochs = 4
optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
loss_fn = keras.losses.CategoricalCrossentropy(label_smoothing=label_smoothing_factor)


def run_experiment(epochs=epochs):
    mobilevit_xxs = create_mobilevit(num_classes=num_classes)
    mobilevit_xxs.compile(optimizer=optimizer, loss=loss_fn, metrics=["accuracy"])
    checkpoint_filepath = "checkpoint.weights.h5"
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath, monitor="val_accuracy", save_best_only=True,
        save_weights_only=True)
    mobilevit_xxs.fit(train_x, train_y, batch_size=batch_size, validation_data=(val_x, val_y),
                      epochs=epochs, callbacks=[checkpoint_callback])
    mobilevit_xxs.load_weights(checkpoint_filepath)
    _, accuracy = mobilevit_xxs.evaluate(val_x, val_y, batch_size=batch_size)
    print(f"Validation accuracy: {round(accuracy * 100, 2)}%")
    return mobilevit_xxs


mobilevit_xxs = run_experiment()
mobilevit_xxs.save("mobilevit_xxs.keras")
