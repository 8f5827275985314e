# Run by cluster.py on emulated hosts: every rank checks the environment it
# got (arguments NAME=VALUE must be set so; -NAME must be absent on the hosts
# other than node1, where ranks inherit mpirun's whole environment) and that its
# threads are its own host's cores over the ranks on that host.
import os
import socket
import sys
import zlib

import numpy as np

import tessera
import tessera.distributed as td

for arg in sys.argv[1:]:
    if arg.startswith("-"):
        if socket.gethostname() == "node1":
            continue
        assert arg[1:] not in os.environ, f"{arg[1:]} reached rank {td.rank()} but should not"
    else:
        name, value = arg.split("=", 1)
        got = os.environ.get(name)
        assert got == value, f"rank {td.rank()} on {socket.gethostname()}: {name}={got!r}, expected {value!r}"
local = int(os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"])
threads = max(1, len(os.sched_getaffinity(0)) // local)
assert tessera.num_threads() == threads, (tessera.num_threads(), threads, local)
hosts = td.all_gather(np.array([zlib.crc32(socket.gethostname().encode())]))
if td.rank() == 0:
    print(f"env ok on {len(set(hosts.tolist()))} hosts")
