# A backward pass that fails part way leaves its gradient bucket waiting for
# members: the next pass meets its own first member there ("arrived twice").
# tessera._core._drop_gradient_buckets() (what model.fit calls when a step
# fails) clears it, and the next pass works. Run with 2 or more localities;
# prints "ok".
import numpy as np

import tessera
import tessera.distributed as td
from tessera import _core

n = td.size()
x = np.arange(3.0) + td.rank()


@tessera.jit
def broken(x):
    part = tessera.bucket_all_reduce(x, "b", 0, 2)  # member 1 never comes
    bad = x + np.ones(4)  # fails: the pass ends here
    return part + bad


@tessera.jit
def whole(x):
    a = tessera.bucket_all_reduce(x, "b", 0, 2)
    b = tessera.bucket_all_reduce(x * 2.0, "b", 1, 2)
    return a + b


want = sum(3.0 * (np.arange(3.0) + r) for r in range(n))
for attempt in range(2):
    try:
        broken(x)
    except ValueError as e:
        assert "operands could not be broadcast" in str(e) or "shape" in str(e), e
    else:
        raise AssertionError("broken() did not fail")
    if attempt == 0:
        # Without dropping, the stale member 0 is found again.
        try:
            whole(x)
        except ValueError as e:
            assert "member 0 of gradient bucket 'b' arrived twice" in str(e), e
        else:
            raise AssertionError("the stale bucket went unnoticed")
    assert _core._drop_gradient_buckets() == 1
    np.testing.assert_allclose(whole(x), want)
print("ok")
