# Modeled on keras-io examples/timeseries/timeseries_classification_transformer.py;
# written for tessera. Transformer encoder blocks (MultiHeadAttention, Conv1D
# with kernel 1 as the feed-forward projections, residuals written with +,
# LayerNormalization) over a univariate series, pooled and classified.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

# The FordA download replaced by generated series of its per-sample shape
# (500 steps, 1 feature): the class is the sign of a hidden sine's amplitude.
rng = np.random.default_rng(0)
n, length = 256, 500
t = np.linspace(0, 8 * np.pi, length)
y_all = rng.integers(0, 2, size=n)
x_all = ((2 * y_all - 1)[:, None] * np.sin(t)[None, :] * rng.uniform(0.5, 1.5, (n, 1))
         + rng.normal(0, 1.0, (n, length)))[:, :, None].astype("float32")
x_train, y_train, x_test, y_test = x_all[:192], y_all[:192], x_all[192:], y_all[192:]
n_classes = len(np.unique(y_train))


def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
    x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads,
                                  dropout=dropout)(inputs, inputs)
    x = layers.Dropout(dropout)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    res = x + inputs
    x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    x = layers.Dropout(dropout)(x)
    x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    return x + res


def build_model(input_shape, head_size, num_heads, ff_dim, num_transformer_blocks, mlp_units,
                dropout=0, mlp_dropout=0):
    inputs = keras.Input(shape=input_shape)
    x = inputs
    for _ in range(num_transformer_blocks):
        x = transformer_encoder(x, head_size, num_heads, ff_dim, dropout)
    x = layers.GlobalAveragePooling1D(data_format="channels_last")(x)
    for dim in mlp_units:
        x = layers.Dense(dim, activation="relu")(x)
        x = layers.Dropout(mlp_dropout)(x)
    outputs = layers.Dense(n_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)


# Sizes shrunk from head_size=256, 4 blocks, mlp 128 (25 s an epoch on a GPU)
model = build_model(x_train.shape[1:], head_size=16, num_heads=2, ff_dim=4,
                    num_transformer_blocks=2, mlp_units=[32], mlp_dropout=0.4, dropout=0.25)
model.compile(loss="sparse_categorical_crossentropy",
              optimizer=keras.optimizers.Adam(learning_rate=1e-3),
              metrics=["sparse_categorical_accuracy"])
model.summary()
callbacks = [keras.callbacks.EarlyStopping(patience=10, restore_best_weights=True)]
model.fit(x_train, y_train, validation_split=0.2, epochs=2, batch_size=64, callbacks=callbacks)
print(model.evaluate(x_test, y_test, verbose=1))
