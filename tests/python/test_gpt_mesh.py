"""examples/gpt_mesh.py without a launcher: its memory limit (RLIMIT_DATA) stops numpy's and
tessera's over-allocations, its parameter count, and its out-of-memory report. The 4-locality runs
are ctest's dist_example_gpt_mesh_* tests."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
EXAMPLES = os.path.join(ROOT, "examples")
PYTHON_DIR = os.path.join(ROOT, "python")


def run(tmp_path, code, *args, timeout=120):
    """Runs `code` from a file (tessera.jit reads its functions' source) in a
    fresh Python: a limit is the process's own."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([EXAMPLES, PYTHON_DIR, env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


ALLOCATE = """
    import sys
    import numpy as np
    import tessera
    import gpt_mesh



    @tessera.jit
    def zeros(n):
        return np.zeros(n) + 1.0


    assert zeros(10).sum() == 10.0
    gpt_mesh.start_runtime()  # the worker threads exist before the limit, as in the example
    if sys.argv[1] == "limit":
        gpt_mesh.set_memory_limit(64 << 20)
    n = 32 << 20  # 256 MiB of float64
    for name, allocate in (("numpy", lambda: np.ones(n)), ("tessera", lambda: zeros(n))):
        try:
            allocate()
            print(name, "allocated")
        except MemoryError as error:
            print(name, "MemoryError:", error)
    # the process goes on: small allocations still work
    print("after", zeros(1000).sum() + np.ones(1000).sum())
"""


def test_memory_limit_stops_numpy_and_tessera_allocations(tmp_path):
    limited = run(tmp_path, ALLOCATE, "limit")
    assert limited.returncode == 0, limited.stderr
    out = limited.stdout
    assert "numpy MemoryError: Unable to allocate 256. MiB" in out, out
    assert "tessera MemoryError: [zeros] cannot allocate an array of shape (33554432,)" in out, out
    assert "after 2000.0" in out, out
    # the same allocations without the limit succeed (so the limit is what stops them)
    free = run(tmp_path, ALLOCATE, "none")
    assert free.returncode == 0, free.stderr
    assert "numpy allocated" in free.stdout and "tessera allocated" in free.stdout, free.stdout


def test_memory_limit_is_rlimit_data_above_the_current_size(tmp_path):
    out = run(tmp_path, """
        import resource
        import gpt_mesh

        before = gpt_mesh.status_bytes("VmData")
        limit = gpt_mesh.set_memory_limit(100 << 20)
        soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
        assert soft == limit, (soft, limit)
        assert before + (100 << 20) <= limit <= before + (101 << 20), (before, limit)
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_parameter_count_is_the_models(tmp_path):
    out = run(tmp_path, """
        import gpt_mesh

        model = gpt_mesh.build_model(63, 64, 128, 5, 4, None)
        print(model.count_params(), gpt_mesh.count_params(63, 64, 128, 5))
        print(gpt_mesh.count_params(63, 128, 768, 14))
    """)
    assert out.returncode == 0, out.stderr
    small, full = out.stdout.splitlines()
    built, formula = small.split()
    assert built == formula == "1015999"
    assert full == "99426879"  # the "99,426,879 parameters" of the docs and the example


@pytest.mark.skipif(shutil.which("bible") is None, reason="Debian's bible-kjv is not installed")
def test_out_of_memory_is_reported_with_what_the_mode_needs():
    # one locality, data parallel, a budget far below the model's 16 B/param
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "gpt_mesh.py"), "--small",
                           "--memory-limit", "0.005", "--steps", "1"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=PYTHON_DIR))
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    message = re.escape(
        " on locality 0: data parallelism on 1 localities needs ~15.5 MiB per locality for "
        "weights, gradients and Adam state (16 B/param x 1.0 M) + activations; the limit is "
        "5.1 MiB (--memory-limit, RLIMIT_DATA): use a tensor/pipeline mesh (e.g. --mesh tensor=2,pipeline=2)")
    assert re.search(r"^\[gpt_mesh\] out of memory (building the model|training)"
                     r"( \(no memory for a thread's stack\))?" + message + "$",
                     proc.stdout, re.M), proc.stdout
