"""Bad input of any kind ends in one of tessera's documented errors, never a
crash, a hang or memory exhaustion: deeply nested programs (C++ parser and the
jit translator), mutated programs."""

import glob
import os
import random
import sys
import textwrap
import threading

import numpy as np
import pytest

import tessera
from tessera import _core

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
LIMIT = 256  # tessera/lang/parser.hpp kMaxExpressionDepth


def _on_small_stack(fn, kb=1024):
    """Runs fn on a thread with a small stack; returns what it raised (or None)."""
    box = {}

    def body():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    old = threading.stack_size(kb * 1024)
    try:
        t = threading.Thread(target=body)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    return box.get("error")


@pytest.mark.parametrize(
    "text",
    [
        "1+(" * 5000 + "1" + ")" * 5000,  # a flat chain 1+1+... is not nested
        "x" + "[0]" * 10000,
        "(" * 5000 + "1" + ")" * 5000,
        "abs(" * 5000 + "1" + ")" * 5000,
        "-" * 10000 + "1",
    ],
    ids=["nested sums", "index", "parentheses", "calls", "unary"],
)
def test_deep_programs_are_compile_errors_even_on_a_small_stack(text):
    err = _on_small_stack(lambda: _core.Program(text, "deep.tsl"))
    assert isinstance(err, _core.CompileError) and isinstance(err, ValueError), err
    msg = str(err)
    assert "[parse] expression nested " in msg and f"the limit is {LIMIT}" in msg, msg
    assert "(at deep.tsl:1:" in msg, msg


def test_the_depth_of_a_chain_is_in_the_message():
    # An index chain nests (a chain of operators does not: test_jit_chains.py).
    with pytest.raises(_core.CompileError, match=r"nested 10000 levels deep: the limit is 256 .*\(at deep.tsl:1:1\)"):
        _core.Program("x" + "[0]" * 9999, "deep.tsl")


def test_programs_at_the_limit_run_on_a_small_stack():
    text = "+".join(["1"] * LIMIT)
    box = {}
    err = _on_small_stack(lambda: box.update(v=_core.Program(text, "ok.tsl").run()))
    assert err is None and box["v"] == LIMIT


def _jit_function(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    return tessera.jit(module.f), path


@pytest.mark.parametrize("terms", [LIMIT + 10, 900])
def test_jit_of_a_deep_expression_is_a_compile_error_naming_the_line(tmp_path, terms):
    f, path = _jit_function(
        tmp_path,
        f"deep_jit_{terms}",
        # - - ... y: nested (a flat chain y + y + ... is not).
        "def f(x):\n    y = x * 2\n    return " + "- " * terms + "y\n",
    )
    with pytest.raises(_core.CompileError, match=rf"nested more than 256 levels deep.*\(at {path.name}:3\)"):
        f(np.ones(3))


def test_jit_at_the_limit_still_works(tmp_path):
    f, _ = _jit_function(
        tmp_path, "deep_jit_ok", "def f(x):\n    return " + " + ".join(["x"] * 200) + "\n"
    )
    np.testing.assert_allclose(f(np.ones(3)), np.full(3, 200.0))


_DEEP_LIST = ("define(x, list()) define(i, 0)\n"
              "while(i < 200000, block(store(x, list(x)), store(i, i + 1)))\n")


def test_a_deep_list_built_in_a_loop_is_freed_and_compared_on_a_small_stack():
    box = {}

    def run():
        box["len"] = _core.Program(_DEEP_LIST + "len(x)", "deep.tsl").run()
        box["eq"] = _core.Program(_DEEP_LIST + "x == list(x)[0]", "deep.tsl").run()

    assert _on_small_stack(run) is None
    assert box == {"len": 1, "eq": True}


def test_a_deep_list_returned_to_python_is_a_value_error_naming_the_limit():
    err = _on_small_stack(lambda: _core.Program(_DEEP_LIST + "x", "deep.tsl").run())
    assert isinstance(err, ValueError), err
    assert "a list nested more than 256 levels deep" in str(err), err


def test_jit_deep_list_from_a_loop(tmp_path):
    f, path = _jit_function(tmp_path, "deep_list_jit", """\
        def f(n):
            x = []
            for i in range(n):
                x = [x, i]
            return len(x)


        def g(n):
            x = []
            for i in range(n):
                x = [x, i]
            return str(x)
        """)
    assert _on_small_stack(lambda: f(100000)) is None
    assert f(100000) == 2
    g = tessera.jit(sys.modules["deep_list_jit"].g)
    with pytest.raises(ValueError, match=rf"nested more than 256 levels deep.*\(at {path.name}:12\)"):
        g(100000)


# Errors a program may raise (tessera's documented exception classes).
_DOCUMENTED = (ValueError, TypeError, IndexError, KeyError, RuntimeError, MemoryError,
               ZeroDivisionError, NotImplementedError)


def test_mutated_examples_compile_or_fail_cleanly():
    """A few seconds of random truncations and byte edits of examples/*.tsl,
    through Program (parse and compile; nothing runs)."""
    files = sorted(glob.glob(os.path.join(ROOT, "examples", "*.tsl")))
    assert files
    sources = [open(p, encoding="utf-8").read() for p in files]
    rnd = random.Random(99)
    alphabet = "()[]{},=:+-*/%@!<>&|\"'.#\\ \n\t0123456789abcxyz_" + "\x00\xff"
    count = 0
    for trial in range(1500):
        text = rnd.choice(sources)
        kind = trial % 4
        if kind == 0:
            text = text[: rnd.randrange(len(text) + 1)]
        else:
            chars = list(text)
            for _ in range(rnd.randint(1, 6)):
                pos = rnd.randrange(len(chars) + 1)
                c = rnd.choice(alphabet)
                op = rnd.randrange(3)
                if op == 0 and pos < len(chars):
                    chars[pos] = c
                elif op == 1:
                    chars.insert(pos, c * rnd.choice([1, 1, 1, 300]))
                elif pos < len(chars):
                    del chars[pos]
            text = "".join(chars)
        try:
            _core.Program(text, "mutant.tsl")
        except _DOCUMENTED as e:
            assert str(e).startswith("["), (text, e)
        count += 1
    assert count == 1500


def test_an_unknown_name_of_a_megabyte_fails_in_milliseconds():
    import time

    t0 = time.perf_counter()
    with pytest.raises(_core.CompileError, match=r"unknown name 'a{60}\.\.\. \(1048576 characters\)' \(at big.tsl:1:1\)"):
        _core.Program("a" * (1 << 20), "big.tsl")
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("op", ["file_read_npy", "file_read_csv", "file_read_txt", "file_read_idx", "load"])
def test_readers_refuse_devices_at_once(op):
    with pytest.raises(ValueError, match=rf"\[{op}\] cannot read '/dev/zero': it is a character device, not a regular file"):
        _core.Program(f'{op}("/dev/zero")').run()


def test_readers_refuse_files_over_the_limit(tmp_path, monkeypatch):
    p = tmp_path / "a.npy"
    np.save(p, np.zeros(1000))
    monkeypatch.setenv("TESSERA_MAX_FILE_BYTES", "1000")
    with pytest.raises(ValueError, match=r"it has 8128 bytes, more than the limit of 1000 .*TESSERA_MAX_FILE_BYTES"):
        _core.Program(f'file_read_npy("{p}")').run()
    monkeypatch.delenv("TESSERA_MAX_FILE_BYTES")
    assert _core.Program(f'file_read_npy("{p}")').run().shape == (1000,)


def test_trace_exports_replace_planted_links_instead_of_following_them(tmp_path):
    d = tmp_path / "t"
    with tessera.trace(d):
        _core.Program("sum(arange(10))").run()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (d / "report.html").symlink_to(victim)
    paths = tessera.trace(d).export()
    assert victim.read_text() == "precious"
    assert not os.path.islink(paths["html"]) and "<html" in open(paths["html"]).read()
    assert not [p for p in os.listdir(d) if p.endswith(".tmp")]


def _weights_fuzz_cases(blob, rnd, n):
    """Mutants of a weights file: bit flips (checksum left wrong, or made right
    again), and header edits (JSON values replaced, bytes flipped) re-checksummed."""
    import hashlib
    import json
    import struct

    hlen = struct.unpack("<Q", blob[8:16])[0]
    header = json.loads(blob[16:16 + hlen])
    data = blob[16 + hlen:-32]
    junk = [None, True, -1, 0, 2 ** 70, -(2 ** 63), 1e308, float("nan"), "", "x" * 300, "float32",
            [], {}, [1, 2], {"a": 1}, [[[[[[[[[[0]]]]]]]]]], "int64", 3.5, [2 ** 40] * 3]

    def seal(body):
        return body + hashlib.sha256(body).digest()

    def containers(v, path=()):
        yield path, v
        if isinstance(v, dict):
            for k, x in v.items():
                yield from containers(x, path + (k,))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                yield from containers(x, path + (i,))

    spots = list(containers(header))
    for i in range(n):
        kind = i % 4
        if kind == 0:  # bit flips anywhere, checksum not fixed
            b = bytearray(blob)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            yield bytes(b)
        elif kind == 1:  # bit flips before the checksum, checksum fixed
            b = bytearray(blob[:-32])
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
            yield seal(bytes(b))
        else:  # a header value replaced (or a key removed), re-checksummed
            h = json.loads(json.dumps(header))
            path, _ = rnd.choice(spots[1:])
            target = h
            for p in path[:-1]:
                target = target[p]
            if kind == 3 and isinstance(target, dict):
                del target[path[-1]]
            else:
                target[path[-1]] = rnd.choice(junk)
            text = json.dumps(h).encode()
            yield seal(b"TSRWGHT1" + struct.pack("<Q", len(text)) + text + data)


def test_weights_files_fuzzed_raise_only_value_error(tmp_path):
    from tessera import nn
    from tessera.nn import saving

    model = nn.Sequential([nn.Dense(4, activation="relu"), nn.Dense(2)], input_shape=(3,))
    model.compile(optimizer="adam", loss="mse")
    model.fit(np.ones((8, 3), np.float32), np.ones((8, 2), np.float32), epochs=1, verbose=0)
    good, checkpoint = tmp_path / "good.tsm", tmp_path / "good.ckpt"
    model.save(good)
    model.save_checkpoint(checkpoint)
    path = tmp_path / "mutant.tsm"
    rnd = random.Random(99)
    outcomes = {"ok": 0, "error": 0}
    mutants = list(_weights_fuzz_cases(good.read_bytes(), rnd, 300)) + \
        list(_weights_fuzz_cases(checkpoint.read_bytes(), rnd, 300))
    loads = (lambda: saving.read_file(path, "fuzz"), lambda: nn.load_model(path),
             lambda: model.load_weights(path), lambda: saving.load_training_state(model, path))
    for i, mutant in enumerate(mutants):
        path.write_bytes(mutant)
        for load in loads:
            try:
                load()
                outcomes["ok"] += 1
            except (ValueError, FileNotFoundError) as e:
                assert str(e).startswith("["), (i, e)
                outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0, outcomes


def _with_header(path, edit):
    """The weights file at path with its JSON header changed by edit(header)."""
    import hashlib
    import json
    import struct

    blob = path.read_bytes()
    (length,) = struct.unpack("<Q", blob[8:16])
    header = json.loads(blob[16:16 + length])
    edit(header)
    text = json.dumps(header).encode()
    body = blob[:8] + struct.pack("<Q", len(text)) + text + blob[16 + length:-32]
    path.write_bytes(body + hashlib.sha256(body).digest())


@pytest.mark.parametrize("edit, message", [
    # (symbolic tensors of 800 TB: refused by their shapes, before anything is allocated)
    (lambda h: h["model"]["layers"][0]["config"]["__dict__"].update(units=10 ** 14),
     r"the architecture makes a weight 'kernel' of shape \(2, 100000000000000\) past the 17 "
     r"weight values in the file"),
    (lambda h: h["model"].update(input_shape=[10 ** 14]),
     r"the Sequential model's input has the shape \(100000000000000,\): 100000000000000 values "
     r"per sample, past the 16777216 a loaded model may declare"),
    (lambda h: h["model"].update(input_shape=[10 ** 6]),
     r"the architecture makes a weight 'kernel' of shape \(1000000, 3\) past the 17 weight "
     r"values in the file"),
], ids=["units", "input", "weights"])
def test_a_crafted_architecture_is_refused_before_it_exhausts_memory(tmp_path, edit, message):
    """A file whose architecture makes weights (or symbolic tensors) far
    larger than the file holds is a ValueError, not a MemoryError or an
    allocation of gigabytes."""
    from tessera import nn

    model = nn.Sequential([nn.Dense(3, activation="relu"), nn.Dense(2)], input_shape=(2,))
    path = tmp_path / "crafted.tsm"
    model.save(path)
    _with_header(path, edit)
    with pytest.raises(ValueError, match=r"\[load_model\] .*crafted.tsm: (" + message + ")"):
        nn.load_model(path)


def test_dataset_from_npy_refuses_devices(tmp_path):
    from tessera.data import Dataset

    with pytest.raises(ValueError, match=r"\[Dataset.from_npy\] '/dev/zero' is not a regular file"):
        Dataset.from_npy("/dev/zero")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Dataset.from_npy(tmp_path / "none.npy")
