"""What the native-loop tests (test_native_loops_*.py) share."""

import os
import subprocess
import sys


def debug_run(code, **env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr
