# Thousands of collectives in flight at once: one block defines 3000
# all-reduces before it reads any, so an agreement round's offer holds more
# entries than fit a posted receive (round.hpp: kPostedBytes) and goes as a
# large message. Every result against its expected value; prints "ok".
import numpy as np

import tessera
import tessera.distributed as td

r, n = td.rank(), td.size()
count = 3000
lines = [f"define(a{k}, all_reduce({k}.0 + r))" for k in range(count)]
# A balanced sum (a chain of 3000 additions would pass the nesting limit).
terms = [f"a{k}" for k in range(count)]
while len(terms) > 1:
    terms = [f"({terms[i]} + {terms[i + 1]})" if i + 1 < len(terms) else terms[i]
             for i in range(0, len(terms), 2)]
total = terms[0]
text = f"define(f, r, block(\n  {', '.join(lines)},\n  list({total}, a0, a{count - 1})))\nf\n"
got_total, first, last = tessera._core.Program(text, "<many_pending>").run([float(r)])
# all_reduce(k + r) over ranks = n*k + n(n-1)/2.
want = sum(n * k + n * (n - 1) / 2 for k in range(count))
assert float(got_total) == want, (got_total, want)
assert float(first) == n * (n - 1) / 2, first
assert float(last) == n * (count - 1) + n * (n - 1) / 2, last
print("ok")
