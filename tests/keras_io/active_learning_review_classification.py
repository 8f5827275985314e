# Modeled on keras-io examples/nlp/active_learning_review_classification.py; written for
# tessera. Keras 3 form (the example is Keras 2, its data tensorflow_datasets'): the
# stratified splits and the pools in NumPy for tf.concat and tf.data (take/skip/concatenate
# of the pools as slices), `keras.ops.where`/`ops.greater` on the predictions,
# ModelCheckpoint to ".keras" files (Keras 3 refuses ".h5" there) loaded back with
# `keras.models.load_model`. In place of IMDB (tfds) and TextVectorization (TensorFlow under
# Keras, its standardization tf.strings): generated reviews whose words tell the sentiment,
# standardized with `re` and tokenized by a dict adapted on the training texts (index 0
# padding, 1 out-of-vocabulary, the most frequent words next, as TextVectorization's).
# Vocabulary 500 (3000), 40 tokens (150), Embedding 16 (128), LSTM 8 (32), Dense 20;
# 400 + 200 + 200 reviews and pools of 400 (7500, 2500, 2500, 35000), batches of 64 (256),
# 2 epochs per fit (20, EarlyStopping(patience=4) kept), 2 iterations of sampling 200 (3 of
# 5000).
import re
import string
from collections import Counter

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

rng = np.random.default_rng(0)
positive = ["great", "wonderful", "loved", "brilliant", "moving", "superb", "fun"]
negative = ["awful", "boring", "hated", "dull", "terrible", "waste", "weak"]
neutral = [f"w{i}" for i in range(700)]


def review(label):
    words = list(rng.choice(neutral, rng.integers(20, 50)))
    for _ in range(rng.integers(2, 5)):
        pool = positive if label else negative
        words.insert(int(rng.integers(len(words))), str(rng.choice(pool)))
    text = " ".join(words)
    return text.capitalize() + ".<br />" + ("!" if label else "...")


labels = rng.integers(0, 2, 1600)
reviews = np.array([review(int(l)) for l in labels])
print("Total examples:", reviews.shape[0])

val_split = 100
test_split = 100
train_split = 200

# Separating the negative and positive samples for manual stratification
x_positives, y_positives = reviews[labels == 1], labels[labels == 1]
x_negatives, y_negatives = reviews[labels == 0], labels[labels == 0]

# Creating training, validation and testing splits
x_val = np.concatenate((x_positives[:val_split], x_negatives[:val_split]), 0)
y_val = np.concatenate((y_positives[:val_split], y_negatives[:val_split]), 0)
x_test = np.concatenate((x_positives[val_split:val_split + test_split],
                         x_negatives[val_split:val_split + test_split]), 0)
y_test = np.concatenate((y_positives[val_split:val_split + test_split],
                         y_negatives[val_split:val_split + test_split]), 0)
start, stop = val_split + test_split, val_split + test_split + train_split
x_train = np.concatenate((x_positives[start:stop], x_negatives[start:stop]), 0)
y_train = np.concatenate((y_positives[start:stop], y_negatives[start:stop]), 0)

# Remaining pool of samples are stored separately. These are only labeled as and when required
x_pool_positives, y_pool_positives = x_positives[stop:], y_positives[stop:]
x_pool_negatives, y_pool_negatives = x_negatives[stop:], y_negatives[stop:]

print(f"Initial training set size: {len(x_train)}")
print(f"Validation set size: {len(x_val)}")
print(f"Testing set size: {len(x_test)}")
print(f"Unlabeled negative pool: {len(x_pool_negatives)}")
print(f"Unlabeled positive pool: {len(x_pool_positives)}")


def custom_standardization(input_data):
    lowercase = input_data.lower()
    stripped_html = lowercase.replace("<br />", " ")
    return re.sub(f"[{re.escape(string.punctuation)}]", "", stripped_html)


max_tokens, sequence_length = 500, 40
counts = Counter(w for text in x_train for w in custom_standardization(text).split())
vocabulary = ["", "[UNK]"] + [w for w, _ in counts.most_common(max_tokens - 2)]
index = {w: i for i, w in enumerate(vocabulary)}


def vectorize_text(texts):
    out = np.zeros((len(texts), sequence_length), "int32")
    for row, text in enumerate(texts):
        ids = [index.get(w, 1) for w in custom_standardization(text).split()]
        out[row, :min(len(ids), sequence_length)] = ids[:sequence_length]
    return out


train_x, val_x, test_x = vectorize_text(x_train), vectorize_text(x_val), vectorize_text(x_test)
pool_negatives = (vectorize_text(x_pool_negatives), y_pool_negatives)
pool_positives = (vectorize_text(x_pool_positives), y_pool_positives)
val_dataset = (val_x, y_val.astype("float32"))
test_dataset = (test_x, y_test.astype("float32"))


# Helper function for merging new history objects with older ones
def append_history(losses, val_losses, accuracy, val_accuracy, history):
    losses = losses + history.history["loss"]
    val_losses = val_losses + history.history["val_loss"]
    accuracy = accuracy + history.history["binary_accuracy"]
    val_accuracy = val_accuracy + history.history["val_binary_accuracy"]
    return losses, val_losses, accuracy, val_accuracy


# Plotter function
def plot_history(losses, val_losses, accuracies, val_accuracies, name):
    plt.figure()
    plt.plot(losses)
    plt.plot(val_losses)
    plt.legend(["train_loss", "val_loss"])
    plt.xlabel("Epochs")
    plt.ylabel("Loss")
    plt.savefig(f"{name}_loss.png")
    plt.figure()
    plt.plot(accuracies)
    plt.plot(val_accuracies)
    plt.legend(["train_accuracy", "val_accuracy"])
    plt.xlabel("Epochs")
    plt.ylabel("Accuracy")
    plt.savefig(f"{name}_accuracy.png")
    plt.close("all")


def create_model():
    model = keras.models.Sequential(
        [
            layers.Input(shape=(sequence_length,)),
            layers.Embedding(input_dim=max_tokens, output_dim=16),
            layers.Bidirectional(layers.LSTM(8, return_sequences=True)),
            layers.GlobalMaxPool1D(),
            layers.Dense(20, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.summary()
    return model


epochs = 2  # 20 there
batch_size = 64  # 256 there


def train_full_model(full_train_dataset, val_dataset, test_dataset):
    model = create_model()
    model.compile(
        loss="binary_crossentropy",
        optimizer="rmsprop",
        metrics=[
            keras.metrics.BinaryAccuracy(),
            keras.metrics.FalseNegatives(),
            keras.metrics.FalsePositives(),
        ],
    )

    # We will save the best model at every epoch and load the best one for evaluation on
    # the test set
    history = model.fit(
        *full_train_dataset,
        batch_size=batch_size,
        epochs=epochs,
        validation_data=val_dataset,
        callbacks=[
            keras.callbacks.EarlyStopping(patience=4, verbose=1),
            keras.callbacks.ModelCheckpoint("FullModelCheckpoint.keras", verbose=1,
                                            save_best_only=True),
        ],
    )

    # Plot history
    plot_history(history.history["loss"], history.history["val_loss"],
                 history.history["binary_accuracy"], history.history["val_binary_accuracy"],
                 "full")

    # Loading the best checkpoint
    model = keras.models.load_model("FullModelCheckpoint.keras")

    print("-" * 100)
    print("Test set evaluation: ",
          model.evaluate(*test_dataset, batch_size=batch_size, verbose=0, return_dict=True))
    print("-" * 100)
    return model


# Sampling the full train dataset to train on (shuffled, as the example's shuffle(20000))
full_x = np.concatenate([train_x, pool_positives[0], pool_negatives[0]])
full_y = np.concatenate([y_train, pool_positives[1], pool_negatives[1]]).astype("float32")
order = rng.permutation(len(full_x))
full_train_dataset = (full_x[order], full_y[order])

# Training the full model
full_dataset_model = train_full_model(full_train_dataset, val_dataset, test_dataset)


def train_active_learning_models(train_dataset, pool_negatives, pool_positives, val_dataset,
                                 test_dataset, num_iterations=3, sampling_size=5000):
    # Creating lists for storing metrics
    losses, val_losses, accuracies, val_accuracies = [], [], [], []

    model = create_model()
    # We will monitor the false positives and false negatives predicted by our model
    # These will decide the subsequent sampling ratio for every Active Learning loop
    model.compile(
        loss="binary_crossentropy",
        optimizer="rmsprop",
        metrics=[
            keras.metrics.BinaryAccuracy(),
            keras.metrics.FalseNegatives(),
            keras.metrics.FalsePositives(),
        ],
    )

    # Defining checkpoints.
    # The checkpoint callback is reused throughout the training since it only saves the best
    # overall model.
    checkpoint = keras.callbacks.ModelCheckpoint("AL_Model.keras", save_best_only=True,
                                                 verbose=1)
    # Here, patience is set to 4. This can be set higher if desired.
    early_stopping = keras.callbacks.EarlyStopping(patience=4, verbose=1)

    print(f"Starting to train with {len(train_dataset[0])} samples")
    # Initial fit with a small subset of the training set
    history = model.fit(*train_dataset, batch_size=batch_size, shuffle=True, epochs=epochs,
                        validation_data=val_dataset, callbacks=[checkpoint, early_stopping])

    # Appending history
    losses, val_losses, accuracies, val_accuracies = append_history(
        losses, val_losses, accuracies, val_accuracies, history)

    for iteration in range(num_iterations):
        # Getting predictions from previously trained model
        predictions = model.predict(test_dataset[0], batch_size=batch_size)

        # Generating labels from the output probabilities
        rounded = ops.where(ops.greater(predictions, 0.5), 1, 0)

        # Evaluating the number of zeros and ones incorrrectly classified
        _, _, false_negatives, false_positives = model.evaluate(*test_dataset,
                                                                batch_size=batch_size,
                                                                verbose=0)

        print("-" * 100)
        print(f"Number of zeros incorrectly classified: {false_negatives}, Number of ones "
              f"incorrectly classified: {false_positives}")
        assert false_negatives + false_positives == int(np.sum(
            ops.convert_to_numpy(rounded)[:, 0] != test_dataset[1]))

        # This technique of Active Learning demonstrates ratio based sampling where
        # Number of ones/zeros to sample = Number of ones/zeros incorrectly classified /
        # Total incorrectly classified
        if false_negatives != 0 and false_positives != 0:
            total = false_negatives + false_positives
            sample_ratio_ones, sample_ratio_zeros = (false_positives / total,
                                                     false_negatives / total)
        # In the case where all samples are correctly predicted, we can sample both classes
        # equally
        else:
            sample_ratio_ones, sample_ratio_zeros = 0.5, 0.5

        print(f"Sample ratio for positives: {sample_ratio_ones}, Sample ratio for "
              f"negatives:{sample_ratio_zeros}")

        # Sample the required number of ones and zeros (take, then skip)
        n_zeros = int(sample_ratio_zeros * sampling_size)
        n_ones = int(sample_ratio_ones * sampling_size)
        sampled_x = np.concatenate([pool_negatives[0][:n_zeros], pool_positives[0][:n_ones]])
        sampled_y = np.concatenate([pool_negatives[1][:n_zeros], pool_positives[1][:n_ones]])
        pool_negatives = (pool_negatives[0][n_zeros:], pool_negatives[1][n_zeros:])
        pool_positives = (pool_positives[0][n_ones:], pool_positives[1][n_ones:])

        # Concatenating the train_dataset with the sampled_dataset
        train_dataset = (np.concatenate([train_dataset[0], sampled_x]),
                         np.concatenate([train_dataset[1], sampled_y]))

        print(f"Starting training with {len(train_dataset[0])} samples")
        print("-" * 100)

        # We recompile the model to reset the optimizer states and retrain the model
        model.compile(
            loss="binary_crossentropy",
            optimizer="rmsprop",
            metrics=[
                keras.metrics.BinaryAccuracy(),
                keras.metrics.FalseNegatives(),
                keras.metrics.FalsePositives(),
            ],
        )
        history = model.fit(
            *train_dataset,
            batch_size=batch_size,
            shuffle=True,
            validation_data=val_dataset,
            epochs=epochs,
            callbacks=[checkpoint, keras.callbacks.EarlyStopping(patience=4, verbose=1)],
        )

        # Appending the history
        losses, val_losses, accuracies, val_accuracies = append_history(
            losses, val_losses, accuracies, val_accuracies, history)

        # Loading the best model from this training loop
        model = keras.models.load_model("AL_Model.keras")

    # Plotting the overall history and evaluating the final model
    plot_history(losses, val_losses, accuracies, val_accuracies, "active_learning")
    print("-" * 100)
    print("Test set evaluation: ",
          model.evaluate(*test_dataset, batch_size=batch_size, verbose=0, return_dict=True))
    print("-" * 100)

    return model


active_learning_model = train_active_learning_models(
    (train_x, y_train.astype("float32")), pool_negatives, pool_positives, val_dataset,
    test_dataset, num_iterations=2, sampling_size=200)
