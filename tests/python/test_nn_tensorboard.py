"""keras.callbacks.TensorBoard's histograms, images, graph, embeddings and
profiled batches (issue 30). The files are read back by TensorBoard itself
(EventAccumulator, `tensorboard --inspect`); what is in them is compared with
what Keras 3's own callback logs for the same model, weights and data (its
tf.summary calls captured by a stand-in, TensorFlow not being installed), with
TensorBoard's NumPy histogram (histogram_pb) and with NumPy."""

import contextlib
import glob
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import tessera
import tessera.nn as nn
from tessera.nn import _tfevents as T

os.environ["KERAS_BACKEND"] = "jax"  # (as conftest's keras fixture: the oracle, never skipped)
import keras  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator)
from tensorboard.plugins.graph import keras_util  # noqa: E402
from tensorboard.plugins.histogram.summary_v2 import histogram_pb  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 6, 6, 1)).astype(np.float32)
Y = RNG.normal(size=(48, 1)).astype(np.float32)
XV = RNG.normal(size=(16, 6, 6, 1)).astype(np.float32)
YV = RNG.normal(size=(16, 1)).astype(np.float32)


def _accumulator(folder):
    ea = EventAccumulator(str(folder), size_guidance={
        k: 0 for k in ("compressedHistograms", "images", "audio", "scalars", "histograms",
                       "tensors")})
    ea.Reload()
    return ea


def _reference_buckets(data, buckets=30):
    return tensor_util.make_ndarray(histogram_pb("h", data, buckets).value[0].tensor)


# ----------------------------------------------------------------- histograms, PNG, pixels

@pytest.mark.parametrize("data, buckets", [
    (RNG.normal(size=(7, 5)).astype(np.float32), 30),
    (RNG.uniform(-3, 3, size=1000), 30),
    (RNG.normal(size=200), 1),
    (RNG.normal(size=200), 7),
    (np.arange(-5, 6), 30),                  # integers, values on the edges
    (np.full((3, 4), 2.5, np.float32), 30),  # all equal
    (np.full(1, -1.0), 5),
    (np.zeros((0, 3)), 30),                  # empty
])
def test_histogram_buckets_are_tensorflows(data, buckets):
    got = T.histogram_buckets(data, buckets)
    assert got.shape == (buckets, 3) and got.dtype == np.float64
    np.testing.assert_array_equal(got, _reference_buckets(data, buckets))
    flat = np.asarray(data, np.float64).ravel()
    assert got[:, 2].sum() == flat.size
    if flat.size and flat.min() < flat.max():
        counts, edges = np.histogram(flat, bins=buckets)
        np.testing.assert_array_equal(got[:, 2], counts)
        np.testing.assert_allclose(got[:, 0], edges[:-1], rtol=1e-12, atol=1e-12)
        assert got[-1, 1] == flat.max() and got[0, 0] == flat.min()


def _decode_png(data):
    """(pixels [h, w, c], header) of an 8-bit PNG with unfiltered rows, checked
    chunk by chunk."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat, header = 8, b"", None
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        assert struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    assert kind == b"IEND"
    w, h, depth, color, _, _, interlace = header
    c = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    assert depth == 8 and interlace == 0
    rows = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * c)
    assert not rows[:, 0].any()  # filter 0
    return rows[:, 1:].reshape(h, w, c), header


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 1), (4, 3, 2), (6, 2, 3), (3, 9, 4)])
def test_png_decodes_to_its_pixels(shape):
    pixels = RNG.integers(0, 256, size=shape).astype(np.uint8)
    got, (w, h, *_) = _decode_png(T.encode_png(pixels))
    assert (h, w) == shape[:2]
    np.testing.assert_array_equal(got, pixels)


def test_png_refuses_what_is_no_image():
    with pytest.raises(ValueError, match=r"\[encode_png\] expected a uint8"):
        T.encode_png(np.zeros((2, 2, 5), np.uint8))
    with pytest.raises(ValueError, match=r"\[encode_png\]"):
        T.encode_png(np.zeros((2, 2, 1), np.float32))


def test_image_uint8_is_tf_convert_image_dtype():
    # floats: x * 255.5 in their own precision, saturated to [0, 255], truncated
    x = np.array([-0.5, 0, 0.001, 0.25, 0.5, 0.999, 1, 3, np.nan], np.float32)
    want = [0 if v != v else int(min(max(float(v * np.float32(255.5)), 0), 255)) for v in x]
    assert T.image_uint8(x).tolist() == want
    assert T.image_uint8(np.array([0, 1 << 23, (1 << 31) - 1, -5], np.int32)).tolist() == \
        [0, 1, 255, 0]
    u = np.array([0, 7, 255], np.uint8)
    assert T.image_uint8(u) is u


# ----------------------------------------------------------------- Keras's callback, captured

class _Writer:
    def __init__(self, log, folder):
        self.log, self.kind = log, os.path.basename(folder)

    def as_default(self, step=None):
        @contextlib.contextmanager
        def scope():
            self.log.defaults.append((self, step is not None))
            try:
                yield
            finally:
                self.log.defaults.pop()
        return scope()

    def flush(self):
        pass

    def close(self):
        pass


class _Summary:
    """The tf.summary functions Keras's TensorBoard calls, recording
    (writer, kind, tag, step, data) instead of writing.

    Keras pushes a writer with record_if(step % update_freq == 0) for the
    batch-level summaries and leaves the last one pushed while it writes the
    epoch's (`with writer.as_default()`); under TensorFlow the condition would
    then drop an epoch's scalars and histograms whenever the epoch's last
    batch is not a multiple of update_freq. tessera writes them (what Keras's
    code means to do), and this stand-in applies the condition to the batch
    writer alone."""

    def __init__(self):
        self.defaults, self.conditions, self.records = [], [], []

    def create_file_writer(self, folder):
        return _Writer(self, folder)

    def record_if(self, condition):
        @contextlib.contextmanager
        def scope():
            self.conditions.append(condition)
            try:
                yield
            finally:
                self.conditions.pop()
        return scope()

    def _record(self, kind, tag, data, step):
        if not self.defaults:
            return
        writer, batch_level = self.defaults[-1]
        if batch_level and self.conditions and not self.conditions[-1]():
            return
        self.records.append((writer.kind, kind, tag, int(np.asarray(step)),
                             np.array(keras.ops.convert_to_numpy(data))))

    def scalar(self, tag, data, step):
        self._record("scalar", tag, data, step)

    def histogram(self, tag, data, step):
        self._record("histogram", tag, data, step)

    def image(self, tag, data, step):
        self._record("image", tag, data, step)


def _conv_model(lib):
    inp = lib.Input((6, 6, 1), name="pixels")
    h = lib.layers.Conv2D(4, 3, activation="tanh", name="conv")(inp)
    h = lib.layers.Flatten(name="flat")(h)
    h = lib.layers.Dense(3, activation="tanh", name="hidden")(h)
    out = lib.layers.Dense(1, name="out")(h)
    return lib.Model(inp, out)


def _keras_records(weights, **tb_args):
    m = _conv_model(keras)
    m.set_weights(weights)
    m.compile(keras.optimizers.SGD(0.0), "mse", metrics=["mae"])
    cb = keras.callbacks.TensorBoard("unused", write_graph=False, **tb_args)
    cb._summary_module = _Summary()
    m.fit(X, Y, epochs=3, batch_size=16, shuffle=False, validation_data=(XV, YV), verbose=0,
          callbacks=[cb])
    return cb._summary_module.records


def _tessera_events(folder):
    """{(writer, kind, tag, step): value} of what TensorBoard reads in
    folder/train and folder/validation (the graph left out)."""
    out = {}
    for writer in ("train", "validation"):
        ea = _accumulator(folder / writer)
        for tag in ea.Tags()["scalars"]:
            for s in ea.Scalars(tag):
                out[(writer, "scalar", tag, s.step)] = s.value
        for tag in ea.Tags()["tensors"]:
            plugin = ea.SummaryMetadata(tag).plugin_data.plugin_name
            for t in ea.Tensors(tag):
                if plugin == "histograms":
                    out[(writer, "histogram", tag, t.step)] = tensor_util.make_ndarray(
                        t.tensor_proto)
                elif plugin == "images":
                    out[(writer, "image", tag, t.step)] = list(t.tensor_proto.string_val)
    return out


def test_fit_logs_what_keras_logs(tmp_path):
    # SGD at rate 0: both frameworks keep the same weights, so the histograms
    # and images must agree exactly; the scalars to float precision.
    weights = _conv_model(keras).get_weights()
    records = _keras_records(weights, histogram_freq=2, write_images=True, update_freq=2)
    m = _conv_model(nn)
    m.set_weights(weights)
    m.compile(nn.optimizers.SGD(0.0), "mse", metrics=["mae"])
    m.fit(X, Y, epochs=3, batch_size=16, shuffle=False, validation_data=(XV, YV), verbose=0,
          callbacks=[nn.callbacks.TensorBoard(tmp_path, histogram_freq=2, write_images=True,
                                              update_freq=2)])
    got = _tessera_events(tmp_path)
    want = {r[:4]: r[4] for r in records}
    assert sorted(got) == sorted(want)
    assert ("train", "histogram", "conv/kernel/histogram", 2) in got
    assert ("validation", "scalar", "evaluation_loss_vs_iterations", 9) in got
    for key, value in want.items():
        if key[1] == "scalar":
            assert got[key] == pytest.approx(float(value), rel=1e-5, abs=1e-6), key
        elif key[1] == "histogram":
            np.testing.assert_array_equal(got[key], _reference_buckets(value), err_msg=str(key))
        else:  # Keras's image array: tf.summary.image's width, height and first 3 PNGs
            k, h, w, c = value.shape
            assert got[key][:2] == [str(w).encode(), str(h).encode()], key
            pngs = got[key][2:]
            assert len(pngs) == min(k, 3)
            for png, img in zip(pngs, value):
                pixels = np.clip(np.nan_to_num(img * np.float32(255.5)), 0, 255).astype(np.uint8)
                np.testing.assert_array_equal(_decode_png(png)[0], pixels, err_msg=str(key))
    # the conv kernel (3, 3, 1, 4) is 4 images of 3 x 3 (3 kept); the hidden
    # kernel (64, 3) one of 3 x 64; a bias one column; a single number none
    assert len(got[("train", "image", "conv/kernel/image", 0)]) == 5
    assert _decode_png(got[("train", "image", "hidden/kernel/image", 0)][2])[0].shape == (3, 64, 1)
    assert _decode_png(got[("train", "image", "hidden/bias/image", 0)][2])[0].shape == (3, 1, 1)
    assert ("train", "image", "out/bias/image", 0) not in got


def test_batch_steps_restart_each_fit_and_steps_per_second(tmp_path):
    weights = _conv_model(keras).get_weights()
    m = _conv_model(nn)
    m.set_weights(weights)
    m.compile("adam", "mse")
    for _ in range(2):  # Keras counts batches from 1 in every fit
        m.fit(X, Y, epochs=1, batch_size=16, verbose=0, callbacks=[
            nn.callbacks.TensorBoard(tmp_path, update_freq="batch", write_steps_per_second=True)])
    steps = sorted(s.step for s in _accumulator(tmp_path / "train").Scalars("batch_loss"))
    assert steps == [1, 1, 2, 2, 3, 3]
    rates = _accumulator(tmp_path / "train").Scalars("batch_steps_per_second")
    assert len(rates) == 6 and all(r.value > 0 for r in rates)
    lr = _accumulator(tmp_path / "train").Scalars("epoch_learning_rate")
    assert [r.value for r in lr] == pytest.approx([0.001, 0.001])


# ----------------------------------------------------------------- graph

def test_graph_is_the_models_json_as_keras_writes_it(tmp_path):

    m = _conv_model(nn)
    m.compile("adam", "mse")
    m.fit(X, Y, epochs=1, batch_size=16, verbose=0, callbacks=[nn.callbacks.TensorBoard(tmp_path)])
    ea = _accumulator(tmp_path / "train")
    meta = ea.SummaryMetadata("keras").plugin_data
    assert (meta.plugin_name, meta.content) == ("graph_keras_model", b"1")
    (event,) = ea.Tensors("keras")
    assert event.step == 0
    text = event.tensor_proto.string_val[0].decode()
    assert json.loads(text) == json.loads(m.to_json())
    # the conceptual graph TensorBoard's Graphs tab draws, as of Keras's model
    ours = keras_util.keras_model_to_graph_def(json.loads(text))
    theirs = keras_util.keras_model_to_graph_def(json.loads(_conv_model(keras).to_json()))
    def nodes(graph):  # (the models' own names differ by their counters)
        return [(n.name.split("/", 1)[1], [i.split("/", 1)[1] for i in n.input])
                for n in graph.node]

    assert nodes(ours) == nodes(theirs)
    assert len(ours.node) == 5
    nn.callbacks.TensorBoard(tmp_path / "off", write_graph=False).set_model(m)
    assert not (tmp_path / "off").exists()


def test_graph_only_for_functional_and_sequential(tmp_path):
    class Sub(nn.Model):
        def __init__(self):
            super().__init__()
            self.d = nn.layers.Dense(1)

        def call(self, x):
            return self.d(x)

    m = Sub()
    m.compile("sgd", "mse")
    x = X.reshape(48, -1)
    m.fit(x, Y, epochs=1, verbose=0, callbacks=[nn.callbacks.TensorBoard(tmp_path)])
    assert "keras" not in _accumulator(tmp_path / "train").Tags()["tensors"]
    s = nn.Sequential([nn.Input((36,)), nn.layers.Dense(1)])
    s.compile("sgd", "mse")
    s.evaluate(x, Y, verbose=0, callbacks=[nn.callbacks.TensorBoard(tmp_path / "seq")])
    assert "keras" in _accumulator(tmp_path / "seq" / "train").Tags()["tensors"]


# ----------------------------------------------------------------- embeddings

def _embedding_model(lib):
    inp = lib.Input((4,), dtype="int32", name="ids")
    h = lib.layers.Embedding(10, 3, name="words")(inp)
    h2 = lib.layers.Embedding(10, 3, name="tags")(inp)
    h = lib.layers.Flatten(name="flat")(lib.layers.Add(name="add")([h, h2]))
    return lib.Model(inp, lib.layers.Dense(1, name="out")(h))


@pytest.mark.parametrize("metadata", [None, "all.tsv", {"words": "words.tsv"}])
def test_embeddings_as_keras(tmp_path, metadata):
    ids = RNG.integers(0, 10, size=(32, 4)).astype(np.int32)
    y = RNG.normal(size=(32, 1)).astype(np.float32)
    km = _embedding_model(keras)
    os.makedirs(tmp_path / "keras")
    kcb = keras.callbacks.TensorBoard(str(tmp_path / "keras"), write_graph=False,
                                      embeddings_freq=2, embeddings_metadata=(
                                          dict(metadata) if isinstance(metadata, dict)
                                          else metadata))
    kcb.set_model(km)  # Keras writes projector_config.pbtxt here
    m = _embedding_model(nn)
    m.compile("adam", "mse")
    saved = []

    class Keep(nn.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            saved.append([w.copy() for w in m.get_weights()])

    m.fit(ids, y, epochs=3, verbose=0, callbacks=[
        Keep(), nn.callbacks.TensorBoard(tmp_path / "ours", embeddings_freq=2,
                                         embeddings_metadata=metadata)])
    assert (tmp_path / "ours" / "projector_config.pbtxt").read_text() == \
        (tmp_path / "keras" / "projector_config.pbtxt").read_text()
    files = sorted(os.listdir(tmp_path / "ours" / "train"))
    assert [f for f in files if not f.startswith("events")] == [
        "keras_embedding.ckpt-0.weights.tsw", "keras_embedding.ckpt-2.weights.tsw"]
    other = _embedding_model(nn)
    other.load_weights(tmp_path / "ours" / "train" / "keras_embedding.ckpt-0.weights.tsw")
    for a, b in zip(other.get_weights(), saved[0]):
        np.testing.assert_array_equal(a, b)


def test_embeddings_metadata_naming_no_embedding_layer(tmp_path):
    m = _embedding_model(nn)
    m.compile("adam", "mse")
    cb = nn.callbacks.TensorBoard(tmp_path, embeddings_freq=1,
                                  embeddings_metadata={"words": "a.tsv", "out": "b.tsv"})
    with pytest.raises(ValueError, match=r"\[TensorBoard\] embeddings_metadata names layers that "
                                         r"are not Embedding layers of the model: \['out'\]"):
        cb.set_model(m)


# ----------------------------------------------------------------- profiling

@pytest.mark.parametrize("profile_batch, steps", [((2, 3), 2), ("4", 1), ("3,5", 3)])
def test_profile_batch_records_those_batches(tmp_path, profile_batch, steps):

    m = _conv_model(nn)
    m.compile("adam", "mse")
    m.fit(X, Y, epochs=2, batch_size=16, verbose=0,
          callbacks=[nn.callbacks.TensorBoard(tmp_path, profile_batch=profile_batch)])
    (folder,) = glob.glob(str(tmp_path / "train" / "tessera_trace_batch_*"))
    assert {"locality-0.trace", "trace.json", "report.html"} <= set(os.listdir(folder))
    (loc,) = tessera.trace(folder).summary["localities"]
    assert len(loc["steps"]) == steps
    json.load(open(os.path.join(folder, "trace.json")))


def test_profile_batch_inside_a_running_trace_warns(tmp_path):

    m = _conv_model(nn)
    m.compile("adam", "mse")
    with tessera.trace(tmp_path / "outer"):
        with pytest.warns(UserWarning, match=r"\[TensorBoard\] profile_batch: a tessera trace is "
                                             r"already being recorded"):
            m.fit(X, Y, epochs=1, batch_size=16, verbose=0,
                  callbacks=[nn.callbacks.TensorBoard(tmp_path, profile_batch=2)])
    assert not glob.glob(str(tmp_path / "train" / "tessera_trace_batch_*"))


# ----------------------------------------------------------------- arguments

@pytest.mark.parametrize("kwargs, error, words", [
    ({"histogram_freq": -1}, ValueError, "histogram_freq must be a non-negative int"),
    ({"histogram_freq": 1.5}, TypeError, "histogram_freq must be a non-negative int"),
    ({"histogram_freq": True}, TypeError, "histogram_freq"),
    ({"embeddings_freq": -2}, ValueError, "embeddings_freq"),
    ({"embeddings_freq": "2"}, TypeError, "embeddings_freq"),
    ({"write_images": "yes"}, TypeError, "write_images must be True or False"),
    ({"write_graph": 1}, TypeError, "write_graph"),
    ({"write_steps_per_second": None}, TypeError, "write_steps_per_second"),
    ({"embeddings_metadata": 5}, TypeError, "embeddings_metadata"),
    ({"embeddings_metadata": {"a": 1}}, TypeError, "embeddings_metadata"),
    ({"profile_batch": -1}, ValueError, "profile_batch"),
    ({"profile_batch": (3, 2)}, ValueError, "profile_batch"),
    ({"profile_batch": (0, 2)}, ValueError, "profile_batch"),
    ({"profile_batch": "a,b"}, ValueError, "profile_batch"),
    ({"profile_batch": (1, 2, 3)}, ValueError, "profile_batch"),
    ({"profile_batch": 1.0}, TypeError, "profile_batch"),
    ({"update_freq": -3}, ValueError, "update_freq"),
    ({"log_dir": 5}, TypeError, "log_dir"),
])
def test_bad_arguments_name_themselves(kwargs, error, words):
    with pytest.raises(error, match=r"\[TensorBoard\] .*" + words + r".*test_nn_tensorboard\.py"):
        nn.callbacks.TensorBoard(**kwargs)


# ----------------------------------------------------------------- TensorBoard's command

def test_tensorboard_inspect_lists_the_tags(tmp_path):
    m = _conv_model(nn)
    m.compile("adam", "mse")
    m.fit(X, Y, epochs=2, batch_size=16, verbose=0, validation_data=(XV, YV),
          callbacks=[nn.callbacks.TensorBoard(tmp_path, histogram_freq=1, write_images=True)])
    tool = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    if not os.path.exists(tool):
        pytest.skip("the tensorboard command is not installed beside this Python")
    try:
        out = subprocess.run([tool, "--inspect", "--logdir", str(tmp_path)], capture_output=True,
                             text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.skip("tensorboard --inspect did not finish in 120 s")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    for tag in ("epoch_loss", "conv/kernel/histogram", "hidden/bias/image", "keras",
                "evaluation_loss_vs_iterations"):
        assert tag in text, (tag, text[-3000:])
