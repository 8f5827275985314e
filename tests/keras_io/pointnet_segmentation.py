# Modeled on keras-io examples/vision/pointnet_segmentation.py (Keras 3); written for tessera.
# In place of the ShapeNet airplane download and its .pts/.seg files: generated airplanes
# (a body along x, wings, a tail fin and two engines, scaled and jittered per plane, with
# stray "none" points) of 256 points (1024 there), each point labelled by its part and
# one-hot encoded by `keras.utils.to_categorical` as the example does; 320 clouds, a fifth
# for validation (VAL_SPLIT); the example's sampling, normalization to the unit sphere and
# jitter augmentation in NumPy, the arrays in batches of 32 in place of the tf.data
# pipeline; every width / 8 (the T-nets' 64-1024 and the segmentation network's 64-2048);
# ExponentialDecay halving every epoch (every 5 epochs of 60); 3 epochs (60); pandas and
# matplotlib's 3-D plots left out (the learning-rate and history curves saved).
import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers

VAL_SPLIT = 0.2
NUM_SAMPLE_POINTS = 256
BATCH_SIZE = 32
EPOCHS = 3
INITIAL_LR = 1e-3
LABELS = ["wing", "body", "tail", "engine"]

rng = np.random.default_rng(12)


def airplane(n_points=300):
    """A point cloud of a generated airplane and the part of each point."""
    part = rng.choice(5, n_points, p=[0.35, 0.35, 0.1, 0.12, 0.08])
    u, v, w = rng.uniform(-1, 1, (3, n_points))
    span, length = rng.uniform(0.8, 1.2), rng.uniform(0.9, 1.1)
    pts = np.zeros((n_points, 3))
    # wing: a thin plate across y; body: a cylinder along x; tail: a fin up at the back;
    # engines: two small blobs under the wings; none: stray points around the plane.
    pts[part == 0] = np.stack([0.15 * u, span * v, 0.02 * w], 1)[part == 0]
    angle = np.pi * v
    pts[part == 1] = np.stack([length * u, 0.1 * np.cos(angle), 0.1 * np.sin(angle)], 1)[part == 1]
    pts[part == 2] = np.stack([length * (0.85 + 0.1 * u), 0.02 * w, 0.2 + 0.2 * v], 1)[part == 2]
    side = np.sign(w)
    pts[part == 3] = np.stack([0.1 * u, side * 0.45 * span + 0.05 * v, -0.12 + 0.04 * w],
                              1)[part == 3]
    pts[part == 4] = rng.uniform(-1.2, 1.2, (n_points, 3))[part == 4]
    pts += rng.normal(0, 0.01, pts.shape)
    return pts, part


point_clouds, point_cloud_labels, all_labels = [], [], []
for _ in range(320):
    point_cloud, parts = airplane()
    label_map = [LABELS[p] if p < len(LABELS) else "none" for p in parts]
    label_data = [LABELS.index(label) if label != "none" else len(LABELS) for label in label_map]
    point_clouds.append(point_cloud)
    point_cloud_labels.append(keras.utils.to_categorical(label_data, num_classes=len(LABELS) + 1))
    all_labels.append(label_map)

for i in range(2):
    for j in range(3):
        print(f"all_labels[{i}][{j}]:", all_labels[i][j],
              f"\tpoint_cloud_labels[{i}][{j}]:", point_cloud_labels[i][j], "\n")

# Preprocessing: sample NUM_SAMPLE_POINTS points of each cloud and normalize it to the unit
# sphere around its mean.
for index in range(len(point_clouds)):
    current_point_cloud = point_clouds[index]
    current_label_cloud = point_cloud_labels[index]
    current_labels = all_labels[index]
    num_points = len(current_point_cloud)
    sampled_indices = rng.choice(num_points, NUM_SAMPLE_POINTS, replace=False)
    sampled_point_cloud = np.array([current_point_cloud[i] for i in sampled_indices])
    sampled_label_cloud = np.array([current_label_cloud[i] for i in sampled_indices])
    sampled_labels = np.array([current_labels[i] for i in sampled_indices])
    norm_point_cloud = sampled_point_cloud - np.mean(sampled_point_cloud, axis=0)
    norm_point_cloud /= np.max(np.linalg.norm(norm_point_cloud, axis=1))
    point_clouds[index] = norm_point_cloud
    point_cloud_labels[index] = sampled_label_cloud
    all_labels[index] = sampled_labels


def load_data(point_cloud_batch, label_cloud_batch):
    return point_cloud_batch.astype("float32"), label_cloud_batch.astype("float32")


def augment(point_cloud_batch, label_cloud_batch):
    noise = rng.uniform(-0.005, 0.005, point_cloud_batch.shape)
    noise[:, :, 2:] = 0.0  # jitter x and y only, as the example
    return (point_cloud_batch + noise).astype("float32"), label_cloud_batch


split_index = int(len(point_clouds) * (1 - VAL_SPLIT))
train_point_clouds = np.stack(point_clouds[:split_index])
train_label_cloud = np.stack(point_cloud_labels[:split_index])
total_training_examples = len(train_point_clouds)
val_point_clouds = np.stack(point_clouds[split_index:])
val_label_cloud = np.stack(point_cloud_labels[split_index:])
print("Num train point clouds:", len(train_point_clouds))
print("Num train point cloud labels:", len(train_label_cloud))
print("Num val point clouds:", len(val_point_clouds))
print("Num val point cloud labels:", len(val_label_cloud))

train_x, train_y = augment(*load_data(train_point_clouds, train_label_cloud))
val_x, val_y = load_data(val_point_clouds, val_label_cloud)
print("Train Dataset:", train_x.shape, train_y.shape)


def conv_block(x, filters, name):
    x = layers.Conv1D(filters, kernel_size=1, padding="valid", name=f"{name}_conv")(x)
    x = layers.BatchNormalization(name=f"{name}_batch_norm")(x)
    return layers.Activation("relu", name=f"{name}_relu")(x)


def mlp_block(x, filters, name):
    x = layers.Dense(filters, name=f"{name}_dense")(x)
    x = layers.BatchNormalization(name=f"{name}_batch_norm")(x)
    return layers.Activation("relu", name=f"{name}_relu")(x)


class OrthogonalRegularizer(keras.regularizers.Regularizer):
    """Keeps the transformation near orthogonal (the classification example's)."""

    def __init__(self, num_features, l2reg=0.001):
        self.num_features = num_features
        self.l2reg = l2reg
        self.identity = keras.ops.eye(num_features)

    def __call__(self, x):
        x = keras.ops.reshape(x, (-1, self.num_features, self.num_features))
        xxt = keras.ops.tensordot(x, x, axes=(2, 2))
        xxt = keras.ops.reshape(xxt, (-1, self.num_features, self.num_features))
        return keras.ops.sum(self.l2reg * keras.ops.square(xxt - self.identity))

    def get_config(self):
        config = super().get_config()
        config.update({"num_features": self.num_features, "l2reg_strength": self.l2reg})
        return config


def transformation_net(inputs, num_features, name):
    x = conv_block(inputs, filters=8, name=f"{name}_1")
    x = conv_block(x, filters=16, name=f"{name}_2")
    x = conv_block(x, filters=128, name=f"{name}_3")
    x = layers.GlobalMaxPooling1D()(x)
    x = mlp_block(x, filters=64, name=f"{name}_1_1")
    x = mlp_block(x, filters=32, name=f"{name}_2_1")
    return layers.Dense(
        num_features * num_features,
        kernel_initializer="zeros",
        bias_initializer=keras.initializers.Constant(np.eye(num_features).flatten()),
        activity_regularizer=OrthogonalRegularizer(num_features),
        name=f"{name}_final",
    )(x)


def transformation_block(inputs, num_features, name):
    transformed_features = transformation_net(inputs, num_features, name=name)
    transformed_features = layers.Reshape((num_features, num_features))(transformed_features)
    return layers.Dot(axes=(2, 1), name=f"{name}_mm")([inputs, transformed_features])


def get_shape_segmentation_model(num_points, num_classes):
    input_points = keras.Input(shape=(None, 3))

    # PointNet Classification Network.
    transformed_inputs = transformation_block(
        input_points, num_features=3, name="input_transformation_block")
    features_64 = conv_block(transformed_inputs, filters=8, name="features_64")
    features_128_1 = conv_block(features_64, filters=16, name="features_128_1")
    features_128_2 = conv_block(features_128_1, filters=16, name="features_128_2")
    transformed_features = transformation_block(
        features_128_2, num_features=16, name="transformed_features")
    features_512 = conv_block(transformed_features, filters=64, name="features_512")
    features_2048 = conv_block(features_512, filters=256, name="pre_maxpool_block")
    global_features = layers.MaxPool1D(pool_size=num_points, name="global_features")(
        features_2048)
    global_features = keras.ops.tile(global_features, [1, num_points, 1])

    # Segmentation head.
    segmentation_input = layers.Concatenate(name="segmentation_input")(
        [features_64, features_128_1, features_128_2, transformed_features, features_512,
         global_features])
    segmentation_features = conv_block(segmentation_input, filters=16,
                                       name="segmentation_features")
    outputs = layers.Conv1D(
        num_classes, kernel_size=1, activation="softmax", name="segmentation_head"
    )(segmentation_features)
    return keras.Model(input_points, outputs)


x, y = train_x[:BATCH_SIZE], train_y[:BATCH_SIZE]
num_points = x.shape[1]
num_classes = y.shape[-1]
segmentation_model = get_shape_segmentation_model(num_points, num_classes)
segmentation_model.summary()

steps_per_epoch = total_training_examples // BATCH_SIZE
total_training_steps = steps_per_epoch * EPOCHS
print(f"Steps per epoch: {steps_per_epoch}.")
print(f"Total training steps: {total_training_steps}.")

lr_schedule = keras.optimizers.schedules.ExponentialDecay(
    initial_learning_rate=0.003,
    decay_steps=steps_per_epoch,
    decay_rate=0.5,
    staircase=True,
)

steps = range(total_training_steps)
lrs = [lr_schedule(step) for step in steps]
assert np.isclose(float(lrs[-1]), 0.003 * 0.5 ** (EPOCHS - 1))
plt.plot(lrs)
plt.xlabel("Steps")
plt.ylabel("Learning Rate")
plt.savefig("learning_rate.png")
plt.close()


def run_experiment(epochs):
    segmentation_model = get_shape_segmentation_model(num_points, num_classes)
    segmentation_model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=lr_schedule),
        loss=keras.losses.CategoricalCrossentropy(),
        metrics=["accuracy"],
    )

    checkpoint_filepath = "checkpoint.weights.h5"
    checkpoint_callback = keras.callbacks.ModelCheckpoint(
        checkpoint_filepath,
        monitor="val_loss",
        save_best_only=True,
        save_weights_only=True,
    )

    history = segmentation_model.fit(
        train_x, train_y,
        batch_size=BATCH_SIZE,
        validation_data=(val_x, val_y),
        epochs=epochs,
        callbacks=[checkpoint_callback],
    )

    segmentation_model.load_weights(checkpoint_filepath)
    return segmentation_model, history


segmentation_model, history = run_experiment(epochs=EPOCHS)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
best = min(history.history["val_loss"])
reloaded = segmentation_model.evaluate(val_x, val_y, batch_size=BATCH_SIZE, verbose=0)
print("best val_loss:", best, "reloaded:", reloaded)
assert abs(reloaded[0] - best) < 1e-3 * max(1.0, best)


def plot_result(item):
    plt.plot(history.history[item], label=item)
    plt.plot(history.history["val_" + item], label="val_" + item)
    plt.xlabel("Epochs")
    plt.ylabel(item)
    plt.title("Train and Validation {} Over Epochs".format(item), fontsize=14)
    plt.legend()
    plt.grid()
    plt.savefig(f"{item}.png")
    plt.close()


plot_result("loss")
plot_result("accuracy")

val_predictions = segmentation_model.predict(val_x[:BATCH_SIZE])
print(f"Validation prediction shape: {val_predictions.shape}")
label_map = LABELS + ["none"]
idx = 0
predicted = [label_map[i] for i in np.argmax(val_predictions[idx], axis=-1)]
truth = [label_map[i] for i in np.argmax(val_y[idx], axis=-1)]
print("points of the first cloud labelled right:",
      np.mean(np.array(predicted) == np.array(truth)))
