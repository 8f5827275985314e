"""The Python examples (ports of the .tsl examples) against plain NumPy, and
jit functions called from several Python threads at once."""

import importlib.util
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from jit_check import assert_same

import tessera

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_logistic_regression_matches_numpy():
    lr = load("logistic_regression")
    x, y = lr.make_data(2000, 10)
    w = lr.train(x, y, 50, 0.5)
    expected = lr.train.__wrapped__(x, y, 50, 0.5)
    assert_same(w, expected, rtol=1e-9)
    acc = lr.accuracy(x, y, w)
    assert_same(acc, lr.accuracy.__wrapped__(x, y, w))
    assert acc > 0.95


def test_kmeans_matches_numpy():
    km = load("kmeans")
    points = km.make_blobs(200)
    initial = points[[0, 200, 400]]
    got = km.kmeans(points, initial, 8)
    expected = km.kmeans.__wrapped__(points, initial, 8)
    assert_same(got, expected, rtol=1e-9)
    centers = got[np.argsort(got[:, 0])]
    np.testing.assert_allclose(centers, [[-6, 6], [0, 0], [6, 6]], atol=0.3)


@pytest.mark.parametrize("script, expected", [
    ("logistic_regression.py", "training accuracy: 0.99"),
    ("kmeans.py", "centroids:"),
])
def test_examples_run_as_scripts(script, expected):
    ARGS = ["2000", "10", "50"]  # noqa: N806 - a small run
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, script), *(ARGS if "log" in script else [])],
        capture_output=True, text=True, timeout=300, check=True,
    )
    assert expected in out.stdout


def test_examples_in_eager_mode_give_the_same_answer():
    km = load("kmeans")
    points = km.make_blobs(100)
    initial = points[[0, 100, 200]]
    compiled = km.kmeans(points, initial, 5)
    tessera.set_eager(True)
    try:
        eager = km.kmeans(points, initial, 5)
    finally:
        tessera.set_eager(False)
    assert_same(compiled, eager, rtol=1e-9)


@tessera.jit
def _work(x, k):
    acc = x * 0.0
    for i in range(k):
        acc = acc + np.sin(x * i) @ np.ones((x.shape[1], x.shape[1]))
    return acc.sum(axis=0)


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_two_python_threads_get_correct_answers(threads):
    inputs = [np.random.default_rng(s).normal(size=(64, 16)) for s in range(8)]
    expected = [_work.__wrapped__(x, 5) for x in inputs]
    results = [None] * len(inputs)
    errors = []

    def run(i):
        try:
            for _ in range(5):
                results[i] = _work(inputs[i], 5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for got, exp in zip(results, expected):
        assert_same(got, exp, rtol=1e-9)


def test_first_compile_from_many_threads_compiles_once():
    @tessera.jit
    def f(x):
        return x + 1

    barrier = threading.Barrier(6)
    out = []

    def run():
        barrier.wait()
        out.append(f(np.arange(3)))

    ts = [threading.Thread(target=run) for _ in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == 6 and all((o == [1, 2, 3]).all() for o in out)
    assert len(f._programs) == 1
