"""Writes the seed corpora of the fuzz targets (fuzz/corpus/NAME/), small
valid (and a few nearly valid) inputs from which the fuzzers start. Run from
the repository root with the built tessera on the path; the seeds are
committed, so this is needed only to change them:

    PYTHONPATH=python .venv/bin/python fuzz/make_seeds.py
"""

import glob
import gzip
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def tsl():
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.tsl")) +
                       glob.glob(os.path.join(ROOT, "tests", "dist", "*.tsl"))):
        with open(path, "rb") as f:
            text = f.read()
        if len(text) <= 4096:
            write("tsl", os.path.basename(path), text)
    write("tsl", "grad.tsl", "define(f, x, y=2, sum(tanh(x) * y ** 2))\n"
          "define(g, grad(f, argnums=[0, 1]))\n"
          "define(h, value_and_grad(lambda(a, mean(a @ a)), has_aux=false))\n"
          "g(ones([3]), 1.5)\n")
    write("tsl", "syntax.tsl", "define(d, dict(\"a\", [1, 2.5e-3, -7], b=nil))\n"
          "define(t, tuple(true, false, 'x'))\n"
          "for_each(lambda(i, if(i % 2 == 0 && !(i > 3) || i != 1, continue(), break())), "
          "range(10))\n"
          "parallel_block(d[\"a\"][0:2], t[::-1], x[1, ..., nil])\n")
    # Chains long enough to become sequences (one with a nested term that
    # gets a step of its own), and names of Python's non-ASCII identifiers.
    write("tsl", "chains.tsl", "define(größe, 1.5)\n"
          "define(f, α, α + α * 2 - größe + α / 3 + 1 + α + 2 + α - 3 + α * α + 4 && α < 5)\n"
          "define(g, grad(lambda(x, x * 2 * x * 3 * x * 4 * x * 5 * (x + 1 + 2 + 3 + 4 + 5 + 6 + "
          "7 + 8 + 9) * x)))\n"
          "f(2.0) || g(1.0) > 0 || größe == 1 == true != false\n")


def tsl_dict():
    """fuzz/dict/tsl.dict: the language's tokens, and every special form and
    primitive as `name(` (from `tessera ops`)."""
    ops = subprocess.run([os.path.join(ROOT, "build", "tessera"), "ops"], check=True,
                         capture_output=True, text=True).stdout
    names = sorted({m.group(1) for m in re.finditer(r"^  ([a-z_][a-z0-9_]*)\(", ops, re.M)})
    tokens = ["+", "-", "*", "/", "%", "**", "@", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
              "!", "(", ")", "[", "]", ",", "=", ":", "::", "...", "//", "\n", "\"", "'",
              "true", "false", "nil", "1e308", "-0.0", "nan", "inf", "9223372036854775807",
              "argnums=", "has_aux=true", "axis=", "dtype=", "keepdims=true", "\"float32\"",
              "\"int8\"", "\"complex128\"", "[[1, 2], [3, 4]]", "x[1:2, ::-1, ...]"]
    def entry(text):
        quoted = "".join(c if c.isprintable() and c not in '\\"' else f"\\x{ord(c):02x}"
                         for c in text)
        return f'"{quoted}"'

    lines = ["# tokens of the expression language, then every special form and primitive"]
    lines += [entry(t) for t in tokens]
    lines += [entry(n + "(") for n in names]
    with open(os.path.join(ROOT, "fuzz", "dict", "tsl.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


def npy():
    arrays = {
        "f8": np.arange(6, dtype="<f8").reshape(2, 3),
        "f4_fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
        "f2": np.array([1.5, -2.0], dtype="<f2"),
        "i8_big": np.array([1, -2, 3], dtype=">i8"),
        "u1": np.array([[0, 255]], dtype="u1"),
        "b1": np.array([True, False]),
        "scalar": np.array(3.5),
        "empty": np.zeros((0, 4), dtype="<i4"),
    }
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a)
        write("npy", name + ".npy", buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype="<u4"), version=(2, 0))
    write("npy", "v2.npy", buf.getvalue())


def csv():
    # byte 0: dtype (tessera::DType) and delimiter; byte 1: header lines skipped
    write("csv", "float64", b"\x03\x01" + b"a,b,c\n1.5,2,-3e-7\n# comment\n\n4,nan,inf\n")
    write("csv", "int64_semicolon", bytes([1 + 15, 0]) + b"1;2\n-3;40000000000\n")
    write("csv", "float32_tab", bytes([2 + 30, 0]) + b"0.1\t0.2\n0.3\t0.4\n")
    write("csv", "bool_one_column", bytes([0, 0]) + b"1\n0\ntrue\n")
    write("csv", "uint8_pipe", bytes([7 + 75, 2]) + b"x\ny\n1|2|3\n")
    write("csv", "complex", bytes([14, 0]) + b"1+2j,3\n-1j,4.5\n")
    write("csv", "ragged", bytes([3, 0]) + b"1,2\n3\n")


def idx():
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    header = struct.pack(">BBBB", 0, 0, 0x08, 3) + struct.pack(">III", 2, 3, 4)
    write("idx", "uint8_3d.idx", header + images.tobytes())
    write("idx", "uint8_3d.idx.gz", gzip.compress(header + images.tobytes(), mtime=0))
    labels = struct.pack(">BBBB", 0, 0, 0x08, 1) + struct.pack(">I", 5) + bytes([0, 1, 2, 9, 7])
    write("idx", "labels.idx", labels)
    for code, dt in ((0x09, ">i1"), (0x0B, ">i2"), (0x0C, ">i4"), (0x0D, ">f4"), (0x0E, ">f8")):
        data = np.array([[1, -2], [3, 4]], dtype=dt).tobytes()
        write("idx", f"type_{code:02x}.idx",
              struct.pack(">BBBB", 0, 0, code, 2) + struct.pack(">II", 2, 2) + data)
    write("idx", "truncated.idx", header + images.tobytes()[:5])


def txt():
    write("txt", "har.txt", " 1.0e-01  2.5 -3\n 4  5  6\n")
    write("txt", "comments.txt", "# header\n\n1 2\n3 4\n")
    write("txt", "ints.txt.gz", gzip.compress(b"1 2 3\n4 5 6\n7 8 9\n", mtime=0))
    write("txt", "ragged.txt", "1 2 3\n4 5\n")


def trace():
    """A real trace of a small program, as the target reads it: the files of
    the directory joined by form feeds."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "p.tsl"), "w") as f:
            f.write("define(x, random_normal([64, 32], seed=1))\n"
                    "define(f, a, sum(tanh(a @ transpose(a)), axis=0))\n"
                    "print(sum(f(x)) + sum(f(x * 2.0)))\n")
        cli = os.path.join(ROOT, "build", "tessera")
        subprocess.run([cli, "eval", "--trace", "t", "p.tsl"], check=True, cwd=d,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(d, "t", "locality-0.trace"), "rb") as f:
            one = f.read()
    write("trace", "one_locality", one)
    # A two-locality run: the second file from another run's id, and a run file.
    other = one.replace(b"locality\t0\t1", b"locality\t1\t2")
    write("trace", "two_localities", one + b"\f" + other + b"\f\frun\tRUN\nlocalities\t4\n")
    write("trace", "truncated", one[: len(one) // 2])
    # The records a one-process program leaves out: communication, steps, strings, sources.
    extra = (b"string\t0\tall_reduce(sum)\nstring\t1\tp.tsl:2:1\n"
             b"source\tp.tsl\tdefine(x, 1)\\nx\n"
             b"c\t100\t900\t4096\t-1\t0\t1\nc\t200\t300\t8\t1\t0\t1\n"
             b"s\t0\t1000\t1\ns\t1000\t2000\t2\n")
    write("trace", "records", one.replace(b"\nend\t", b"\n" + extra + b"end\t"))


def weights():
    """Model files and a checkpoint, as the target reads them: the header,
    a NUL byte, the data section (the target adds magic, length and SHA-256);
    and a checkpoint folder: its manifest, a NUL byte, the state's bytes."""
    import json

    from tessera import nn
    from tessera.nn import checkpoints

    model = nn.Sequential([nn.Dense(3, activation="relu"), nn.Dense(2)], input_shape=(2,))
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    model.fit(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32), epochs=1, verbose=0,
              checkpoint_dir=False)
    inp = nn.Input((4,))  # a functional graph with operations (prim nodes)
    functional = nn.Model(inp, nn.Dense(2)(np.tanh(inp[:, :3] * 2.0 + 1.0)))
    with tempfile.TemporaryDirectory() as d:
        for name, save in (("model", model.save), ("checkpoint", model.save_checkpoint),
                           ("weights", model.save_weights), ("functional", functional.save)):
            path = os.path.join(d, name)
            save(path)
            with open(path, "rb") as f:
                blob = f.read()
            (length,) = struct.unpack("<Q", blob[8:16])
            write("weights", name, blob[16:16 + length] + b"\0" + blob[16 + length:-32])
        model.fit(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32), epochs=1,
                  verbose=0, checkpoint_dir=os.path.join(d, "ck"))
        run = glob.glob(os.path.join(d, "ck", "fit*"))[0]  # the fit's run folder
        _, manifest, state = checkpoints.newest_checkpoint(run, warn=False)
        write("weights", "folder", json.dumps(manifest).encode() + b"\0" + state)


if __name__ == "__main__":
    targets = sys.argv[1:] or ["tsl", "npy", "csv", "idx", "txt", "trace", "weights"]
    for t in targets:
        shutil.rmtree(os.path.join(CORPUS, t), ignore_errors=True)
        globals()[t]()
        if t == "tsl":
            tsl_dict()
