"""Fuzz target (atheris, coverage-guided): tessera's weights and checkpoint
loader (tessera.nn.saving: read_file, load_model, Model.load_weights,
fit(resume_from=...)). Every load must succeed or raise a ValueError (or
FileNotFoundError) whose message starts with "[op]"; any other exception is a
finding.

The input is the JSON header, a NUL byte, then the data section; the target
adds the magic, the header length and the SHA-256, so that the fuzzer
explores what lies behind the checksum.

    python fuzz/weights.py [libFuzzer flags] [corpus folders]
"""

import hashlib
import json
import random
import struct
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["tessera"]):
    import numpy as np

    from tessera import nn
    from tessera.nn import saving


def _model():
    model = nn.Sequential([nn.Dense(4, activation="relu"), nn.Dense(2)], input_shape=(3,))
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((8, 3), np.float32), np.ones((8, 2), np.float32), epochs=1, verbose=0)
    return model


MODEL = _model()
# The file the loaders read: unlinked at once, reached through /proc, so
# nothing is left behind however the fuzzer exits.
FILE = tempfile.TemporaryFile()
PATH = f"/proc/self/fd/{FILE.fileno()}"


def sealed(data: bytes) -> bytes:
    header, _, rest = data.partition(b"\0")
    body = saving.MAGIC + struct.pack("<Q", len(header)) + header + rest
    return body + hashlib.sha256(body).digest()


def test_one_input(data: bytes):
    FILE.seek(0)
    FILE.truncate()
    FILE.write(sealed(data))
    FILE.flush()
    loads = (lambda: saving.read_file(PATH, "fuzz"), lambda: nn.load_model(PATH),
             lambda: MODEL.load_weights(PATH), lambda: saving.load_training_state(MODEL, PATH))
    for load in loads:
        try:
            load()
        except (ValueError, FileNotFoundError) as e:
            if not str(e).startswith("["):
                raise AssertionError(f"an error without an op tag: {e!r}") from e


# Values a header edit puts in place of another (wrong types, extremes).
JUNK = [None, True, -1, 0, 1, 2 ** 40, 2 ** 63, -(2 ** 63), 1e308, 0.5, "", "x" * 300, "float32",
        "Dense", "Sequential", "Functional", "tessera.nn.layers", "os", [], [0], [2 ** 31, 3],
        [[1, 2]], {}, {"__tuple__": [1]}, {"__dict__": {}}, {"__layer__": {"class": "Dense"}},
        {"__object__": "Adam", "module": "tessera.optim"}, {"t": 0}, {"t": 99}]


def _paths(v, path=()):
    yield path
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _paths(x, path + (i,))


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    """Half the time an edit of the JSON header (a value replaced by junk or by
    another value of the header, a key removed, an entry duplicated), which
    byte mutations rarely make without breaking the JSON; else libFuzzer's."""
    rnd = random.Random(seed)
    header, sep, rest = data.partition(b"\0")
    try:
        h = json.loads(header)
    except (ValueError, RecursionError):
        h = None
    if h is None or not sep or rnd.random() < 0.5:
        return atheris.Mutate(data, max_size)
    paths = list(_paths(h))[1:]
    if not paths:
        return atheris.Mutate(data, max_size)
    path = rnd.choice(paths)
    target = h
    for k in path[:-1]:
        target = target[k]
    choice = rnd.random()
    if choice < 0.15:
        del target[path[-1]]
    elif choice < 0.3 and isinstance(target, list):
        target.append(target[path[-1]])
    elif choice < 0.5:
        other = h
        for k in rnd.choice(paths):
            other = other[k]
        target[path[-1]] = json.loads(json.dumps(other))
    else:
        target[path[-1]] = rnd.choice(JUNK)
    out = json.dumps(h).encode() + b"\0" + rest
    return out[:max_size]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input, custom_mutator=mutate)
    atheris.Fuzz()
