# Modeled on keras-io examples/vision/attention_mil_classification.py (Keras 3 form); written
# for tessera. In place of MNIST: uint8 arrays of its per-sample shape with a bright bar at a
# height given by the digit; 200 training bags and 60 validation bags of 3 instances (1000 and
# 300 there), 3 epochs (20 there); the model list iterated without tqdm (not installed here);
# the plots drawn into files.
import numpy as np
from matplotlib import pyplot as plt
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

POSITIVE_CLASS = 1
BAG_COUNT = 200
VAL_BAG_COUNT = 60
BAG_SIZE = 3
PLOT_SIZE = 3
ENSEMBLE_AVG_COUNT = 1

keras.utils.set_random_seed(0)


def digits(n, rng):
    images = rng.integers(0, 128, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    images[np.arange(n)[:, None], 4 + 2 * labels[:, None].astype(int) + np.arange(2)] = 255
    return images, labels


def create_bags(input_data, input_labels, positive_class, bag_count, instance_count):
    bags, bag_labels = [], []
    input_data = np.divide(input_data, 255.0)
    count = 0
    for _ in range(bag_count):
        # A random subset of the samples makes a bag; it is positive when it holds the class.
        index = np.random.choice(input_data.shape[0], instance_count, replace=False)
        instances_data = input_data[index]
        instances_labels = input_labels[index]
        bag_label = 0
        if positive_class in instances_labels:
            bag_label = 1
            count += 1
        bags.append(instances_data)
        bag_labels.append(np.array([bag_label]))
    print(f"Positive bags: {count}")
    print(f"Negative bags: {bag_count - count}")
    return list(np.swapaxes(bags, 0, 1)), np.array(bag_labels)


rng = np.random.default_rng(0)
(x_train, y_train), (x_val, y_val) = digits(2000, rng), digits(600, rng)
train_data, train_labels = create_bags(x_train, y_train, POSITIVE_CLASS, BAG_COUNT, BAG_SIZE)
val_data, val_labels = create_bags(x_val, y_val, POSITIVE_CLASS, VAL_BAG_COUNT, BAG_SIZE)


class MILAttentionLayer(layers.Layer):
    """Attention-based deep MIL: one softmax-normalised score per instance of a bag.

    Takes a list of (batch_size, input_dim) tensors, returns as many (batch_size, 1) scores.
    """

    def __init__(self, weight_params_dim, kernel_initializer="glorot_uniform",
                 kernel_regularizer=None, use_gated=False, **kwargs):
        super().__init__(**kwargs)
        self.weight_params_dim = weight_params_dim
        self.use_gated = use_gated
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.v_init = self.w_init = self.u_init = self.kernel_initializer
        self.v_regularizer = self.w_regularizer = self.u_regularizer = self.kernel_regularizer

    def build(self, input_shape):
        input_dim = input_shape[0][1]
        self.v_weight_params = self.add_weight(
            shape=(input_dim, self.weight_params_dim), initializer=self.v_init, name="v",
            regularizer=self.v_regularizer, trainable=True)
        self.w_weight_params = self.add_weight(
            shape=(self.weight_params_dim, 1), initializer=self.w_init, name="w",
            regularizer=self.w_regularizer, trainable=True)
        if self.use_gated:
            self.u_weight_params = self.add_weight(
                shape=(input_dim, self.weight_params_dim), initializer=self.u_init, name="u",
                regularizer=self.u_regularizer, trainable=True)
        else:
            self.u_weight_params = None
        self.input_built = True

    def call(self, inputs):
        instances = [self.compute_attention_scores(instance) for instance in inputs]
        instances = ops.stack(instances)
        # Softmax over the instances: a bag's scores sum to 1.
        alpha = ops.softmax(instances, axis=0)
        return [alpha[i] for i in range(alpha.shape[0])]

    def compute_attention_scores(self, instance):
        original_instance = instance
        instance = ops.tanh(ops.tensordot(instance, self.v_weight_params, axes=1))
        if self.use_gated:
            instance = instance * ops.sigmoid(
                ops.tensordot(original_instance, self.u_weight_params, axes=1))
        return ops.tensordot(instance, self.w_weight_params, axes=1)


def plot(data, labels, bag_class, predictions=None, attention_weights=None):
    labels = np.array(labels).reshape(-1)
    if bag_class == "positive":
        chosen = np.where((predictions.argmax(1) if predictions is not None else labels) == 1)[0]
    elif bag_class == "negative":
        chosen = np.where((predictions.argmax(1) if predictions is not None else labels) == 0)[0]
    else:
        print(f"There is no class {bag_class}")
        return
    bags = np.array(data)[:, chosen[0:PLOT_SIZE]]
    print(f"The bag class label is {bag_class}")
    for i in range(min(PLOT_SIZE, bags.shape[1])):
        figure = plt.figure(figsize=(8, 8))
        print(f"Bag number: {chosen[i]}")
        for j in range(BAG_SIZE):
            figure.add_subplot(1, BAG_SIZE, j + 1)
            plt.grid(False)
            if attention_weights is not None:
                plt.title(np.around(attention_weights[chosen[i]][j], 2))
            plt.imshow(bags[j][i])
        figure.savefig(f"bag_{bag_class}_{i}.png")
        plt.close(figure)


plot(val_data, val_labels, "positive")
plot(val_data, val_labels, "negative")


def create_model(instance_shape):
    inputs, embeddings = [], []
    shared_dense_layer_1 = layers.Dense(128, activation="relu")
    shared_dense_layer_2 = layers.Dense(64, activation="relu")
    for _ in range(BAG_SIZE):
        inp = layers.Input(instance_shape)
        flatten = layers.Flatten()(inp)
        dense_1 = shared_dense_layer_1(flatten)
        dense_2 = shared_dense_layer_2(dense_1)
        inputs.append(inp)
        embeddings.append(dense_2)

    alpha = MILAttentionLayer(weight_params_dim=256,
                              kernel_regularizer=keras.regularizers.L2(0.01), use_gated=True,
                              name="alpha")(embeddings)
    multiply_layers = [layers.multiply([alpha[i], embeddings[i]]) for i in range(len(alpha))]
    concat = layers.concatenate(multiply_layers, axis=1)
    output = layers.Dense(2, activation="softmax")(concat)
    return keras.Model(inputs, output)


def compute_class_weights(labels):
    negative_count = len(np.where(labels == 0)[0])
    positive_count = len(np.where(labels == 1)[0])
    total_count = negative_count + positive_count
    return {0: (1 / negative_count) * (total_count / 2),
            1: (1 / positive_count) * (total_count / 2)}


def train(train_data, train_labels, val_data, val_labels, model):
    file_path = "best_model.weights.h5"
    model_checkpoint = keras.callbacks.ModelCheckpoint(
        file_path, monitor="val_loss", verbose=0, mode="min", save_best_only=True,
        save_weights_only=True)
    early_stopping = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10, mode="min")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(train_data, train_labels, validation_data=(val_data, val_labels), epochs=3,
              class_weight=compute_class_weights(train_labels), batch_size=1,
              callbacks=[early_stopping, model_checkpoint], verbose=0)
    model.load_weights(file_path)
    return model


instance_shape = train_data[0][0].shape
models = [create_model(instance_shape) for _ in range(ENSEMBLE_AVG_COUNT)]
print(models[0].summary())
trained_models = [train(train_data, train_labels, val_data, val_labels, model)
                  for model in models]


def predict(data, labels, trained_models):
    models_predictions, models_attention_weights = [], []
    models_losses, models_accuracies = [], []
    for model in trained_models:
        predictions = model.predict(data)
        models_predictions.append(predictions)
        # A model from the same inputs to the attention layer's outputs: the instance scores.
        intermediate_model = keras.Model(model.input, model.get_layer("alpha").output)
        intermediate_predictions = intermediate_model.predict(data)
        attention_weights = np.squeeze(np.swapaxes(intermediate_predictions, 1, 0))
        models_attention_weights.append(attention_weights)
        loss, accuracy = model.evaluate(data, labels, verbose=0)
        models_losses.append(loss)
        models_accuracies.append(accuracy)
    print(f"The average loss and accuracy are "
          f"{np.sum(models_losses, axis=0) / ENSEMBLE_AVG_COUNT:.2f} and "
          f"{100 * np.sum(models_accuracies, axis=0) / ENSEMBLE_AVG_COUNT:.2f} % resp.")
    return (np.sum(models_predictions, axis=0) / ENSEMBLE_AVG_COUNT,
            np.sum(models_attention_weights, axis=0) / ENSEMBLE_AVG_COUNT)


class_predictions, attention_params = predict(val_data, val_labels, trained_models)
# Each bag's attention weights sum to 1 (the guide's conclusion).
assert attention_params.shape == (VAL_BAG_COUNT, BAG_SIZE), attention_params.shape
np.testing.assert_allclose(attention_params.sum(axis=1), 1.0, rtol=1e-4)
plot(val_data, val_labels, "positive", predictions=class_predictions,
     attention_weights=attention_params)
plot(val_data, val_labels, "negative", predictions=class_predictions,
     attention_weights=attention_params)
