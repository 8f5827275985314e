# Modeled on keras-io examples/nlp/pretrained_word_embeddings.py (its Keras 3 form); written
# for tessera. The 20 Newsgroups download replaced by 1,000 generated messages of 4
# newsgroups (each draws most of its words from its group's list), GloVe by a local text file
# of the same format with random 32-dimensional vectors for most words (vectors that tell the
# groups apart); tf.data's batches for adapt by the array; filters 32 in place of 128;
# 3 epochs.
import os
import tempfile

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn.layers import Embedding, TextVectorization

rng = np.random.default_rng(0)
class_names = ["comp.graphics", "rec.autos", "sci.space", "talk.politics"]
topics = [
    ["image", "pixel", "render", "polygon", "texture", "graphics", "modeling", "shader", "3d"],
    ["car", "engine", "tire", "brake", "dealer", "mileage", "sedan", "clutch", "gear"],
    ["orbit", "nasa", "launch", "shuttle", "moon", "rocket", "satellite", "mars", "probe"],
    ["vote", "senate", "law", "policy", "government", "election", "tax", "rights", "court"],
]
common = ["the", "a", "is", "of", "and", "to", "in", "this", "message", "about", "i", "it",
          "for", "on", "with", "was", "that", "my", "from", "anyone", "know", "thanks"]
samples, labels = [], []
for _ in range(1000):
    k = int(rng.integers(len(class_names)))
    n = int(rng.integers(30, 120))
    words = [topics[k][rng.integers(9)] if rng.random() < 0.25 else common[rng.integers(22)]
             for _ in range(n)]
    samples.append("Subject: " + " ".join(words).capitalize() + ".")
    labels.append(k)
print("Classes:", class_names)
print("Number of samples:", len(samples))

# Shuffle the data
seed = 1337
rng_shuffle = np.random.RandomState(seed)
rng_shuffle.shuffle(samples)
rng_shuffle = np.random.RandomState(seed)
rng_shuffle.shuffle(labels)

# Extract a training & validation split
validation_split = 0.2
num_validation_samples = int(validation_split * len(samples))
train_samples = samples[:-num_validation_samples]
val_samples = samples[-num_validation_samples:]
train_labels = labels[:-num_validation_samples]
val_labels = labels[-num_validation_samples:]

vectorizer = TextVectorization(max_tokens=20000, output_sequence_length=200)
vectorizer.adapt(np.array(train_samples))
print(vectorizer.get_vocabulary()[:5])

output = vectorizer([["the cat sat on the mat"]])
print(np.asarray(output)[0, :6])

voc = vectorizer.get_vocabulary()
word_index = dict(zip(voc, range(len(voc))))
test = ["the", "message", "is", "about", "the", "car"]
print([word_index[w] for w in test])

# The GloVe file's format: a word and its vector per line (here written from random vectors:
# each group's words lean along a direction of their own).
embedding_dim = 32
path_to_glove_file = os.path.join(tempfile.mkdtemp(), "glove.6B.32d.txt")
directions = rng.normal(size=(len(topics), embedding_dim))
with open(path_to_glove_file, "w") as f:
    for word in common + sum(topics, []) + [f"rare{i}" for i in range(50)]:
        vec = rng.normal(scale=0.3, size=embedding_dim)
        for k, t in enumerate(topics):
            if word in t:
                vec += directions[k]
        if rng.random() < 0.9:  # a few words have no vector, as in GloVe
            f.write(word + " " + " ".join(f"{v:.5f}" for v in vec) + "\n")

embeddings_index = {}
with open(path_to_glove_file) as f:
    for line in f:
        word, coefs = line.split(maxsplit=1)
        coefs = np.fromstring(coefs, "f", sep=" ")
        embeddings_index[word] = coefs
print("Found %s word vectors." % len(embeddings_index))

num_tokens = len(voc) + 2
hits = 0
misses = 0

# Prepare embedding matrix
embedding_matrix = np.zeros((num_tokens, embedding_dim))
for word, i in word_index.items():
    embedding_vector = embeddings_index.get(word)
    if embedding_vector is not None:
        # Words not found in embedding index will be all-zeros.
        # This includes the representation for "padding" and "OOV"
        embedding_matrix[i] = embedding_vector
        hits += 1
    else:
        misses += 1
print("Converted %d words (%d misses)" % (hits, misses))

embedding_layer = Embedding(num_tokens, embedding_dim, trainable=False)
embedding_layer.build((1,))
embedding_layer.set_weights([embedding_matrix])

int_sequences_input = keras.Input(shape=(None,), dtype="int32")
embedded_sequences = embedding_layer(int_sequences_input)
x = layers.Conv1D(32, 5, activation="relu")(embedded_sequences)
x = layers.MaxPooling1D(5)(x)
x = layers.Conv1D(32, 5, activation="relu")(x)
x = layers.MaxPooling1D(5)(x)
x = layers.Conv1D(32, 5, activation="relu")(x)
x = layers.GlobalMaxPooling1D()(x)
x = layers.Dense(32, activation="relu")(x)
x = layers.Dropout(0.5)(x)
preds = layers.Dense(len(class_names), activation="softmax")(x)
model = keras.Model(int_sequences_input, preds)
model.summary()

x_train = np.asarray(vectorizer(np.array([[s] for s in train_samples])))
x_val = np.asarray(vectorizer(np.array([[s] for s in val_samples])))
y_train = np.array(train_labels)
y_val = np.array(val_labels)

model.compile(loss="sparse_categorical_crossentropy", optimizer="rmsprop", metrics=["acc"])
model.fit(x_train, y_train, batch_size=128, epochs=3, validation_data=(x_val, y_val),
          verbose=2)
# check: the frozen embedding kept the pretrained vectors
assert np.allclose(embedding_layer.get_weights()[0], embedding_matrix)

string_input = keras.Input(shape=(1,), dtype="string")
x = vectorizer(string_input)
preds = model(x)
end_to_end_model = keras.Model(string_input, preds)

probabilities = end_to_end_model(
    keras.ops.convert_to_tensor([["this message is about computer graphics and 3D modeling"]]))
print(class_names[np.argmax(probabilities[0])])
