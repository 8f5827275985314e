# Every rank writes its lines in pieces, flushing each piece, while the other
# ranks do the same: mpirun relays each piece as it comes, and the launcher
# must still put every whole line, once, after its own rank's prefix.
import sys
import time

import tessera.distributed as td

r = td.rank()
td.barrier()
for k in range(30):
    out = sys.stderr if k % 3 == 0 else sys.stdout
    for piece in ("<", f"{r}", f":{k}", ">"):
        out.write(f"{r}{piece}")
        out.flush()
        time.sleep(0.002 * ((r + k) % 3))
    out.write("\n")
    out.flush()
td.barrier()
