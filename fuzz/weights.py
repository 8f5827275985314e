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


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
