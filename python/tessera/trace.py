"""Traces: what the runtime did, task by task, on every locality, and a report to see it.

Record a block of Python, then look at it::

    import tessera

    with tessera.trace("har-trace") as t:        # a directory; one file per locality
        model.fit(x, y, batch_size=64, epochs=1)
    t                                            # in Jupyter: the report, inline
    t.report("report.html")                      # the same report as a file
    t.export()                                   # report.html, trace.json, tree.dot, counters.csv in the directory

``tessera.trace()`` without a directory records into a new temporary one.
``@tessera.jit(trace=True)`` records each call of a function (``f.last_trace``);
``tessera run -n N --trace DIR`` records every locality of a run, and
``tessera report DIR`` turns any trace directory into the report and exports.
Recording is off unless asked for, and never changes results.

``plot_split``, ``plot_utilization``, ``plot_timeline``, ``plot_steps`` and
``plot_top`` draw the same data with matplotlib (not a tessera dependency:
install it to use them). See docs/tracing.md.
"""

from __future__ import annotations

import atexit
import html
import json
import os
import sys
import tempfile
import types

from . import _core
from ._files import mode_for_replacing

__all__ = ["Trace", "trace", "plot_split", "plot_utilization", "plot_timeline", "plot_steps",
           "plot_top"]


class Trace:
    """A trace directory: recorded by this object (as a context manager, or
    ``start``/``stop``) or opened from an earlier run.

    ``summary`` is the data of the report (a dict: localities with their time
    split, timelines and steps, programs with their execution trees, top
    primitives, and the ``problems`` of an incomplete trace)."""

    def __init__(self, directory=None):
        if directory is None:
            directory = tempfile.mkdtemp(prefix="tessera-trace-")
        self.directory = os.fspath(directory)
        self.path = None  # this process's trace file, once written
        self._summary = None
        self._recording = False

    # ------------------------------------------------------------------ recording

    def start(self):
        """Starts recording this process into the directory."""
        _core._trace_start(self.directory)
        self._recording = True
        self._summary = None
        return self

    def stop(self):
        """Stops recording and writes this locality's file; returns its path."""
        if not self._recording:
            raise RuntimeError(f"[trace] {self.directory!r} is not being recorded")
        self._recording = False
        _add_jit_sources()
        self.path = _core._trace_stop()
        return self.path

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._recording:
            self.stop()
        return False

    # ------------------------------------------------------------------ reading

    def _export(self, what):
        if self._recording:
            raise RuntimeError(f"[trace] {self.directory!r} is still being recorded: stop it first")
        return _core._trace_export(self.directory, what)

    @property
    def summary(self) -> dict:
        """The report's data as a dict (read once)."""
        if self._summary is None:
            self._summary = json.loads(self._export("summary"))
        return self._summary

    @property
    def problems(self) -> list:
        """What the trace misses (localities without a file, truncated files), one sentence each."""
        return self.summary["problems"]

    @property
    def native(self) -> dict:
        """The fast loops' native code in the trace: compile and cache-load totals
        (``compiled``, ``disk_loads``, ``process_loads``, ``compile_ns``, ``load_ns`` and the
        compiles' ``generate_ns``/``optimise_ns``/``codegen_ns``), ``loops`` (per loop: its
        runs, native runs and compiles) and ``text``, the lines ``tessera report`` prints."""
        return self.summary["native"]

    def _write(self, what, path):
        text = self._export(what)
        if path is not None:
            _write_file(os.fspath(path), text)
        return text

    def report(self, path=None) -> str:
        """The self-contained HTML report (written to ``path`` if given)."""
        return self._write("html", path)

    def chrome(self, path=None) -> str:
        """The Chrome trace-event JSON (opens in Perfetto and chrome://tracing)."""
        return self._write("chrome", path)

    def dot(self, path=None) -> str:
        """The execution trees as Graphviz DOT, with per-node times."""
        return self._write("dot", path)

    def csv(self, path=None) -> str:
        """Per-node counters as CSV (one row per locality and evaluated primitive node)."""
        return self._write("csv", path)

    def export(self, directory=None) -> dict:
        """Writes report.html, trace.json, tree.dot and counters.csv (into the trace
        directory unless ``directory``), as ``tessera report DIR`` does; returns the paths."""
        out = os.fspath(directory) if directory is not None else self.directory
        os.makedirs(out, exist_ok=True)
        paths = {}
        for what, name in (("html", "report.html"), ("chrome", "trace.json"), ("dot", "tree.dot"),
                           ("csv", "counters.csv")):
            paths[what] = os.path.join(out, name)
            self._write(what, paths[what])
        return paths

    def _repr_html_(self):
        # The report is a whole page with its own script and styles: an iframe
        # keeps them apart from the notebook's.
        if self._recording:
            return f"<p>tessera trace {html.escape(self.directory)}: recording</p>"
        page = html.escape(self.report(), quote=True)
        return (f'<iframe srcdoc="{page}" style="width:100%;height:900px;border:1px solid #ddd">'
                "</iframe>")

    def __repr__(self):
        state = "recording" if self._recording else "recorded" if self.path else "directory"
        return f"<tessera.Trace {self.directory!r} ({state})>"


def _write_file(path, text):
    """Writes through a new temporary beside ``path`` (created exclusively, so a
    link planted at a guessable name is never followed), renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode_for_replacing(path))  # mkstemp makes it private (0600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def trace(directory=None) -> Trace:
    """A :class:`Trace` of ``directory`` (a new temporary directory if None): use it as
    ``with tessera.trace(DIR) as t:`` to record, or to open a directory recorded earlier
    (by ``tessera run --trace DIR`` for instance)."""
    return Trace(directory)


def _add_jit_sources():
    """Gives the running trace the files of jit functions, so the report shows their lines."""
    from .jit import source_files  # noqa: PLC0415 - jit imports this module's package

    for name, path in source_files().items():
        try:
            if os.path.getsize(path) > (1 << 20):
                continue
            with open(path, encoding="utf-8") as f:
                _core._trace_add_source(name, f.read())
        except OSError:
            continue


def _stop_at_exit():
    if _core._trace_active():
        _add_jit_sources()
        _core._trace_stop()


# `tessera run --trace DIR` (TESSERA_TRACE): the whole process is recorded,
# and written when it exits normally.
if os.environ.get("TESSERA_TRACE") and _core._trace_start_from_env():
    atexit.register(_stop_at_exit)


# ---------------------------------------------------------------------- plots


def _summary_of(t):
    if isinstance(t, Trace):
        return t.summary
    if isinstance(t, dict):
        return t
    return Trace(t).summary


def _pyplot():
    try:
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as e:
        raise ImportError("tessera.trace.plot_* draws with matplotlib, which is not installed (it is "
                          "not a tessera dependency): pip install matplotlib") from e
    return plt


def plot_split(t):
    """Bar chart: each locality's thread time split into compute, waiting for
    communication and idle. ``t`` is a Trace, a directory or a summary dict."""
    s, plt = _summary_of(t), _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * len(s["localities"])))
    names = [f"locality {loc['locality']}" for loc in s["localities"]]
    left = [0.0] * len(names)
    for key, label, color in (("compute_ns", "compute", "#3b78d8"),
                              ("comm_wait_ns", "waiting for communication", "#e69500"),
                              ("idle_ns", "idle", "#c0c0c0")):
        vals = [loc["stats"][key] * 1e-9 for loc in s["localities"]]
        ax.barh(names, vals, left=left, label=label, color=color)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("thread seconds")
    ax.invert_yaxis()
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_utilization(t):
    """Line chart: the fraction of each locality's threads busy over time."""
    s, plt = _summary_of(t), _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3))
    span = s["span_ns"] * 1e-9
    for loc in s["localities"]:
        u = loc["utilization"]
        ax.plot([span * (k + 0.5) / len(u) for k in range(len(u))], u, label=f"locality {loc['locality']}")
    ax.set_xlabel("seconds")
    ax.set_ylabel("busy threads")
    ax.set_ylim(0, 1.05)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_timeline(t, max_events_per_row=2000):
    """Gantt chart: one row per worker of each locality, then its communication."""
    s, plt = _summary_of(t), _pyplot()
    rows = []
    for loc in s["localities"]:
        for th in loc["threads"]:
            spans = sorted(th["events"], key=lambda e: -e[1])[:max_events_per_row]
            rows.append((f"{loc['locality']}: {th['name']}", [(e[0] * 1e-9, e[1] * 1e-9) for e in spans],
                         "#3b78d8"))
        if loc["comm"]:
            rows.append((f"{loc['locality']}: communication",
                         [(c[0] * 1e-9, c[1] * 1e-9) for c in loc["comm"]], "#e69500"))
    fig, ax = plt.subplots(figsize=(10, 0.8 + 0.3 * len(rows)))
    for i, (_, spans, color) in enumerate(rows):
        ax.broken_barh(spans, (i - 0.4, 0.8), facecolors=color)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    fig.tight_layout()
    return fig


def plot_steps(t):
    """Stacked bars: the mean training step of each locality split in phases."""
    s, plt = _summary_of(t), _pyplot()
    phases = ["forward", "backward", "communication wait", "optimizer", "losses and metrics"]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * len(s["localities"])))
    names, means = [], []
    for loc in s["localities"]:
        split = [st for st in loc["steps"] if st[3]]
        if not split:
            continue
        names.append(f"locality {loc['locality']}")
        means.append([sum(st[4 + k] for st in split) / len(split) * 1e-3 for k in range(5)])
    left = [0.0] * len(names)
    for k, phase in enumerate(phases):
        vals = [m[k] for m in means]
        ax.barh(names, vals, left=left, label=phase)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("microseconds per step")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def plot_top(t, n=15):
    """Bar chart: the ``n`` primitives that took the most time (all localities)."""
    s, plt = _summary_of(t), _pyplot()
    top = s["top"][:n]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.3 * len(top)))
    ax.barh([p["name"] for p in top], [p["exclusive_ns"] * 1e-6 for p in top], color="#3b78d8")
    ax.set_xlabel("milliseconds (own time, all evaluations)")
    ax.invert_yaxis()
    fig.tight_layout()
    return fig


class _TraceModule(types.ModuleType):
    """``tessera.trace`` is this module and also the function ``trace``."""

    def __call__(self, directory=None) -> Trace:
        return trace(directory)


sys.modules[__name__].__class__ = _TraceModule
