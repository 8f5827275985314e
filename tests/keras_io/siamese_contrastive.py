# Modeled on keras-io examples/vision/siamese_contrastive.py (Keras 3 form); written for tessera.
import os
import random
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers, ops

epochs = 2
batch_size = 16
margin = 1  # Margin for the contrastive loss.

# In place of keras.datasets.mnist.load_data(): uint8 arrays of the same shapes, shrunk,
# with a bright bar 2 rows high at a height given by the digit (something to tell apart).
rng = np.random.default_rng(0)
def digits(n):
    y = rng.integers(0, 10, n).astype(np.uint8)
    x = rng.integers(0, 128, (n, 28, 28), dtype=np.uint8)
    x[np.arange(n)[:, None], 4 + 2 * y[:, None].astype(int) + np.arange(2)] = 255
    return x, y
x_train_val, y_train_val = digits(1200)
x_test, y_test = digits(200)

x_train_val = x_train_val.astype("float32")
x_test = x_test.astype("float32")

# Keep half of train_val as the validation set.
x_train, x_val = x_train_val[:600], x_train_val[600:]
y_train, y_val = y_train_val[:600], y_train_val[600:]
del x_train_val, y_train_val


def make_pairs(x, y):
    """Pairs of images (one of the same digit, one of another per image) and their
    labels: 1 for the same digit, 0 otherwise."""
    num_classes = max(y) + 1
    digit_indices = [np.where(y == i)[0] for i in range(num_classes)]
    pairs = []
    labels = []
    for idx1 in range(len(x)):
        x1 = x[idx1]
        label1 = y[idx1]
        idx2 = random.choice(digit_indices[label1])
        pairs += [[x1, x[idx2]]]
        labels += [1]
        label2 = random.randint(0, num_classes - 1)
        while label2 == label1:
            label2 = random.randint(0, num_classes - 1)
        idx2 = random.choice(digit_indices[label2])
        pairs += [[x1, x[idx2]]]
        labels += [0]
    return np.array(pairs), np.array(labels).astype("float32")


pairs_train, labels_train = make_pairs(x_train, y_train)
pairs_val, labels_val = make_pairs(x_val, y_val)
pairs_test, labels_test = make_pairs(x_test, y_test)

x_train_1 = pairs_train[:, 0]  # (1200, 28, 28)
x_train_2 = pairs_train[:, 1]
x_val_1 = pairs_val[:, 0]
x_val_2 = pairs_val[:, 1]
x_test_1 = pairs_test[:, 0]
x_test_2 = pairs_test[:, 1]

figures = tempfile.mkdtemp()


def visualize(pairs, labels, to_show=6, num_col=3, predictions=None, test=False):
    num_row = to_show // num_col if to_show // num_col != 0 else 1
    to_show = num_row * num_col
    fig, axes = plt.subplots(num_row, num_col, figsize=(5, 5))
    for i in range(to_show):
        ax = axes[i % num_col] if num_row == 1 else axes[i // num_col, i % num_col]
        ax.imshow(ops.concatenate([pairs[i][0], pairs[i][1]], axis=1), cmap="gray")
        ax.set_axis_off()
        if test:
            ax.set_title("True: {} | Pred: {:.5f}".format(labels[i], predictions[i][0]))
        else:
            ax.set_title("Label: {}".format(labels[i]))
    plt.savefig(os.path.join(figures, f"pairs_{len(os.listdir(figures))}.png"))
    plt.close(fig)


visualize(pairs_train[:-1], labels_train[:-1], to_show=4, num_col=4)
visualize(pairs_val[:-1], labels_val[:-1], to_show=4, num_col=4)
visualize(pairs_test[:-1], labels_test[:-1], to_show=4, num_col=4)


def euclidean_distance(vects):
    """The Euclidean distance between two batches of vectors, one per row."""
    x, y = vects
    sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
    return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))


input = keras.layers.Input((28, 28, 1))
x = keras.layers.BatchNormalization()(input)
x = keras.layers.Conv2D(4, (5, 5), activation="tanh")(x)
x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
x = keras.layers.Conv2D(16, (5, 5), activation="tanh")(x)
x = keras.layers.AveragePooling2D(pool_size=(2, 2))(x)
x = keras.layers.Flatten()(x)

x = keras.layers.BatchNormalization()(x)
x = keras.layers.Dense(10, activation="tanh")(x)
embedding_network = keras.Model(input, x)

input_1 = keras.layers.Input((28, 28, 1))
input_2 = keras.layers.Input((28, 28, 1))

# The two towers share the embedding network (and so its weights).
tower_1 = embedding_network(input_1)
tower_2 = embedding_network(input_2)

merge_layer = keras.layers.Lambda(euclidean_distance, output_shape=(1,))([tower_1, tower_2])
normal_layer = keras.layers.BatchNormalization()(merge_layer)
output_layer = keras.layers.Dense(1, activation="sigmoid")(normal_layer)
siamese = keras.Model(inputs=[input_1, input_2], outputs=output_layer)


def loss(margin=1):
    """The contrastive loss with the given margin."""

    def contrastive_loss(y_true, y_pred):
        square_pred = ops.square(y_pred)
        margin_square = ops.square(ops.maximum(margin - (y_pred), 0))
        return ops.mean((1 - y_true) * square_pred + (y_true) * margin_square)

    return contrastive_loss


siamese.compile(loss=loss(margin=margin), optimizer="RMSprop", metrics=["accuracy"])
siamese.summary()

history = siamese.fit(
    [x_train_1, x_train_2],
    labels_train,
    validation_data=([x_val_1, x_val_2], labels_val),
    batch_size=batch_size,
    epochs=epochs,
)


def plt_metric(history, metric, title, has_valid=True):
    plt.plot(history[metric])
    if has_valid:
        plt.plot(history["val_" + metric])
        plt.legend(["train", "validation"], loc="upper left")
    plt.title(title)
    plt.ylabel(metric)
    plt.xlabel("epoch")
    plt.savefig(os.path.join(figures, f"{metric}.png"))
    plt.close()


plt_metric(history=history.history, metric="accuracy", title="Model accuracy")
plt_metric(history=history.history, metric="loss", title="Contrastive Loss")

results = siamese.evaluate([x_test_1, x_test_2], labels_test)
print("test loss, test acc:", results)

predictions = siamese.predict([x_test_1, x_test_2])
visualize(pairs_test, labels_test, to_show=3, predictions=predictions, test=True)
