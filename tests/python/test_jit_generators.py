"""Generator functions under tessera.jit (issue 31 item 6): each consumer of a
generator gives Python's answer (jit_check.check runs the same function as
plain Python/NumPy), and the two generators tessera refuses say why and where."""

import numpy as np
import pytest

import tessera
from jit_check import check


def multiples(n, k):
    for i in range(n):
        yield i * k


def rows_scaled(a, s):
    for row in a:
        yield row * s


def up_to(x, limit):
    for v in x:
        if v > limit:
            return
        yield v


def chained(n):
    yield -1
    yield from multiples(n, 2)
    yield from range(3)


def halvings(x):
    while x > 1.0:
        yield x
        x = x / 2.0


def list_of_generator(n):
    return list(multiples(n, 3))


def sum_of_generator(n, k):
    return sum(multiples(n, k))


def loop_over_generator(a):
    out = np.zeros(a.shape[0])
    for i, row in enumerate(rows_scaled(a, 2.0)):
        out[i] = row.sum()
    return out


def early_return(x):
    return list(up_to(x, 0.5))


def yield_from(n):
    return list(chained(n))


def while_condition(x):
    total = 0.0
    for v in halvings(x):
        total += v
    return total


def nested_generator(x):
    def squares(v):
        for e in v:
            yield e * e
    return np.array(list(squares(x)))


def tuple_and_sorted(n):
    return tuple(multiples(n, -1)), sorted(multiples(n, -1))


def zipped(a, b):
    s = 0.0
    for u, v in zip(rows_scaled(a, 1.0), rows_scaled(b, 2.0)):
        s += float(np.dot(u, v))
    return s


def test_list_sum_and_loop():
    check(list_of_generator, 7)
    check(sum_of_generator, 10, 4)
    check(loop_over_generator, np.arange(12.0).reshape(4, 3))


def test_return_yield_from_and_while():
    check(early_return, np.array([0.1, 0.4, 0.7, 0.2]))
    check(yield_from, 4)
    check(while_condition, 37.0)


def test_nested_tuple_sorted_and_zip():
    check(nested_generator, np.array([1.0, -2.0, 3.0]))
    check(tuple_and_sorted, 5)
    check(zipped, np.arange(6.0).reshape(3, 2), np.ones((3, 2)))


def receiver(n):
    total = 0
    for i in range(n):
        got = yield i
        total += got or 0


def use_receiver(n):
    return list(receiver(n))


def forever(start):
    while True:
        yield start
        start += 1


def use_forever(n):
    out = []
    for v in forever(0):
        if v >= n:
            break
        out.append(v)
    return out


def test_refusals_name_the_construct_and_line():
    with pytest.raises(tessera.UnsupportedError, match=r"receives values.*test_jit_generators\.py:\d+"):
        tessera.jit(use_receiver)(3)
    with pytest.raises(tessera.UnsupportedError, match=r"while True.*'forever'.*test_jit_generators\.py:\d+"):
        tessera.jit(use_forever)(3)
