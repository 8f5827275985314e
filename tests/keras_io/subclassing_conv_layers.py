# Modeled on keras-io examples/keras_recipes/subclassing_conv_layers.py (written there
# with tf.nn: here in Keras 3's form, keras.ops in its place); written for tessera. Two Conv2D subclasses
# standardize their kernel: one overrides convolution_op, one calls it from call.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops


class StandardizedConv2DWithOverride(layers.Conv2D):
    def convolution_op(self, inputs, kernel):
        # (the kernel as a tensor: Keras 3.15 on JAX refuses ops.moments on a Variable,
        # "Triggering __jax_array__() during abstractification is no longer supported")
        kernel = ops.convert_to_tensor(kernel)
        mean, var = ops.moments(kernel, axes=[0, 1, 2], keepdims=True)
        return ops.conv(
            inputs,
            (kernel - mean) / ops.sqrt(var + 1e-10),
            padding="valid",
            strides=list(self.strides),
        )


class StandardizedConv2DWithCall(layers.Conv2D):
    def call(self, inputs):
        kernel = ops.convert_to_tensor(self.kernel)
        mean, var = ops.moments(kernel, axes=[0, 1, 2], keepdims=True)
        result = self.convolution_op(inputs, (kernel - mean) / ops.sqrt(var + 1e-10))
        if self.use_bias:
            result = result + self.bias
        return result


num_classes = 10
input_shape = (28, 28, 1)

# In place of keras.datasets.mnist.load_data(): uint8 arrays of the same shapes, shrunk,
# with a bright bar at a height given by the label (something to learn).
rng = np.random.default_rng(0)
x_train = rng.integers(0, 128, (1024, 28, 28), dtype=np.uint8)
y_train = rng.integers(0, 10, 1024).astype(np.uint8)
x_test = rng.integers(0, 128, (256, 28, 28), dtype=np.uint8)
y_test = rng.integers(0, 10, 256).astype(np.uint8)
for xs, ys in ((x_train, y_train), (x_test, y_test)):
    xs[np.arange(len(xs))[:, None], 4 + 2 * ys[:, None].astype(int) + np.arange(2)] = 255

x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")

y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.layers.InputLayer(shape=input_shape),
        StandardizedConv2DWithCall(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        StandardizedConv2DWithOverride(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

batch_size = 128
epochs = 1  # 5 in the example
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1)
score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
