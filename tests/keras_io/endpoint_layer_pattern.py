# Modeled on keras-io examples/keras_recipes/endpoint_layer_pattern.py (its Keras 3 form); written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import ops


class LogisticEndpoint(keras.layers.Layer):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    def call(self, logits, targets=None, sample_weight=None):
        if targets is not None:
            loss = self.loss_fn(targets, logits, sample_weight)
            self.add_loss(loss)
        return ops.softmax(logits)


inputs = keras.Input((764,), name="inputs")
logits = keras.layers.Dense(1)(inputs)
targets = keras.Input((1,), name="targets")
sample_weight = keras.Input((1,), name="sample_weight")
preds = LogisticEndpoint()(logits, targets, sample_weight)
model = keras.Model([inputs, targets, sample_weight], preds)

inputs_data = np.random.random((1000, 764))
data = {
    "inputs": inputs_data,
    # targets: a fixed function of the inputs (the guide's are random), to learn
    "targets": ((inputs_data - 0.5) @ np.random.normal(size=(764, 1)) > 0).astype("float64"),
    "sample_weight": np.random.random((1000, 1)),
}
model.compile(keras.optimizers.Adam(1e-3))
model.fit(data, epochs=2)

inputs = keras.Input((764,), name="inputs")
logits = keras.layers.Dense(1)(inputs)
preds = LogisticEndpoint()(logits, targets=None, sample_weight=None)
inference_model = keras.Model(inputs, preds)
inference_model.set_weights(model.get_weights())
preds = inference_model.predict(np.random.random((1000, 764)))


class LogReg(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.logistic_endpoint = LogisticEndpoint()

    def call(self, inputs):
        logits = self.dense(inputs["inputs"])
        preds = self.logistic_endpoint(
            logits=logits, targets=inputs["targets"], sample_weight=inputs["sample_weight"]
        )
        return preds


model = LogReg()
model.compile(keras.optimizers.Adam(1e-3))
model.fit(data, epochs=2)
