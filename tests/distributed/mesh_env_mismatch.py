# Different mesh settings on different ranks: rank 1's TESSERA_MESH is changed
# before it asks for the job's mesh (as a rank started with other flags would
# have it). Every rank fails within seconds, naming the ranks and their values.
import os

import tessera.distributed as dist

if dist.rank() == 1:
    os.environ["TESSERA_MESH"] = "data=1,tensor=2"
dist.mesh()
print("the mesh was made despite different TESSERA_MESH values")
