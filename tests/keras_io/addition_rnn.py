# Modeled on keras-io examples/nlp/addition_rnn.py; written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

TRAINING_SIZE = 1000  # shrunk from 50000
DIGITS = 3
REVERSE = True
MAXLEN = DIGITS + 1 + DIGITS


class CharacterTable:
    def __init__(self, chars):
        self.chars = sorted(set(chars))
        self.char_indices = {c: i for i, c in enumerate(self.chars)}
        self.indices_char = {i: c for i, c in enumerate(self.chars)}

    def encode(self, text, num_rows):
        x = np.zeros((num_rows, len(self.chars)))
        for i, c in enumerate(text):
            x[i, self.char_indices[c]] = 1
        return x

    def decode(self, x, calc_argmax=True):
        if calc_argmax:
            x = x.argmax(axis=-1)
        return "".join(self.indices_char[int(v)] for v in x)


chars = "0123456789+ "
ctable = CharacterTable(chars)
rng = np.random.default_rng(0)
questions, expected, seen = [], [], set()
while len(questions) < TRAINING_SIZE:
    a, b = (int(rng.integers(0, 10 ** int(rng.integers(1, DIGITS + 1)))) for _ in range(2))
    key = tuple(sorted((a, b)))
    if key in seen:
        continue
    seen.add(key)
    q = f"{a}+{b}"
    query = q + " " * (MAXLEN - len(q))
    ans = str(a + b)
    ans += " " * (DIGITS + 1 - len(ans))
    if REVERSE:
        query = query[::-1]
    questions.append(query)
    expected.append(ans)

x = np.zeros((len(questions), MAXLEN, len(chars)), dtype=bool)
y = np.zeros((len(questions), DIGITS + 1, len(chars)), dtype=bool)
for i, sentence in enumerate(questions):
    x[i] = ctable.encode(sentence, MAXLEN)
for i, sentence in enumerate(expected):
    y[i] = ctable.encode(sentence, DIGITS + 1)
split_at = len(x) - len(x) // 10
(x_train, x_val), (y_train, y_val) = (x[:split_at], x[split_at:]), (y[:split_at], y[split_at:])

num_layers = 1
model = keras.Sequential()
model.add(layers.LSTM(128, input_shape=(MAXLEN, len(chars))))
model.add(layers.RepeatVector(DIGITS + 1))
for _ in range(num_layers):
    model.add(layers.LSTM(128, return_sequences=True))
model.add(layers.Dense(len(chars), activation="softmax"))
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.summary()

for epoch in range(1, 2):  # 1 iteration instead of 29
    model.fit(x_train, y_train, batch_size=32, epochs=1, validation_data=(x_val, y_val))
    for i in range(3):
        ind = rng.integers(0, len(x_val))
        rowx, rowy = x_val[np.array([ind])], y_val[np.array([ind])]
        preds = np.argmax(model.predict(rowx, verbose=0), axis=-1)
        print("Q", ctable.decode(rowx[0])[::-1], "T", ctable.decode(rowy[0]), "G", ctable.decode(preds[0], calc_argmax=False))
