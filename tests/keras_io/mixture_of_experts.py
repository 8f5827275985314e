# Modeled on keras-io examples/keras_recipes/mixture_of_experts.py; written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops, activations, optimizers


class DenseMoE(layers.Layer):
    """A Dense layer whose output mixes n_experts Dense experts by a softmax gate."""

    def __init__(self, units, n_experts, expert_activation=None, gating_activation=None,
                 use_expert_bias=True, use_gating_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.n_experts = n_experts
        self.expert_activation = activations.get(expert_activation)
        self.gating_activation = activations.get(gating_activation)
        self.use_expert_bias = use_expert_bias
        self.use_gating_bias = use_gating_bias

    def build(self, input_shape):
        d = input_shape[-1]
        self.expert_kernel = self.add_weight(name="expert_kernel",
                                             shape=(d, self.units, self.n_experts),
                                             initializer="glorot_uniform", trainable=True)
        if self.use_expert_bias:
            self.expert_bias = self.add_weight(name="expert_bias",
                                               shape=(self.units, self.n_experts),
                                               initializer="zeros", trainable=True)
        self.gating_kernel = self.add_weight(name="gating_kernel", shape=(d, self.n_experts),
                                             initializer="glorot_uniform", trainable=True)
        if self.use_gating_bias:
            self.gating_bias = self.add_weight(name="gating_bias", shape=(self.n_experts,),
                                               initializer="zeros", trainable=True)
        super().build(input_shape)

    def call(self, inputs):
        experts = ops.tensordot(inputs, self.expert_kernel, axes=1)  # (batch, units, experts)
        if self.use_expert_bias:
            experts = experts + self.expert_bias
        experts = self.expert_activation(experts)
        gates = ops.tensordot(inputs, self.gating_kernel, axes=1)  # (batch, experts)
        if self.use_gating_bias:
            gates = gates + self.gating_bias
        gates = self.gating_activation(gates)
        gates = ops.expand_dims(gates, axis=1)
        return ops.sum(experts * gates, axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({
            "units": self.units,
            "n_experts": self.n_experts,
            "expert_activation": activations.serialize(self.expert_activation),
            "gating_activation": activations.serialize(self.gating_activation),
            "use_expert_bias": self.use_expert_bias,
            "use_gating_bias": self.use_gating_bias,
        })
        return config


class Conv2DMoE(layers.Layer):
    """A Conv2D layer whose output mixes n_experts convolutions by a per-pixel 1x1 gate."""

    def __init__(self, filters, kernel_size, n_experts, strides=1, padding="valid",
                 expert_activation=None, gating_activation=None, use_expert_bias=True,
                 use_gating_bias=True, **kwargs):
        super().__init__(**kwargs)
        self.filters = filters
        if not isinstance(kernel_size, tuple):
            kernel_size = (kernel_size, kernel_size)
        self.kernel_size = kernel_size
        self.n_experts = n_experts
        self.strides = strides if isinstance(strides, tuple) else (strides, strides)
        self.padding = padding
        self.expert_activation = activations.get(expert_activation)
        self.gating_activation = activations.get(gating_activation)
        self.use_expert_bias = use_expert_bias
        self.use_gating_bias = use_gating_bias

    def build(self, input_shape):
        c = input_shape[-1]
        kh, kw = self.kernel_size
        self.expert_kernel = self.add_weight(name="expert_kernel",
                                             shape=(kh, kw, c, self.filters, self.n_experts),
                                             initializer="glorot_uniform", trainable=True)
        if self.use_expert_bias:
            self.expert_bias = self.add_weight(name="expert_bias",
                                               shape=(self.filters, self.n_experts),
                                               initializer="zeros", trainable=True)
        self.gating_kernel = self.add_weight(name="gating_kernel",
                                             shape=(1, 1, c, self.n_experts),
                                             initializer="glorot_uniform", trainable=True)
        if self.use_gating_bias:
            self.gating_bias = self.add_weight(name="gating_bias", shape=(self.n_experts,),
                                               initializer="zeros", trainable=True)
        super().build(input_shape)

    def call(self, inputs):
        # All experts in one convolution: their filters side by side, split afterwards.
        kernel = ops.reshape(self.expert_kernel,
                             (self.kernel_size[0], self.kernel_size[1], ops.shape(inputs)[-1],
                              self.filters * self.n_experts))
        experts = ops.conv(inputs, kernel, strides=self.strides, padding=self.padding)
        shape = ops.shape(experts)
        experts = ops.reshape(experts, (shape[0], shape[1], shape[2], self.filters,
                                        self.n_experts))
        if self.use_expert_bias:
            experts = experts + self.expert_bias
        experts = self.expert_activation(experts)
        gates = ops.conv(inputs, self.gating_kernel, strides=self.strides, padding=self.padding)
        if self.use_gating_bias:
            gates = gates + self.gating_bias
        gates = self.gating_activation(gates)
        gates = ops.expand_dims(gates, axis=-2)
        return ops.sum(experts * gates, axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "n_experts": self.n_experts,
            "strides": self.strides,
            "padding": self.padding,
            "expert_activation": activations.serialize(self.expert_activation),
            "gating_activation": activations.serialize(self.gating_activation),
            "use_expert_bias": self.use_expert_bias,
            "use_gating_bias": self.use_gating_bias,
        })
        return config


# In place of cifar10.load_data(): uint8 images of CIFAR-10's shape, shrunk, each tinted by a
# colour of its class (labels of shape (n, 1), as CIFAR's).
rng = np.random.default_rng(0)
palette = rng.integers(0, 256, (10, 3))


def make_images(n):
    y = rng.integers(0, 10, (n, 1)).astype(np.uint8)
    x = rng.integers(0, 256, (n, 32, 32, 3))
    x = (0.5 * x + 0.5 * palette[y[:, 0]][:, None, None, :]).astype(np.uint8)
    return x, y


(x_train, y_train), (x_test, y_test) = make_images(640), make_images(160)
x_train = x_train.astype("float32") / 255.0
x_test = x_test.astype("float32") / 255.0
subset_size = 640
x_train = x_train[:subset_size]
y_train = y_train[:subset_size]
print(f"Training samples: {len(x_train)}")
print(f"Test samples: {len(x_test)}")

# Widths / 4 of the example's (32, 64 filters; 128, 64 units).


def create_baseline_model():
    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Conv2D(8, 3, activation="relu", padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(32, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    x = layers.Dense(16, activation="relu")(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="baseline_model")


def create_moe_model():
    inputs = keras.Input(shape=(32, 32, 3))
    x = Conv2DMoE(8, 3, n_experts=4, padding="same", expert_activation="relu",
                  gating_activation="softmax")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPooling2D(2)(x)
    x = Conv2DMoE(16, 3, n_experts=4, padding="same", expert_activation="relu",
                  gating_activation="softmax")(x)
    x = layers.BatchNormalization()(x)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = DenseMoE(32, n_experts=8, expert_activation="relu", gating_activation="softmax")(x)
    x = layers.Dropout(0.5)(x)
    x = DenseMoE(16, n_experts=4, expert_activation="relu", gating_activation="softmax")(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="moe_model")


epochs = 3
batch_size = 64

print("BASELINE MODEL")
baseline_model = create_baseline_model()
baseline_model.compile(optimizer=optimizers.Adam(learning_rate=0.001),
                       loss="sparse_categorical_crossentropy", metrics=["accuracy"])
baseline_model.summary()
baseline_history = baseline_model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs,
                                      validation_split=0.2, verbose=1)
baseline_test_loss, baseline_test_acc = baseline_model.evaluate(x_test, y_test, verbose=0)
print(f"\nBaseline Test Accuracy: {baseline_test_acc:.4f}")

print("\nMIXTURE-OF-EXPERTS MODEL")
moe_model = create_moe_model()
moe_model.compile(optimizer=optimizers.Adam(learning_rate=0.001),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
moe_model.summary()
moe_history = moe_model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs,
                            validation_split=0.2, verbose=1)
moe_test_loss, moe_test_acc = moe_model.evaluate(x_test, y_test, verbose=0)
print(f"\nMoE Test Accuracy: {moe_test_acc:.4f}")

print("\nMODEL COMPARISON")
print(f"Baseline - Params: {baseline_model.count_params():,} | "
      f"Test Accuracy: {baseline_test_acc:.4f}")
print(f"MoE Model - Params: {moe_model.count_params():,} | Test Accuracy: {moe_test_acc:.4f}")

# Expert utilization: the first DenseMoE's gate, rebuilt as a Dense from its weights.
dense_moe_layer = None
for layer in moe_model.layers:
    if isinstance(layer, DenseMoE):
        dense_moe_layer = layer
        break

if dense_moe_layer:
    feature_extractor = keras.Model(inputs=moe_model.input, outputs=dense_moe_layer.input)
    test_features = feature_extractor.predict(x_test[:100], verbose=0)
    gating_layer = layers.Dense(units=dense_moe_layer.n_experts,
                                activation=dense_moe_layer.gating_activation,
                                use_bias=dense_moe_layer.use_gating_bias)
    gating_layer.build(test_features.shape)
    weights = [dense_moe_layer.gating_kernel]
    if dense_moe_layer.use_gating_bias:
        weights.append(dense_moe_layer.gating_bias)
    gating_layer.set_weights(weights)
    gating_weights = gating_layer(test_features)
    gating_weights_np = ops.convert_to_numpy(gating_weights)
    print("\nGating weights distribution across experts:")
    print(f"Mean gating weights per expert: {gating_weights_np.mean(axis=0)}")
    print(f"Std of gating weights per expert: {gating_weights_np.std(axis=0)}")
    # check: the gate is a softmax over the experts
    assert gating_weights_np.shape == (100, 8)
    assert np.allclose(gating_weights_np.sum(axis=1), 1.0, atol=1e-5)
