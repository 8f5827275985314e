# Modeled on keras-io examples/timeseries/event_classification_for_payment_card_fraud_detection.py
# (Keras 3: a list of `keras.Input(shape=(1,), name=...)` fed a dict of per-feature batches of
# shape (batch,) keyed by those names, layers.concatenate, sigmoid Dense layers,
# BinaryCrossentropy with int32 labels, metrics `keras.metrics.Accuracy()` (exact equality of
# the sigmoid output and the label, as the example writes it) and `keras.metrics.AUC()`, fit
# with validation data, evaluate, predict and the labels gathered back from the batches);
# written for tessera. In place of the simulated transactions' download (pandas pickles) and
# Temporian: 24,000 generated transactions over 183 days (1,000 customers, 300 terminals; a
# terminal compromised for 28 days makes a third of its transactions fraudulent, and some
# customers' amounts are inflated), with the example's features computed in NumPy: per
# terminal, the sum and count of transactions over the last 7, 14 and 28 days, the count and
# rate of fraud among the transactions of those windows lagged by a week, the hour and the day
# of the week; z-normalized over time (the mean and deviation of all earlier transactions),
# NaN as 0; the example's train / validation / test months; the training set resampled to 20%
# fraud in NumPy for `rejection_resample`; keras.utils.PyDataset of (features, labels) batches
# for tf.data; no ROC figure (scikit-learn). 2 epochs (1: the training month is shrunk).
import datetime
import math

import numpy as np
import tessera.nn as keras

rng = np.random.default_rng(21)
start_date = datetime.datetime(2018, 4, 1)
num_days, num_tx, num_customers, num_terminals = 183, 24000, 1000, 300
DAY = 86400.0

timestamps = np.sort(start_date.timestamp() + rng.uniform(0, num_days * DAY, num_tx))
customer_ids = rng.integers(0, num_customers, num_tx)
terminal_ids = rng.integers(0, num_terminals, num_tx)
amounts = rng.gamma(2.0, 25.0, num_tx)
fraud = np.zeros(num_tx, dtype=np.int32)
# Compromised terminals: for 28 days, a third of their transactions are fraudulent.
day_of_tx = (timestamps - start_date.timestamp()) // DAY
for day in range(num_days):
    for terminal in rng.choice(num_terminals, 2, replace=False):
        hit = (terminal_ids == terminal) & (day_of_tx >= day) & (day_of_tx < day + 28)
        fraud[hit & (rng.uniform(size=num_tx) < 0.33)] = 1
# Compromised customers: a few inflated amounts.
inflated = rng.uniform(size=num_tx) < 0.01
amounts[inflated] *= 5
fraud[inflated] = 1
fraudulent_rate = fraud.mean()
print(f"Found {num_tx} transactions")
print("Rate of fraudulent transactions:", fraudulent_rate)


def per_terminal_window(values, t, terminals, window, lag=0.0, sampling_t=None):
    """Sum of `values` of the same terminal's transactions in (t - lag - window, t - lag]."""
    out = np.zeros(len(t))
    for terminal in np.unique(terminals):
        rows = np.nonzero(terminals == terminal)[0]
        times = t[rows]
        cum = np.concatenate([[0.0], np.cumsum(values[rows])])
        hi = np.searchsorted(times, times - lag, side="right")
        lo = np.searchsorted(times, times - lag - window, side="right")
        out[rows] = cum[hi] - cum[lo]
    return out


features = {}
ones = np.ones(num_tx)
for n in [7, 14, 28]:
    features[f"sum_transactions_{n}_days"] = per_terminal_window(amounts, timestamps,
                                                                 terminal_ids, n * DAY)
    features[f"count_transactions_{n}_days"] = per_terminal_window(ones, timestamps,
                                                                   terminal_ids, n * DAY)
for n in [7, 14, 28]:
    count = per_terminal_window(fraud.astype(float), timestamps, terminal_ids, n * DAY,
                                lag=7 * DAY)
    seen = per_terminal_window(ones, timestamps, terminal_ids, n * DAY, lag=7 * DAY)
    features[f"count_fraud_transactions_{n}_days"] = count
    with np.errstate(invalid="ignore", divide="ignore"):
        features[f"rate_fraud_transactions_{n}_days"] = count / seen
hours = ((timestamps - start_date.timestamp()) % DAY) // 3600
features["calendar_hour"] = hours
features["calendar_day_of_week"] = (day_of_tx + start_date.weekday()) % 7
input_feature_names = list(features)
print("The model input features:", input_feature_names)

# z-normalization over time: each value against the mean and deviation of the values before
# it (NaN, missing, left out of both).
normalized = {}
for name, values in features.items():
    present = ~np.isnan(values)
    v = np.where(present, values, 0.0)
    count = np.cumsum(present)
    mean = np.cumsum(v) / np.maximum(count, 1)
    var = np.cumsum(v * v) / np.maximum(count, 1) - mean**2
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (values - mean) / np.sqrt(np.maximum(var, 0.0))
    normalized[name] = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0).astype("float32")

begin_train = datetime.datetime(2018, 7, 1).timestamp()
begin_valid = datetime.datetime(2018, 8, 1).timestamp()
begin_test = datetime.datetime(2018, 9, 1).timestamp()
is_train = (timestamps >= begin_train) & (timestamps < begin_valid)
is_valid = (timestamps >= begin_valid) & (timestamps < begin_test)
is_test = timestamps >= begin_test
print(f"Training examples: {is_train.sum()}")
print(f"Validation examples: {is_valid.sum()}")
print(f"Testing examples: {is_test.sum()}")

# The training set resampled to 80% legitimate / 20% fraudulent (rejection_resample).
target_rate = 0.2
batch_size = 32
train_rows = np.nonzero(is_train)[0]
positives = train_rows[fraud[train_rows] == 1]
negatives = train_rows[fraud[train_rows] == 0]
num_neg = min(len(negatives), int(len(positives) * (1 - target_rate) / target_rate))
train_rows = np.concatenate([positives, rng.choice(negatives, num_neg, replace=False)])


class Transactions(keras.utils.PyDataset):
    """(features, labels) batches: a dict of (batch,) arrays and int32 labels."""

    def __init__(self, rows, shuffle=False, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.shuffle = rows, shuffle
        if shuffle:
            self.rows = rng.permutation(rows)

    def __len__(self):
        return math.ceil(len(self.rows) / batch_size)

    def __getitem__(self, idx):
        take = self.rows[idx * batch_size:(idx + 1) * batch_size]
        return {k: normalized[k][take] for k in input_feature_names}, fraud[take]

    def on_epoch_end(self):
        if self.shuffle:
            self.rows = rng.permutation(self.rows)


train_ds = Transactions(train_rows, shuffle=True)
valid_ds = Transactions(np.nonzero(is_valid)[0])
test_ds = Transactions(np.nonzero(is_test)[0])

first_features, first_labels = train_ds[0]
print("features")
for feature_name, feature_value in first_features.items():
    print(f"\t{feature_name}: {feature_value[:4]}")
print(f"labels: {first_labels[:4]}")

inputs = [keras.Input(shape=(1,), name=name) for name in input_feature_names]
x = keras.layers.concatenate(inputs)
x = keras.layers.Dense(32, activation="sigmoid")(x)
x = keras.layers.Dense(16, activation="sigmoid")(x)
x = keras.layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs=inputs, outputs=x)

model.compile(
    optimizer=keras.optimizers.Adam(0.01),
    loss=keras.losses.BinaryCrossentropy(),
    metrics=[keras.metrics.Accuracy(), keras.metrics.AUC()],
)
model.fit(train_ds, validation_data=valid_ds, epochs=2)

results = model.evaluate(test_ds, return_dict=True)
print(results)

predictions = model.predict(test_ds)
predictions = np.nan_to_num(predictions, nan=0)
labels = np.concatenate([test_ds[i][1] for i in range(len(test_ds))])

# Checks (not in the example): the predictions follow the test rows in order, and the AUC
# evaluate reports is the ranking's (to the metric's 200 thresholds).
assert predictions.shape == (len(labels), 1), predictions.shape
order = np.argsort(-predictions[:, 0], kind="stable")
ranked = labels[order]
pos, neg = ranked.sum(), len(ranked) - ranked.sum()
negatives_below = neg - np.cumsum(1 - ranked)[ranked == 1]  # for each fraud, by its score
exact_auc = negatives_below.sum() / (pos * neg)
print(f"AUC from the predictions: {exact_auc:.4f}")
assert abs(results["auc"] - exact_auc) < 0.05, (results["auc"], exact_auc)
