"""Smoke test of the benchmarks against PyTorch (bench/bench_*.py of issue 16's
fair race): every script starts (--help without PyTorch), and where PyTorch is
installed, a tiny --quick run goes through and its correctness checks hold
(the PyTorch networks given tessera's weights compute the same outputs). No
time is asserted: benchmarks never assert speed."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
_BENCH = os.path.join(_ROOT, "bench")
SCRIPTS = ["bench_har_cnn.py", "bench_char_gpt.py", "bench_resnet.py", "bench_conv3d.py",
           "bench_dp_har.py",
           "profile_step.py",
           "bench_peak_rss.py", "bench_allocators.py"]
HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed "
                                 "(benchmarks only: .venv/bin/pip install torch==2.13.0+cpu)")


def run(script, *args, timeout=900):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(_ROOT, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, os.path.join(_BENCH, script), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    out = run(script, "--help", timeout=120)
    assert "usage" in out


@needs_torch
def test_har_quick():
    out = run("bench_har_cnn.py", "--quick")
    for word in ("machine:", "threads: 1", "allocator of this process", "inference_mode",
                 "load average",
                 "training step"):
        assert word in out, out
    diff = float(re.search(r"outputs differ by ([0-9.e+-]+)", out).group(1))
    assert diff < 1e-4, out


@needs_torch
def test_resnet_quick():
    out = run("bench_resnet.py", "--quick")
    assert "NCHW" in out and "load average" in out, out


@needs_torch
def test_conv3d_quick():
    out = run("bench_conv3d.py", "--quick")
    assert "NCDHW" in out and "load average" in out, out
    diff = float(re.search(r"outputs differ by ([0-9.e+-]+)", out).group(1))
    assert diff < 1e-4, out


@needs_torch
def test_char_gpt_quick():
    out = run("bench_char_gpt.py", "--quick", "--train-seconds", "0")
    diff = float(re.search(r"initial logits differ by ([0-9.e+-]+)", out).group(1))
    assert diff < 1e-4, out  # the weight copy from Keras layouts is right


@needs_torch
@pytest.mark.skipif(not os.access(os.path.join(_ROOT, "build", "tessera"), os.X_OK),
                    reason="build/tessera is not built")
def test_dp_har_quick():
    out = run("bench_dp_har.py", "--quick")
    assert "DDP" in out and "load average" in out, out
