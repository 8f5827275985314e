# Modeled on keras-io examples/nlp/lstm_seq2seq.py; written for tessera.
# A character-level encoder-decoder: an LSTM encodes the English phrase into
# its two states, a second LSTM started from them is trained with teacher
# forcing on the French phrase; the trained model is saved, loaded, and split
# into an encoder and a one-step decoder that translate by greedy sampling.
import os
import tempfile

import numpy as np
import tessera.nn as keras

LATENT = 32
PAIRS = 300  # shrunk from 10000; the fra-eng download replaced by generated phrases
rng = np.random.default_rng(0)
vocab = {"go": "va", "run": "cours", "stop": "arrete", "wait": "attends", "help": "aide",
         "hello": "bonjour", "hi": "salut", "who": "qui", "wow": "ouah", "fire": "feu"}
english = list(vocab)
sources, targets = [], []
for _ in range(PAIRS):
    picked = [english[i] for i in rng.integers(0, len(english), size=rng.integers(1, 3))]
    sources.append(" ".join(picked) + ".")
    # "\t" starts a target phrase and "\n" ends it, as in the guide
    targets.append("\t" + " ".join(vocab[w] for w in picked) + " !\n")

src_chars = sorted(set("".join(sources)))
tgt_chars = sorted(set("".join(targets)))
src_index = {c: i for i, c in enumerate(src_chars)}
tgt_index = {c: i for i, c in enumerate(tgt_chars)}
src_len = max(map(len, sources))
tgt_len = max(map(len, targets))


def one_hot(texts, index, length, shift=0):
    """(phrases, length, characters) one-hot, padded with spaces; shift=1
    gives the targets one step ahead of the decoder's inputs."""
    out = np.zeros((len(texts), length, len(index)), dtype="float32")
    for row, text in enumerate(texts):
        text = text[shift:]
        for t, ch in enumerate(text):
            out[row, t, index[ch]] = 1.0
        out[row, len(text):, index[" "]] = 1.0
    return out


encoder_input_data = one_hot(sources, src_index, src_len)
decoder_input_data = one_hot(targets, tgt_index, tgt_len)
decoder_target_data = one_hot(targets, tgt_index, tgt_len, shift=1)
print("pairs:", PAIRS, "source characters:", len(src_chars), "target characters:",
      len(tgt_chars), "lengths:", src_len, tgt_len)

# Training model: the encoder's last states start the decoder.
encoder_inputs = keras.Input(shape=(None, len(src_chars)))
_, state_h, state_c = keras.layers.LSTM(LATENT, return_state=True)(encoder_inputs)
decoder_inputs = keras.Input(shape=(None, len(tgt_chars)))
decoder_lstm = keras.layers.LSTM(LATENT, return_sequences=True, return_state=True)
decoded, _, _ = decoder_lstm(decoder_inputs, initial_state=[state_h, state_c])
probabilities = keras.layers.Dense(len(tgt_chars), activation="softmax")(decoded)
model = keras.Model([encoder_inputs, decoder_inputs], probabilities)
model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
model.fit([encoder_input_data, decoder_input_data], decoder_target_data, batch_size=64,
          epochs=2, validation_split=0.2)

folder = tempfile.mkdtemp()
model.save(os.path.join(folder, "s2s_model.keras"))
model = keras.models.load_model(os.path.join(folder, "s2s_model.keras"))

# Sampling models from the loaded model's layers, found by position as the guide does.
_, enc_h, enc_c = model.layers[2].output
encoder_model = keras.Model(model.input[0], [enc_h, enc_c])
state_inputs = [keras.Input(shape=(LATENT,)), keras.Input(shape=(LATENT,))]
step_out, dec_h, dec_c = model.layers[3](model.input[1], initial_state=state_inputs)
decoder_model = keras.Model([model.input[1]] + state_inputs,
                            [model.layers[4](step_out), dec_h, dec_c])


def translate(one_phrase):
    states = encoder_model.predict(one_phrase, verbose=0)
    token = np.zeros((1, 1, len(tgt_chars)))
    token[0, 0, tgt_index["\t"]] = 1.0
    text = ""
    while True:
        probs, h, c = decoder_model.predict([token] + states, verbose=0)
        ch = tgt_chars[int(np.argmax(probs[0, -1, :]))]
        text += ch
        if ch == "\n" or len(text) > tgt_len:
            return text
        token = np.zeros((1, 1, len(tgt_chars)))
        token[0, 0, tgt_index[ch]] = 1.0
        states = [h, c]


for k in range(3):
    print(repr(sources[k]), "->", repr(translate(encoder_input_data[k:k + 1])))
