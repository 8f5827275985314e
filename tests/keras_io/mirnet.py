# Modeled on keras-io examples/vision/mirnet.py; written for tessera. Keras 3 form: MIRNet's
# selective kernel feature fusion (Add, GlobalAveragePooling2D, Reshape, 1x1 Conv2D with a
# softmax activation, products of the graph's tensors), dual attention units (a `ChannelPooling`
# layer of `ops.mean`/`ops.max` over the channels, `keras.activations.sigmoid` on the graph's
# tensor), down- and up-sampling modules (MaxPooling2D, UpSampling2D) and recursive residual
# groups on `Input(shape=[None, None, 3])`; the Charbonnier loss and a PSNR metric written with
# `ops` (`ops.psnr` for `tf.image.psnr`), Adam, ReduceLROnPlateau on
# `val_peak_signal_noise_ratio` (mode "max"); the model called on a whole test image of another
# size. 96 generated pairs of 40x40 smooth pictures and their darkened, noisy copies in place of
# the LoL download, a keras.utils.PyDataset of random 32x32 crops (128 there) in place of
# tf.data; channels 16 (64), 1 group of 1 block (3 of 2), learning rate 1e-3 (1e-4),
# 3 epochs (50).
import random

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

random.seed(10)
keras.utils.set_random_seed(10)
rng = np.random.default_rng(10)

IMAGE_SIZE = 32
BATCH_SIZE = 4
MAX_TRAIN_IMAGES = 72


def make_pair(size=40):
    """A smooth well-exposed picture (float in [0, 1]) and its low-light copy."""
    yy, xx = np.mgrid[0:size, 0:size] / size
    f = rng.uniform(1, 4, (3, 2))
    ph = rng.uniform(0, 2 * np.pi, 3)
    high = np.stack([0.5 + 0.4 * np.sin(f[c, 0] * 3 * yy + f[c, 1] * 2 * xx + ph[c])
                     for c in range(3)], axis=-1)
    low = high * 0.25 + rng.normal(0, 0.02, high.shape)
    return np.clip(low, 0, 1).astype("float32"), high.astype("float32")


pairs = [make_pair() for _ in range(96)]
low_images = np.stack([p[0] for p in pairs])
enhanced_images = np.stack([p[1] for p in pairs])


def random_crop(low_image, enhanced_image):
    h, w = low_image.shape[:2]
    low_w = random.randint(0, w - IMAGE_SIZE)
    low_h = random.randint(0, h - IMAGE_SIZE)
    return (low_image[low_h:low_h + IMAGE_SIZE, low_w:low_w + IMAGE_SIZE],
            enhanced_image[low_h:low_h + IMAGE_SIZE, low_w:low_w + IMAGE_SIZE])


class CropBatches(keras.utils.PyDataset):
    """Batches of random crops of the pairs (the example's tf.data map, drop_remainder)."""

    def __init__(self, low, high, **kwargs):
        super().__init__(**kwargs)
        self.low, self.high = low, high

    def __len__(self):
        return len(self.low) // BATCH_SIZE

    def __getitem__(self, idx):
        crops = [random_crop(self.low[i], self.high[i])
                 for i in range(idx * BATCH_SIZE, (idx + 1) * BATCH_SIZE)]
        return np.stack([c[0] for c in crops]), np.stack([c[1] for c in crops])


train_dataset = CropBatches(low_images[:MAX_TRAIN_IMAGES], enhanced_images[:MAX_TRAIN_IMAGES])
val_dataset = CropBatches(low_images[MAX_TRAIN_IMAGES:], enhanced_images[MAX_TRAIN_IMAGES:])
print("Train batches:", len(train_dataset), "Val batches:", len(val_dataset))


def selective_kernel_feature_fusion(multi_scale_feature_1, multi_scale_feature_2,
                                    multi_scale_feature_3):
    channels = list(multi_scale_feature_1.shape)[-1]
    combined_feature = layers.Add()(
        [multi_scale_feature_1, multi_scale_feature_2, multi_scale_feature_3])
    gap = layers.GlobalAveragePooling2D()(combined_feature)
    channel_wise_statistics = layers.Reshape((1, 1, channels))(gap)
    compact_feature_representation = layers.Conv2D(
        filters=channels // 8, kernel_size=(1, 1), activation="relu")(channel_wise_statistics)
    feature_descriptor_1 = layers.Conv2D(channels, kernel_size=(1, 1), activation="softmax")(
        compact_feature_representation)
    feature_descriptor_2 = layers.Conv2D(channels, kernel_size=(1, 1), activation="softmax")(
        compact_feature_representation)
    feature_descriptor_3 = layers.Conv2D(channels, kernel_size=(1, 1), activation="softmax")(
        compact_feature_representation)
    feature_1 = multi_scale_feature_1 * feature_descriptor_1
    feature_2 = multi_scale_feature_2 * feature_descriptor_2
    feature_3 = multi_scale_feature_3 * feature_descriptor_3
    return layers.Add()([feature_1, feature_2, feature_3])


class ChannelPooling(layers.Layer):
    def __init__(self, axis=-1, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.axis = axis
        self.concat = layers.Concatenate(axis=self.axis)

    def call(self, inputs):
        average_pooling = ops.expand_dims(ops.mean(inputs, axis=-1), axis=-1)
        max_pooling = ops.expand_dims(ops.max(inputs, axis=-1), axis=-1)
        return self.concat([average_pooling, max_pooling])

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis})
        return config


def spatial_attention_block(input_tensor):
    compressed_feature_map = ChannelPooling(axis=-1)(input_tensor)
    feature_map = layers.Conv2D(1, kernel_size=(1, 1))(compressed_feature_map)
    feature_map = keras.activations.sigmoid(feature_map)
    return input_tensor * feature_map


def channel_attention_block(input_tensor):
    channels = list(input_tensor.shape)[-1]
    average_pooling = layers.GlobalAveragePooling2D()(input_tensor)
    feature_descriptor = layers.Reshape((1, 1, channels))(average_pooling)
    feature_activations = layers.Conv2D(filters=channels // 8, kernel_size=(1, 1),
                                        activation="relu")(feature_descriptor)
    feature_activations = layers.Conv2D(filters=channels, kernel_size=(1, 1),
                                        activation="sigmoid")(feature_activations)
    return input_tensor * feature_activations


def dual_attention_unit_block(input_tensor):
    channels = list(input_tensor.shape)[-1]
    feature_map = layers.Conv2D(channels, kernel_size=(3, 3), padding="same",
                                activation="relu")(input_tensor)
    feature_map = layers.Conv2D(channels, kernel_size=(3, 3), padding="same")(feature_map)
    channel_attention = channel_attention_block(feature_map)
    spatial_attention = spatial_attention_block(feature_map)
    concatenation = layers.Concatenate(axis=-1)([channel_attention, spatial_attention])
    concatenation = layers.Conv2D(channels, kernel_size=(1, 1))(concatenation)
    return layers.Add()([input_tensor, concatenation])


def down_sampling_module(input_tensor):
    channels = list(input_tensor.shape)[-1]
    main_branch = layers.Conv2D(channels, kernel_size=(1, 1), activation="relu")(input_tensor)
    main_branch = layers.Conv2D(channels, kernel_size=(3, 3), padding="same",
                                activation="relu")(main_branch)
    main_branch = layers.MaxPooling2D()(main_branch)
    main_branch = layers.Conv2D(channels * 2, kernel_size=(1, 1))(main_branch)
    skip_branch = layers.MaxPooling2D()(input_tensor)
    skip_branch = layers.Conv2D(channels * 2, kernel_size=(1, 1))(skip_branch)
    return layers.Add()([skip_branch, main_branch])


def up_sampling_module(input_tensor):
    channels = list(input_tensor.shape)[-1]
    main_branch = layers.Conv2D(channels, kernel_size=(1, 1), activation="relu")(input_tensor)
    main_branch = layers.Conv2D(channels, kernel_size=(3, 3), padding="same",
                                activation="relu")(main_branch)
    main_branch = layers.UpSampling2D()(main_branch)
    main_branch = layers.Conv2D(channels // 2, kernel_size=(1, 1))(main_branch)
    skip_branch = layers.UpSampling2D()(input_tensor)
    skip_branch = layers.Conv2D(channels // 2, kernel_size=(1, 1))(skip_branch)
    return layers.Add()([skip_branch, main_branch])


def multi_scale_residual_block(input_tensor, channels):
    level1 = input_tensor
    level2 = down_sampling_module(input_tensor)
    level3 = down_sampling_module(level2)
    level1_dau = dual_attention_unit_block(level1)
    level2_dau = dual_attention_unit_block(level2)
    level3_dau = dual_attention_unit_block(level3)
    level1_skff = selective_kernel_feature_fusion(
        level1_dau, up_sampling_module(level2_dau),
        up_sampling_module(up_sampling_module(level3_dau)))
    level2_skff = selective_kernel_feature_fusion(
        down_sampling_module(level1_dau), level2_dau, up_sampling_module(level3_dau))
    level3_skff = selective_kernel_feature_fusion(
        down_sampling_module(down_sampling_module(level1_dau)),
        down_sampling_module(level2_dau), level3_dau)
    level1_dau_2 = dual_attention_unit_block(level1_skff)
    level2_dau_2 = up_sampling_module(dual_attention_unit_block(level2_skff))
    level3_dau_2 = up_sampling_module(up_sampling_module(dual_attention_unit_block(level3_skff)))
    skff_ = selective_kernel_feature_fusion(level1_dau_2, level2_dau_2, level3_dau_2)
    conv = layers.Conv2D(channels, kernel_size=(3, 3), padding="same")(skff_)
    return layers.Add()([input_tensor, conv])


def recursive_residual_group(input_tensor, num_mrb, channels):
    conv1 = layers.Conv2D(channels, kernel_size=(3, 3), padding="same")(input_tensor)
    for _ in range(num_mrb):
        conv1 = multi_scale_residual_block(conv1, channels)
    conv2 = layers.Conv2D(channels, kernel_size=(3, 3), padding="same")(conv1)
    return layers.Add()([conv2, input_tensor])


def mirnet_model(num_rrg, num_mrb, channels):
    input_tensor = keras.Input(shape=[None, None, 3])
    x1 = layers.Conv2D(channels, kernel_size=(3, 3), padding="same")(input_tensor)
    for _ in range(num_rrg):
        x1 = recursive_residual_group(x1, num_mrb, channels)
    conv = layers.Conv2D(3, kernel_size=(3, 3), padding="same")(x1)
    output_tensor = layers.Add()([input_tensor, conv])
    return keras.Model(input_tensor, output_tensor)


model = mirnet_model(num_rrg=1, num_mrb=1, channels=16)


def charbonnier_loss(y_true, y_pred):
    return ops.mean(ops.sqrt(ops.square(y_true - y_pred) + ops.square(1e-3)))


def peak_signal_noise_ratio(y_true, y_pred):
    return ops.psnr(y_pred, y_true, max_val=255.0)


optimizer = keras.optimizers.Adam(learning_rate=1e-3)
model.compile(optimizer=optimizer, loss=charbonnier_loss, metrics=[peak_signal_noise_ratio])

history = model.fit(
    train_dataset,
    validation_data=val_dataset,
    epochs=3,
    callbacks=[
        keras.callbacks.ReduceLROnPlateau(monitor="val_peak_signal_noise_ratio", factor=0.5,
                                          patience=5, verbose=1, min_delta=1e-7, mode="max")
    ],
)


def plot_history(value, name):
    plt.plot(history.history[value], label=f"train_{name.lower()}")
    plt.plot(history.history[f"val_{value}"], label=f"val_{name.lower()}")
    plt.xlabel("Epochs")
    plt.ylabel(name)
    plt.title(f"Train and Validation {name} Over Epochs", fontsize=14)
    plt.legend()
    plt.grid()
    plt.savefig(f"mirnet_{value}.png")
    plt.close()


plot_history("loss", "Loss")
plot_history("peak_signal_noise_ratio", "PSNR")


def infer(original_image):
    image = keras.utils.img_to_array(original_image)
    image = image.astype("float32") / 255.0
    image = np.expand_dims(image, axis=0)
    output = model.predict(image, verbose=0)
    output_image = output[0] * 255.0
    output_image = output_image.clip(0, 255)
    output_image = output_image.reshape((np.shape(output_image)[0], np.shape(output_image)[1], 3))
    return keras.utils.array_to_img(np.uint8(output_image))


# A whole test picture (40x40, not the crops' size) through the same model.
low, high = make_pair()
original_image = keras.utils.array_to_img(np.uint8(low * 255))
enhanced = infer(original_image)
print("enhanced image size:", enhanced.size)
before = float(np.mean(np.abs(low - high)))
after = float(np.mean(np.abs(np.asarray(enhanced, "float32") / 255.0 - high)))
print(f"mean absolute error to the well-exposed picture: {before:.3f} -> {after:.3f}")
assert after < before
