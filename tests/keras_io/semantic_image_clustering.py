# Modeled on keras-io examples/vision/semantic_image_clustering.py; written for tessera. Keras 3
# form: SCAN. A `Resizing`/`Normalization.adapt` preprocessing Sequential and an augmentation
# Sequential (RandomTranslation, RandomFlip, RandomRotation, RandomZoom with
# fill_mode="nearest") called inside a subclassed `RepresentationLearner` and a functional
# clustering model; `layers.Concatenate(axis=0)` of two augmented views made in `call`; the
# contrastive loss with `ops.max`, `ops.tile` of `ops.eye`, `keras.losses.categorical_crossentropy`
# on logits; `keras.optimizers.schedules.CosineDecay` with AdamW; `keras.utils.normalize` and
# `ops.top_k` for the neighbours; two `keras.losses.Loss` subclasses overriding `__call__`
# (`ops.ones_like`, `binary_crossentropy`, an entropy with `ops.clip`/`ops.log`) given as
# compile's list for a model of two named Inputs and two outputs (one label array per
# output: Keras 3.15 refuses the example's one array for two outputs); the encoder's
# layers frozen in a loop. The example's train_step/test_step (tf.GradientTape) as a
# `compute_loss` override fit on images alone (Keras on JAX calls no tf.GradientTape), its own
# loss tracker left to fit's; `ops.matmul` of a transpose for `tf.linalg.matmul(...,
# transpose_b=True)`, `ops.take` for `tf.gather`; a small residual convnet with average pooling
# for `keras.applications.ResNet50V2(include_top=False, weights=None, pooling="avg")`; no tqdm.
# 384 generated 32x32 images of 10 classes (a tint and a bar at the class's height) in place of
# CIFAR-10's 60,000; representation 64 (512), projection 32 (128), 10 clusters (20), batches of
# 64 (512), decay steps 30 (500), 4 + 2 epochs (50 + 50).
from collections import defaultdict

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
import matplotlib.pyplot as plt

keras.utils.set_random_seed(7)
rng = np.random.default_rng(7)
TINTS = rng.uniform(40, 200, (10, 3))


def make(n):
    x = rng.uniform(0, 90, (n, 32, 32, 3))
    y = rng.integers(0, 10, (n, 1))
    for img, (c,) in zip(x, y):
        img += TINTS[c] * 0.6
        img[3 * c:3 * c + 3, 4:28] = 255
    return np.clip(x, 0, 255).astype("uint8"), y.astype("uint8")


num_classes = 10
input_shape = (32, 32, 3)
(x_train, y_train), (x_test, y_test) = make(320), make(64)

x_data = np.concatenate([x_train, x_test])
y_data = np.concatenate([y_train, y_test])
print("x_data shape:", x_data.shape, "- y_data shape:", y_data.shape)

classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]

target_size = 32  # Resize the input images.
representation_dim = 64  # The dimensions of the features vector.
projection_units = 32  # The projection head of the representation learner.
num_clusters = 10  # Number of clusters.
k_neighbours = 5  # Number of neighbours to consider during cluster learning.
tune_encoder_during_clustering = False  # Freeze the encoder in the cluster learning.

data_preprocessing = keras.Sequential(
    [layers.Resizing(target_size, target_size), layers.Normalization()])
# Compute the mean and the variance from the data for normalization.
data_preprocessing.layers[-1].adapt(x_data)

data_augmentation = keras.Sequential(
    [
        layers.RandomTranslation(height_factor=(-0.2, 0.2), width_factor=(-0.2, 0.2),
                                 fill_mode="nearest"),
        layers.RandomFlip(mode="horizontal"),
        layers.RandomRotation(factor=0.15, fill_mode="nearest"),
        layers.RandomZoom(height_factor=(-0.3, 0.1), width_factor=(-0.3, 0.1),
                          fill_mode="nearest"),
    ]
)

image_idx = np.random.choice(range(x_data.shape[0]))
image = x_data[image_idx]
image_class = classes[y_data[image_idx][0]]
plt.figure(figsize=(3, 3))
plt.imshow(x_data[image_idx].astype("uint8"))
plt.title(image_class)
_ = plt.axis("off")
plt.savefig("sic_image.png")
plt.close()

plt.figure(figsize=(10, 10))
for i in range(9):
    augmented_images = data_augmentation(np.array([image]))
    ax = plt.subplot(3, 3, i + 1)
    plt.imshow(np.asarray(augmented_images[0]).astype("uint8"))
    plt.axis("off")
plt.savefig("sic_augmented.png")
plt.close()


def small_resnet(name="resnet_stand_in"):
    """Stands for keras.applications.ResNet50V2(include_top=False, weights=None, pooling="avg")."""
    inputs = keras.Input((None, None, 3))
    x = layers.Conv2D(16, 3, strides=2, padding="same")(inputs)
    for filters in (16, 32):
        y = layers.BatchNormalization()(x)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(filters, 3, padding="same")(y)
        y = layers.BatchNormalization()(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(filters, 3, padding="same")(y)
        if x.shape[-1] != filters:
            x = layers.Conv2D(filters, 1)(x)
        x = layers.Add()([x, y])
        x = layers.MaxPooling2D()(x)
    x = layers.BatchNormalization(name="post_bn")(x)
    x = layers.Activation("relu")(x)
    outputs = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, outputs, name=name)


def create_encoder(representation_dim):
    encoder = keras.Sequential([small_resnet(), layers.Dense(representation_dim)])
    return encoder


class RepresentationLearner(keras.Model):
    def __init__(self, encoder, projection_units, num_augmentations, temperature=1.0,
                 dropout_rate=0.1, l2_normalize=False, **kwargs):
        super().__init__(**kwargs)
        self.encoder = encoder
        # Create projection head.
        self.projector = keras.Sequential(
            [
                layers.Dropout(dropout_rate),
                layers.Dense(units=projection_units, use_bias=False),
                layers.BatchNormalization(),
                layers.ReLU(),
            ]
        )
        self.num_augmentations = num_augmentations
        self.temperature = temperature
        self.l2_normalize = l2_normalize

    def compute_contrastive_loss(self, feature_vectors, batch_size):
        num_augmentations = keras.ops.shape(feature_vectors)[0] // batch_size
        if self.l2_normalize:
            feature_vectors = keras.utils.normalize(feature_vectors)
        # The logits shape is [num_augmentations * batch_size, num_augmentations * batch_size].
        logits = (keras.ops.matmul(feature_vectors, keras.ops.transpose(feature_vectors))
                  / self.temperature)
        # Apply log-max trick for numerical stability.
        logits_max = keras.ops.max(logits, axis=1)
        logits = logits - logits_max
        # num_augmentations x num_augmentations identity blocks of [batch_size, batch_size].
        targets = keras.ops.tile(keras.ops.eye(batch_size),
                                 [num_augmentations, num_augmentations])
        return keras.losses.categorical_crossentropy(y_true=targets, y_pred=logits,
                                                     from_logits=True)

    def call(self, inputs):
        # Preprocess the input images.
        preprocessed = data_preprocessing(inputs)
        # Create augmented versions of the images.
        augmented = []
        for _ in range(self.num_augmentations):
            augmented.append(data_augmentation(preprocessed))
        augmented = layers.Concatenate(axis=0)(augmented)
        # Generate embedding representations of the images.
        features = self.encoder(augmented)
        # Apply projection head.
        return self.projector(features)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        batch_size = keras.ops.shape(x)[0]
        return keras.ops.mean(self.compute_contrastive_loss(y_pred, batch_size))


encoder = create_encoder(representation_dim)
representation_learner = RepresentationLearner(encoder, projection_units, num_augmentations=2,
                                               temperature=0.1)
lr_scheduler = keras.optimizers.schedules.CosineDecay(initial_learning_rate=0.001,
                                                      decay_steps=30, alpha=0.1)
representation_learner.compile(
    optimizer=keras.optimizers.AdamW(learning_rate=lr_scheduler, weight_decay=0.0001),
    jit_compile=False,
)
history = representation_learner.fit(x=x_data, batch_size=64, epochs=4)

plt.plot(history.history["loss"])
plt.ylabel("loss")
plt.xlabel("epoch")
plt.savefig("sic_representation_loss.png")
plt.close()

batch_size = 128
# Get the feature vector representations of the images.
feature_vectors = encoder.predict(x_data, batch_size=batch_size, verbose=0)
# Normalize the feature vectores.
feature_vectors = keras.utils.normalize(feature_vectors)

neighbours = []
num_batches = feature_vectors.shape[0] // batch_size
for batch_idx in range(num_batches):
    start_idx = batch_idx * batch_size
    end_idx = start_idx + batch_size
    current_batch = feature_vectors[start_idx:end_idx]
    # Compute the dot similarity.
    similarities = keras.ops.matmul(current_batch, keras.ops.transpose(feature_vectors))
    # Get the indices of most similar vectors.
    _, indices = keras.ops.top_k(similarities, k=k_neighbours + 1, sorted=True)
    # Add the indices to the neighbours.
    neighbours.append(np.asarray(indices)[..., 1:])

neighbours = np.reshape(np.array(neighbours), (-1, k_neighbours))
same_class = np.mean(y_data[neighbours][..., 0] == y_data[:, :1])
print(f"neighbours of the same class: {same_class:.3f} (chance: about 0.1)")

nrows = 4
ncols = k_neighbours + 1
plt.figure(figsize=(12, 12))
position = 1
for _ in range(nrows):
    anchor_idx = np.random.choice(range(x_data.shape[0]))
    neighbour_indicies = neighbours[anchor_idx]
    indices = [anchor_idx] + neighbour_indicies.tolist()
    for j in range(ncols):
        plt.subplot(nrows, ncols, position)
        plt.imshow(x_data[indices[j]].astype("uint8"))
        plt.title(classes[y_data[indices[j]][0]])
        plt.axis("off")
        position += 1
plt.savefig("sic_neighbours.png")
plt.close()


class ClustersConsistencyLoss(keras.losses.Loss):
    def __init__(self):
        super().__init__()

    def __call__(self, target, similarity, sample_weight=None):
        # Set targets to be ones.
        target = keras.ops.ones_like(similarity)
        # Compute cross entropy loss.
        loss = keras.losses.binary_crossentropy(y_true=target, y_pred=similarity,
                                                from_logits=True)
        return keras.ops.mean(loss)


class ClustersEntropyLoss(keras.losses.Loss):
    def __init__(self, entropy_loss_weight=1.0):
        super().__init__()
        self.entropy_loss_weight = entropy_loss_weight

    def __call__(self, target, cluster_probabilities, sample_weight=None):
        # Ideal entropy = log(num_clusters).
        num_clusters = keras.ops.cast(keras.ops.shape(cluster_probabilities)[-1], "float32")
        target = keras.ops.log(num_clusters)
        # Compute the overall clusters distribution.
        cluster_probabilities = keras.ops.mean(cluster_probabilities, axis=0)
        # Replacing zero probabilities - if any - with a very small value.
        cluster_probabilities = keras.ops.clip(cluster_probabilities, 1e-8, 1.0)
        # Compute the entropy over the clusters.
        entropy = -keras.ops.sum(cluster_probabilities * keras.ops.log(cluster_probabilities))
        # Compute the difference between the target and the actual.
        loss = target - entropy
        return loss


def create_clustering_model(encoder, num_clusters, name=None):
    inputs = keras.Input(shape=input_shape)
    # Preprocess the input images.
    preprocessed = data_preprocessing(inputs)
    # Apply data augmentation to the images.
    augmented = data_augmentation(preprocessed)
    # Generate embedding representations of the images.
    features = encoder(augmented)
    # Assign the images to clusters.
    outputs = layers.Dense(units=num_clusters, activation="softmax")(features)
    model = keras.Model(inputs=inputs, outputs=outputs, name=name)
    return model


def create_clustering_learner(clustering_model):
    anchor = keras.Input(shape=input_shape, name="anchors")
    neighbours = keras.Input(shape=tuple([k_neighbours]) + input_shape, name="neighbours")
    # Changes neighbours shape to [batch_size * k_neighbours, width, height, channels]
    neighbours_reshaped = keras.ops.reshape(neighbours, tuple([-1]) + input_shape)
    # anchor_clustering shape: [batch_size, num_clusters]
    anchor_clustering = clustering_model(anchor)
    # neighbours_clustering shape: [batch_size * k_neighbours, num_clusters]
    neighbours_clustering = clustering_model(neighbours_reshaped)
    # Convert neighbours_clustering shape to [batch_size, k_neighbours, num_clusters]
    neighbours_clustering = keras.ops.reshape(
        neighbours_clustering, (-1, k_neighbours, keras.ops.shape(neighbours_clustering)[-1]))
    # similarity shape: [batch_size, 1, k_neighbours]
    similarity = keras.ops.einsum("bij,bkj->bik",
                                  keras.ops.expand_dims(anchor_clustering, axis=1),
                                  neighbours_clustering)
    # similarity shape:  [batch_size, k_neighbours]
    similarity = layers.Lambda(lambda x: keras.ops.squeeze(x, axis=1),
                               name="similarity")(similarity)
    model = keras.Model(inputs=[anchor, neighbours], outputs=[similarity, anchor_clustering],
                        name="clustering_learner")
    return model


# If tune_encoder_during_clustering is set to False, then freeze the encoder weights.
for layer in encoder.layers:
    layer.trainable = tune_encoder_during_clustering
clustering_model = create_clustering_model(encoder, num_clusters, name="clustering")
clustering_learner = create_clustering_learner(clustering_model)
losses = [ClustersConsistencyLoss(), ClustersEntropyLoss(entropy_loss_weight=5)]
inputs = {"anchors": x_data,
          "neighbours": np.asarray(keras.ops.take(x_data, neighbours, axis=0))}
labels = np.ones(shape=(x_data.shape[0]))
clustering_learner.compile(
    optimizer=keras.optimizers.AdamW(learning_rate=0.0005, weight_decay=0.0001),
    loss=losses,
    jit_compile=False,
)
# One label array per output: Keras 3.15 refuses the example's single `y=labels` for the two
# outputs ("y_true and y_pred have different structures"), as tessera does.
clustering_learner.fit(x=inputs, y=[labels, labels], batch_size=64, epochs=2)

plt.plot(history.history["loss"])
plt.ylabel("loss")
plt.xlabel("epoch")
plt.savefig("sic_clustering_loss.png")
plt.close()

clustering_probs = clustering_model.predict(x_data, batch_size=batch_size, verbose=0)
cluster_assignments = np.asarray(keras.ops.argmax(clustering_probs, axis=-1))
cluster_confidence = np.asarray(keras.ops.max(clustering_probs, axis=-1))

clusters = defaultdict(list)
for idx, c in enumerate(cluster_assignments):
    clusters[c].append((idx, cluster_confidence[idx]))

non_empty_clusters = defaultdict(list)
for c in clusters.keys():
    if clusters[c]:
        non_empty_clusters[c] = clusters[c]

for c in range(num_clusters):
    print("cluster", c, ":", len(clusters[c]))

num_images = 4
plt.figure(figsize=(15, 15))
position = 1
for c in non_empty_clusters.keys():
    cluster_instances = sorted(non_empty_clusters[c], key=lambda kv: kv[1], reverse=True)
    for j in range(min(num_images, len(cluster_instances))):
        image_idx = cluster_instances[j][0]
        plt.subplot(len(non_empty_clusters), num_images, position)
        plt.imshow(x_data[image_idx].astype("uint8"))
        plt.title(classes[y_data[image_idx][0]])
        plt.axis("off")
        position += 1
plt.savefig("sic_prototypes.png")
plt.close()

cluster_label_counts = dict()
for c in range(num_clusters):
    cluster_label_counts[c] = [0] * num_classes
    instances = clusters[c]
    for i, _ in instances:
        cluster_label_counts[c][y_data[i][0]] += 1
    cluster_label_idx = np.argmax(cluster_label_counts[c])
    correct_count = np.max(cluster_label_counts[c])
    cluster_size = len(clusters[c])
    accuracy = np.round((correct_count / cluster_size) * 100, 2) if cluster_size > 0 else 0
    cluster_label = classes[cluster_label_idx]
    print("cluster", c, "label is:", cluster_label, " -  accuracy:", accuracy, "%")
