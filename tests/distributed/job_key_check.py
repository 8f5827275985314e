"""The job's secret under plain mpirun (run by ctest as dist_job_key_n2).

usage: job_key_check.py

Starts a 2-rank program (a barrier) with mpirun, no launcher, and checks that
ranks whose TESSERA_JOB_KEY is malformed, set on one rank only, or different
refuse to start with an error naming the variable and the ranks (instead of
running with failure detection that hears nobody), and that ranks with the
same secret, or none (rank 0 then draws one), run.
"""

import os
import subprocess
import sys
import tempfile

PROGRAM = "import tessera.distributed as td\ntd.barrier()\nprint('barrier passed', flush=True)\n"
KEY_A, KEY_B = "ab" * 32, "cd" * 32


def run(*contexts):
    """mpirun with one app context per item: the environment (VAR=VALUE) of its rank."""
    python = os.environ.get("TESSERA_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "barrier.py")
        with open(script, "w") as f:
            f.write(PROGRAM)
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none"]
        for i, env in enumerate(contexts):
            cmd += ([":"] if i else []) + ["-n", "1", "env", *env, python, script]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   TESSERA_FAILURE_TIMEOUT="5")
        env.pop("TESSERA_JOB_KEY", None)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        return p.returncode, p.stdout + p.stderr


def expect(what, result, needle, ok):
    status, out = result
    if ok:
        good = status == 0 and out.count("barrier passed") == 2
    else:
        good = status != 0 and needle in out
    if not good:
        print(out)
        sys.exit(f"FAIL: {what}: status {status}, expected " + (f"'{needle}'" if needle else "ok"))
    print(f"{what}: as expected")


expect("no secret", run([], []), None, True)
expect("the same secret", run([f"TESSERA_JOB_KEY={KEY_A}"], [f"TESSERA_JOB_KEY={KEY_A}"]), None,
       True)
expect("a malformed secret", run(["TESSERA_JOB_KEY=xyz"], ["TESSERA_JOB_KEY=xyz"]),
       "[locality] failure detection (TESSERA_FAILURE_TIMEOUT) cannot start on rank 0: "
       "TESSERA_JOB_KEY must be 64 hex digits (the 32-byte job secret `tessera run` makes), "
       "got 3 characters", False)
expect("a secret on one rank", run([f"TESSERA_JOB_KEY={KEY_A}"], []),
       "TESSERA_JOB_KEY (the job's secret) is set on rank 0 but not on rank 1", False)
expect("different secrets", run([f"TESSERA_JOB_KEY={KEY_A}"], [f"TESSERA_JOB_KEY={KEY_B}"]),
       "rank 1 has another job secret (TESSERA_JOB_KEY) than rank 0", False)
print("PASS")
