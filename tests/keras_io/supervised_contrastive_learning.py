# Modeled on keras-io examples/vision/supervised-contrastive-learning.py (an augmentation
# Sequential whose Normalization is adapted through `data_augmentation.layers[0]`, an encoder
# model wrapping a convolutional base with average pooling, a classifier on it with Dropout,
# the baseline trained end to end; then the encoder pretrained with a projection head and a
# `keras.losses.Loss` subclass overriding `__call__` (labels, feature vectors): the
# supervised contrastive loss on L2-normalized features; then a classifier on the encoder
# frozen by setting `trainable` on each of `encoder.layers`); written for tessera. Keras 3
# form: `ops` for tf's math, the N-pairs loss of TensorFlow Addons written out (softmax cross
# entropy of the similarity logits against the same-label rows, each row summing to 1), the
# Keras 3 preprocessing layers (RandomWidth and RandomHeight are gone from Keras 3: left out).
# In place of CIFAR-10: 640 + 160 tinted 32x32 images of 10 classes (a colour and a bright
# quadrant per class, with noise); a small conv base (Conv2D/BatchNormalization/ReLU, 3
# stages) in place of ResNet50V2; hidden 128 (512), projection 64 (128), batches of 64 (265),
# 3 epochs each (50).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

num_classes = 10
input_shape = (32, 32, 3)

rng = np.random.default_rng(0)
class_colours = rng.uniform(0.2, 1.0, size=(num_classes, 3))


def tinted_images(n):
    labels = rng.integers(0, num_classes, n)
    images = rng.uniform(0, 90, size=(n,) + input_shape)
    for i, c in enumerate(labels):
        images[i] += 120 * class_colours[c]
        r, q = divmod(int(c) % 4, 2)
        images[i, 16 * r:16 * r + 16, 16 * q:16 * q + 16] += 40
    return images.clip(0, 255).astype("uint8"), labels.reshape(-1, 1).astype("uint8")


(x_train, y_train), (x_test, y_test) = tinted_images(640), tinted_images(160)
print(f"x_train shape: {x_train.shape} - y_train shape: {y_train.shape}")
print(f"x_test shape: {x_test.shape} - y_test shape: {y_test.shape}")

data_augmentation = keras.Sequential(
    [
        layers.Normalization(),
        layers.RandomFlip("horizontal"),
        layers.RandomRotation(0.02),
    ]
)
data_augmentation.layers[0].adapt(x_train)


def conv_base():
    inputs = keras.Input(shape=input_shape)
    x = inputs
    for filters in (16, 32, 64):
        x = layers.Conv2D(filters, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization(momentum=0.9)(x)
        x = layers.ReLU()(x)
    outputs = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, outputs, name="conv_base")


def create_encoder():
    resnet = conv_base()

    inputs = keras.Input(shape=input_shape)
    augmented = data_augmentation(inputs)
    outputs = resnet(augmented)
    model = keras.Model(inputs=inputs, outputs=outputs, name="cifar10-encoder")
    return model


encoder = create_encoder()
encoder.summary()

learning_rate = 0.001
batch_size = 64
hidden_units = 128
projection_units = 64
num_epochs = 3
dropout_rate = 0.5
temperature = 0.05


def create_classifier(encoder, trainable=True):
    for layer in encoder.layers:
        layer.trainable = trainable

    inputs = keras.Input(shape=input_shape)
    features = encoder(inputs)
    features = layers.Dropout(dropout_rate)(features)
    features = layers.Dense(hidden_units, activation="relu")(features)
    features = layers.Dropout(dropout_rate)(features)
    outputs = layers.Dense(num_classes, activation="softmax")(features)

    model = keras.Model(inputs=inputs, outputs=outputs, name="cifar10-classifier")
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


encoder = create_encoder()
classifier = create_classifier(encoder)
classifier.summary()

history = classifier.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs)

accuracy = classifier.evaluate(x_test, y_test)[1]
print(f"Test accuracy: {round(accuracy * 100, 2)}%")


def npairs_loss(labels, logits):
    """TensorFlow Addons' npairs_loss: softmax cross entropy of each row of logits
    against the rows of the same label, spread evenly."""
    labels = ops.reshape(labels, (-1, 1))
    same = ops.cast(ops.equal(labels, ops.transpose(labels)), "float32")
    same = same / ops.sum(same, axis=1, keepdims=True)
    return ops.mean(-ops.sum(same * ops.log_softmax(logits, axis=1), axis=1))


class SupervisedContrastiveLoss(keras.losses.Loss):
    def __init__(self, temperature=1, name=None):
        super().__init__(name=name)
        self.temperature = temperature

    def __call__(self, labels, feature_vectors, sample_weight=None):
        feature_vectors_normalized = ops.normalize(feature_vectors, axis=1, order=2)
        logits = ops.divide(
            ops.matmul(feature_vectors_normalized, ops.transpose(feature_vectors_normalized)),
            self.temperature,
        )
        return npairs_loss(ops.squeeze(labels), logits)


def add_projection_head(encoder):
    inputs = keras.Input(shape=input_shape)
    features = encoder(inputs)
    outputs = layers.Dense(projection_units, activation="relu")(features)
    model = keras.Model(inputs=inputs, outputs=outputs,
                        name="cifar-encoder_with_projection-head")
    return model


encoder = create_encoder()

encoder_with_projection_head = add_projection_head(encoder)
encoder_with_projection_head.compile(
    optimizer=keras.optimizers.Adam(learning_rate),
    loss=SupervisedContrastiveLoss(temperature),
)

encoder_with_projection_head.summary()

history = encoder_with_projection_head.fit(x=x_train, y=y_train, batch_size=batch_size,
                                           epochs=num_epochs)

classifier = create_classifier(encoder, trainable=False)
classifier.summary()
# Frozen: only the two Dense layers train.
assert len(classifier.trainable_weights) == 4, len(classifier.trainable_weights)
frozen = [np.array(w) for w in encoder.weights]

history = classifier.fit(x=x_train, y=y_train, batch_size=batch_size, epochs=num_epochs)

assert all(np.array_equal(a, np.array(w)) for a, w in zip(frozen, encoder.weights))
accuracy = classifier.evaluate(x_test, y_test)[1]
print(f"Test accuracy: {round(accuracy * 100, 2)}%")
