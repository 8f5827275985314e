# Modeled on keras-io examples/vision/pointnet.py (Keras 3 form); written for tessera.
# In place of ModelNet10 sampled with trimesh: point clouds on ellipsoids whose axes tell the
# class (10 classes), jittered, shuffled and rotated about z in NumPy as the example's
# tf.data `augment` map does; 128 points per cloud (2048 there), 400 training clouds (a fifth
# for validation) and 100 test clouds; the convolutions' and dense layers' widths divided by 4
# (8-128 in place of 32-512); batches of 32; 3 epochs (20 there).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

NUM_POINTS = 128
NUM_CLASSES = 10
BATCH_SIZE = 32

rng = np.random.default_rng(0)
CLASS_MAP = {i: f"shape_{i}" for i in range(NUM_CLASSES)}
axes_of = np.array([[1.0, r, z] for r in (0.4, 1.0) for z in (0.2, 0.5, 0.9, 1.4, 2.0)])


def parse_dataset(n):
    labels = rng.integers(0, NUM_CLASSES, n)
    directions = rng.normal(size=(n, NUM_POINTS, 3))
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    points = directions * axes_of[labels][:, None, :]
    return points.astype("float32"), labels.astype("int32")


train_points, train_labels = parse_dataset(400)
test_points, test_labels = parse_dataset(100)


def augment(points):
    # jitter points
    points = points + rng.uniform(-0.005, 0.005, points.shape)
    # shuffle points
    points = points[:, rng.permutation(points.shape[1])]
    # random rotation about the z axis
    theta = rng.uniform(-np.pi, np.pi, len(points))
    c, s = np.cos(theta), np.sin(theta)
    rotation = np.zeros((len(points), 3, 3))
    rotation[:, 0, 0], rotation[:, 0, 1], rotation[:, 1, 0], rotation[:, 1, 1] = c, -s, s, c
    rotation[:, 2, 2] = 1.0
    return np.einsum("nij,nkj->nki", rotation, points).astype("float32")


train_size = int(0.8 * len(train_points))
val_points, val_labels = train_points[train_size:], train_labels[train_size:]
train_points, train_labels = augment(train_points[:train_size]), train_labels[:train_size]


def conv_bn(x, filters):
    x = layers.Conv1D(filters, kernel_size=1, padding="valid")(x)
    x = layers.BatchNormalization(momentum=0.0)(x)
    return layers.Activation("relu")(x)


def dense_bn(x, filters):
    x = layers.Dense(filters)(x)
    x = layers.BatchNormalization(momentum=0.0)(x)
    return layers.Activation("relu")(x)


class OrthogonalRegularizer(keras.regularizers.Regularizer):
    """Keeps the T-net's matrices near orthogonal: ||X X^T - I||^2."""

    def __init__(self, num_features, l2reg=0.001):
        self.num_features = num_features
        self.l2reg = l2reg
        self.eye = ops.eye(num_features)

    def __call__(self, x):
        x = ops.reshape(x, (-1, self.num_features, self.num_features))
        xxt = ops.tensordot(x, x, axes=(2, 2))
        xxt = ops.reshape(xxt, (-1, self.num_features, self.num_features))
        return ops.sum(self.l2reg * ops.square(xxt - self.eye))

    def get_config(self):
        config = super().get_config()
        config.update({"num_features": self.num_features, "l2reg_strength": self.l2reg})
        return config


def tnet(inputs, num_features):
    # Initialise bias as the identity matrix
    bias = keras.initializers.Constant(np.eye(num_features).flatten())
    reg = OrthogonalRegularizer(num_features)

    x = conv_bn(inputs, 8)
    x = conv_bn(x, 16)
    x = conv_bn(x, 128)
    x = layers.GlobalMaxPooling1D()(x)
    x = dense_bn(x, 64)
    x = dense_bn(x, 32)
    x = layers.Dense(
        num_features * num_features,
        kernel_initializer="zeros",
        bias_initializer=bias,
        activity_regularizer=reg,
    )(x)
    feat_T = layers.Reshape((num_features, num_features))(x)
    # Apply affine transformation to input features
    return layers.Dot(axes=(2, 1))([inputs, feat_T])


inputs = keras.Input(shape=(NUM_POINTS, 3))

x = tnet(inputs, 3)
x = conv_bn(x, 8)
x = conv_bn(x, 8)
x = tnet(x, 8)
x = conv_bn(x, 8)
x = conv_bn(x, 16)
x = conv_bn(x, 128)
x = layers.GlobalMaxPooling1D()(x)
x = dense_bn(x, 64)
x = layers.Dropout(0.3)(x)
x = dense_bn(x, 32)
x = layers.Dropout(0.3)(x)

outputs = layers.Dense(NUM_CLASSES, activation="softmax")(x)

model = keras.Model(inputs=inputs, outputs=outputs, name="pointnet")
model.summary()

model.compile(
    loss="sparse_categorical_crossentropy",
    optimizer=keras.optimizers.Adam(learning_rate=0.001),
    metrics=["sparse_categorical_accuracy"],
)

history = model.fit(train_points, train_labels, batch_size=BATCH_SIZE, epochs=3,
                    validation_data=(val_points, val_labels))
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})

# Visualize predictions: the first 8 test clouds.
points, labels = test_points[:8], test_labels[:8]
preds = model.predict(points)
preds = ops.argmax(preds, -1)
for i in range(8):
    print(f"pred: {CLASS_MAP[int(preds[i])]}, label: {CLASS_MAP[int(labels[i])]}")
print("test:", model.evaluate(test_points, test_labels, batch_size=BATCH_SIZE))
