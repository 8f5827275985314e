# Modeled on keras-io examples/audio/transformer_asr.py; written for tessera, in a Keras 3
# backend-agnostic form: `ops` for the tf.* calls of the layers (`tf.shape`, `tf.range`, the
# causal mask's `tf.tile`, given `[batch_size, 1, 1]`: JAX takes no tensor of repeats), and
# the example's `train_step`/`test_step` (tf.GradientTape; the loss of the shifted target,
# one-hot, masked where it is padding) as a `compute_loss` override of the same loss, the shift
# done by the data pipeline (a `keras.utils.PyDataset` yielding `((source, target[:, :-1]),
# target[:, 1:])` in place of tf.data's dicts); the compiled loss tracked by fit in place of the
# `metrics` property's own Mean. In place of LJSpeech (3.6 GB) and `tf.signal.stft`: sentences
# of 14 words spoken as one tone per character (a pitch per letter, 20 ms each) at 4 kHz, their
# |STFT| ** 0.5 computed in NumPy with the example's frame/step/FFT lengths in ms, normalized
# per clip and padded to 64 frames (2754); the example's character vectorizer; 480 + 32 clips;
# num_hid 32 (200), feed-forward 64 (400), 2 encoder layers (4), target_maxlen 24 (200); the
# warm-up schedule over 2 + 4 epochs (15 + 85); 3 epochs (1, 100 for a real run).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

rng = np.random.default_rng(7)


class TokenEmbedding(layers.Layer):
    def __init__(self, num_vocab=1000, maxlen=100, num_hid=64):
        super().__init__()
        self.emb = keras.layers.Embedding(num_vocab, num_hid)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=num_hid)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        x = self.emb(x)
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        return x + positions


class SpeechFeatureEmbedding(layers.Layer):
    def __init__(self, num_hid=64, maxlen=100):
        super().__init__()
        self.conv1 = keras.layers.Conv1D(num_hid, 11, strides=2, padding="same",
                                         activation="relu")
        self.conv2 = keras.layers.Conv1D(num_hid, 11, strides=2, padding="same",
                                         activation="relu")
        self.conv3 = keras.layers.Conv1D(num_hid, 11, strides=2, padding="same",
                                         activation="relu")

    def call(self, x):
        x = self.conv1(x)
        x = self.conv2(x)
        return self.conv3(x)


class TransformerEncoder(layers.Layer):
    def __init__(self, embed_dim, num_heads, feed_forward_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(feed_forward_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs, training=False):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


class TransformerDecoder(layers.Layer):
    def __init__(self, embed_dim, num_heads, feed_forward_dim, dropout_rate=0.1):
        super().__init__()
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm3 = layers.LayerNormalization(epsilon=1e-6)
        self.self_att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.enc_att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.self_dropout = layers.Dropout(0.5)
        self.enc_dropout = layers.Dropout(0.1)
        self.ffn_dropout = layers.Dropout(0.1)
        self.ffn = keras.Sequential(
            [layers.Dense(feed_forward_dim, activation="relu"), layers.Dense(embed_dim)])

    def causal_attention_mask(self, batch_size, n_dest, n_src, dtype):
        """1's in the lower triangle, counting from the lower right corner: no flow of
        information from future tokens to the current one."""
        i = ops.arange(n_dest)[:, None]
        j = ops.arange(n_src)
        m = i >= j - n_src + n_dest
        mask = ops.cast(m, dtype)
        mask = ops.reshape(mask, [1, n_dest, n_src])
        # (the example concatenates tensors; JAX's tile takes only static repeats)
        return ops.tile(mask, [batch_size, 1, 1])

    def call(self, enc_out, target):
        input_shape = ops.shape(target)
        batch_size = input_shape[0]
        seq_len = input_shape[1]
        causal_mask = self.causal_attention_mask(batch_size, seq_len, seq_len, "bool")
        target_att = self.self_att(target, target, attention_mask=causal_mask)
        target_norm = self.layernorm1(target + self.self_dropout(target_att))
        enc_out = self.enc_att(target_norm, enc_out)
        enc_out_norm = self.layernorm2(self.enc_dropout(enc_out) + target_norm)
        ffn_out = self.ffn(enc_out_norm)
        ffn_out_norm = self.layernorm3(enc_out_norm + self.ffn_dropout(ffn_out))
        return ffn_out_norm


class Transformer(keras.Model):
    def __init__(self, num_hid=64, num_head=2, num_feed_forward=128, source_maxlen=100,
                 target_maxlen=100, num_layers_enc=4, num_layers_dec=1, num_classes=10):
        super().__init__()
        self.num_layers_enc = num_layers_enc
        self.num_layers_dec = num_layers_dec
        self.target_maxlen = target_maxlen
        self.num_classes = num_classes

        self.enc_input = SpeechFeatureEmbedding(num_hid=num_hid, maxlen=source_maxlen)
        self.dec_input = TokenEmbedding(num_vocab=num_classes, maxlen=target_maxlen,
                                        num_hid=num_hid)
        self.encoder = keras.Sequential(
            [self.enc_input]
            + [TransformerEncoder(num_hid, num_head, num_feed_forward)
               for _ in range(num_layers_enc)])
        for i in range(num_layers_dec):
            setattr(self, f"dec_layer_{i}",
                    TransformerDecoder(num_hid, num_head, num_feed_forward))
        self.classifier = layers.Dense(num_classes)

    def decode(self, enc_out, target):
        y = self.dec_input(target)
        for i in range(self.num_layers_dec):
            y = getattr(self, f"dec_layer_{i}")(enc_out, y)
        return y

    def call(self, inputs):
        source = inputs[0]
        target = inputs[1]
        x = self.encoder(source)
        y = self.decode(x, target)
        return self.classifier(y)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The example's step loss: the shifted target one-hot, its padding masked."""
        one_hot = ops.one_hot(y, self.num_classes)
        mask = ops.logical_not(ops.equal(y, 0))
        return super().compute_loss(x, one_hot, y_pred, sample_weight=mask, training=training)

    def generate(self, source, target_start_token_idx):
        """Performs inference over one batch of inputs using greedy decoding."""
        bs = ops.shape(source)[0]
        enc = self.encoder(source)
        dec_input = ops.ones((bs, 1), dtype="int32") * target_start_token_idx
        dec_logits = []
        for i in range(self.target_maxlen - 1):
            dec_out = self.decode(enc, dec_input)
            logits = self.classifier(dec_out)
            logits = ops.cast(ops.argmax(logits, axis=-1), "int32")
            last_logit = ops.expand_dims(logits[:, -1], axis=-1)
            dec_logits.append(last_logit)
            dec_input = ops.concatenate([dec_input, last_logit], axis=-1)
        return dec_input


# Data: sentences "spoken" one tone per character.
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "red", "box", "sun", "big",
         "hat"]
SAMPLE_RATE = 4000
CHAR_MS = 20


def get_data(n, maxlen=22):
    data = []
    while len(data) < n:
        text = " ".join(rng.choice(WORDS, rng.integers(2, 6)))
        if len(text) < maxlen:
            data.append({"audio": None, "text": text})
    return data


class VectorizeChar:
    def __init__(self, max_len=50):
        self.vocab = (["-", "#", "<", ">"] + [chr(i + 96) for i in range(1, 27)]
                      + [" ", ".", ",", "?"])
        self.max_len = max_len
        self.char_to_idx = {}
        for i, ch in enumerate(self.vocab):
            self.char_to_idx[ch] = i

    def __call__(self, text):
        text = text.lower()
        text = text[: self.max_len - 2]
        text = "<" + text + ">"
        pad_len = self.max_len - len(text)
        return [self.char_to_idx.get(ch, 1) for ch in text] + [0] * pad_len

    def get_vocabulary(self):
        return self.vocab


max_target_len = 24
data = get_data(512)
vectorizer = VectorizeChar(max_target_len)
print("vocab size", len(vectorizer.get_vocabulary()))


def speak(text):
    """A tone per character (its own pitch; silence for a space), with noise."""
    n = SAMPLE_RATE * CHAR_MS // 1000
    t = np.arange(n) / SAMPLE_RATE
    parts = []
    for ch in text:
        k = vectorizer.char_to_idx.get(ch, 1)
        pitch = 200.0 + 55.0 * k
        parts.append(0.0 * t if ch == " " else np.sin(2 * np.pi * pitch * t + rng.uniform(0, 6)))
    wave = np.concatenate(parts) * rng.uniform(0.5, 1.0)
    return wave + rng.normal(0, 0.05, wave.shape)


def path_to_audio(wave, pad_len=64):
    # spectrogram using stft: frames of 200 and steps of 80 samples at 16 kHz, in ms here
    frame_length, frame_step, fft_length = SAMPLE_RATE // 80, SAMPLE_RATE // 200, 64
    frames = [wave[s:s + frame_length] for s in range(0, len(wave) - frame_length + 1,
                                                       frame_step)]
    window = np.hanning(frame_length + 1)[:-1]
    stfts = np.fft.rfft(np.stack(frames) * window, n=fft_length)
    x = np.abs(stfts) ** 0.5
    # normalisation
    means = np.mean(x, 1, keepdims=True)
    stddevs = np.std(x, 1, keepdims=True)
    x = (x - means) / stddevs
    # padding
    x = np.pad(x, [[0, pad_len], [0, 0]])[:pad_len, :]
    return x.astype("float32")


class SpeechBatches(keras.utils.PyDataset):
    """The example's tf.data pipeline, its batches split as the train_step splits them."""

    def __init__(self, data, bs=4, **kwargs):
        super().__init__(**kwargs)
        self.source = np.stack([path_to_audio(speak(d["text"])) for d in data])
        self.target = np.array([vectorizer(d["text"]) for d in data], dtype="int32")
        self.bs = bs

    def __len__(self):
        return -(-len(self.source) // self.bs)

    def __getitem__(self, idx):
        rows = slice(idx * self.bs, (idx + 1) * self.bs)
        source, target = self.source[rows], self.target[rows]
        return (source, target[:, :-1]), target[:, 1:]


split = int(len(data) * 15 / 16)
train_data = data[:split]
test_data = data[split:]
ds = SpeechBatches(train_data, bs=32)
val_ds = SpeechBatches(test_data, bs=4)
print("source", ds[0][0][0].shape, "target", ds[0][0][1].shape, ds[0][1].shape)


class DisplayOutputs(keras.callbacks.Callback):
    def __init__(self, batch, idx_to_token, target_start_token_idx=27, target_end_token_idx=28):
        """Displays a batch of outputs after every fifth epoch."""
        self.batch = batch
        self.target_start_token_idx = target_start_token_idx
        self.target_end_token_idx = target_end_token_idx
        self.idx_to_char = idx_to_token

    def on_epoch_end(self, epoch, logs=None):
        if epoch % 5 != 0:
            return
        (source, _), _ = self.batch
        target = val_ds.target[: len(source)]
        bs = ops.shape(source)[0]
        preds = self.model.generate(source, self.target_start_token_idx)
        preds = ops.convert_to_numpy(preds)
        for i in range(bs):
            target_text = "".join([self.idx_to_char[_] for _ in target[i, :]])
            prediction = ""
            for idx in preds[i, :]:
                prediction += self.idx_to_char[idx]
                if idx == self.target_end_token_idx:
                    break
            print(f"target:     {target_text.replace('-', '')}")
            print(f"prediction: {prediction}\n")


class CustomSchedule(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, init_lr=0.00001, lr_after_warmup=0.001, final_lr=0.00001,
                 warmup_epochs=15, decay_epochs=85, steps_per_epoch=203):
        super().__init__()
        self.init_lr = init_lr
        self.lr_after_warmup = lr_after_warmup
        self.final_lr = final_lr
        self.warmup_epochs = warmup_epochs
        self.decay_epochs = decay_epochs
        self.steps_per_epoch = steps_per_epoch

    def calculate_lr(self, epoch):
        """linear warm up - linear decay"""
        warmup_lr = (self.init_lr
                     + ((self.lr_after_warmup - self.init_lr) / (self.warmup_epochs - 1))
                     * epoch)
        decay_lr = ops.maximum(
            self.final_lr,
            self.lr_after_warmup
            - (epoch - self.warmup_epochs) * (self.lr_after_warmup - self.final_lr)
            / self.decay_epochs)
        return ops.minimum(warmup_lr, decay_lr)

    def __call__(self, step):
        epoch = step // self.steps_per_epoch
        epoch = ops.cast(epoch, "float32")
        return self.calculate_lr(epoch)


batch = val_ds[0]
idx_to_char = vectorizer.get_vocabulary()
display_cb = DisplayOutputs(
    batch, idx_to_char, target_start_token_idx=2, target_end_token_idx=3
)  # set the arguments as per vocabulary index for '<' and '>'
model = Transformer(
    num_hid=32,
    num_head=2,
    num_feed_forward=64,
    target_maxlen=max_target_len,
    num_layers_enc=2,
    num_layers_dec=1,
    num_classes=34,
)
loss_fn = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)

learning_rate = CustomSchedule(
    init_lr=0.0001,
    lr_after_warmup=0.003,
    final_lr=0.0001,
    warmup_epochs=2,
    decay_epochs=4,
    steps_per_epoch=len(ds),
)
print("learning rates:", [round(float(learning_rate(s * len(ds))), 6) for s in range(4)])
optimizer = keras.optimizers.Adam(learning_rate)
model.compile(optimizer=optimizer, loss=loss_fn)

history = model.fit(ds, validation_data=val_ds, callbacks=[display_cb], epochs=3)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
