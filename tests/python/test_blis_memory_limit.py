"""Matrix products under a memory limit (RLIMIT_DATA): when BLIS would need a
new packing buffer that malloc cannot give, the product raises MemoryError
naming it, instead of BLIS aborting the whole process."""

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import resource, sys, numpy as np, tessera

def vm_data():
    for line in open("/proc/self/status"):
        if line.startswith("VmData"):
            return int(line.split()[1]) * 1024

@tessera.jit
def products(a):
    return (np.tanh(a @ a) + np.tanh(a.T @ a) + np.tanh(a @ a.T)).sum()

a = np.ones((600, 600))
# the worker threads started (their stacks count in RLIMIT_DATA), no product yet
tessera.jit(lambda x: np.tanh(x).sum() + np.tanh(x + 1).sum())(np.ones(4_000_000))
limit = vm_data() + int(sys.argv[1]) * (1 << 20)
resource.setrlimit(resource.RLIMIT_DATA, (limit, resource.RLIM_INFINITY))
try:
    print("value", products(a))
except MemoryError as e:
    print("MemoryError", e)
"""


def _run(tmp_path, margin_mib: int):
    script = tmp_path / "products.py"  # tessera.jit reads its functions' source
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.pop("BLIS_ARCH_TYPE", None)
    return subprocess.run([sys.executable, str(script), str(margin_mib)], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("margin_mib", [0, 6, 12])
def test_product_without_room_for_packing_buffers_raises_memory_error(tmp_path, margin_mib):
    r = _run(tmp_path, margin_mib)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "MemoryError" in r.stdout, r.stdout
    assert "Aborting" not in r.stderr


def test_product_with_room_runs(tmp_path):
    r = _run(tmp_path, 96)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert r.stdout.split() == ["value", "1080000.0"], r.stdout
