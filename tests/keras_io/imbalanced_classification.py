# Modeled on keras-io examples/structured_data/imbalanced_classification.py; written for tessera.
import numpy as np
import tessera.nn as keras

# In place of the creditcard.csv download (30 float features, rare positives), shrunk.
rng = np.random.default_rng(0)
features = rng.normal(size=(2000, 30)).astype("float32")
score = features @ rng.normal(size=(30, 1))  # the rare positives: a fixed function, to learn
targets = (score > np.quantile(score, 0.98)).astype("uint8")
print("features.shape:", features.shape)
print("targets.shape:", targets.shape)

num_val_samples = int(len(features) * 0.2)
train_features = features[:-num_val_samples]
train_targets = targets[:-num_val_samples]
val_features = features[-num_val_samples:]
val_targets = targets[-num_val_samples:]

counts = np.bincount(train_targets[:, 0])
print("Number of positive samples in training data: {} ({:.2f}% of total)".format(
    counts[1], 100 * float(counts[1]) / len(train_targets)))
weight_for_0 = 1.0 / counts[0]
weight_for_1 = 1.0 / counts[1]

mean = np.mean(train_features, axis=0)
train_features -= mean
val_features -= mean
std = np.std(train_features, axis=0)
train_features /= std
val_features /= std

model = keras.Sequential(
    [
        keras.Input(shape=train_features.shape[1:]),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.summary()

metrics = [
    keras.metrics.FalseNegatives(name="fn"),
    keras.metrics.FalsePositives(name="fp"),
    keras.metrics.TrueNegatives(name="tn"),
    keras.metrics.TruePositives(name="tp"),
    keras.metrics.Precision(name="precision"),
    keras.metrics.Recall(name="recall"),
]
model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)

import os, tempfile
ckpt = os.path.join(tempfile.mkdtemp(), "fraud_model_at_epoch_{epoch}.keras")
callbacks = [keras.callbacks.ModelCheckpoint(ckpt)]
class_weight = {0: weight_for_0, 1: weight_for_1}
model.fit(
    train_features,
    train_targets,
    batch_size=2048,
    epochs=1,
    verbose=2,
    callbacks=callbacks,
    validation_data=(val_features, val_targets),
    class_weight=class_weight,
)
