"""tessera.trace from Python: recording blocks and jit calls, results unchanged,
the report's data, exports, errors; plots when matplotlib is installed."""

import csv
import io
import json
import os

import numpy as np
import pytest

import tessera
from tessera import data, nn, optim


@tessera.jit
def predict(x, w):
    h = np.tanh(x @ w)
    return (h * h).sum(axis=0)


def small_model():
    model = nn.Sequential([nn.Conv1D(8, 3, activation="relu"), nn.MaxPool1D(2), nn.Flatten(),
                           nn.Dense(6, activation="softmax")], input_shape=(128, 9), seed=1)
    model.compile(optim.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_trace_is_a_module_and_a_function(tmp_path):
    t = tessera.trace(tmp_path / "t")
    assert isinstance(t, tessera.trace.Trace)
    assert t.directory == str(tmp_path / "t")
    assert callable(tessera.trace.plot_split)


def test_recording_a_block_keeps_results(tmp_path, rng, threads):
    x = rng.normal(size=(200, 50))
    w = rng.normal(size=(50, 20))
    plain = predict(x, w)
    with tessera.trace(tmp_path / "t") as t:
        traced = predict(x, w)
    np.testing.assert_array_equal(traced, plain)
    np.testing.assert_array_equal(predict(x, w), plain)
    assert os.path.basename(t.path) == "locality-0.trace"
    s = t.summary
    assert s["problems"] == []
    assert [loc["locality"] for loc in s["localities"]] == [0]
    names = {p["name"] for p in s["top"]}
    assert {"matmul", "tanh", "sum"} <= names
    # The jit function's file is in the trace, so positions show their lines.
    assert os.path.basename(__file__) in s["sources"]


def test_fit_records_steps_split_in_phases(tmp_path):
    x, y = data.synthetic_har(n=192, seed=3)
    a, b = small_model(), small_model()
    ha = a.fit(x, y, batch_size=64, epochs=1, seed=2, verbose=0)
    with tessera.trace(tmp_path / "fit") as t:
        hb = b.fit(x, y, batch_size=64, epochs=1, seed=2, verbose=0)
    assert ha.history["loss"] == hb.history["loss"]
    for k in a.weights.keys():
        np.testing.assert_array_equal(a.weights[k], b.weights[k])
    steps = t.summary["localities"][0]["steps"]
    assert [s[0] for s in steps] == [0, 1, 2]
    for it, t0, dur, split, fwd, bwd, wait, opt, other in steps:
        assert split and fwd > 0 and bwd > 0 and opt > 0
        assert wait == 0  # one locality
        assert fwd + bwd + wait + opt + other == dur


def test_exports(tmp_path):
    x = np.ones((30, 4))
    w = np.ones((4, 3))
    with tessera.trace(tmp_path / "t") as t:
        predict(x, w)
    paths = t.export(tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == ["counters.csv", "report.html", "trace.json",
                                                    "tree.dot"]
    doc = json.loads(open(paths["chrome"]).read())
    assert {e["ph"] for e in doc["traceEvents"]} <= {"X", "M"}
    rows = list(csv.DictReader(io.StringIO(t.csv())))
    by_name = {r["name"]: r for r in rows}
    assert int(by_name["matmul"]["evaluations"]) == 1
    assert t.dot().startswith("digraph")
    html = t._repr_html_()
    assert html.startswith("<iframe srcdoc=") and "tessera trace report" in html


def test_exports_keep_the_mode_of_the_files_they_replace(tmp_path):
    with tessera.trace(tmp_path / "t") as t:
        predict(np.ones((3, 4)), np.ones((4, 2)))
    umask = os.umask(0o022)
    os.umask(umask)
    out = tmp_path / "report.html"
    t.report(out)
    assert os.stat(out).st_mode & 0o7777 == 0o666 & ~umask
    os.chmod(out, 0o640)
    t.report(out)
    assert os.stat(out).st_mode & 0o7777 == 0o640
    # A link at the output's name is replaced, not written through, and its
    # target's mode is not taken.
    victim = tmp_path / "victim"
    victim.write_text("precious")
    os.chmod(victim, 0o600)
    link = tmp_path / "link.html"
    os.symlink(victim, link)
    t.report(link)
    assert victim.read_text() == "precious"
    assert not os.path.islink(link) and os.stat(link).st_mode & 0o7777 == 0o666 & ~umask


def test_jit_trace_option(tmp_path):
    f = tessera.jit(predict.__wrapped__, trace=tmp_path / "jt")
    x, w = np.ones((10, 4)), np.ones((4, 2))
    assert f.last_trace is None
    np.testing.assert_array_equal(f(x, w), predict(x, w))
    assert isinstance(f.last_trace, tessera.trace.Trace)
    assert f.last_trace.directory == str(tmp_path / "jt")
    assert f.last_trace.summary["top"]
    g = tessera.jit(predict.__wrapped__, trace=True)
    g(x, w)
    assert os.path.isdir(g.last_trace.directory)
    assert "<iframe" in g.last_trace._repr_html_()


def test_errors(tmp_path):
    with pytest.raises(ValueError, match=r"\[report\] '.*' is not a trace directory: it has no "
                                         r"locality-N.trace files"):
        tessera.trace(tmp_path).summary
    with pytest.raises(ValueError, match="does not exist"):
        tessera.trace(tmp_path / "missing").summary
    t = tessera.trace(tmp_path / "a").start()
    with pytest.raises(RuntimeError, match="a trace is already being recorded into"):
        tessera.trace(tmp_path / "b").start()
    with pytest.raises(RuntimeError, match="still being recorded"):
        t.summary
    t.stop()
    with pytest.raises(RuntimeError, match="is not being recorded"):
        t.stop()


def test_plots(tmp_path):
    import matplotlib  # scripts/install-deps puts it in .venv for this test

    matplotlib.use("Agg")
    x, y = data.synthetic_har(n=128, seed=3)
    with tessera.trace(tmp_path / "t") as t:
        small_model().fit(x, y, batch_size=64, epochs=1, verbose=0)
    for plot in (tessera.trace.plot_split, tessera.trace.plot_utilization,
                 tessera.trace.plot_timeline, tessera.trace.plot_steps, tessera.trace.plot_top):
        fig = plot(t)
        assert fig.axes
        fig.savefig(tmp_path / f"{plot.__name__}.png")


def test_plots_without_matplotlib_say_so(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match="matplotlib, which is not installed"):
        tessera.trace.plot_split({"localities": []})
