# Modeled on keras-io guides/understanding_masking_and_padding.py; written for tessera.
# The guide trains nothing; the lines marked "check" (not in the guide) test what it
# prints, and run the same under Keras.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

raw_inputs = [
    [711, 632, 71],
    [73, 8, 3215, 55, 927],
    [83, 91, 1, 645, 1253, 927],
]
# Zeros at the end ("post"); the default pads at the start.
padded_inputs = keras.utils.pad_sequences(raw_inputs, padding="post")
print(padded_inputs)
lengths = np.array([len(r) for r in raw_inputs])
expected_mask = np.arange(padded_inputs.shape[1])[None, :] < lengths[:, None]  # check

# Mask makers: Embedding(mask_zero=True) and Masking.
embedding = layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True)
masked_output = embedding(padded_inputs)
print(masked_output._keras_mask)
assert np.array_equal(np.asarray(masked_output._keras_mask), expected_mask)  # check

masking_layer = layers.Masking()
# The embedding lookup imitated: each id repeated 10 times along a new last axis.
unmasked_embedding = ops.cast(
    ops.tile(ops.expand_dims(padded_inputs, axis=-1), [1, 1, 10]), dtype="float32"
)
masked_embedding = masking_layer(unmasked_embedding)
print(masked_embedding._keras_mask)
assert np.array_equal(np.asarray(masked_embedding._keras_mask), expected_mask)  # check

# Masks flow through Sequential and functional models to the LSTM.
model = keras.Sequential(
    [
        layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True),
        layers.LSTM(32),
    ]
)

inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True)(inputs)
outputs = layers.LSTM(32)(x)
model = keras.Model(inputs, outputs)
# check: the masked steps at the end are skipped, so the padded sequence gives the
# unpadded one's result.
full = np.asarray(model(padded_inputs))
for i, n in enumerate(lengths):
    alone = np.asarray(model(padded_inputs[i:i + 1, :n]))
    assert np.allclose(full[i], alone[0], atol=1e-5), (i, full[i], alone[0])


# A mask given by hand to a layer that takes one.
class MyLayer(layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True)
        self.lstm = layers.LSTM(32)

    def call(self, inputs):
        x = self.embedding(inputs)
        # Any boolean (batch_size, timesteps) tensor would do as the mask.
        mask = self.embedding.compute_mask(inputs)
        output = self.lstm(x, mask=mask)  # masked steps are skipped
        return output


layer = MyLayer()
x = np.random.random((32, 10)) * 100
x = x.astype("int32")
print("MyLayer output shape:", tuple(layer(x).shape))


# A layer that changes the time axis changes the mask with it.
class TemporalSplit(keras.layers.Layer):
    """Cuts the input in two halves along the time axis."""

    def call(self, inputs):
        return ops.split(inputs, 2, axis=1)

    def compute_mask(self, inputs, mask=None):
        # The mask is cut the same way, when there is one.
        if mask is None:
            return None
        return ops.split(mask, 2, axis=1)


first_half, second_half = TemporalSplit()(masked_embedding)
print(first_half._keras_mask)
print(second_half._keras_mask)
assert np.array_equal(np.asarray(first_half._keras_mask), expected_mask[:, :3])  # check
assert np.array_equal(np.asarray(second_half._keras_mask), expected_mask[:, 3:])  # check


# A layer that makes a mask from its input values.
class CustomEmbedding(keras.layers.Layer):
    def __init__(self, input_dim, output_dim, mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.mask_zero = mask_zero

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            shape=(self.input_dim, self.output_dim),
            initializer="random_normal",
            dtype="float32",
        )

    def call(self, inputs):
        inputs = ops.cast(inputs, "int32")
        return ops.take(self.embeddings, inputs)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)


layer = CustomEmbedding(10, 32, mask_zero=True)
x = np.random.random((3, 10)) * 9
x = x.astype("int32")
y = layer(x)
mask = layer.compute_mask(x)
print(mask)
assert np.array_equal(np.asarray(mask), x != 0)  # check
assert np.array_equal(np.asarray(y._keras_mask), x != 0)  # check
# check: ops.take without axis takes from the flattened table, as np.take does
assert np.allclose(np.asarray(y), np.asarray(layer.embeddings).reshape(-1)[x])


# Opting in: a layer that keeps the time axis passes the mask on.
class MyActivation(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The mask may go through this layer unchanged.
        self.supports_masking = True

    def call(self, inputs):
        return ops.relu(inputs)


inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True)(inputs)
x = MyActivation()(x)  # passes the mask on
print("Mask found:", x._keras_mask)
outputs = layers.LSTM(32)(x)  # gets the mask
model = keras.Model(inputs, outputs)
y = model(np.random.randint(0, 5000, size=(32, 100)))
print("model output shape:", tuple(y.shape))


# A mask consumer: a softmax over the time axis that leaves out the masked steps.
class TemporalSoftmax(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        assert mask is not None
        broadcast_float_mask = ops.expand_dims(ops.cast(mask, "float32"), -1)
        inputs_exp = ops.exp(inputs) * broadcast_float_mask
        inputs_sum = ops.sum(inputs_exp * broadcast_float_mask, axis=-1, keepdims=True)
        return inputs_exp / inputs_sum


inputs = keras.Input(shape=(None,), dtype="int32")
x = layers.Embedding(input_dim=10, output_dim=32, mask_zero=True)(inputs)
x = layers.Dense(1)(x)
outputs = TemporalSoftmax()(x)
model = keras.Model(inputs, outputs)
ids = np.random.randint(0, 10, size=(32, 100))
y = np.asarray(model(ids))
print("TemporalSoftmax output shape:", y.shape)
# check: as the guide writes it (sum over the last axis, of size 1) the result is 1 at
# every unmasked step and 0/0 = nan at the masked ones.
assert np.allclose(y[ids != 0], 1.0) and np.isnan(y[ids == 0]).all()
