# Modeled on keras-io examples/keras_recipes/reproducibility_recipes.py (Keras 3 form); written
# for tessera. In place of MNIST and tf.data: uint8 arrays of its per-sample shape with a bright
# bar at the digit's height, cast, given a channel axis and resized to 32x32 with
# `ops.image.resize` in NumPy batches of 64 (the guide's `map`), fit with `shuffle=True` (the
# guide's `shuffle`); 640 training and 128 test images. The guide's second run "after restarting
# the kernel" is a second `train_model` after `set_random_seed(812)` again, in the same process;
# its comparison is asserted. `tf.config.experimental.enable_op_determinism()` is left out
# (TensorFlow's; tessera's reductions have a fixed order). The guide's
# `float(initializer(seed=42)(shape=(1, 1)))` stops under Keras 3.15 on JAX 0.7+ (only 0-d
# arrays convert to a Python number) as under tessera: the script takes the array's one value.
import json

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import initializers
from tessera.nn import ops

keras.utils.set_random_seed(812)

initializers_list = [
    initializers.RandomNormal,
    initializers.RandomUniform,
    initializers.TruncatedNormal,
    initializers.VarianceScaling,
    initializers.GlorotNormal,
    initializers.GlorotUniform,
    initializers.HeNormal,
    initializers.HeUniform,
    initializers.LecunNormal,
    initializers.LecunUniform,
    initializers.Orthogonal,
]

# The same seed gives the same value at each call.
for initializer in initializers_list:
    print(f"Running {initializer}")
    results = []
    for iteration in range(2):
        # The guide's float() of the (1, 1) array: JAX 0.7+ refuses it (only 0-d arrays
        # convert), as NumPy 2 does; its one value, under both.
        result = float(initializer(seed=42)(shape=(1, 1))[0, 0])
        results.append(result)
        print(f"\tIteration --> {iteration} // Result --> {result}")
    print("\n")
    assert results[0] == results[1], (initializer, results)

# Two initializer objects with the same seed draw the same values.
glorot_normal_1 = keras.initializers.GlorotNormal(seed=42)
glorot_normal_2 = keras.initializers.GlorotNormal(seed=42)
input_dim, neurons = 3, 5
result_1 = glorot_normal_1(shape=(input_dim, neurons))
result_2 = glorot_normal_2(shape=(input_dim, neurons))
equal = np.allclose(result_1, result_2)
print(f"Are the results equal? {equal}")
assert equal

# Without a seed, two objects draw different values (the same ones in each run of the script).
glorot_normal_3 = keras.initializers.GlorotNormal()
glorot_normal_4 = keras.initializers.GlorotNormal()
result_3 = glorot_normal_3(shape=(input_dim, neurons))
result_4 = glorot_normal_4(shape=(input_dim, neurons))
equal = np.allclose(result_3, result_4)
print(f"Are the results equal? {equal}")
assert not equal


def train_model(train_data, test_data) -> dict:
    model = keras.Sequential(
        [
            layers.Conv2D(32, (3, 3), activation="relu"),
            layers.MaxPooling2D((2, 2)),
            layers.Dropout(0.2),
            layers.Conv2D(32, (3, 3), activation="relu"),
            layers.MaxPooling2D((2, 2)),
            layers.Dropout(0.2),
            layers.Conv2D(32, (3, 3), activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(64, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=False)
    # fit shuffles arrays before each epoch (shuffle=True, the default).
    history = model.fit(*train_data, batch_size=64, epochs=2, validation_data=test_data)
    print(f"Model accuracy on test data: {model.evaluate(*test_data)[1] * 100:.2f}%")
    return history.history


rng = np.random.default_rng(0)


def digits(n):
    images = rng.integers(0, 128, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images[np.arange(n)[:, None], 4 + 2 * labels[:, None].astype(int) + np.arange(2)] = 255
    return images, labels


(train_images, train_labels), (test_images, test_labels) = digits(640), digits(128)


def prepare_dataset(image, label):
    image = ops.cast(image, "float32") / 255.0
    image = ops.expand_dims(image, axis=-1)
    image = ops.image.resize(image, (32, 32))
    return np.asarray(image), label


def prepare(images, labels):
    batches = [prepare_dataset(images[i:i + 64], labels[i:i + 64])
               for i in range(0, len(images), 64)]
    return (np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches]))


train_data = prepare(train_images, train_labels)
test_data = prepare(test_images, test_labels)

history = train_model(train_data, test_data)
with open("history.json", "w") as fp:
    json.dump(history, fp)

# The second run, as after restarting the kernel: the same seed and the same draws before
# training (the unseeded initializers), the same results.
keras.utils.set_random_seed(812)
glorot_normal_3 = keras.initializers.GlorotNormal()
glorot_normal_4 = keras.initializers.GlorotNormal()
assert np.allclose(glorot_normal_3(shape=(input_dim, neurons)), result_3)
assert np.allclose(glorot_normal_4(shape=(input_dim, neurons)), result_4)
history = train_model(train_data, test_data)

with open("history.json", "r") as fp:
    history_loaded = json.load(fp)

different = []
for key in history.keys():
    for i in range(len(history[key])):
        if not np.allclose(history[key][i], history_loaded[key][i]):
            print(f"{key} not equal")
            different.append(key)
assert not different, different
