# Modeled on keras-io examples/vision/captcha_ocr.py; written for tessera. Keras 3 form:
# the CTC loss of the endpoint layer is `ops.ctc_loss` (the example calls
# tf.compat.v1.nn.ctc_loss on a SparseTensor built with tf.compat.v1.scan) with the blank last,
# as TensorFlow's; the greedy decoding `ops.ctc_decode` with the same blank; dicts in place of
# the two StringLookup layers (TensorFlow under Keras); a keras.utils.PyDataset of
# {"image", "label"} batches in place of tf.data, reading generated arrays in place of PNGs.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

# In place of the 1040 captcha PNGs (the download): 320 generated captchas of the same size
# and alphabet, 5 characters each, every character drawn as its own fixed random glyph at
# a jittered place, dark on a light noisy background.
characters = sorted(set("2345678bcdefgmnpwxy"))
rng = np.random.default_rng(0)
glyphs = {c: rng.random((30, 24)) < 0.45 for c in characters}
labels = ["".join(rng.choice(characters, 5)) for _ in range(320)]
images = []
for label in labels:
    img = 0.85 + 0.1 * rng.random((50, 200))
    for i, c in enumerate(label):
        x0, y0 = 8 + 38 * i + rng.integers(0, 8), 8 + rng.integers(0, 10)
        img[y0:y0 + 30, x0:x0 + 24][glyphs[c]] = 0.1
    images.append(img.astype("float32"))

print("Number of images found: ", len(images))
print("Number of labels found: ", len(labels))
print("Number of unique characters: ", len(characters))
print("Characters present: ", characters)

# Batch size for training and validation
batch_size = 16

# Desired image dimensions
img_width = 200
img_height = 50

# Two convolution blocks, each halving the size: downsampled 4 times.
downsample_factor = 4

# Maximum length of any captcha in the dataset
max_length = max([len(label) for label in labels])

# Characters to integers and back (StringLookup(vocabulary=characters, mask_token=None):
# index 0 for out-of-vocabulary, the characters from 1; the CTC blank after them).
vocabulary = ["[UNK]"] + characters
char_to_num = {c: i for i, c in enumerate(vocabulary)}
num_to_char = {i: c for i, c in enumerate(vocabulary)}
blank = len(vocabulary)


def split_data(images, labels, train_size=0.9, shuffle=True):
    # 1. Get the total size of the dataset
    size = len(images)
    # 2. Make an indices array and shuffle it, if required
    indices = ops.arange(size)
    if shuffle:
        keras.random.shuffle(indices)
    # 3. Get the size of training samples
    train_samples = int(size * train_size)
    # 4. Split data into training and validation sets
    x_train, y_train = images[indices[:train_samples]], labels[indices[:train_samples]]
    x_valid, y_valid = images[indices[train_samples:]], labels[indices[train_samples:]]
    return x_train, x_valid, y_train, y_valid


x_train, x_valid, y_train, y_valid = split_data(np.array(images), np.array(labels))


def encode_single_sample(img, label):
    # Transpose the image: the time axis is the image's width.
    img = ops.transpose(ops.expand_dims(img, -1), axes=[1, 0, 2])
    # Map the characters in label to numbers
    label = np.array([char_to_num[c] for c in label], dtype="float32")
    # A dict, as the model has two inputs
    return {"image": np.asarray(img), "label": label}


class CaptchaDataset(keras.utils.PyDataset):
    def __init__(self, x, y, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = x, y

    def __len__(self):
        return -(-len(self.x) // batch_size)

    def __getitem__(self, idx):
        samples = [encode_single_sample(img, label) for img, label in
                   zip(self.x[idx * batch_size:(idx + 1) * batch_size],
                       self.y[idx * batch_size:(idx + 1) * batch_size])]
        return {k: np.stack([s[k] for s in samples]) for k in ("image", "label")}


train_dataset = CaptchaDataset(x_train, y_train)
validation_dataset = CaptchaDataset(x_valid, y_valid)

_, ax = plt.subplots(4, 4, figsize=(10, 5))
batch = train_dataset[0]
for i in range(16):
    img = (batch["image"][i] * 255).astype("uint8")
    label = "".join(num_to_char[int(k)] for k in batch["label"][i])
    ax[i // 4, i % 4].imshow(img[:, :, 0].T, cmap="gray")
    ax[i // 4, i % 4].set_title(label)
    ax[i // 4, i % 4].axis("off")
plt.savefig("captchas.png")


def ctc_batch_cost(y_true, y_pred, input_length, label_length):
    label_length = ops.cast(ops.squeeze(label_length, axis=-1), dtype="int32")
    input_length = ops.cast(ops.squeeze(input_length, axis=-1), dtype="int32")
    y_pred = ops.log(y_pred + keras.backend.epsilon())
    loss = ops.ctc_loss(ops.cast(y_true, "int32"), y_pred, label_length, input_length,
                        mask_index=blank)
    return ops.expand_dims(loss, 1)


class CTCLayer(layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = ctc_batch_cost

    def call(self, y_true, y_pred):
        # The training-time loss, added to the layer with self.add_loss().
        # (the example casts these three lengths to int64 tensors, which JAX refuses as
        # the shape of ops.ones while Keras traces the layer: the plain ints here)
        batch_len = ops.shape(y_true)[0]
        input_length = ops.shape(y_pred)[1]
        label_length = ops.shape(y_true)[1]

        input_length = input_length * ops.ones(shape=(batch_len, 1), dtype="int64")
        label_length = label_length * ops.ones(shape=(batch_len, 1), dtype="int64")

        loss = self.loss_fn(y_true, y_pred, input_length, label_length)
        self.add_loss(loss)

        # At test time, just return the computed predictions
        return y_pred


def build_model():
    input_img = layers.Input(shape=(img_width, img_height, 1), name="image", dtype="float32")
    labels = layers.Input(name="label", shape=(None,), dtype="float32")

    # First conv block (filters / 2 here)
    x = layers.Conv2D(
        16,
        (3, 3),
        activation="relu",
        kernel_initializer="he_normal",
        padding="same",
        name="Conv1",
    )(input_img)
    x = layers.MaxPooling2D((2, 2), name="pool1")(x)

    # Second conv block
    x = layers.Conv2D(
        32,
        (3, 3),
        activation="relu",
        kernel_initializer="he_normal",
        padding="same",
        name="Conv2",
    )(x)
    x = layers.MaxPooling2D((2, 2), name="pool2")(x)

    # Two max pools of size and strides 2: feature maps 4x smaller, 32 filters.
    new_shape = ((img_width // 4), (img_height // 4) * 32)
    x = layers.Reshape(target_shape=new_shape, name="reshape")(x)
    x = layers.Dense(32, activation="relu", name="dense1")(x)
    x = layers.Dropout(0.2)(x)

    # RNNs (128 and 64 units there)
    x = layers.Bidirectional(layers.LSTM(32, return_sequences=True, dropout=0.25))(x)
    x = layers.Bidirectional(layers.LSTM(16, return_sequences=True, dropout=0.25))(x)

    # Output layer
    x = layers.Dense(len(vocabulary) + 1, activation="softmax", name="dense2")(x)

    # The CTC layer computes the loss at each step
    output = CTCLayer(name="ctc_loss")(labels, x)

    model = keras.models.Model(inputs=[input_img, labels], outputs=output, name="ocr_model_v1")
    opt = keras.optimizers.Adam(learning_rate=0.003)  # the example: Adam's 0.001, 100 epochs
    model.compile(optimizer=opt)
    return model


model = build_model()
model.summary()

epochs = 4  # the example: 100
early_stopping_patience = 10
early_stopping = keras.callbacks.EarlyStopping(
    monitor="val_loss", patience=early_stopping_patience, restore_best_weights=True
)

history = model.fit(
    train_dataset,
    validation_data=validation_dataset,
    epochs=epochs,
    callbacks=[early_stopping],
)

# The prediction model: the layers up to the output layer
prediction_model = keras.models.Model(model.input[0], model.get_layer(name="dense2").output)
prediction_model.summary()


def decode_batch_predictions(pred):
    input_len = np.ones(pred.shape[0]) * pred.shape[1]
    # Greedy search (beam search for harder tasks)
    results = ops.ctc_decode(pred, sequence_lengths=input_len, strategy="greedy",
                             mask_index=blank)[0][0]
    # Keep up to max_length labels (-1 pads each sequence)
    results = np.asarray(results)[:, :max_length]
    output_text = []
    for res in results:
        output_text.append("".join(num_to_char[int(k)] for k in res if k >= 0))
    return output_text


batch = validation_dataset[0]
batch_images = batch["image"]
batch_labels = batch["label"]

preds = prediction_model.predict(batch_images)
pred_texts = decode_batch_predictions(preds)

orig_texts = ["".join(num_to_char[int(k)] for k in label) for label in batch_labels]
for o, p in zip(orig_texts, pred_texts):
    print(f"{o} -> {p}")

_, ax = plt.subplots(4, 4, figsize=(15, 5))
for i in range(len(pred_texts)):
    img = (batch_images[i, :, :, 0] * 255).astype(np.uint8)
    img = img.T
    title = f"Prediction: {pred_texts[i]}"
    ax[i // 4, i % 4].imshow(img, cmap="gray")
    ax[i // 4, i % 4].set_title(title)
    ax[i // 4, i % 4].axis("off")
plt.savefig("predictions.png")
