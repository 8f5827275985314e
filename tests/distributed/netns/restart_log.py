# Prints a line per launch; on the first launch (TESSERA_RESTART=0) the last
# rank fails with a traceback, so that `tessera run --max-restarts 1` launches
# the job again. Needs no MPI: each rank reads its rank from Open MPI.
import os

launch = int(os.environ["TESSERA_RESTART"])
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
print(f"rank {rank} launch {launch} starts", flush=True)
if launch == 0 and rank == size - 1:
    raise RuntimeError(f"rank {rank} fails on launch {launch}")
print(f"rank {rank} launch {launch} done", flush=True)
