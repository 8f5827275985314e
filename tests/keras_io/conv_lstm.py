# Modeled on keras-io examples/vision/conv_lstm.py; written for tessera.
# Next-frame video prediction: stacked ConvLSTM2D layers read a video of any length
# and predict each following frame.
import io
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from PIL import Image
from tessera.nn import layers

# In place of the Moving MNIST download (10000 videos of 20 frames of 64x64, uint8):
# 60 videos of 10 frames of 16x16, each a bright square moving at its own constant
# speed and bouncing off the borders, so the next frame follows from the previous ones.
rng = np.random.default_rng(0)


def moving_squares(n, frames=10, size=16, side=4):
    videos = np.zeros((frames, n, size, size), dtype=np.uint8)  # Moving MNIST's axis order
    pos = rng.integers(0, size - side, (n, 2)).astype(float)
    vel = rng.choice([-2.0, -1.0, 1.0, 2.0], (n, 2))
    for t in range(frames):
        for i in range(n):
            r, c = pos[i].astype(int)
            videos[t, i, r:r + side, c:c + side] = 255
        pos += vel
        bounce = (pos < 0) | (pos > size - side)
        vel[bounce] *= -1
        pos = np.clip(pos, 0, size - side)
    return videos


dataset = moving_squares(60)

# Swap the axes of frames and samples, and add a channel axis (grayscale).
dataset = np.swapaxes(dataset, 0, 1)
dataset = np.expand_dims(dataset, axis=-1)

# Split into training and validation sets through shuffled indexes.
indexes = np.arange(dataset.shape[0])
np.random.shuffle(indexes)
train_index = indexes[: int(0.9 * dataset.shape[0])]
val_index = indexes[int(0.9 * dataset.shape[0]):]
train_dataset = dataset[train_index]
val_dataset = dataset[val_index]

# Scale to [0, 1].
train_dataset = train_dataset / 255
val_dataset = val_dataset / 255


def create_shifted_frames(data):
    """x: frames 0 to n - 1; y: frames 1 to n (each frame predicts the next)."""
    x = data[:, 0: data.shape[1] - 1, :, :]
    y = data[:, 1: data.shape[1], :, :]
    return x, y


x_train, y_train = create_shifted_frames(train_dataset)
x_val, y_val = create_shifted_frames(val_dataset)

print("Training Dataset Shapes: " + str(x_train.shape) + ", " + str(y_train.shape))
print("Validation Dataset Shapes: " + str(x_val.shape) + ", " + str(y_val.shape))

# The frames of one training video (figure written to a file).
fig, axes = plt.subplots(2, 5, figsize=(10, 4))
data_choice = np.random.choice(range(len(train_dataset)), size=1)[0]
for idx, ax in enumerate(axes.flat):
    ax.imshow(np.squeeze(train_dataset[data_choice][idx]), cmap="gray")
    ax.set_title(f"Frame {idx + 1}")
    ax.axis("off")
print(f"Displaying frames for example {data_choice}.")
plt.savefig(os.path.join(tempfile.gettempdir(), "conv_lstm_frames.png"))
plt.close()

# The model reads videos of any number of frames: (None, height, width, channels).
inp = layers.Input(shape=(None, *x_train.shape[2:]))

# Three ConvLSTM2D layers with batch normalization (filters 64 in the example, 8 here),
# then a Conv3D over time and space for the predicted frames.
x = layers.ConvLSTM2D(
    filters=8,
    kernel_size=(5, 5),
    padding="same",
    return_sequences=True,
    activation="relu",
)(inp)
x = layers.BatchNormalization()(x)
x = layers.ConvLSTM2D(
    filters=8,
    kernel_size=(3, 3),
    padding="same",
    return_sequences=True,
    activation="relu",
)(x)
x = layers.BatchNormalization()(x)
x = layers.ConvLSTM2D(
    filters=8,
    kernel_size=(1, 1),
    padding="same",
    return_sequences=True,
    activation="relu",
)(x)
x = layers.Conv3D(
    filters=1, kernel_size=(3, 3, 3), activation="sigmoid", padding="same"
)(x)

model = keras.models.Model(inp, x)
model.compile(
    loss=keras.losses.binary_crossentropy, optimizer=keras.optimizers.Adam(),
)

early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10)
reduce_lr = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", patience=5)

# 20 epochs of batches of 5 in the example; 2 here.
epochs = 2
batch_size = 5

model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    epochs=epochs,
    validation_data=(x_val, y_val),
    callbacks=[early_stopping, reduce_lr],
)

# From the first five frames of a validation video, predict five more, one at a time
# (each prediction appended to the frames read next: a longer video each time).
example = val_dataset[np.random.choice(range(len(val_dataset)), size=1)[0]]
frames = example[:5, ...]
original_frames = example[5:, ...]
for _ in range(5):
    new_prediction = model.predict(np.expand_dims(frames, axis=0))
    new_prediction = np.squeeze(new_prediction, axis=0)
    predicted_frame = np.expand_dims(new_prediction[-1, ...], axis=0)
    frames = np.concatenate((frames, predicted_frame), axis=0)

fig, axes = plt.subplots(2, 5, figsize=(10, 4))
for idx, ax in enumerate(axes[0]):
    ax.imshow(np.squeeze(original_frames[idx]), cmap="gray")
    ax.set_title(f"Frame {idx + 6}")
    ax.axis("off")
new_frames = frames[5:, ...]
for idx, ax in enumerate(axes[1]):
    ax.imshow(np.squeeze(new_frames[idx]), cmap="gray")
    ax.set_title(f"Frame {idx + 6}")
    ax.axis("off")
plt.savefig(os.path.join(tempfile.gettempdir(), "conv_lstm_predicted.png"))
plt.close()

# Predicted videos of a few validation examples, as GIFs (the example writes them with
# imageio and shows them in notebook widgets; here Pillow writes them to files).
examples = val_dataset[np.random.choice(range(len(val_dataset)), size=3)]
predicted_videos = []
for example in examples:
    frames = example[:5, ...]
    original_frames = example[5:, ...]
    new_predictions = np.zeros(shape=(5, *frames[0].shape))
    for i in range(5):
        frames = example[: 5 + i + 1, ...]
        new_prediction = model.predict(np.expand_dims(frames, axis=0))
        new_prediction = np.squeeze(new_prediction, axis=0)
        predicted_frame = np.expand_dims(new_prediction[-1, ...], axis=0)
        new_predictions[i] = predicted_frame

    for frame_set in [original_frames, new_predictions]:
        current_frames = np.squeeze(frame_set)
        current_frames = current_frames[..., np.newaxis] * np.ones(3)
        current_frames = (current_frames * 255).astype(np.uint8)
        images = [Image.fromarray(f) for f in current_frames]
        with io.BytesIO() as gif:
            images[0].save(gif, "GIF", save_all=True, append_images=images[1:], duration=200)
            predicted_videos.append(gif.getvalue())

print(" Truth\tPrediction")
for i in range(0, len(predicted_videos), 2):
    for j, kind in ((i, "truth"), (i + 1, "prediction")):
        with open(os.path.join(tempfile.gettempdir(), f"conv_lstm_{i // 2}_{kind}.gif"),
                  "wb") as f:
            f.write(predicted_videos[j])
    print(f" video {i // 2}: {len(predicted_videos[i])} and {len(predicted_videos[i + 1])} bytes")
