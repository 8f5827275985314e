# Modeled on keras-io examples/nlp/multi_label_classification.py (Keras 3 form); written for
# tessera. In place of the arXiv CSV, pandas, scikit-learn's split, StringLookup(multi_hot)
# and TextVectorization(ngrams=2, output_mode="tf_idf") (both need TensorFlow under Keras):
# 1,500 generated abstracts of 12 subject terms (1 to 3 per paper; the words of an abstract
# drawn from its terms' word lists and a common list), their multi-hot labels and their
# unigram + bigram TF-IDF vectors (Keras's formula: count x log(1 + n / (1 + df))) computed in
# NumPy; a vocabulary of 2,000 n-grams; 5 epochs (20 there).
import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers

rng = np.random.default_rng(0)
terms = ["cs.LG", "cs.CV", "cs.AI", "stat.ML", "cs.CL", "cs.NE", "cs.RO", "eess.IV",
         "math.OC", "cs.IR", "q-bio.NC", "cs.SI"]
term_words = [[f"{t.split('.')[-1].lower()}{k}" for k in range(30)] for t in terms]
common_words = [f"w{k}" for k in range(200)]


def make_paper():
    n_terms = rng.choice([1, 2, 3], p=[0.5, 0.35, 0.15])
    paper_terms = sorted(rng.choice(len(terms), n_terms, replace=False))
    words = []
    for _ in range(60):
        if rng.random() < 0.35:
            t = paper_terms[rng.integers(len(paper_terms))]
            words.append(term_words[t][rng.integers(30)])
        else:
            words.append(common_words[rng.integers(200)])
    return " ".join(words), [terms[t] for t in paper_terms]


papers = [make_paper() for _ in range(1500)]
print(f"There are {len(papers)} rows in the dataset.")

# 80 / 10 / 10 split, as the example's stratified split.
train_papers, val_papers, test_papers = papers[:1200], papers[1200:1350], papers[1350:]
print(f"Number of rows in training set: {len(train_papers)}")
print(f"Number of rows in validation set: {len(val_papers)}")
print(f"Number of rows in test set: {len(test_papers)}")

vocab = sorted(terms)
print("Vocabulary:\n")
print(vocab)


def multi_hot(paper_terms):
    out = np.zeros(len(vocab), dtype="float32")
    out[[vocab.index(t) for t in paper_terms]] = 1.0
    return out


def invert_multi_hot(encoded_labels):
    """Reverse a single multi-hot encoded label to a tuple of vocab terms."""
    hot_indices = np.argwhere(encoded_labels == 1.0)[..., 0]
    return np.take(vocab, hot_indices)


sample_label = train_papers[0][1]
print(f"Original label: {sample_label}")
label_binarized = multi_hot(sample_label)
print(f"Label-binarized representation: {label_binarized}")
print(f"Inverted: {invert_multi_hot(label_binarized)}")

max_seqlen = 60
batch_size = 128
max_tokens = 2000


def ngrams(text):
    words = text.split()
    return words + [f"{a} {b}" for a, b in zip(words, words[1:])]


# TextVectorization(max_tokens, ngrams=2, output_mode="tf_idf").adapt(train texts)
counts = {}
document_frequency = {}
for text, _ in train_papers:
    grams = ngrams(text)
    for g in grams:
        counts[g] = counts.get(g, 0) + 1
    for g in set(grams):
        document_frequency[g] = document_frequency.get(g, 0) + 1
tokens = sorted(counts, key=lambda g: (-counts[g], g))[:max_tokens - 1]
index_of = {g: i + 1 for i, g in enumerate(tokens)}  # 0: the out-of-vocabulary n-grams
idf = np.zeros(max_tokens, dtype="float32")
idf[1:len(tokens) + 1] = [np.log(1 + len(train_papers) / (1 + document_frequency[g]))
                          for g in tokens]
idf[0] = np.mean(idf[1:len(tokens) + 1])


def text_vectorizer(texts):
    out = np.zeros((len(texts), max_tokens), dtype="float32")
    for row, text in enumerate(texts):
        for g in ngrams(text):
            out[row, index_of.get(g, 0)] += 1.0
    return out * idf


def make_dataset(split):
    texts = [text for text, _ in split]
    labels = np.stack([multi_hot(t) for _, t in split])
    return text_vectorizer(texts), labels


x_train, y_train = make_dataset(train_papers)
x_val, y_val = make_dataset(val_papers)
x_test, y_test = make_dataset(test_papers)
print(x_train.shape, y_train.shape)


def make_model():
    shallow_mlp_model = keras.Sequential(
        [
            layers.Dense(512, activation="relu"),
            layers.Dense(256, activation="relu"),
            layers.Dense(len(vocab), activation="sigmoid"),
        ]  # More on why "sigmoid" has been used here in a moment.
    )
    return shallow_mlp_model


epochs = 5

shallow_mlp_model = make_model()
shallow_mlp_model.compile(loss="binary_crossentropy", optimizer="adam",
                          metrics=["binary_accuracy"])

history = shallow_mlp_model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs,
                                validation_data=(x_val, y_val))


def plot_result(item):
    plt.plot(history.history[item], label=item)
    plt.plot(history.history["val_" + item], label="val_" + item)
    plt.xlabel("Epochs")
    plt.ylabel(item)
    plt.title("Train and Validation {} Over Epochs".format(item), fontsize=14)
    plt.legend()
    plt.grid()
    plt.close()


plot_result("loss")
plot_result("binary_accuracy")

_, binary_acc = shallow_mlp_model.evaluate(x_test, y_test, batch_size=batch_size)
print(f"Categorical accuracy on the test set: {round(binary_acc * 100, 2)}%.")

# Inference: a model taking the vectorized abstracts of a few test papers.
model_for_inference = keras.Sequential([keras.Input((max_tokens,)), shallow_mlp_model])
predicted_probabilities = model_for_inference.predict(x_test[:5])
for i, (text, label) in enumerate(test_papers[:5]):
    print(f"Abstract: {text[:40]}...")
    print(f"Label(s): {label}")
    predicted_proba = [proba for proba in predicted_probabilities[i]]
    top_3_labels = [x for _, x in sorted(zip(predicted_probabilities[i], vocab),
                                         key=lambda pair: pair[0], reverse=True)][:3]
    print(f"Predicted Label(s): ({', '.join([label for label in top_3_labels])})")
    print(" ")
