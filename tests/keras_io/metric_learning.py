# Modeled on keras-io examples/vision/metric_learning.py (an `EmbeddingModel(keras.Model)` made
# from a functional graph `EmbeddingModel(inputs, embeddings)`, its `train_step` overridden:
# the batch is one (2, num_classes, h, w, 3) array of anchors and positives from a
# `keras.utils.Sequence`, both embedded with `self(..., training=True)`, their similarities
# by einsum over a temperature as logits, `self.compiled_loss` on the labels `range(num_classes)`,
# `self.compiled_metrics.update_state`, `{m.name: m.result() for m in self.metrics}`; the
# embeddings L2-normalized on the graph's tensor; the near neighbours of the test embeddings
# by NumPy, a confusion matrix of their classes; a collage by PIL); written for tessera: the
# example's train_step takes TensorFlow's GradientTape, here keras.GradientTape (tessera's),
# `tf.einsum`/`tf.range`/`tf.nn.l2_normalize` as `ops.einsum`/`ops.arange`/`ops.normalize`.
# In place of CIFAR-10: 32x32 noise images tinted by their class's colour, 2,000 + 500; 100
# batches a epoch (1,000), 4 epochs (20); figures written to files (PIL, no matplotlib or
# scikit-learn's ConfusionMatrixDisplay).
import random
from collections import defaultdict

import numpy as np
import tessera.nn as keras
from PIL import Image
from tessera.nn import layers, ops

num_classes = 10
height_width = 32
rng = np.random.default_rng(4)
colours = rng.uniform(0.1, 0.9, (num_classes, 3))


def tinted(n):
    y = rng.integers(0, num_classes, n)
    x = 0.5 * rng.uniform(size=(n, height_width, height_width, 3)) + 0.5 * colours[y][:, None, None]
    return x.astype("float32"), y


(x_train, y_train), (x_test, y_test) = tinted(2000), tinted(500)


def show_collage(examples, path):
    box_size = height_width + 2
    num_rows, num_cols = examples.shape[:2]
    collage = Image.new(mode="RGB", size=(num_cols * box_size, num_rows * box_size),
                        color=(250, 250, 250))
    for row_idx in range(num_rows):
        for col_idx in range(num_cols):
            array = (np.array(examples[row_idx, col_idx]) * 255).astype(np.uint8)
            collage.paste(Image.fromarray(array), (col_idx * box_size, row_idx * box_size))
    collage = collage.resize((2 * num_cols * box_size, 2 * num_rows * box_size))
    collage.save(path)
    return collage


sample_idxs = np.random.randint(0, len(x_train), size=(5, 5))
show_collage(x_train[sample_idxs], "samples.png")

class_idx_to_train_idxs = defaultdict(list)
for y_train_idx, y in enumerate(y_train):
    class_idx_to_train_idxs[y].append(y_train_idx)

class_idx_to_test_idxs = defaultdict(list)
for y_test_idx, y in enumerate(y_test):
    class_idx_to_test_idxs[y].append(y_test_idx)


class AnchorPositivePairs(keras.utils.Sequence):
    def __init__(self, num_batchs):
        super().__init__()
        self.num_batchs = num_batchs

    def __len__(self):
        return self.num_batchs

    def __getitem__(self, _idx):
        x = np.empty((2, num_classes, height_width, height_width, 3), dtype=np.float32)
        for class_idx in range(num_classes):
            examples_for_class = class_idx_to_train_idxs[class_idx]
            anchor_idx = random.choice(examples_for_class)
            positive_idx = random.choice(examples_for_class)
            while positive_idx == anchor_idx:
                positive_idx = random.choice(examples_for_class)
            x[0, class_idx] = x_train[anchor_idx]
            x[1, class_idx] = x_train[positive_idx]
        return x


examples = next(iter(AnchorPositivePairs(num_batchs=1)))
show_collage(examples, "pairs.png")


class EmbeddingModel(keras.Model):
    def train_step(self, data):
        # Note: Workaround for open issue, to be removed.
        if isinstance(data, tuple):
            data = data[0]
        anchors, positives = data[0], data[1]

        with keras.GradientTape() as tape:
            anchor_embeddings = self(anchors, training=True)
            positive_embeddings = self(positives, training=True)

            # Cosine similarities of the normalized embeddings, over a temperature, as logits.
            similarities = ops.einsum("ae,pe->ap", anchor_embeddings, positive_embeddings)
            temperature = 0.2
            similarities /= temperature

            # The anchor / positive pairs are on the diagonal.
            sparse_labels = ops.arange(num_classes)
            loss = self.compiled_loss(sparse_labels, similarities)

        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))

        self.compiled_metrics.update_state(sparse_labels, similarities)
        return {m.name: m.result() for m in self.metrics}


inputs = layers.Input(shape=(height_width, height_width, 3))
x = layers.Conv2D(filters=32, kernel_size=3, strides=2, activation="relu")(inputs)
x = layers.Conv2D(filters=64, kernel_size=3, strides=2, activation="relu")(x)
x = layers.Conv2D(filters=128, kernel_size=3, strides=2, activation="relu")(x)
x = layers.GlobalAveragePooling2D()(x)
embeddings = layers.Dense(units=8, activation=None)(x)
embeddings = ops.normalize(embeddings, axis=-1)

model = EmbeddingModel(inputs, embeddings)

model.compile(
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)

history = model.fit(AnchorPositivePairs(num_batchs=100), epochs=4)
print("loss by epoch:", [round(float(v), 4) for v in history.history["loss"]])

near_neighbours_per_example = 10

embeddings = model.predict(x_test)
gram_matrix = np.einsum("ae,be->ab", embeddings, embeddings)
near_neighbours = np.argsort(gram_matrix.T)[:, -(near_neighbours_per_example + 1):]

num_collage_examples = 5
examples = np.empty((num_collage_examples, near_neighbours_per_example + 1, height_width,
                     height_width, 3), dtype=np.float32)
for row_idx in range(num_collage_examples):
    examples[row_idx, 0] = x_test[row_idx]
    anchor_near_neighbours = reversed(near_neighbours[row_idx][:-1])
    for col_idx, nn_idx in enumerate(anchor_near_neighbours):
        examples[row_idx, col_idx + 1] = x_test[nn_idx]
show_collage(examples, "neighbours.png")

confusion_matrix = np.zeros((num_classes, num_classes))
for class_idx in range(num_classes):
    example_idxs = class_idx_to_test_idxs[class_idx][:10]
    for y_test_idx in example_idxs:
        for nn_idx in near_neighbours[y_test_idx][:-1]:
            nn_class_idx = y_test[nn_idx]
            confusion_matrix[class_idx, nn_class_idx] += 1
print(confusion_matrix.astype(int))

# Checks (not in the example): the embeddings are unit vectors, and the near neighbours share
# their class more often than chance (a tenth).
np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-4)
same_class = np.trace(confusion_matrix) / confusion_matrix.sum()
print(f"near neighbours of the same class: {same_class:.2f}")
assert history.history["loss"][-1] < history.history["loss"][0]
assert same_class > 0.3, same_class
