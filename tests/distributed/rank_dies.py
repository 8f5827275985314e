# A rank that dies while the others wait in a collective: the launcher must
# stop the job within seconds and say which rank died and how. The way it
# dies comes from TESSERA_TEST_DEATH: "kill" (SIGKILL on itself), "exit"
# (sys.exit(3)) or "leave" (os._exit(0), leaving without MPI_Finalize).
import os
import signal
import sys
import time

import numpy as np

import tessera.distributed as td

how = os.environ["TESSERA_TEST_DEATH"]
victim = td.size() - 1
td.barrier()
if td.rank() == victim:
    time.sleep(0.2)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "exit":
        sys.exit(3)
    else:
        os._exit(0)
td.all_reduce(np.ones(3))
print("the others never get here")
