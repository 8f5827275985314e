# Each rank runs a program text generated for it: rank 1's has one comment line
# more, so the same all_reduce sits at another source position on each rank
# and no rank ever offers the other's collective. Every rank fails within
# seconds with the mismatch error naming both ranks' collectives, instead of
# waiting for the collective timeout.
import tessera
import tessera.distributed as dist

R = dist.rank()
text = "// generated for rank 1\n" * R + "all_reduce(ones(3))\n"
tessera.Program(text, "generated.tsl").run([])
print("no error")
