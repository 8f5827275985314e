"""tessera.resilience: replay and replicate inside @tessera.jit (the
language's primitives) and eagerly, compared with plain calls, under the
fault injector; the docs' examples run as shown."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
from tessera import _core
from tessera.resilience import fault_counts, inject_faults, replay, replicate

ROOT = Path(__file__).resolve().parents[2]
FILE = os.path.basename(__file__)


def step(x):
    return np.sin(x) * 2.0 + np.cos(x)


def in_range(y):
    return bool(np.all(np.abs(y) <= 3.0))


def first(results):
    return results[0]


@tessera.jit
def replayed(x):
    return replay(3, step, x)


@tessera.jit
def replayed_once(x):
    return replay(1, step, x)


@tessera.jit
def replicated(x):
    return replicate(3, step, x)


@tessera.jit
def replicated_5(x):
    return replicate(5, step, x)


@tessera.jit
def replicated_valid(x):
    return replicate(4, step, x, validate=in_range)


@tessera.jit
def replicated_vote(x):
    return replicate(3, step, x, vote=lambda rs: len(rs) * 1.0 + rs[0][0] * 0.0)


@tessera.jit
def replayed_validated(x, n):
    return tessera.resilience.replay(n, step, x, validate=in_range)


def never(y):
    return False


@tessera.jit
def never_valid(x):
    return replay(2, step, x, validate=never)


X = np.linspace(0.0, 1.0, 256)


@pytest.fixture(autouse=True)
def no_faults():
    _core._set_fault_injection(None)
    yield
    _core._set_fault_injection(None)


def test_without_faults_they_equal_a_plain_call(threads):
    expected = step(X)
    for fn in (replayed, replicated, replicated_valid):
        assert np.array_equal(fn(X), expected), fn.__name__
    assert np.array_equal(replayed_validated(X, 2), expected)
    assert replicated_vote(X) == 3.0
    # Eagerly, with Python functions.
    assert np.array_equal(replay(2, step, X), expected)
    assert np.array_equal(replicate(3, step, X), expected)
    assert replicate(3, lambda a, b: a * b, 6, 7) == 42


def test_the_jit_text_uses_the_primitives():
    text = replicated_valid.code
    assert re.search(r"replicate\(4, step\w*, x, validate=in_range\w*\)", text), text
    assert "replay(n, step" in replayed_validated.code


def test_replay_succeeds_after_injected_throws(threads):
    expected = step(X)
    with inject_faults(throw=0.5, seed=3):
        for _ in range(10):
            assert np.array_equal(replayed_validated(X, 30), expected)
        counts = fault_counts()
    assert counts["throws"] >= 3
    assert counts["calls"] > counts["throws"]


def test_replay_gives_the_error_after_n():
    with inject_faults(throw=1.0):
        with pytest.raises(RuntimeError) as e:
            replayed(X)
    msg = str(e.value)
    assert re.search(r"\[replay\] step\w* failed all 3 attempts \(at ", msg), msg
    assert "the last error: [inject_faults] injected fault in attempt 3 of step" in msg


def test_replay_validate_failures_and_kind_of_the_error():
    calls = []

    def flaky(x):
        calls.append(x)
        if len(calls) < 3:
            raise ValueError(f"transient {len(calls)}")
        return x * 2

    assert replay(3, flaky, 21) == 42 and len(calls) == 3
    calls.clear()
    with pytest.raises(ValueError) as e:
        replay(2, flaky, 21)
    line = sys._getframe().f_lineno - 1
    assert str(e.value) == (
        f"[replay] flaky failed all 2 attempts (at {FILE}:{line}); the last error: transient 2"
    )
    with pytest.raises(RuntimeError, match=r"validate rejected the result of attempt 2: "
                       r"<lambda>\(result\) returned False"):
        replay(2, lambda: -1, validate=lambda r: r > 0)
    # Inside jit: a validation that never passes.
    with pytest.raises(RuntimeError, match=r"\[replay\] step\w* failed all 2 attempts \(at "
                       rf"{FILE}:\d+\); the last error: validate rejected the result of attempt 2: "
                       r"never\w*\(result\) returned bool false"):
        never_valid(X)


def test_replicate_catches_bit_flips(threads):
    expected = step(X)
    corrupted = 0
    with inject_faults(bitflip=0.1, seed=11):
        for _ in range(20):
            assert np.array_equal(replicated_5(X), expected)
            corrupted += not np.array_equal(replayed_once(X), expected)
        assert fault_counts()["bitflips"] > 5
    assert corrupted > 0  # without a vote, the same faults pass unnoticed


def test_replicate_all_different_is_an_error(threads):
    with inject_faults(bitflip=1.0, seed=5):
        with pytest.raises(RuntimeError, match=r"\[replicate\] no majority among the results of "
                           r"3 copies of step\w*: 3 different checksums, copies agreeing: "
                           r"\[1\], \[2\], \[3\] \(at "):
            replicated(X)
        with pytest.raises(RuntimeError, match=r"no majority .* of step: 3 different checksums, "
                           rf"copies agreeing: \[1\], \[2\], \[3\] \(at {FILE}:\d+\)"):
            replicate(3, step, X)


def test_replicate_custom_vote_and_validate():
    assert replicate(3, lambda: 2, vote=lambda rs: sum(rs)) == 6
    median = replicate(5, step, X, vote=lambda rs: np.median(np.stack(rs), axis=0))
    assert np.array_equal(median, step(X))
    with inject_faults(bitflip=0.5, seed=2):
        for _ in range(5):
            y = replicated_valid(X)
            assert in_range(y)
    with pytest.raises(RuntimeError, match=r"all 3 copies of <lambda> failed .*validate rejected"):
        replicate(3, lambda: 5, validate=lambda r: r < 0)


def test_injector_is_deterministic_for_a_seed():
    def outcome(seed):
        log = []
        with inject_faults(throw=0.2, bitflip=0.3, seed=seed):
            for _ in range(15):
                try:
                    log.append(replicated_vote(X))
                    log.append(replicated(X).tobytes())
                except RuntimeError as e:
                    log.append(str(e))
            log.append(tuple(fault_counts().values()))
        return log

    a = outcome(9)
    assert a == outcome(9)
    assert a != outcome(10)


def test_injector_restores_what_was_before():
    assert _core._fault_injection() is None
    with inject_faults("throw=0.25,seed=4,only=step"):
        assert _core._fault_injection() == "throw=0.25,seed=4,only=step"
        with inject_faults(bitflip=0.5):
            assert _core._fault_injection() == "bitflip=0.5,seed=0"
        assert _core._fault_injection() == "throw=0.25,seed=4,only=step"
    assert _core._fault_injection() is None


def test_only_faults_the_named_function():
    with inject_faults(throw=1.0, only="other"):
        assert np.array_equal(replayed(X), step(X))
        assert fault_counts()["calls"] == 0


def test_argument_errors():
    with pytest.raises(ValueError, match=r"\[replay\] argument 'n' must be a number of attempts "
                       r"from 1 to 1048576, got 0 \(at "):
        replay(0, step, X)
    with pytest.raises(TypeError, match=r"\[replay\] argument 'n' must be an int \(a number of "
                       r"attempts\), got float 2.5"):
        replay(2.5, step, X)
    assert replay(np.int64(2), lambda: 7) == 7
    with pytest.raises(TypeError, match=r"\[replicate\] argument 'f' must be a function, got int"):
        replicate(2, 5, X)
    with pytest.raises(TypeError, match=r"argument 'vote' must be a function or None"):
        replicate(2, step, X, vote=3)
    with pytest.raises(ValueError, match=r"\[inject_faults\] throw must be a probability"):
        with inject_faults(throw=2.0):
            pass
    with pytest.raises(ValueError, match=r"\[inject_faults\] inject_faults: unknown key 'flip'"):
        with inject_faults("flip=0.1"):
            pass

    @tessera.jit
    def bad_n(x):
        return replay(0, step, x)

    with pytest.raises(ValueError, match=r"\[replay\] argument 'n' must be a number of attempts "
                       rf"from 1 to 1048576, got 0 \(at {FILE}:\d+\)"):
        bad_n(X)


def test_environment_variable_in_a_fresh_process(tmp_path):
    code = (
        "import numpy as np, tessera\n"
        "p = tessera.Program('define(f, x, x * 2.0) define(main, x, replay(2, f, x)) main')\n"
        "try:\n"
        "    p.run([np.ones(3)])\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), TESSERA_INJECT_FAULTS="throw=1,seed=1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "[replay] f failed all 2 attempts" in r.stdout, r.stdout + r.stderr
    env["TESSERA_INJECT_FAULTS"] = "throw=0.1,flip=2"
    r = subprocess.run([sys.executable, "-c", code.replace("RuntimeError", "ValueError")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert "unknown key 'flip'" in r.stdout and "seen by replay" in r.stdout, r.stdout + r.stderr


def test_ops_lists_the_primitives():
    ops = {name: (sig, family, text) for name, sig, family, text in tessera.ops()}
    assert ops["replay"][0] == "replay(n, f, *args, validate=nil)"
    assert ops["replicate"][0] == "replicate(n, f, *args, validate=nil, vote=nil)"
    assert ops["replay"][1] == ops["replicate"][1] == "resilience"
    assert "HPX" in ops["replicate"][2]


def _doc_blocks(lang):
    text = (ROOT / "docs" / "resilience.md").read_text()
    return [m.group(1) for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("code", _doc_blocks("python"))
def test_doc_python_example_runs(code, tmp_path):
    script = tmp_path / "demo.py"  # a file, so that jit can read the functions' source
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    env.pop("TESSERA_INJECT_FAULTS", None)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]


@pytest.mark.parametrize("code", _doc_blocks("tsl"))
def test_doc_tsl_example_runs(code, capfd):
    _core.Program(code, "resilience.md").run([])
    out = capfd.readouterr().out
    assert "False" not in out
