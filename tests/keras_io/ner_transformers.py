# Modeled on keras-io examples/nlp/ner_transformers.py (its Keras 3 form); written for
# tessera. CoNLL 2003 (a Hugging Face download) replaced by 960 generated sentences whose
# tags follow from the words (names, organisations, places and other entities from small
# lists, the rest "O"); StringLookup (it needs TensorFlow under Keras) by a dict from the
# vocabulary; tf.data's padded batches by a keras.utils.PyDataset that pads every batch to
# the longest sentence (tessera reads a PyDataset's batches with one sample shape; predict
# meets other lengths); conlleval's report by token-level precision, recall and F1 in
# NumPy; 2 epochs.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [keras.layers.Dense(ff_dim, activation="relu"), keras.layers.Dense(embed_dim)])
        self.layernorm1 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = keras.layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = keras.layers.Dropout(rate)
        self.dropout2 = keras.layers.Dropout(rate)

    def call(self, inputs, training=False):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = keras.layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = keras.layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, inputs):
        maxlen = ops.shape(inputs)[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        position_embeddings = self.pos_emb(positions)
        token_embeddings = self.token_emb(inputs)
        return token_embeddings + position_embeddings


class NERModel(keras.Model):
    def __init__(self, num_tags, vocab_size, maxlen=128, embed_dim=32, num_heads=2,
                 ff_dim=32):
        super().__init__()
        self.embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
        self.transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
        self.dropout1 = layers.Dropout(0.1)
        self.ff = layers.Dense(ff_dim, activation="relu")
        self.dropout2 = layers.Dropout(0.1)
        self.ff_final = layers.Dense(num_tags, activation="softmax")

    def call(self, inputs, training=False):
        x = self.embedding_layer(inputs)
        x = self.transformer_block(x)
        x = self.dropout1(x, training=training)
        x = self.ff(x)
        x = self.dropout2(x, training=training)
        x = self.ff_final(x)
        return x


def make_tag_lookup_table():
    iob_labels = ["B", "I"]
    ner_labels = ["PER", "ORG", "LOC", "MISC"]
    all_labels = [(label1, label2) for label2 in ner_labels for label1 in iob_labels]
    all_labels = ["-".join([a, b]) for a, b in all_labels]
    all_labels = ["[PAD]", "O"] + all_labels
    return dict(zip(range(0, len(all_labels) + 1), all_labels))


mapping = make_tag_lookup_table()
print(mapping)

# The corpus: sentences of plain words and entities of 1-2 words, tagged in IOB2 (0-based as
# CoNLL's ner_tags: 0 is "O", 1 B-PER, 2 I-PER, ...; the map below adds one).
rng = np.random.default_rng(0)
entities = {
    "PER": [["john", "smith"], ["mary"], ["peter", "blair"], ["anna", "meyer"], ["paul"]],
    "ORG": [["eu"], ["united", "nations"], ["reuters"], ["nato"], ["acme", "corp"]],
    "LOC": [["germany"], ["britain"], ["new", "york"], ["paris"], ["tokyo"]],
    "MISC": [["german"], ["british"], ["french"], ["olympic", "games"], ["euro"]],
}
plain = ["the", "a", "said", "on", "to", "call", "rejects", "boycott", "lamb", "in", "of",
         "met", "with", "after", "talks", "week", "will", "visit", "and", "minister"]
ner_index = {"PER": 1, "ORG": 3, "LOC": 5, "MISC": 7}


def make_sentence():
    tokens, tags = [], []
    for _ in range(rng.integers(4, 14)):
        if rng.random() < 0.3:
            kind = list(entities)[rng.integers(4)]
            words = entities[kind][rng.integers(len(entities[kind]))]
            tokens += words
            tags += [ner_index[kind]] + [ner_index[kind] + 1] * (len(words) - 1)
        else:
            tokens.append(plain[rng.integers(len(plain))])
            tags.append(0)
    return tokens, tags


train_records = [make_sentence() for _ in range(800)]
val_records = [make_sentence() for _ in range(160)]

all_tokens = sum([t for t, _ in train_records], [])
all_tokens_array = np.array(list(map(str.lower, all_tokens)))
tokens_seen, counts = np.unique(all_tokens_array, return_counts=True)
num_tags = len(mapping)
vocab_size = 64
order = np.argsort(-counts, kind="stable")
vocabulary = [str(tokens_seen[i]) for i in order[:vocab_size - 2]]

# StringLookup's map: 0 the padding, 1 an unknown token, then the vocabulary.
word_ids = {w: i + 2 for i, w in enumerate(vocabulary)}


def lowercase_and_convert_to_ids(tokens):
    return np.array([word_ids.get(t.lower(), 1) for t in tokens], dtype="int64")


class PaddedBatches(keras.utils.PyDataset):
    """The example's padded_batch: batches of (token ids, tags + 1), padded with 0
    to the longest sentence."""

    def __init__(self, records, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.records = records
        self.batch_size = batch_size

    def __len__(self):
        return (len(self.records) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, idx):
        batch = self.records[idx * self.batch_size:(idx + 1) * self.batch_size]
        length = max(len(t) for t, _ in self.records)
        x = np.zeros((len(batch), length), dtype="int64")
        y = np.zeros((len(batch), length), dtype="int64")
        for i, (tokens, tags) in enumerate(batch):
            x[i, :len(tokens)] = lowercase_and_convert_to_ids(tokens)
            y[i, :len(tags)] = np.array(tags) + 1
        return x, y


batch_size = 32
train_dataset = PaddedBatches(train_records, batch_size)
val_dataset = PaddedBatches(val_records, batch_size)

ner_model = NERModel(num_tags, vocab_size, embed_dim=32, num_heads=4, ff_dim=64)


class CustomNonPaddingTokenLoss(keras.losses.Loss):
    """The crossentropy over the tokens that are not padding."""

    def __init__(self, name="custom_ner_loss"):
        super().__init__(name=name)

    def call(self, y_true, y_pred):
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=False, reduction=None)
        loss = loss_fn(y_true, y_pred)
        mask = ops.cast((y_true > 0), dtype="float32")
        loss = loss * mask
        return ops.sum(loss) / ops.sum(mask)


loss = CustomNonPaddingTokenLoss()

ner_model.compile(optimizer="adam", loss=loss)
ner_model.fit(train_dataset, epochs=2, verbose=2)


def tokenize_and_convert_to_ids(text):
    tokens = text.split()
    return lowercase_and_convert_to_ids(tokens)


sample_input = tokenize_and_convert_to_ids("eu rejects german call to boycott british lamb")
sample_input = ops.reshape(sample_input, [1, -1])
print(sample_input)

output = ner_model.predict(sample_input)
prediction = np.argmax(output, axis=-1)[0]
prediction = [mapping[i] for i in prediction]
print(prediction)
assert len(prediction) == 8  # check


def calculate_metrics(dataset):
    all_true_tag_ids, all_predicted_tag_ids = [], []
    for i in range(len(dataset)):
        x, y = dataset[i]
        output = ner_model.predict(x, verbose=0)
        predictions = np.argmax(output, axis=-1)
        predictions = np.reshape(predictions, [-1])
        true_tag_ids = np.reshape(y, [-1])
        mask = (true_tag_ids > 0) & (predictions > 0)
        all_true_tag_ids.append(true_tag_ids[mask])
        all_predicted_tag_ids.append(predictions[mask])
    all_true_tag_ids = np.concatenate(all_true_tag_ids)
    all_predicted_tag_ids = np.concatenate(all_predicted_tag_ids)
    predicted_tags = [mapping[tag] for tag in all_predicted_tag_ids]
    real_tags = [mapping[tag] for tag in all_true_tag_ids]
    return predicted_tags, real_tags


def evaluate(real_tags, predicted_tags):
    """Token-level precision, recall and F1 of the entity tags (conlleval's report
    counts whole chunks)."""
    real, pred = np.array(real_tags), np.array(predicted_tags)
    hit = np.sum((real == pred) & (real != "O"))
    precision = hit / max(np.sum(pred != "O"), 1)
    recall = hit / max(np.sum(real != "O"), 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-9)
    print(f"precision: {100 * precision:.2f}%; recall: {100 * recall:.2f}%; FB1: {100 * f1:.2f}")
    return f1


predicted_tags, real_tags = calculate_metrics(val_dataset)
evaluate(real_tags, predicted_tags)
