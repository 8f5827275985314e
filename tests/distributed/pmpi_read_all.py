# The example of docs/scaling.md: every rank writes a part, then reads every
# rank's part between MPI_Pcontrol(2) and MPI_Pcontrol(3, "read every part"), for
# the PMPI counter's file counts (pmpi_count_files.sh).
import ctypes
import os

import tessera.distributed as td

folder = os.environ["PMPI_COUNT_PATH"]
with open(os.path.join(folder, f"part{td.rank()}.bin"), "wb") as fh:
    fh.write(bytes(100_000))
td.barrier()
mpi = ctypes.CDLL(None)  # the preloaded counter's MPI_Pcontrol
mpi.MPI_Pcontrol(2)
for q in range(td.size()):
    with open(os.path.join(folder, f"part{q}.bin"), "rb") as fh:
        fh.read()
mpi.MPI_Pcontrol(3, b"read every part")
print("ok")
