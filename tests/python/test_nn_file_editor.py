"""tessera.nn.saving.KerasFileEditor on tessera's own files: a saved model's
weights by layer path, edited (rename_object, delete_object, add_object,
delete_weight, add_weights), written (save, resave_weights) and loaded by path
into the edited architecture, against the oracle of the same model edited in
memory; compare() against what load_weights accepts; nested models' paths as
model.weights gives them; and the file as untrusted input (links, checksums,
sizes, classes), each refusal named."""

import hashlib
import json
import os
import struct

import numpy as np
import pytest

import tessera.nn as tn
from tessera.nn import distillation as dist
from tessera.nn import weights_file
from tessera.nn.saving import KerasFileEditor


def _model(spec, seed=0):
    """A functional model of Dense layers: spec = [(name, units, use_bias)]."""
    i = tn.Input(shape=(4,))
    h = i
    for name, units, bias in spec:
        h = tn.layers.Dense(units, use_bias=bias, name=name, activation="tanh")(h)
    return tn.Model(i, h, seed=seed)


ORIGINAL = [("a", 5, True), ("b", 3, True), ("c", 2, True)]
EDITED = [("a", 5, False), ("b2", 3, True), ("d", 2, False)]


def _saved(tmp_path, spec=ORIGINAL, fit=True):
    m = _model(spec)
    m.compile(tn.optimizers.Adam(0.01), "mse")
    if fit:  # (the optimizer's state is in the file too: not a weight)
        r = np.random.RandomState(0)
        m.fit(r.randn(8, 4).astype("float32"), r.randn(8, spec[-1][1]).astype("float32"),
              epochs=1, verbose=0)
    path = str(tmp_path / "model.keras")
    m.save(path)
    return m, path


def _by_path(model):
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


def test_weights_dict_is_nested_by_layer_path(tmp_path):
    m, path = _saved(tmp_path)
    e = KerasFileEditor(path)
    assert list(e.weights_dict) == ["a", "b", "c"]
    flat = {f"{o}/{k}": v for o, ws in e.weights_dict.items() for k, v in ws.items()}
    held = _by_path(m)
    assert list(flat) == list(held)
    for k in held:
        np.testing.assert_array_equal(flat[k], held[k])


def test_edited_file_loads_as_the_model_edited_in_memory(tmp_path):
    original, path = _saved(tmp_path)
    w = _by_path(original)
    r = np.random.RandomState(5)
    new_kernel = r.randn(3, 2).astype("float32")
    new_bias = r.randn(3).astype("float32")
    e = KerasFileEditor(path)
    e.rename_object("b", "b2")
    e.delete_object("c")
    e.add_object("d", {"kernel": new_kernel})
    e.delete_weight("a", "bias")
    e.add_weights("b2", {"bias": new_bias})  # replaces the saved one
    out = str(tmp_path / "edited.weights")
    e.save(out)
    loaded = _model(EDITED, seed=1)
    loaded.load_weights(out)
    # the oracle: the new architecture given the same arrays in memory
    oracle = _model(EDITED, seed=2)
    by_name = {"a/kernel": w["a/kernel"], "b2/kernel": w["b/kernel"], "b2/bias": new_bias,
               "d/kernel": new_kernel}
    for v in oracle.weights:
        v.assign(by_name[v.path])
    for a, b in zip(oracle.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    x = r.randn(6, 4).astype("float32")
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), oracle.predict(x, verbose=0))
    e.resave_weights(out)  # the same file again
    loaded.load_weights(out)
    # the edited file opens again, as it was written
    again = KerasFileEditor(out)
    assert list(again.weights_dict) == ["a", "b2", "d"]
    np.testing.assert_array_equal(again.weights_dict["d"]["kernel"], new_kernel)


def test_compare_agrees_with_what_load_weights_accepts(tmp_path, capsys):
    original, path = _saved(tmp_path)
    e = KerasFileEditor(path)
    same = _model(ORIGINAL, seed=3)
    result = e.compare(same)
    assert result == {"status": "success", "error_count": 0,
                      "match_count": len(same.weights)}
    same.load_weights(path)
    for spec in (EDITED, [("a", 5, True), ("b", 4, True), ("c", 2, True)],
                 ORIGINAL + [("e", 2, True)]):
        other = _model(spec)
        result = e.compare(other)
        assert result["status"] == "error" and result["error_count"] > 0
        assert result["match_count"] < len(other.weights)
        e.save(str(tmp_path / "w"))
        with pytest.raises(ValueError, match=r"\[load_weights\].*nothing was loaded"):
            other.load_weights(str(tmp_path / "w"))
    assert "missing from" in capsys.readouterr().out
    with pytest.raises(TypeError, match=r"\[KerasFileEditor.compare\] reference_model"):
        e.compare("model")


def test_nested_models_paths_as_model_weights(tmp_path):
    L = tn.layers
    teacher = tn.Sequential([tn.Input(shape=(4,)), L.Dense(6, name="dense"),
                             L.Dense(3, name="out")], name="teacher")
    student = tn.Sequential([tn.Input(shape=(4,)), L.Dense(3, name="dense")], name="student")
    d = dist.Distiller(teacher, student, dist.LogitsDistillation())
    path = str(tmp_path / "d.keras")
    d.save(path)
    e = KerasFileEditor(path)
    assert list(e.weights_dict) == ["teacher", "student"]
    flat = {f"{t}/{o}/{k}": v for t, objs in e.weights_dict.items()
            for o, ws in objs.items() for k, v in ws.items()}
    assert list(flat) == list(_by_path(d))
    with pytest.raises(ValueError, match=r"'dense' occurs 2 times in the file; give its whole"):
        e.delete_object("dense")
    e.delete_object("teacher/dense")
    assert list(e.weights_dict["teacher"]) == ["out"]
    assert "dense" in e.weights_dict["student"]
    e.summary()


def test_edits_refused_by_name(tmp_path):
    _, path = _saved(tmp_path, fit=False)
    e = KerasFileEditor(path)
    with pytest.raises(ValueError, match=r"\[KerasFileEditor\] rename_object: the name 'zz' is "
                                         r"not in the file"):
        e.rename_object("zz", "y")
    with pytest.raises(ValueError, match=r"new_name must be a leaf name"):
        e.rename_object("a", "x/y")
    with pytest.raises(ValueError, match=r"'c' is taken beside 'b'"):
        e.rename_object("b", "c")
    with pytest.raises(ValueError, match=r"add_object: 'a' is in the file already"):
        e.add_object("a", {"kernel": np.zeros((1,), "float32")})
    with pytest.raises(ValueError, match=r"the path 'q' is not in the file"):
        e.add_object("q/r", {"kernel": np.zeros((1,), "float32")})
    with pytest.raises(ValueError, match=r"weights must be a dict"):
        e.add_weights("a", [np.zeros(1)])
    with pytest.raises(TypeError, match=r"dtype complex128"):
        e.add_weights("a", {"z": np.zeros(2, complex)})
    with pytest.raises(ValueError, match=r"no weight 'gamma' in 'a'; its weights: \['kernel', "
                                         r"'bias'\]"):
        e.delete_weight("a", "gamma")
    with pytest.raises(ValueError, match=r"the path 'a/x' is not in the file"):
        e.delete_object("a/x")
    for name in ("a", "b", "c"):
        e.delete_object(name)
    with pytest.raises(ValueError, match=r"no weights left"):
        e.save(str(tmp_path / "empty"))


def _crafted(path, header: dict, data: bytes):
    text = json.dumps(header).encode()
    body = weights_file.MAGIC + struct.pack("<Q", len(text)) + text + data
    with open(path, "wb") as f:
        f.write(body + hashlib.sha256(body).digest())


def test_untrusted_files_are_refused(tmp_path):
    m, path = _saved(tmp_path, fit=False)
    link = tmp_path / "link.keras"
    os.symlink(path, link)
    with pytest.raises(ValueError, match=r"is a symbolic link"):
        KerasFileEditor(str(link))
    with pytest.raises(FileNotFoundError, match=r"\[KerasFileEditor\].*no such file"):
        KerasFileEditor(str(tmp_path / "none.keras"))
    blob = bytearray(open(path, "rb").read())
    blob[len(blob) // 2] ^= 0xFF
    bad = tmp_path / "bad.keras"
    bad.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match=r"checksum mismatch"):
        KerasFileEditor(str(bad))
    # a header claiming a tensor larger than the file: refused before any allocation
    huge = {"format": "tessera-weights", "version": 1, "keyed": "path", "tensors": [
        {"name": "a/kernel", "dtype": "float32", "shape": [1 << 30, 1 << 9], "offset": 0,
         "nbytes": (1 << 39) * 4}]}
    _crafted(tmp_path / "huge.keras", huge, b"\0" * 64)
    with pytest.raises(ValueError, match=r"lies outside the data section"):
        KerasFileEditor(str(tmp_path / "huge.keras"))
    # an architecture naming a class tessera does not know: nothing is built
    header = json.loads(json.dumps(weights_file.read_file(path, "t")[1]))
    header["model"]["layers"][0]["class"] = "os.system"
    tensors, _ = weights_file.read_file(path, "t")
    data = b"".join(np.ascontiguousarray(tensors[t["name"]]).tobytes()
                    for t in header["tensors"])
    _crafted(tmp_path / "class.keras", header, data)
    with pytest.raises(ValueError, match=r"names the class os.system"):
        KerasFileEditor(str(tmp_path / "class.keras"))
    m.save_weights(str(tmp_path / "only.weights"))
    with pytest.raises(ValueError, match=r"holds no architecture"):
        KerasFileEditor(str(tmp_path / "only.weights"))


def test_path_keyed_file_with_unknown_paths_loads_nothing(tmp_path):
    m, path = _saved(tmp_path, fit=False)
    e = KerasFileEditor(path)
    e.rename_object("c", "zz")
    out = str(tmp_path / "w")
    e.save(out)
    target = _model(ORIGINAL, seed=9)
    before = [np.array(a) for a in target.get_weights()]
    with pytest.raises(ValueError, match=r"missing \['c/bias', 'c/kernel'\], unexpected "
                                         r"\['zz/bias', 'zz/kernel'\]; nothing was loaded"):
        target.load_weights(out)
    for a, b in zip(before, target.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_save_replaces_a_planted_link_and_leaves_no_temporary(tmp_path):
    _, path = _saved(tmp_path, fit=False)
    e = KerasFileEditor(path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "out.weights"
    os.symlink(victim, target)
    e.save(str(target))
    assert victim.read_text() == "keep me"
    assert not os.path.islink(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras", "out.weights",
                                                          "victim.txt"]
    m2 = _model(ORIGINAL, seed=4)
    m2.load_weights(str(target))


def test_checkpoint_file_opens_without_its_training_state(tmp_path):
    m, _ = _saved(tmp_path)
    path = str(tmp_path / "ckpt.keras")
    m.save_checkpoint(path)
    e = KerasFileEditor(path)
    flat = {f"{o}/{k}": v for o, ws in e.weights_dict.items() for k, v in ws.items()}
    held = _by_path(m)
    assert list(flat) == list(held)  # no optimizer/ or training entries
    for k in held:
        np.testing.assert_array_equal(flat[k], held[k])
