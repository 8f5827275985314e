# Modeled on keras-io examples/audio/ctc_asr.py; written for tessera. Keras 3 form (the
# example is Keras 2): `keras.backend.ctc_batch_cost` as `ops.ctc_loss` on the log of the
# softmax with the blank last, as the Keras 2 function's; `keras.backend.ctc_decode` as
# greedy `ops.ctc_decode` with the same blank; dicts in place of the two StringLookup
# layers (TensorFlow under Keras); jiwer's word error rate written in Python. The LJSpeech
# download, tf.audio.decode_wav and tf.signal.stft are replaced by generated spectrograms:
# each character of a transcription is a fixed random spectrum held for a few frames.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

rng = np.random.default_rng(0)

# The set of characters accepted in the transcription.
characters = [x for x in "abcdefghijklmnopqrstuvwxyz'?! "]
# Characters to integers and back (StringLookup(vocabulary=characters, oov_token=""):
# index 0 for out-of-vocabulary, the characters from 1).
vocabulary = [""] + characters
char_to_num = {c: i for i, c in enumerate(vocabulary)}
num_to_char = {i: c for i, c in enumerate(vocabulary)}
print(f"The vocabulary is: {vocabulary} (size ={len(vocabulary)})")

# fft_length 384 there (193 frequency bins): 64 here, 33 bins; 64 frames per clip.
fft_length = 64
frames = 64
words = ["the", "a", "was", "of", "in", "by", "lord", "reign", "first", "sir"]


def transcription():
    text = ""
    while len(text) < 6:
        text = (text + " " + words[rng.integers(len(words))]).strip()
    return text[:6]


spectra = {c: rng.random(fft_length // 2 + 1) ** 2 * 4 for c in vocabulary}


def encode_single_sample(label):
    """(spectrogram, label) of one generated clip: the characters one after the other,
    7 to 10 frames each, plus noise, normalised per frame as the example's step 6."""
    spectrogram = np.zeros((frames, fft_length // 2 + 1), "float32")
    t = 1
    for c in label:
        n = int(rng.integers(7, 11))
        spectrogram[t:t + n] = spectra[c]
        t += n
    spectrogram += 0.3 * rng.random(spectrogram.shape)
    spectrogram = np.sqrt(spectrogram)
    means = spectrogram.mean(1, keepdims=True)
    stddevs = spectrogram.std(1, keepdims=True)
    spectrogram = (spectrogram - means) / (stddevs + 1e-10)
    return spectrogram.astype("float32"), np.array([char_to_num[c] for c in label], "int32")


texts = [transcription() for _ in range(320)]
pairs = [encode_single_sample(t) for t in texts]
split = int(len(pairs) * 0.80)
x_train = np.stack([p[0] for p in pairs[:split]])
y_train = np.stack([p[1] for p in pairs[:split]])
x_val = np.stack([p[0] for p in pairs[split:]])
y_val = np.stack([p[1] for p in pairs[split:]])
print(f"Size of the training set: {len(x_train)}")
print(f"Size of the validation set: {len(x_val)}")

batch_size = 32
validation_dataset = [(x_val[i:i + batch_size], y_val[i:i + batch_size])
                      for i in range(0, len(x_val), batch_size)]

fig = plt.figure(figsize=(8, 5))
ax = plt.subplot(1, 1, 1)
ax.imshow(np.transpose(x_train[0]), vmax=1)
ax.set_title("".join(num_to_char[int(k)] for k in y_train[0]))
ax.axis("off")
plt.savefig("spectrogram.png")

blank = len(vocabulary)  # the last class, as keras.backend.ctc_batch_cost's


def CTCLoss(y_true, y_pred):
    # Compute the training-time loss value
    batch_len = ops.shape(y_true)[0]
    input_length = ops.shape(y_pred)[1]
    label_length = ops.shape(y_true)[1]

    input_length = input_length * ops.ones(shape=(batch_len,), dtype="int32")
    label_length = label_length * ops.ones(shape=(batch_len,), dtype="int32")
    y_pred = ops.log(y_pred + keras.backend.epsilon())
    loss = ops.ctc_loss(ops.cast(y_true, "int32"), y_pred, label_length, input_length,
                        mask_index=blank)
    return loss


def build_model(input_dim, output_dim, rnn_layers=5, rnn_units=128):
    """Model similar to DeepSpeech2."""
    # Model's input
    input_spectrogram = layers.Input((None, input_dim), name="input")
    # Expand the dimension to use 2D CNN.
    x = layers.Reshape((-1, input_dim, 1), name="expand_dim")(input_spectrogram)
    # Convolution layer 1 (filters 8 here, 32 there)
    x = layers.Conv2D(
        filters=8,
        kernel_size=[11, 41],
        strides=[2, 2],
        padding="same",
        use_bias=False,
        name="conv_1",
    )(x)
    x = layers.BatchNormalization(name="conv_1_bn")(x)
    x = layers.ReLU(name="conv_1_relu")(x)
    # Convolution layer 2
    x = layers.Conv2D(
        filters=8,
        kernel_size=[11, 21],
        strides=[1, 2],
        padding="same",
        use_bias=False,
        name="conv_2",
    )(x)
    x = layers.BatchNormalization(name="conv_2_bn")(x)
    x = layers.ReLU(name="conv_2_relu")(x)
    # Reshape the resulted volume to feed the RNNs layers
    x = layers.Reshape((-1, x.shape[-2] * x.shape[-1]))(x)
    # RNN layers
    for i in range(1, rnn_layers + 1):
        recurrent = layers.GRU(
            units=rnn_units,
            activation="tanh",
            recurrent_activation="sigmoid",
            use_bias=True,
            return_sequences=True,
            reset_after=True,
            name=f"gru_{i}",
        )
        x = layers.Bidirectional(recurrent, name=f"bidirectional_{i}", merge_mode="concat")(x)
        if i < rnn_layers:
            x = layers.Dropout(rate=0.5)(x)
    # Dense layer
    x = layers.Dense(units=rnn_units * 2, name="dense_1")(x)
    x = layers.ReLU(name="dense_1_relu")(x)
    x = layers.Dropout(rate=0.5)(x)
    # Classification layer
    output = layers.Dense(units=output_dim + 1, activation="softmax")(x)
    # Model
    model = keras.Model(input_spectrogram, output, name="DeepSpeech_2")
    # Optimizer (learning rate 1e-3 here, 1e-4 there over 50 epochs)
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    # Compile the model and return
    model.compile(optimizer=opt, loss=CTCLoss)
    return model


# Get the model (2 recurrent layers of 32 units here, 5 of 512 there)
model = build_model(
    input_dim=fft_length // 2 + 1,
    output_dim=len(vocabulary),
    rnn_layers=2,
    rnn_units=32,
)
model.summary(line_length=110)


def decode_batch_predictions(pred):
    input_len = np.ones(pred.shape[0]) * pred.shape[1]
    # Use greedy search. For complex tasks, you can use beam search
    results = ops.ctc_decode(pred, sequence_lengths=input_len, strategy="greedy",
                             mask_index=blank)[0][0]
    # Iterate over the results and get back the text
    output_text = []
    for result in ops.convert_to_numpy(results):
        output_text.append("".join(num_to_char.get(int(k), "") for k in result if k >= 0))
    return output_text


def wer(targets, predictions):
    """Word error rate: word edits (substitutions, insertions, deletions) over the words
    of the targets (jiwer's)."""
    edits = words_total = 0
    for target, prediction in zip(targets, predictions):
        a, b = target.split(), prediction.split()
        row = list(range(len(b) + 1))
        for i, wa in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, wb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wa != wb))
        edits += row[len(b)]
        words_total += len(a)
    return edits / max(words_total, 1)


class CallbackEval(keras.callbacks.Callback):
    """Displays a batch of outputs after every epoch."""

    def __init__(self, dataset):
        super().__init__()
        self.dataset = dataset

    def on_epoch_end(self, epoch: int, logs=None):
        predictions = []
        targets = []
        for batch in self.dataset:
            X, y = batch
            batch_predictions = model.predict(X, verbose=0)
            batch_predictions = decode_batch_predictions(batch_predictions)
            predictions.extend(batch_predictions)
            for label in y:
                targets.append("".join(num_to_char[int(k)] for k in label))
        wer_score = wer(targets, predictions)
        print("-" * 100)
        print(f"Word Error Rate: {wer_score:.4f}")
        print("-" * 100)
        for i in np.random.randint(0, len(predictions), 2):
            print(f"Target    : {targets[i]}")
            print(f"Prediction: {predictions[i]}")
            print("-" * 100)


# Define the number of epochs (2 here).
epochs = 2
# Callback function to check transcription on the val set.
validation_callback = CallbackEval(validation_dataset)
# Train the model
history = model.fit(
    x_train,
    y_train,
    batch_size=batch_size,
    validation_data=(x_val, y_val),
    epochs=epochs,
    callbacks=[validation_callback],
)

# Let's check results on more validation samples
predictions = []
targets = []
for batch in validation_dataset:
    X, y = batch
    batch_predictions = model.predict(X, verbose=0)
    batch_predictions = decode_batch_predictions(batch_predictions)
    predictions.extend(batch_predictions)
    for label in y:
        targets.append("".join(num_to_char[int(k)] for k in label))
wer_score = wer(targets, predictions)
print("-" * 100)
print(f"Word Error Rate: {wer_score:.4f}")
print("-" * 100)
for i in np.random.randint(0, len(predictions), 5):
    print(f"Target    : {targets[i]}")
    print(f"Prediction: {predictions[i]}")
    print("-" * 100)
assert history.history["loss"][-1] < history.history["loss"][0]
