"""Loading a model or weights file never executes anything from it (issue 27):
crafted files that name internal functions, arbitrary classes or effectful
operations are refused with a ValueError, under an audit hook that fails on
any write, import, process or code compilation; declared sizes are checked
before anything of that size is allocated; duplicate tensor names are
refused; and saving over a file keeps its mode."""

import hashlib
import json
import os
import stat
import struct
import sys
import tracemalloc

import numpy as np
import pytest

import tessera
from tessera import nn
from tessera.nn import checkpoints, saving

# ----------------------------------------------------------------- audit hook

# Audit events loading must never raise (besides "open" for writing).
FORBIDDEN_EVENTS = ("import", "exec", "compile", "subprocess.Popen", "os.system", "os.exec",
                    "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.startfile",
                    "os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir",
                    "os.mkdir", "os.symlink", "os.link", "os.chmod", "os.truncate",
                    "shutil.", "ctypes.", "socket.", "urllib.", "http.", "pty.", "code.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_SEEN: list = []
_WATCHING = [False]


def _audit(event, args):
    if not _WATCHING[0]:
        return
    if event == "open":
        mode, flags = (args[1], args[2]) if len(args) > 2 else (args[1], 0)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing:
            _SEEN.append((event, repr(args)[:200]))
    elif event.startswith(FORBIDDEN_EVENTS):
        _SEEN.append((event, repr(args)[:200]))


_INSTALLED = []


def watching(fn, *args, **kwargs):
    """fn(*args, **kwargs) under the audit hook: (result or exception, the
    forbidden events it raised). The hook is installed once per process (an
    audit hook cannot be removed) and records only inside this call."""
    if not _INSTALLED:
        sys.addaudithook(_audit)
        _INSTALLED.append(True)
    _SEEN.clear()
    _WATCHING[0] = True
    try:
        try:
            out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - returned to the test
            out = e
    finally:
        _WATCHING[0] = False
    return out, list(_SEEN)


# ----------------------------------------------------------------- crafting files


def _edit(path, edit):
    """Rewrites the weights file at `path` with its JSON header changed by
    edit(header) and a recomputed SHA-256 (a crafted, not a damaged file)."""
    blob = path.read_bytes()
    (length,) = struct.unpack("<Q", blob[8:16])
    header = json.loads(blob[16:16 + length])
    edit(header)
    text = json.dumps(header).encode()
    body = blob[:8] + struct.pack("<Q", len(text)) + text + blob[16 + length:-32]
    path.write_bytes(body + hashlib.sha256(body).digest())


def _sequential(path):
    model = nn.Sequential([nn.Dense(3, activation="relu"), nn.Dense(2)], input_shape=(2,))
    model.compile("adam", "mse")
    model.save(path)
    return model


def _functional(path):
    inp = nn.Input((3,))
    out = nn.Dense(2)(inp * 2.0)
    model = nn.Model(inp, out)
    model.save(path)
    return model


@pytest.fixture(scope="module", autouse=True)
def _warm(tmp_path_factory):
    """Loads legitimate files once, so that every module loading uses is
    imported before the hook watches (an import while watching is a finding)."""
    folder = tmp_path_factory.mktemp("warm")
    _sequential(folder / "s.tsm")
    _functional(folder / "f.tsm")
    nn.load_model(folder / "s.tsm")
    nn.load_model(folder / "f.tsm")
    nn.load_model(folder / "s.tsm").load_weights(folder / "s.tsm")


def _refused(path, *patterns):
    out, events = watching(nn.load_model, path)
    assert events == [], events
    assert isinstance(out, ValueError), out
    text = str(out)
    assert text.startswith(f"[load_model] {path}"), text
    for p in patterns:
        assert p in text, (p, text)
    return text


# ----------------------------------------------------------------- 1. nothing runs


def test_an_object_naming_an_internal_file_writer_is_refused(tmp_path):
    """The attack of the issue: an __object__ naming tessera.nn.saving's
    save_file wrote a file (a .pth in site-packages) while loading."""
    path, target = tmp_path / "evil.tsm", tmp_path / "evil.pth"
    _sequential(path)
    planted = {"__object__": "save_file", "module": "tessera.nn.saving",
               "config": {"__dict__": {"path": str(target), "tensors": {"__dict__": {}},
                                       "meta": {"__dict__": {}}, "where": "x"}}}
    _edit(path, lambda h: h["model"]["layers"][0]["config"]["__dict__"].update(
        kernel_initializer=planted))
    text = _refused(path, "'save_file'", "custom_objects", "register_keras_serializable",
                    "could run any code")
    assert "tessera.nn.saving" in text
    assert not target.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tessera")]


def test_a_layer_class_pointing_at_an_internal_module_is_refused(tmp_path):
    path, target = tmp_path / "evil.tsm", tmp_path / "written.tsw"
    _sequential(path)
    planted = {"class": "save_file", "module": "tessera.nn.saving",
               "config": {"__dict__": {"path": str(target), "tensors": {"__dict__": {}},
                                       "meta": {"__dict__": {}}, "where": "x"}}}
    _edit(path, lambda h: h["model"]["layers"].__setitem__(1, planted))
    _refused(path, "a layer names the class save_file", "custom_objects")
    assert not target.exists()


@pytest.mark.parametrize("name, module", [
    ("Model", "tessera.nn.model"), ("Layer", "tessera.nn.layers"), ("system", "os"),
    ("Dense", "os"), ("FunctionLoss", "tessera.nn.losses")])
def test_only_registered_classes_are_built(tmp_path, name, module):
    """Base classes, other modules' names and tessera's non-public classes
    are not in the registry."""
    path = tmp_path / "m.tsm"
    _sequential(path)
    _edit(path, lambda h: h["model"]["layers"][0].update({"class": name, "module": module}))
    _refused(path, f"class {name}", "custom_objects")


def test_a_prim_node_naming_file_write_csv_is_refused(tmp_path):
    path, target = tmp_path / "evil.tsm", tmp_path / "written.csv"
    _functional(path)

    def plant(h):
        node = next(n for n in h["model"]["nodes"] if n["op"] == "prim")
        node.update(fn="file_write_csv", args=[str(target), {"t": 0}], kwargs={})

    _edit(path, plant)
    _refused(path, "'file_write_csv'", "pure operations")
    assert not target.exists()


@pytest.mark.parametrize("fn", ["print", "save", "random_uniform", "set_seed", "zeros",
                                "allreduce", "no_such_operation"])
def test_effectful_or_unknown_operations_are_refused(tmp_path, fn):
    path = tmp_path / "m.tsm"
    _functional(path)

    def plant(h):
        next(n for n in h["model"]["nodes"] if n["op"] == "prim")["fn"] = fn

    _edit(path, plant)
    _refused(path, f"the operation {fn!r}")


def test_an_object_in_an_operations_arguments_is_refused(tmp_path):
    path = tmp_path / "m.tsm"
    _functional(path)

    def plant(h):
        node = next(n for n in h["model"]["nodes"] if n["op"] == "prim")
        node["args"][1] = {"__object__": "Zeros", "module": "tessera.nn.initializers",
                           "config": {"__dict__": {}}}

    _edit(path, plant)
    _refused(path, "operations take only tensors")


def test_the_compile_settings_name_only_registered_classes(tmp_path):
    """Losses were found by getattr on the losses module: any function of it
    was called with the file's arguments."""
    path = tmp_path / "m.tsm"
    _sequential(path)
    _edit(path, lambda h: h["compile"]["losses"].__setitem__(
        0, {"class": "get", "config": {"__dict__": {"loss": "mse"}}}))
    _refused(path, "the compiled loss names the class get")


def test_legitimate_files_load_under_the_hook(tmp_path):
    """The hook itself sees nothing when ordinary files load (and the
    registry holds every class tessera saves)."""
    a, b = tmp_path / "s.tsm", tmp_path / "f.tsm"
    m1, m2 = _sequential(a), _functional(b)
    x = np.ones((4, 2), np.float32)
    for path, model, xs in ((a, m1, x), (b, m2, np.ones((4, 3), np.float32))):
        out, events = watching(nn.load_model, path)
        assert events == [] and not isinstance(out, Exception), (events, out)
        np.testing.assert_array_equal(out.predict(xs), model.predict(xs))
        out, events = watching(model.load_weights, path)
        assert events == [] and not isinstance(out, Exception), (events, out)


def test_a_registered_custom_layer_loads_and_an_unregistered_one_is_refused(tmp_path):
    class Twice(nn.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    inp = nn.Input((3,))
    model = nn.Model(inp, nn.Dense(2)(Twice(3.0)(inp)))
    path = tmp_path / "c.tsm"
    model.save(path)
    _refused(path, "class Twice", "custom_objects={'Twice': ...}")
    back = nn.load_model(path, custom_objects={"Twice": Twice})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(back.predict(x), model.predict(x))
    # a file giving the registered class arguments its constructor lacks
    _edit(path, lambda h: h["model"]["layers"][0]["config"]["__dict__"].update(evil=1))
    with pytest.raises(ValueError, match=r"Twice cannot be built from the file's arguments"):
        nn.load_model(path, custom_objects={"Twice": Twice})


# ----------------------------------------------------------------- 2. budgets


def test_a_small_file_declaring_a_large_input_allocates_nothing_large(tmp_path):
    """A 1 KB file declaring an input of 3 million values per sample made
    stand-ins of 5 samples of it (60 MB; 3.1 GB for larger shapes) before
    the weights' mismatch was seen."""
    path = tmp_path / "big.tsm"
    _functional(path)

    def plant(h):
        h["model"]["nodes"][0]["shape"] = [3_000_000]

    _edit(path, plant)
    assert path.stat().st_size < 2048
    tessera.reset_peak_memory()  # the core's arrays (the graph's operations run there)
    tracemalloc.start()  # Python's and NumPy's
    try:
        with pytest.raises(ValueError, match=r"\[load_model\] .*big.tsm: the architecture makes "
                                             r"a weight 'kernel' of shape \(3000000, 2\)"):
            nn.load_model(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    # the graph's `inp * 2.0` on stand-ins of 3 million values made 60 MB in
    # the core; on one-value stand-ins it makes one value per batch
    core_peak = tessera.memory_stats()["peak_live_bytes"]
    assert core_peak < 1 << 20, core_peak


def test_a_declared_input_past_the_budget_is_refused_by_its_shape(tmp_path):
    path = tmp_path / "big.tsm"
    _functional(path)
    _edit(path, lambda h: h["model"]["nodes"][0].update(shape=[10 ** 5, 10 ** 5]))
    tracemalloc.start()
    try:
        _refused(path, "node 0 (an Input) has the shape (100000, 100000): 10000000000 values "
                       "per sample, past the")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


def test_an_operation_whose_result_would_pass_the_budget_is_refused_before_it_runs(
        tmp_path, monkeypatch):
    """An outer product of a moderate input with itself: the result's size
    is bounded from the operands' shapes before the stand-ins are made."""
    inp = nn.Input((1000,))
    outer = inp[:, :, None] * inp[:, None, :]  # stand-ins of 5 million values
    model = nn.Model(inp, nn.Dense(2)(np.mean(outer, axis=2)))
    path = tmp_path / "outer.tsm"
    model.save(path)
    monkeypatch.setattr(saving, "MAX_SAMPLE_VALUES", 100_000)
    tracemalloc.start()
    try:
        _refused(path, "(multiply of [(None, 1000, 1), (None, 1, 1000)]) could make up to "
                       "3000000 values")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak
    monkeypatch.setattr(saving, "MAX_SAMPLE_VALUES", 1 << 22)
    monkeypatch.setattr(saving, "MAX_STANDIN_VALUES", 1_000_000)
    _refused(path, "for the whole graph")


def test_graph_sizes_are_bounded(tmp_path, monkeypatch):
    path = tmp_path / "m.tsm"
    _functional(path)
    monkeypatch.setattr(saving, "MAX_NODES", 2)
    _refused(path, "nodes, past the")
    monkeypatch.setattr(saving, "MAX_NODES", 100)
    _edit(path, lambda h: h["model"]["layers"][0]["config"]["__dict__"].update(
        name={"__tuple__": json.loads("[" * 100 + "]" * 100)}))
    _refused(path, "nested more than 64 levels")


# ----------------------------------------------------------------- 3. duplicate names


def test_a_weights_file_naming_a_tensor_twice_is_refused(tmp_path):
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,))
    path = tmp_path / "w.tsw"
    model.save_weights(path)

    def twice(h):
        h["tensors"].append(dict(h["tensors"][0]))

    _edit(path, twice)
    name = json.loads(path.read_bytes()[16:16 + struct.unpack("<Q", path.read_bytes()[8:16])[0]]
                      )["tensors"][0]["name"]
    with pytest.raises(ValueError, match=rf"\[load_weights\] .*w.tsw: the tensor '{name}' is "
                                         r"named twice; nothing was loaded"):
        model.load_weights(path)


# ----------------------------------------------------------------- 4. file modes


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_saving_over_a_file_keeps_its_mode(tmp_path, mode):
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,))
    path = tmp_path / "m.tsm"
    path.write_bytes(b"old")
    os.chmod(path, mode)
    model.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    model.save_weights(path)
    assert stat.S_IMODE(path.stat().st_mode) == mode


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_mode_open_would_give(tmp_path, umask):
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,))
    old = os.umask(umask)
    try:
        model.save(tmp_path / "new.tsm")
        with open(tmp_path / "plain", "wb"):
            pass
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
    assert want == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "new.tsm").stat().st_mode) == want


# ----------------------------------------------------------------- 5. checkpoints, resume


def test_reading_checkpoints_and_resuming_run_nothing(tmp_path):
    """fit(resume_from=...) and the checkpoint folder readers under the hook."""
    model = nn.Sequential([nn.Dense(2)], input_shape=(2,))
    model.compile("sgd", "mse")
    x, y = np.ones((4, 2), np.float32), np.ones((4, 2), np.float32)
    model.fit(x, y, epochs=1, verbose=0, checkpoint_dir=tmp_path / "ck")
    model.save_checkpoint(tmp_path / "c.ckpt")
    out, events = watching(saving.load_training_state, model, tmp_path / "c.ckpt")
    assert events == [] and not isinstance(out, Exception), (events, out)
    model.fit(x, y, epochs=2, verbose=0, checkpoint_dir=False)  # programs made, modules imported
    out, events = watching(model.fit, x, y, epochs=2, verbose=0, checkpoint_dir=False,
                           resume_from=tmp_path / "c.ckpt")
    assert events == [] and not isinstance(out, Exception), (events, out)
    run = next((tmp_path / "ck").glob("fit*"))  # the fit's run folder of ckpt-<step> folders
    out, events = watching(checkpoints.newest_checkpoint, run, warn=False)
    assert events == [] and out is not None and not isinstance(out, Exception), (events, out)
    path, manifest, _ = out
    out, events = watching(checkpoints.read_manifest, path)
    assert events == [] and isinstance(out, dict), (events, out)
    out, events = watching(checkpoints.read_state, path, manifest)
    assert events == [] and isinstance(out, bytes), (events, out)


def test_a_graph_of_numpy_operations_round_trips(tmp_path):
    """The allow-list holds what symbolic tensors record for ordinary NumPy
    code (operators, ufuncs, reductions, indexing, joins, products)."""
    a, b = nn.Input((4,)), nn.Input((4,))
    h = np.tanh(a * 2.0 + 1.0) - np.abs(b) / (1.0 + b ** 2)
    h = np.where(h > 0, h, 0.1 * h) + np.clip(a, -1.0, 1.0)
    m = np.mean(h, axis=-1, keepdims=True)
    h = np.concatenate([h - m, np.sqrt(np.maximum(h, 0.0)), a[:, ::-1]], axis=-1)
    h = np.expand_dims(h, 1).reshape((-1, 3, 4))
    h = np.einsum("bij,bkj->bik", h, h).sum(axis=-1) + (h @ np.ones((4, 2))).max(axis=-1)
    h = np.stack([h, h.T.T], axis=1)[:, 0]
    model = nn.Model([a, b], nn.Dense(2)(h))
    path = tmp_path / "numpy.tsm"
    model.save(path)
    back, events = watching(nn.load_model, path)
    assert events == [] and not isinstance(back, Exception), (events, back)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(5, 4)).astype(np.float32) for _ in range(2)]
    np.testing.assert_array_equal(back.predict(xs), model.predict(xs))


def test_a_literal_list_in_an_operation_counts_every_value(tmp_path, monkeypatch):
    """A nested literal list broadcast against a tensor: its extents are not
    trusted, the bound is the product of the operands' sizes."""
    path = tmp_path / "m.tsm"
    _functional(path)

    def plant(h):
        next(n for n in h["model"]["nodes"] if n["op"] == "prim")["args"][1] = [[2.0]] * 5000

    _edit(path, plant)
    monkeypatch.setattr(saving, "MAX_SAMPLE_VALUES", 1000)
    _refused(path, "node 1 (multiply of [(None, 3)]) could make up to 45000 values")
