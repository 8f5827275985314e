"""Run every Keras-style script of this folder in its own process with tessera.nn.

Usage: python tests/keras_io/run_all.py [-t SECONDS] [NAME ...]

Prints one line per script (ran / FAILED, seconds), then "N of M ran" and the
last error line of each failure. Scripts run one at a time; each gets
TESSERA_THREADS=2 unless the environment sets it.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def scripts():
    return sorted(f[:-3] for f in os.listdir(HERE)
                  if f.endswith(".py") and f != "run_all.py" and not f.startswith("_"))


def last_error_line(stderr):
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    for line in reversed(lines):
        if not line.startswith((" ", "\t")) and ("Error" in line or "Exception" in line):
            return line.strip()
    return lines[-1].strip() if lines else "(no output on stderr)"


def run_one(name, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TESSERA_THREADS", "2")
    env.setdefault("MPLBACKEND", "Agg")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:  # files a script writes stay out of the tree
        try:
            p = subprocess.run([sys.executable, os.path.join(HERE, name + ".py")], cwd=cwd,
                               env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, time.perf_counter() - start, f"timed out after {timeout} s", ""
    took = time.perf_counter() - start
    if p.returncode == 0:
        return True, took, "", p.stdout
    return False, took, last_error_line(p.stderr), p.stderr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scripts to run (default: all)")
    ap.add_argument("-t", "--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    names = args.names or scripts()
    failures = []
    for name in names:
        ok, took, err, _ = run_one(name, args.timeout)
        print(f"{'ran   ' if ok else 'FAILED'} {name:45s} {took:6.1f} s", flush=True)
        if not ok:
            failures.append((name, err))
    print(f"\n{len(names) - len(failures)} of {len(names)} ran")
    for name, err in failures:
        print(f"  {name}: {err}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
