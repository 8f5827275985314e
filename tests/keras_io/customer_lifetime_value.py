# Modeled on keras-io examples/structured_data/customer_lifetime_value.py (Keras 3, JAX): a
# hybrid model of three Inputs (temporal features, trend features, a one-hot country), an
# Embedding of the one-hot country flattened and repeated over the months, a tanh projection of
# the temporal features, three Transformer encoder blocks, an LSTM over the trends, their
# outputs merged and repeated into an LSTM decoder with an L1L2 recurrent regularizer and a
# Dense per month; validation data, predict, RMSE/MAE/R2 and a Lorenz curve's mutual Gini.
# Written for tessera; in place of the UCI Online Retail download, ucimlrepo and pandas: 160
# generated customers of 5 countries over 24 months (a customer's level, a country factor, a
# seasonal swing, monthly noise), the example's windows of 6 months in and 6 out and its
# features computed in NumPy; keras_hub's TransformerEncoder written here (post-norm: attention,
# residual, LayerNormalization, a relu feed-forward, residual, LayerNormalization, as
# keras_hub's defaults); a dict for StringLookup(output_mode="one_hot") (TensorFlow under
# Keras); 4 epochs (20); the figure saved.
import os
import tempfile

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import Model
from tessera.nn import ops
from tessera.nn import regularizers

rng = np.random.default_rng(7)
countries = ["United Kingdom", "France", "Germany", "EIRE", "Spain"]
NUM_CUSTOMERS, NUM_MONTHS = 160, 24
customer_country = rng.integers(0, len(countries), NUM_CUSTOMERS)
level = rng.gamma(2.0, 150.0, NUM_CUSTOMERS) * (1.0 + 0.3 * customer_country)
months = np.arange(NUM_MONTHS) % 12 + 1
years = 2010 + np.arange(NUM_MONTHS) // 12
season = 1.0 + 0.4 * np.sin(2 * np.pi * months / 12)
amount = level[:, None] * season[None, :] * rng.lognormal(0.0, 0.3, (NUM_CUSTOMERS, NUM_MONTHS))
quantity = np.round(amount / rng.uniform(2.0, 4.0, (NUM_CUSTOMERS, 1)))
frequency = rng.poisson(1.0 + amount / 200.0)


def prepare_data_for_modeling(input_sequence_length=6, output_sequence_length=6):
    seqs = {"temporal_sequences": [], "trend_sequences": [], "static_features": [],
            "output_sequences": []}
    for c in range(NUM_CUSTOMERS):
        for i in range(NUM_MONTHS - input_sequence_length - output_sequence_length + 1):
            w = slice(i, i + input_sequence_length)
            month = months[w]
            temporal = np.column_stack([month, years[w], np.sin(2 * np.pi * month / 12),
                                        np.cos(2 * np.pi * month / 12),
                                        (month % 3 == 1).astype(int)])
            cols = [amount[c, w], quantity[c, w], frequency[c, w]]
            lags = []
            for lag in range(1, 4):
                for col in cols:
                    lags.append(np.concatenate([np.zeros(lag), col[:-lag]]))
            seqs["temporal_sequences"].append(temporal)
            seqs["trend_sequences"].append(np.column_stack(cols + lags))
            seqs["static_features"].append(countries[customer_country[c]])
            out = slice(i + input_sequence_length,
                        i + input_sequence_length + output_sequence_length)
            seqs["output_sequences"].append(amount[c, out])
    order = rng.permutation(len(seqs["trend_sequences"]))  # customers' windows mixed in time
    return {k: (np.array(v, dtype=np.float32) if k != "static_features" else np.array(v))[order]
            for k, v in seqs.items()}


output = prepare_data_for_modeling(input_sequence_length=6, output_sequence_length=6)


def robust_scale(data):
    data = np.array(data)
    return (data - np.min(data)) / (np.max(data) - np.min(data))


def create_temporal_splits_with_scaling(prepared_data, test_ratio=0.2, val_ratio=0.2):
    total = len(prepared_data["trend_sequences"])
    test_size, val_size = int(total * test_ratio), int(total * val_ratio)
    train_size = total - (test_size + val_size)
    scaled_trends = np.zeros_like(prepared_data["trend_sequences"])
    for i in range(prepared_data["trend_sequences"].shape[-1]):
        scaled_trends[..., i] = robust_scale(prepared_data["trend_sequences"][..., i])
    scaled_outputs = robust_scale(prepared_data["output_sequences"])
    parts = []
    for start, stop in ((0, train_size), (train_size, train_size + val_size),
                        (train_size + val_size, total)):
        parts.append({"trend_sequences": scaled_trends[start:stop],
                      "temporal_sequences": prepared_data["temporal_sequences"][start:stop],
                      "static_features": prepared_data["static_features"][start:stop],
                      "output_sequences": scaled_outputs[start:stop]})
    return parts


train_data, val_data, test_data = create_temporal_splits_with_scaling(output)
print("train / val / test windows:", len(train_data["trend_sequences"]),
      len(val_data["trend_sequences"]), len(test_data["trend_sequences"]))


def calculate_metrics(y_true, y_pred):
    y_true = ops.convert_to_numpy(ops.cast(y_true, dtype="float32"))
    y_pred = ops.convert_to_numpy(ops.cast(y_pred, dtype="float32"))
    rmse = np.sqrt(np.mean(np.square(y_true - y_pred)))
    ss_res = np.sum(np.square(y_true - y_pred))
    ss_tot = np.sum(np.square(y_true - np.mean(y_true)))
    return {"mae": np.mean(np.abs(y_true - y_pred)), "rmse": rmse, "r2": 1 - ss_res / ss_tot}


def plot_lorenz_analysis(y_true, y_pred):
    import matplotlib.pyplot as plt

    y_true, y_pred = np.array(y_true).flatten(), np.array(y_pred).flatten()
    true_cumsum, pred_cumsum = np.cumsum(np.sort(-y_true)), np.cumsum(np.sort(-y_pred))
    true_pct, pred_pct = true_cumsum / true_cumsum[-1], pred_cumsum / pred_cumsum[-1]
    percentiles = np.linspace(0, 1, len(y_true))
    mutual_gini = np.abs(np.trapezoid(true_pct, percentiles) -
                         np.trapezoid(pred_pct, percentiles))
    plt.figure(figsize=(10, 6))
    plt.plot(percentiles, true_pct, "g-", label="True Values")
    plt.plot(percentiles, pred_pct, "r-", label="Predicted Values")
    plt.legend()
    plt.savefig(os.path.join(tempfile.mkdtemp(), "lorenz.png"))
    plt.close()
    print(f"\nMutual Gini: {mutual_gini:.4f} (lower is better)")
    return mutual_gini


class TransformerEncoder(layers.Layer):
    """keras_hub.layers.TransformerEncoder's defaults: post-norm, relu, no dropout."""

    def __init__(self, intermediate_dim, num_heads, dropout=0.0, activation="relu",
                 layer_norm_epsilon=1e-05, **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim, self.num_heads = intermediate_dim, num_heads
        self.dropout, self.activation, self.epsilon = dropout, activation, layer_norm_epsilon

    def build(self, inputs_shape):
        hidden_dim = inputs_shape[-1]
        self._self_attention_layer = layers.MultiHeadAttention(
            num_heads=self.num_heads, key_dim=int(hidden_dim // self.num_heads),
            dropout=self.dropout)
        self._self_attention_layer_norm = layers.LayerNormalization(epsilon=self.epsilon)
        self._self_attention_dropout = layers.Dropout(rate=self.dropout)
        self._feedforward_intermediate_dense = layers.Dense(self.intermediate_dim,
                                                            activation=self.activation)
        self._feedforward_output_dense = layers.Dense(hidden_dim)
        self._feedforward_layer_norm = layers.LayerNormalization(epsilon=self.epsilon)
        self._feedforward_dropout = layers.Dropout(rate=self.dropout)

    def call(self, inputs, training=None):
        residual = inputs
        x = self._self_attention_layer(query=inputs, value=inputs, training=training)
        x = self._self_attention_dropout(x, training=training)
        x = self._self_attention_layer_norm(x + residual)
        residual = x
        x = self._feedforward_output_dense(self._feedforward_intermediate_dense(x))
        x = self._feedforward_dropout(x, training=training)
        return self._feedforward_layer_norm(x + residual)


def build_hybrid_model(input_sequence_length, output_sequence_length, num_countries,
                       d_model=8, num_heads=4):
    keras.utils.set_random_seed(seed=42)
    temporal_inputs = layers.Input(shape=(input_sequence_length, 5), name="temporal_inputs")
    trend_inputs = layers.Input(shape=(input_sequence_length, 12), name="trend_inputs")
    country_inputs = layers.Input(shape=(num_countries,), dtype="int32", name="country_inputs")
    country_embedding = layers.Embedding(input_dim=num_countries, output_dim=d_model,
                                         mask_zero=False, name="country_embedding")(country_inputs)
    country_embedding = layers.Flatten(name="flatten_country_embedding")(country_embedding)
    country_embedding_repeated = layers.RepeatVector(
        input_sequence_length, name="repeat_country_embedding")(country_embedding)
    temporal_projection = layers.Dense(d_model, activation="tanh",
                                       name="temporal_projection")(temporal_inputs)
    combined_features = layers.Concatenate()([temporal_projection, country_embedding_repeated])
    transformer_output = combined_features
    for _ in range(3):
        transformer_output = TransformerEncoder(intermediate_dim=16,
                                                num_heads=num_heads)(transformer_output)
    lstm_output = layers.LSTM(units=64, name="lstm_trend")(trend_inputs)
    transformer_flattened = layers.GlobalAveragePooling1D(name="flatten_transformer")(
        transformer_output)
    transformer_flattened = layers.Dense(1, activation="sigmoid")(transformer_flattened)
    merged_features = layers.Concatenate(name="concatenate_transformer_lstm")(
        [transformer_flattened, lstm_output])
    decoder_initial = layers.RepeatVector(output_sequence_length,
                                          name="repeat_merged_features")(merged_features)
    decoder_lstm = layers.LSTM(units=64, return_sequences=True,
                               recurrent_regularizer=regularizers.L1L2(l1=1e-5, l2=1e-4))(
        decoder_initial)
    output = layers.Dense(units=1, activation="linear", name="output_dense")(decoder_lstm)
    model = Model(inputs=[temporal_inputs, trend_inputs, country_inputs], outputs=output)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse",
                  metrics=["mse"])
    return model


model = build_hybrid_model(input_sequence_length=6, output_sequence_length=6,
                           num_countries=len(np.unique(train_data["static_features"])) + 1,
                           d_model=8, num_heads=4)
model.summary()

# StringLookup(output_mode="one_hot", num_oov_indices=1) adapted on the training countries:
# index 0 for an unknown country, then the vocabulary by decreasing frequency
names, counts = np.unique(train_data["static_features"], return_counts=True)
vocabulary = [n for _, n in sorted(zip(-counts, names))]
lookup = {n: i + 1 for i, n in enumerate(vocabulary)}


def label_encoder(values):
    out = np.zeros((len(values), len(vocabulary) + 1), dtype="float32")
    out[np.arange(len(values)), [lookup.get(v, 0) for v in values]] = 1.0
    return out


train_static_encoded = label_encoder(train_data["static_features"])
val_static_encoded = label_encoder(val_data["static_features"])
test_static_encoded = label_encoder(test_data["static_features"])

x_train_seq = np.asarray(train_data["trend_sequences"]).astype(np.float32)
x_val_seq = np.asarray(val_data["trend_sequences"]).astype(np.float32)
x_train_temporal = np.asarray(train_data["temporal_sequences"]).astype(np.float32)
x_val_temporal = np.asarray(val_data["temporal_sequences"]).astype(np.float32)
train_outputs = np.asarray(train_data["output_sequences"]).astype(np.float32)
keras.utils.set_random_seed(seed=42)
history = model.fit([x_train_temporal, x_train_seq, train_static_encoded], train_outputs,
                    validation_data=([x_val_temporal, x_val_seq, val_static_encoded],
                                     val_data["output_sequences"].astype(np.float32)),
                    epochs=4, batch_size=30, verbose=2)

predictions = model.predict([test_data["temporal_sequences"].astype(np.float32),
                             test_data["trend_sequences"].astype(np.float32),
                             test_static_encoded], verbose=0)
predictions = np.squeeze(predictions)
hybrid_metrics = calculate_metrics(test_data["output_sequences"], predictions)
print({k: round(float(v), 4) for k, v in hybrid_metrics.items()})
hybrid_mutual_gini = plot_lorenz_analysis(test_data["output_sequences"], predictions)
assert predictions.shape == test_data["output_sequences"].shape, predictions.shape
