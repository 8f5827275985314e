# Two ranks exchanging all-reduces while heartbeat_attack.py attacks their
# heartbeats, until the file named by TESSERA_TEST_GO exists (rank 0 looks,
# and tells the other through the all-reduce). Then, by TESSERA_TEST_LOSS:
#   none   every rank prints "ok" and the job ends normally;
#   stop   the last rank stops itself (SIGSTOP), printing "lost at <time>";
#          the others wait in an all-reduce until failure detection names it.
import os
import signal
import time

import numpy as np

import tessera.distributed as td

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
