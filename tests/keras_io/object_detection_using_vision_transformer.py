# Modeled on keras-io examples/vision/object_detection_using_vision_transformer.py; written for
# tessera. Keras 3 form: a `Patches` layer reading the batch and image sizes from `ops.shape`
# for `ops.image.extract_patches` and `ops.reshape`, called eagerly on one image for the
# preview; a `PatchEncoder` (Dense projection plus an `Embedding` of `ops.arange` positions)
# whose `get_config` reads the script's globals, as the example's; transformer blocks of
# LayerNormalization, MultiHeadAttention with dropout, gelu MLPs and `layers.Add`; a Dense(4)
# regression head of the box, AdamW, MeanSquaredError, ModelCheckpoint(save_best_only,
# save_weights_only) on `val_loss`, EarlyStopping, `validation_split`; the model saved as
# `.keras`; the mean IoU of predicted boxes on test images resized by `keras.utils` (PIL) in
# place of cv2. 240 generated 64x64 pictures of a bright plane-like rectangle on a noisy sky,
# their boxes scaled to [0, 1], in place of Caltech 101's airplanes and scipy's .mat annotations;
# image size 64 (224), patches of 16 (32), 2 transformer layers (4), head units [128, 64, 32]
# ([2048, 1024, 512, 64, 32]), 6 epochs (100).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt
import matplotlib.patches as patches

keras.utils.set_random_seed(42)
rng = np.random.default_rng(42)

image_size = 64  # resize input images to this size


def make_image(h, w):
    """A sky with a bright rectangle; its box (top-left x, y, bottom-right x, y) in pixels."""
    img = rng.uniform(60, 120, (h, w, 3))
    bw, bh = rng.integers(w // 4, w // 2), rng.integers(h // 6, h // 3)
    x0, y0 = rng.integers(0, w - bw), rng.integers(0, h - bh)
    img[y0:y0 + bh, x0:x0 + bw] = rng.uniform(200, 255, 3)
    return img.astype("uint8"), (x0, y0, x0 + bw, y0 + bh)


images, targets, originals = [], [], []
for i in range(240):
    h, w = rng.integers(72, 96), rng.integers(88, 120)  # the pictures' own sizes vary
    im, (top_left_x, top_left_y, bottom_right_x, bottom_right_y) = make_image(h, w)
    image = keras.utils.array_to_img(im)
    (w, h) = image.size[:2]
    image = image.resize((image_size, image_size))
    images.append(keras.utils.img_to_array(image))
    originals.append(im)
    targets.append((float(top_left_x) / w, float(top_left_y) / h,
                     float(bottom_right_x) / w, float(bottom_right_y) / h))

(x_train), (y_train) = (np.asarray(images[: int(len(images) * 0.8)]),
                        np.asarray(targets[: int(len(targets) * 0.8)]))
(x_test), (y_test) = (np.asarray(images[int(len(images) * 0.8):]),
                      np.asarray(targets[int(len(targets) * 0.8):]))
test_originals = originals[int(len(images) * 0.8):]


def mlp(x, hidden_units, dropout_rate):
    for units in hidden_units:
        x = layers.Dense(units, activation=keras.activations.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


class Patches(layers.Layer):
    def __init__(self, patch_size):
        super().__init__()
        self.patch_size = patch_size

    def call(self, images):
        input_shape = ops.shape(images)
        batch_size = input_shape[0]
        height = input_shape[1]
        width = input_shape[2]
        channels = input_shape[3]
        num_patches_h = height // self.patch_size
        num_patches_w = width // self.patch_size
        patches = keras.ops.image.extract_patches(images, size=self.patch_size)
        patches = ops.reshape(
            patches,
            (batch_size, num_patches_h * num_patches_w,
             self.patch_size * self.patch_size * channels))
        return patches

    def get_config(self):
        config = super().get_config()
        config.update({"patch_size": self.patch_size})
        return config


patch_size = 16  # Size of the patches to be extracted from the input images

plt.figure(figsize=(4, 4))
plt.imshow(x_train[0].astype("uint8"))
plt.axis("off")
plt.savefig("odvit_image.png")
plt.close()

patches_ = Patches(patch_size)(np.expand_dims(x_train[0], axis=0))
print(f"Image size: {image_size} X {image_size}")
print(f"Patch size: {patch_size} X {patch_size}")
print(f"{patches_.shape[1]} patches per image \n{patches_.shape[-1]} elements per patch")
assert tuple(patches_.shape) == (1, (image_size // patch_size) ** 2, patch_size * patch_size * 3)

n = int(np.sqrt(patches_.shape[1]))
plt.figure(figsize=(4, 4))
for i, patch in enumerate(patches_[0]):
    ax = plt.subplot(n, n, i + 1)
    patch_img = ops.reshape(patch, (patch_size, patch_size, 3))
    plt.imshow(ops.convert_to_numpy(patch_img).astype("uint8"))
    plt.axis("off")
plt.savefig("odvit_patches.png")
plt.close()


class PatchEncoder(layers.Layer):
    def __init__(self, num_patches, projection_dim):
        super().__init__()
        self.num_patches = num_patches
        self.projection = layers.Dense(units=projection_dim)
        self.position_embedding = layers.Embedding(input_dim=num_patches,
                                                   output_dim=projection_dim)

    # Override function to avoid error while saving model
    def get_config(self):
        config = super().get_config().copy()
        config.update({
            "input_shape": input_shape,
            "patch_size": patch_size,
            "num_patches": num_patches,
            "projection_dim": projection_dim,
            "num_heads": num_heads,
            "transformer_units": transformer_units,
            "transformer_layers": transformer_layers,
            "mlp_head_units": mlp_head_units,
        })
        return config

    def call(self, patch):
        positions = ops.expand_dims(ops.arange(start=0, stop=self.num_patches, step=1), axis=0)
        projected_patches = self.projection(patch)
        encoded = projected_patches + self.position_embedding(positions)
        return encoded


def create_vit_object_detector(input_shape, patch_size, num_patches, projection_dim, num_heads,
                               transformer_units, transformer_layers, mlp_head_units):
    inputs = keras.Input(shape=input_shape)
    patches = Patches(patch_size)(inputs)
    encoded_patches = PatchEncoder(num_patches, projection_dim)(patches)

    for _ in range(transformer_layers):
        x1 = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=projection_dim, dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, encoded_patches])
        x3 = layers.LayerNormalization(epsilon=1e-6)(x2)
        x3 = mlp(x3, hidden_units=transformer_units, dropout_rate=0.1)
        encoded_patches = layers.Add()([x3, x2])

    representation = layers.LayerNormalization(epsilon=1e-6)(encoded_patches)
    representation = layers.Flatten()(representation)
    representation = layers.Dropout(0.3)(representation)
    features = mlp(representation, hidden_units=mlp_head_units, dropout_rate=0.3)
    bounding_box = layers.Dense(4)(features)  # Final four neurons that output bounding box
    return keras.Model(inputs=inputs, outputs=bounding_box)


def run_experiment(model, learning_rate, weight_decay, batch_size, num_epochs):
    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay)
    model.compile(optimizer=optimizer, loss=keras.losses.MeanSquaredError())

    checkpoint_filepath = "vit_object_detector.weights.h5"
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath, monitor="val_loss", save_best_only=True, save_weights_only=True)

    history = model.fit(
        x=x_train,
        y=y_train,
        batch_size=batch_size,
        epochs=num_epochs,
        validation_split=0.1,
        callbacks=[checkpoint_callback,
                   keras.callbacks.EarlyStopping(monitor="val_loss", patience=10)],
    )
    return history


input_shape = (image_size, image_size, 3)  # input image shape
learning_rate = 0.001
weight_decay = 0.0001
batch_size = 32
num_epochs = 6
num_patches = (image_size // patch_size) ** 2
projection_dim = 32
num_heads = 4
transformer_units = [projection_dim * 2, projection_dim]
transformer_layers = 2
mlp_head_units = [128, 64, 32]  # Size of the dense layers

history = []
num_patches = (image_size // patch_size) ** 2

vit_object_detector = create_vit_object_detector(
    input_shape, patch_size, num_patches, projection_dim, num_heads, transformer_units,
    transformer_layers, mlp_head_units)

history = run_experiment(vit_object_detector, learning_rate, weight_decay, batch_size,
                         num_epochs)


def plot_history(item):
    plt.plot(history.history[item], label=item)
    plt.plot(history.history["val_" + item], label="val_" + item)
    plt.xlabel("Epochs")
    plt.ylabel(item)
    plt.title("Train and Validation {} Over Epochs".format(item), fontsize=14)
    plt.legend()
    plt.grid()
    plt.savefig(f"odvit_{item}.png")
    plt.close()


plot_history("loss")

vit_object_detector.save("vit_object_detector.keras")


def bounding_box_intersection_over_union(box_predicted, box_truth):
    top_x_intersect = max(box_predicted[0], box_truth[0])
    top_y_intersect = max(box_predicted[1], box_truth[1])
    bottom_x_intersect = min(box_predicted[2], box_truth[2])
    bottom_y_intersect = min(box_predicted[3], box_truth[3])
    intersection_area = (max(0, bottom_x_intersect - top_x_intersect + 1)
                         * max(0, bottom_y_intersect - top_y_intersect + 1))
    box_predicted_area = ((box_predicted[2] - box_predicted[0] + 1)
                          * (box_predicted[3] - box_predicted[1] + 1))
    box_truth_area = (box_truth[2] - box_truth[0] + 1) * (box_truth[3] - box_truth[1] + 1)
    return intersection_area / float(box_predicted_area + box_truth_area - intersection_area)


i, mean_iou = 0, 0
for input_image in test_originals[:10]:
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8, 4))
    im = input_image
    ax1.imshow(im.astype("uint8"))
    ax2.imshow(im.astype("uint8"))

    input_image = keras.utils.img_to_array(
        keras.utils.array_to_img(input_image).resize((image_size, image_size)))
    input_image = np.expand_dims(input_image, axis=0)
    preds = vit_object_detector.predict(input_image, verbose=0)[0]

    (h, w) = (im).shape[0:2]
    top_left_x, top_left_y = int(preds[0] * w), int(preds[1] * h)
    bottom_right_x, bottom_right_y = int(preds[2] * w), int(preds[3] * h)
    box_predicted = [top_left_x, top_left_y, bottom_right_x, bottom_right_y]
    rect = patches.Rectangle((top_left_x, top_left_y), bottom_right_x - top_left_x,
                             bottom_right_y - top_left_y, facecolor="none", edgecolor="red",
                             linewidth=1)
    ax1.add_patch(rect)
    ax1.set_xlabel("Predicted: " + ", ".join(str(v) for v in box_predicted))

    top_left_x, top_left_y = int(y_test[i][0] * w), int(y_test[i][1] * h)
    bottom_right_x, bottom_right_y = int(y_test[i][2] * w), int(y_test[i][3] * h)
    box_truth = top_left_x, top_left_y, bottom_right_x, bottom_right_y
    mean_iou += bounding_box_intersection_over_union(box_predicted, box_truth)
    rect = patches.Rectangle((top_left_x, top_left_y), bottom_right_x - top_left_x,
                             bottom_right_y - top_left_y, facecolor="none", edgecolor="red",
                             linewidth=1)
    ax2.add_patch(rect)
    ax2.set_xlabel("Target: " + ", ".join(str(v) for v in box_truth))
    plt.savefig(f"odvit_test_{i}.png")
    plt.close()
    i = i + 1

print("mean_iou: " + str(mean_iou / len(x_test[:10])))
