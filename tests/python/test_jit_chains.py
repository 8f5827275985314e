"""Long flat chains of operators and non-ASCII names in jit functions
(issue 27): whatever CPython itself parses translates and runs with Python's
left-to-right meaning, and what it cannot parse is a CompileError at the
function's line."""

import sys
import textwrap

import numpy as np
import pytest

import tessera
from tessera import _core


def _module(tmp_path, name, source):
    """Imports `source` as module `name` from a file in tmp_path."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    return module, path


# ----------------------------------------------------------------- Unicode names


def test_unicode_variables_arguments_and_function_names(tmp_path):
    m, _ = _module(tmp_path, "unicode_names", """\
        import tessera


        @tessera.jit
        def doppelt(größe, faktor_λ=2.0):
            名前 = größe * faktor_λ
            σ_2 = 名前 + 1
            return σ_2


        @tessera.jit
        def 二倍(α):
            ñ = [α, α]
            return doppelt(ñ[0]) + doppelt(ñ[1], faktor_λ=0.5)
        """)
    np.testing.assert_allclose(m.doppelt(np.arange(3.0)), np.arange(3.0) * 2 + 1)
    np.testing.assert_allclose(m.二倍(np.arange(3.0)), np.arange(3.0) * 2.5 + 2)
    assert m.doppelt(3) == 7


def test_errors_show_the_unicode_name_as_written(tmp_path):
    m, path = _module(tmp_path, "unicode_errors", """\
        import tessera


        @tessera.jit
        def f(größe):
            return größe + β_unbekannt
        """)
    want = rf"name 'β_unbekannt' is not defined \(at {path.name}:6\)"
    with pytest.raises(NameError, match=want):
        m.f(1.0)


# ----------------------------------------------------------------- chains


def _chain_source(n, ops=("+",)):
    """def f(x, y): return x op c1 op c2 ... (n terms), with constants of very
    different sizes so that only left-to-right addition gives Python's value."""
    rng = np.random.default_rng(n)
    terms = ["x"]
    for i in range(1, n):
        op = ops[i % len(ops)]
        if op in "*/":  # one chain with its terms: factors near 1
            c = float(1.0 + rng.uniform(-1e-3, 1e-3))
            terms.append(f"{op} {c!r}" if i % 3 else f"{op} y")
        else:
            c = float(rng.uniform(-1, 1) * 10.0 ** rng.integers(-8, 8))
            terms.append(f"{op} {c!r} * y" if i % 3 else f"{op} x")
    return "def f(x, y):\n    return " + " ".join(terms) + "\n"


@pytest.mark.parametrize("n", [1000, 2000])
@pytest.mark.parametrize("ops", [("+",), ("+", "-"), ("*", "/")])
def test_long_chains_translate_and_run_left_to_right(tmp_path, n, ops):
    name = f"chain_{n}_{'_'.join('pmtd'['+-*/'.index(o)] for o in ops)}"
    m, _ = _module(tmp_path, name, _chain_source(n, ops))
    x, y = np.array([0.3, -1.7, 2.5]), np.array([1.25, 0.5, -0.75])
    if ops == ("*", "/"):
        x, y = np.array([1.0000001, 0.9999999, 1.0]), np.array([1.0, 1.0000002, 0.9999998])
    want = m.f(x, y)
    got = tessera.jit(m.f)(x, y)
    np.testing.assert_array_equal(got, want)  # bitwise: the same order of operations
    assert tessera.jit(m.f)(0.5, 2.0) == m.f(0.5, 2.0)


def test_long_boolean_and_comparison_chains(tmp_path):
    m, _ = _module(tmp_path, "chain_bool", (
        "def f(x):\n    return " + " and ".join(f"x > {-i}" for i in range(1500)) + "\n"
        "def g(x):\n    return 0 < x < " + " < ".join(str(i + 2) for i in range(1500)) + "\n"
    ))
    assert tessera.jit(m.f)(1) is True and tessera.jit(m.f)(-5) is False
    assert tessera.jit(m.g)(1) is True and tessera.jit(m.g)(3) is False


def test_the_gradient_of_a_long_chain(tmp_path):
    m, _ = _module(tmp_path, "chain_grad", (
        "def f(x):\n    return (" + " + ".join(f"x * {i % 7}.0" for i in range(1000)) + ").sum()\n"
    ))
    g = tessera.grad(tessera.jit(m.f))(np.ones(3))
    np.testing.assert_allclose(g, np.full(3, float(sum(i % 7 for i in range(1000)))))


def test_deep_nesting_is_still_a_compile_error(tmp_path):
    # - - - ... x: nested, not a chain.
    m, path = _module(tmp_path, "nested_right", "def f(x):\n    return " + "- " * 300 + "x\n")
    want = rf"nested more than 256 levels deep.*\(at {path.name}:2\)"
    with pytest.raises(_core.CompileError, match=want):
        tessera.jit(m.f)(1.0)


def test_what_cpython_cannot_parse_is_a_compile_error_at_the_function(tmp_path):
    # CPython compiled the module, but its parser's limit falls as the stack
    # it is called from grows: jit called deep in the stack cannot read the
    # function's source back (ast.parse raises RecursionError).
    m, path = _module(tmp_path, "chain_cpython", (
        "import tessera\n\n\n@tessera.jit\ndef f(x):\n    return " + " + ".join(["x"] * 2000) + "\n"
    ))

    def deep(n):
        return m.f(1.0) if n == 0 else deep(n - 1)

    with pytest.raises(_core.CompileError) as info:
        deep(sys.getrecursionlimit() // 2)
    msg = str(info.value)
    assert "[jit] Python's parser cannot read the source of 'f' back" in msg, msg
    assert f"(at {path.name}:4)" in msg, msg
    # Called from a shallow stack, the same function runs.
    assert m.f(1.0) == 2000.0


def test_chains_in_statements_asserts_and_fstrings(tmp_path):
    chain = " + ".join(["x[0]"] * 1500)
    m, path = _module(tmp_path, "chain_statements", f"""\
        import tessera


        @tessera.jit
        def f(x):
            y = 0.0
            y += {chain}
            assert {chain} > 0
            return y, f"{{{chain}}}"
        """)
    assert m.f([1.0]) == (1500.0, "1500.0")
    # The assertion's text is Python's own unparsing, which a long chain
    # exceeds: the message names the line instead of a RecursionError.
    with pytest.raises(AssertionError, match=rf"the expression of line 8 .*\(at {path.name}:8\)"):
        m.f([-1.0])
