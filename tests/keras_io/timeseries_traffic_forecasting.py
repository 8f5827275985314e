# Modeled on keras-io examples/timeseries/timeseries_traffic_forecasting.py (Keras 3 form: ops
# for tf.*, add_weight for tf.Variable); written for tessera. In place of the PeMSD7 download and
# pandas: 26 roads at random positions (their distances in the CSV's units) and 900 time steps
# of speeds, each road a daily wave at its own phase plus its neighbours' mean and noise; the
# windows cut in NumPy in place of timeseries_dataset_from_array and tf.data (Keras's needs
# TensorFlow), fit on arrays shuffled in batches of 64; the mean aggregation as segment sums
# over neighbour counts (tf.math.unsorted_segment_mean); lstm_units 16 (64 there), 2 epochs (20);
# the plots saved.
import typing

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
num_routes, num_steps = 26, 900
positions = rng.uniform(0, 9000, (num_routes, 2))
route_distances = np.sqrt(((positions[:, None] - positions[None]) ** 2).sum(-1))
near = (route_distances < 2600) & ~np.eye(num_routes, dtype=bool)
t = np.arange(num_steps)[:, None]
base = np.sin(2 * np.pi * t / 96 + rng.uniform(0, 2 * np.pi, num_routes))
coupled = base + (near @ base.T).T / np.maximum(near.sum(1), 1)
speeds_array = 60 + 8 * coupled + rng.normal(0, 1.0, (num_steps, num_routes))
print(f"route_distances shape={route_distances.shape}")
print(f"speeds_array shape={speeds_array.shape}")

plt.figure(figsize=(18, 6))
plt.plot(speeds_array[:, [0, -1]])
plt.legend(["route_0", "route_25"])
plt.savefig("routes.png")
plt.close()

train_size, val_size = 0.5, 0.2


def preprocess(data_array: np.ndarray, train_size: float, val_size: float):
    """Train/validation/test splits, normalized by the training split's statistics."""
    num_time_steps = data_array.shape[0]
    num_train, num_val = int(num_time_steps * train_size), int(num_time_steps * val_size)
    train_array = data_array[:num_train]
    mean, std = train_array.mean(axis=0), train_array.std(axis=0)
    train_array = (train_array - mean) / std
    val_array = (data_array[num_train: (num_train + num_val)] - mean) / std
    test_array = (data_array[(num_train + num_val):] - mean) / std
    return train_array, val_array, test_array


train_array, val_array, test_array = preprocess(speeds_array, train_size, val_size)
print(f"train set size: {train_array.shape}")
print(f"validation set size: {val_array.shape}")
print(f"test set size: {test_array.shape}")

batch_size = 64
input_sequence_length = 12
forecast_horizon = 3
multi_horizon = False


def create_windows(data_array, input_sequence_length, forecast_horizon, multi_horizon=True):
    """(inputs, targets): inputs (n, input_sequence_length, num_routes, 1) of consecutive
    steps, targets (n, forecast_horizon or 1, num_routes) of the steps that follow."""
    target_offset = (input_sequence_length if multi_horizon
                     else input_sequence_length + forecast_horizon - 1)
    target_seq_length = forecast_horizon if multi_horizon else 1
    n = len(data_array) - forecast_horizon - input_sequence_length + 1
    inputs = np.stack([data_array[i: i + input_sequence_length] for i in range(n)])[..., None]
    targets = np.stack([data_array[target_offset + i: target_offset + i + target_seq_length]
                        for i in range(n)])
    return inputs.astype("float32"), targets.astype("float32")


train_x, train_y = create_windows(train_array, input_sequence_length, forecast_horizon)
val_x, val_y = create_windows(val_array, input_sequence_length, forecast_horizon)
x_test, y = create_windows(test_array, input_sequence_length, forecast_horizon,
                           multi_horizon=multi_horizon)


def compute_adjacency_matrix(route_distances: np.ndarray, sigma2: float, epsilon: float):
    """1 where exp(-(distance / 10000)^2 / sigma2) >= epsilon, off the diagonal."""
    num_routes = route_distances.shape[0]
    route_distances = route_distances / 10000.0
    w2, w_mask = (route_distances * route_distances,
                  np.ones([num_routes, num_routes]) - np.identity(num_routes))
    return (np.exp(-w2 / sigma2) >= epsilon) * w_mask


class GraphInfo:
    def __init__(self, edges: typing.Tuple[list, list], num_nodes: int):
        self.edges = edges
        self.num_nodes = num_nodes


sigma2 = 0.1
epsilon = 0.5
adjacency_matrix = compute_adjacency_matrix(route_distances, sigma2, epsilon)
node_indices, neighbor_indices = np.where(adjacency_matrix == 1)
graph = GraphInfo(edges=(node_indices.tolist(), neighbor_indices.tolist()),
                  num_nodes=adjacency_matrix.shape[0])
print(f"number of nodes: {graph.num_nodes}, number of edges: {len(graph.edges[0])}")


class GraphConv(layers.Layer):
    def __init__(self, in_feat, out_feat, graph_info: GraphInfo, aggregation_type="mean",
                 combination_type="concat", activation: typing.Optional[str] = None, **kwargs):
        super().__init__(**kwargs)
        self.in_feat = in_feat
        self.out_feat = out_feat
        self.graph_info = graph_info
        self.aggregation_type = aggregation_type
        self.combination_type = combination_type
        self.weight = self.add_weight(initializer=keras.initializers.GlorotUniform(),
                                      shape=(in_feat, out_feat), dtype="float32",
                                      trainable=True)
        self.activation = layers.Activation(activation)

    def aggregate(self, neighbour_representations):
        segments = np.asarray(self.graph_info.edges[0], dtype="int32")
        n = self.graph_info.num_nodes
        if self.aggregation_type == "sum":
            return ops.segment_sum(neighbour_representations, segments, num_segments=n)
        if self.aggregation_type == "max":
            return ops.segment_max(neighbour_representations, segments, num_segments=n)
        if self.aggregation_type == "mean":
            counts = np.maximum(np.bincount(segments, minlength=n), 1).astype("float32")
            sums = ops.segment_sum(neighbour_representations, segments, num_segments=n)
            return sums / ops.reshape(counts, (n, 1, 1, 1))
        raise ValueError(f"Invalid aggregation type: {self.aggregation_type}")

    def compute_nodes_representation(self, features):
        """(num_nodes, batch_size, input_seq_len, in_feat) times the weight."""
        return ops.matmul(features, self.weight)

    def compute_aggregated_messages(self, features):
        neighbour_representations = ops.take(features, self.graph_info.edges[1], axis=0)
        aggregated_messages = self.aggregate(neighbour_representations)
        return ops.matmul(aggregated_messages, self.weight)

    def update(self, nodes_representation, aggregated_messages):
        if self.combination_type == "concat":
            h = ops.concatenate([nodes_representation, aggregated_messages], axis=-1)
        elif self.combination_type == "add":
            h = nodes_representation + aggregated_messages
        else:
            raise ValueError(f"Invalid combination type: {self.combination_type}.")
        return self.activation(h)

    def call(self, features):
        nodes_representation = self.compute_nodes_representation(features)
        aggregated_messages = self.compute_aggregated_messages(features)
        return self.update(nodes_representation, aggregated_messages)


class LSTMGC(layers.Layer):
    """A graph convolution, then an LSTM and a Dense over each node's sequence."""

    def __init__(self, in_feat, out_feat, lstm_units: int, input_seq_len: int,
                 output_seq_len: int, graph_info: GraphInfo,
                 graph_conv_params: typing.Optional[dict] = None, **kwargs):
        super().__init__(**kwargs)
        if graph_conv_params is None:
            graph_conv_params = {"aggregation_type": "mean", "combination_type": "concat",
                                 "activation": None}
        self.graph_conv = GraphConv(in_feat, out_feat, graph_info, **graph_conv_params)
        self.lstm = layers.LSTM(lstm_units, activation="relu")
        self.dense = layers.Dense(output_seq_len)
        self.input_seq_len, self.output_seq_len = input_seq_len, output_seq_len

    def call(self, inputs):
        # (batch_size, input_seq_len, num_nodes, in_feat) -> (num_nodes, batch_size, ...)
        inputs = ops.transpose(inputs, [2, 0, 1, 3])
        gcn_out = self.graph_conv(inputs)
        shape = ops.shape(gcn_out)
        num_nodes, batch_size, input_seq_len, out_feat = shape[0], shape[1], shape[2], shape[3]
        # the LSTM reads each node's sequence of each sample
        gcn_out = ops.reshape(gcn_out, (batch_size * num_nodes, input_seq_len, out_feat))
        lstm_out = self.lstm(gcn_out)
        dense_output = self.dense(lstm_out)
        output = ops.reshape(dense_output, (num_nodes, batch_size, self.output_seq_len))
        return ops.transpose(output, [1, 2, 0])  # (batch_size, output_seq_len, num_nodes)


in_feat = 1
epochs = 2
out_feat = 10
lstm_units = 16
graph_conv_params = {"aggregation_type": "mean", "combination_type": "concat",
                     "activation": None}
st_gcn = LSTMGC(in_feat, out_feat, lstm_units, input_sequence_length, forecast_horizon, graph,
                graph_conv_params)
inputs = layers.Input((input_sequence_length, graph.num_nodes, in_feat))
outputs = st_gcn(inputs)
model = keras.models.Model(inputs, outputs)
model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.002),
              loss=keras.losses.MeanSquaredError())
model.fit(train_x, train_y, batch_size=batch_size, validation_data=(val_x, val_y),
          epochs=epochs, callbacks=[keras.callbacks.EarlyStopping(patience=10)])

y_pred = model.predict(x_test)
plt.figure(figsize=(18, 6))
plt.plot(y[:, 0, 0])
plt.plot(y_pred[:, 0, 0])
plt.legend(["actual", "forecast"])
plt.savefig("forecast.png")
plt.close()
naive_mse, model_mse = (np.square(x_test[:, -1, :, 0] - y[:, 0, :]).mean(),
                        np.square(y_pred[:, 0, :] - y[:, 0, :]).mean())
print(f"naive MAE: {naive_mse}, model MAE: {model_mse}")
