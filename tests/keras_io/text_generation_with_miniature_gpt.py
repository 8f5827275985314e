# Modeled on keras-io examples/generative/text_generation_with_miniature_gpt.py (its Keras 3
# form); written for tessera. The IMDB reviews replaced by 1,200 sentences generated from a
# small grammar (so that the next word is partly predictable), tokenized in Python in place of
# TextVectorization and tf.data (a vocabulary of the words by frequency, 0 for padding, 1 for
# unknown words); sequences of 24 words, embeddings of 32, 2 epochs, 8 words generated.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops


def causal_attention_mask(batch_size, n_dest, n_src, dtype):
    """Mask the upper half of the dot product matrix in self attention: no
    information flows from later tokens. 1's in the lower triangle, counting
    from the lower right corner."""
    i = ops.arange(n_dest)[:, None]
    j = ops.arange(n_src)
    m = i >= j - n_src + n_dest
    mask = ops.cast(m, dtype)
    mask = ops.reshape(mask, [1, n_dest, n_src])
    mult = ops.concatenate(
        [ops.expand_dims(batch_size, -1), ops.convert_to_tensor([1, 1])], 0)
    return ops.tile(mask, mult)


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads, embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs):
        input_shape = ops.shape(inputs)
        batch_size = input_shape[0]
        seq_len = input_shape[1]
        causal_mask = causal_attention_mask(batch_size, seq_len, seq_len, "bool")
        attention_output = self.att(inputs, inputs, attention_mask=causal_mask)
        attention_output = self.dropout1(attention_output)
        out1 = self.layernorm1(inputs + attention_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(0, maxlen, 1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


vocab_size = 200  # the vocabulary's size, padding and unknown words included
maxlen = 24  # the sequences' length
embed_dim = 32  # each token's embedding size
num_heads = 2  # attention heads
feed_forward_dim = 32  # the transformer's feed-forward hidden size


def create_model():
    inputs = layers.Input(shape=(maxlen,), dtype="int32")
    embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    transformer_block = TransformerBlock(embed_dim, num_heads, feed_forward_dim)
    x = transformer_block(x)
    outputs = layers.Dense(vocab_size)(x)
    model = keras.Model(inputs=inputs, outputs=[outputs, x])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("adam", loss=[loss_fn, None])  # no loss on the transformer's embeddings
    return model


# The corpus: sentences of a small grammar.
rng = np.random.default_rng(0)
subjects = ["this movie", "the film", "the story", "the actor", "the ending", "the plot",
            "this show", "the cast", "the music", "the director"]
verbs = ["is", "was", "seems", "felt", "looks", "became"]
adverbs = ["very", "quite", "really", "not", "so", "rather", "truly"]
adjectives = ["good", "bad", "boring", "great", "funny", "slow", "beautiful", "awful",
              "long", "short", "dark", "bright", "sad", "clever", "silly"]
extra = [f"word{i}" for i in range(200)]  # rare words, some left out of the vocabulary


def sentence():
    words = []
    for _ in range(rng.integers(2, 5)):
        words += rng.choice(subjects).split() + [rng.choice(verbs), rng.choice(adverbs),
                                                 rng.choice(adjectives)]
        if rng.random() < 0.5:
            words += ["and", str(rng.choice(extra))]
        words.append(".")
    return " ".join(words)


texts = [sentence() for _ in range(1200)]
print(f"{len(texts)} texts")

counts = {}
for t in texts:
    for w in t.split():
        counts[w] = counts.get(w, 0) + 1
vocab = ["", "[UNK]"] + sorted(counts, key=lambda w: (-counts[w], w))[:vocab_size - 2]
word_to_index = {}
for index, word in enumerate(vocab):
    word_to_index[word] = index


def prepare_lm_inputs_labels(texts):
    """Shift word sequences by 1 position so that the target for position (i) is
    word at position (i+1). The model uses all words up till position (i) to
    predict the next word."""
    tokenized = np.zeros((len(texts), maxlen + 1), dtype="int32")
    for n, t in enumerate(texts):
        ids = [word_to_index.get(w, 1) for w in t.split()][:maxlen + 1]
        tokenized[n, :len(ids)] = ids
    return tokenized[:, :-1], tokenized[:, 1:]


x_train, y_train = prepare_lm_inputs_labels(texts)


class TextGenerator(keras.callbacks.Callback):
    """A callback to generate text from a trained model.
    1. Feed some starting prompt to the model
    2. Predict probabilities for the next token
    3. Sample the next token and add it to the next input"""

    def __init__(self, max_tokens, start_tokens, index_to_word, top_k=10, print_every=1):
        self.max_tokens = max_tokens
        self.start_tokens = start_tokens
        self.index_to_word = index_to_word
        self.print_every = print_every
        self.k = top_k

    def sample_from(self, logits):
        logits, indices = ops.top_k(logits, k=self.k, sorted=True)
        indices = np.asarray(indices).astype("int32")
        preds = keras.activations.softmax(ops.expand_dims(logits, 0))[0]
        preds = np.asarray(preds).astype("float32")
        return np.random.choice(indices, p=preds / preds.sum())

    def detokenize(self, number):
        return self.index_to_word[number]

    def on_epoch_end(self, epoch, logs=None):
        start_tokens = [_ for _ in self.start_tokens]
        if (epoch + 1) % self.print_every != 0:
            return
        num_tokens_generated = 0
        tokens_generated = []
        while num_tokens_generated <= self.max_tokens:
            pad_len = maxlen - len(start_tokens)
            sample_index = len(start_tokens) - 1
            if pad_len < 0:
                x = start_tokens[:maxlen]
                sample_index = maxlen - 1
            elif pad_len > 0:
                x = start_tokens + [0] * pad_len
            else:
                x = start_tokens
            x = np.array([x])
            y, _ = self.model.predict(x, verbose=0)
            sample_token = self.sample_from(y[0][sample_index])
            tokens_generated.append(sample_token)
            start_tokens.append(sample_token)
            num_tokens_generated = len(tokens_generated)
        txt = " ".join([self.detokenize(_) for _ in self.start_tokens + tokens_generated])
        print(f"generated text:\n{txt}\n")


start_prompt = "this movie is"
start_tokens = [word_to_index.get(_, 1) for _ in start_prompt.split()]
num_tokens_generated = 8
text_gen_callback = TextGenerator(num_tokens_generated, start_tokens, vocab)

model = create_model()
model.fit(x_train, y_train, batch_size=32, verbose=2, epochs=2,
          callbacks=[text_gen_callback])

# check: the causal mask keeps later tokens out: changing the last token leaves the
# predictions at the earlier positions as they were.
a = x_train[:2].copy()
b = a.copy()
b[:, -1] = (b[:, -1] + 7) % vocab_size
pa, pb = model.predict(a, verbose=0)[0], model.predict(b, verbose=0)[0]
assert np.allclose(pa[:, :-1], pb[:, :-1], atol=1e-5), np.abs(pa - pb)[:, :-1].max()
