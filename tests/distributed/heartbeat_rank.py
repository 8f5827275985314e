# First, the job's secret: given by `tessera run` (the guard, this process's
# parent, has it in its environment) unless TESSERA_TEST_NO_LAUNCHER is set,
# and out of this process's environment (os.environ, /proc/self/environ, a
# child process's) once tessera is imported: prints "key ok".
# Then, two ranks exchanging all-reduces while heartbeat_attack.py attacks their
# heartbeats, until the file named by TESSERA_TEST_GO exists (rank 0 looks,
# and tells the other through the all-reduce). Then, by TESSERA_TEST_LOSS:
#   none   every rank prints "ok" and the job ends normally;
#   stop   the last rank stops itself (SIGSTOP), printing "lost at <time>";
#          the others wait in an all-reduce until failure detection names it.
import os
import signal
import time

import re
import subprocess
import sys

import numpy as np

import tessera.distributed as td

KEY = re.compile(rb"TESSERA_JOB_KEY=([0-9a-f]{64})")


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


if not os.environ.get("TESSERA_TEST_NO_LAUNCHER"):
    given = KEY.search(environ_of(os.getppid()))
    assert given and given.group(1) != b"0" * 64, "the launcher gave the rank no TESSERA_JOB_KEY"
    assert given.group(1) not in environ_of(os.getpid()), "the secret is in /proc/self/environ"
assert "TESSERA_JOB_KEY" not in os.environ, "TESSERA_JOB_KEY is still in os.environ"
child = subprocess.run(
    [sys.executable, "-c", "import os; print(os.environ.get('TESSERA_JOB_KEY'))"],
    capture_output=True, text=True).stdout.strip()
assert child == "None", f"a child process got TESSERA_JOB_KEY: {child}"
print("key ok", flush=True)

go = os.environ["TESSERA_TEST_GO"]
how = os.environ.get("TESSERA_TEST_LOSS", "none")
victim = td.size() - 1
td.barrier()
print("ready", flush=True)
while True:
    flag = td.all_reduce(np.array([1.0 if td.rank() == 0 and os.path.exists(go) else 0.0]))
    if flag[0] > 0:
        break
    time.sleep(0.05)
if how == "stop":
    if td.rank() == victim:
        print(f"lost at {time.time():.3f}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
    td.all_reduce(np.ones(3))
print("ok")
