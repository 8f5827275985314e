"""The console script of an installed tessera (python/_tessera_cli.py), which pip
turns into ``<env>/bin/tessera``: it execs the C++ front end installed beside it
(``tessera/bin/tessera``) and gives ``tessera run`` the interpreter it was
installed for. Here it runs from a copy laid out as an install is, with a stand-in
program that reports what it was given; tests/install/pip_command.sh installs the
real thing into a fresh virtual environment (ctest -L install)."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the C++ program: prints its arguments, TESSERA_PYTHON and its
# pid, and exits with status 7.
STAND_IN = """#!/bin/sh
echo "args=$*"
echo "python=${TESSERA_PYTHON-<unset>}"
echo "pid=$$"
exit 7
"""


def _site(tmp_path, program=STAND_IN):
    """A site-packages folder as `pip install .` lays it out: _tessera_cli.py and
    tessera/bin/tessera (absent when program is None)."""
    site = tmp_path / "site-packages"
    (site / "tessera" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "python" / "_tessera_cli.py", site / "_tessera_cli.py")
    if program is not None:
        exe = site / "tessera" / "bin" / "tessera"
        exe.write_text(program)
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return site


def _run(site, args, **env_changes):
    """The console script as pip writes it: `python -c 'from _tessera_cli import
    main; sys.exit(main())' ARGS`, run from a folder outside the checkout."""
    env = {k: v for k, v in os.environ.items() if k != "TESSERA_PYTHON"}
    env.update(PYTHONPATH=str(site), **env_changes)
    code = ("import os, sys; print('launcher', os.getpid(), flush=True); "
            "from _tessera_cli import main; sys.exit(main())")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=site.parent, env=env,
                          capture_output=True, text=True, timeout=60)


def _fields(out):
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_execs_the_installed_program_with_the_arguments(tmp_path):
    site = _site(tmp_path)
    r = _run(site, ["run", "-n", "2", "a b.py", "--flag"])
    assert r.returncode == 7, r.stderr  # the program's own status
    fields = _fields(r.stdout)
    assert fields["args"] == "run -n 2 a b.py --flag"
    # exec, not a child process: tessera run's signals and clean-up see one process
    launcher_pid = r.stdout.splitlines()[0].split()[1]
    assert fields["pid"] == launcher_pid


def test_tessera_python_defaults_to_the_installing_interpreter(tmp_path):
    r = _run(_site(tmp_path), ["ops"])
    assert r.returncode == 7, r.stderr
    assert _fields(r.stdout)["python"] == sys.executable


def test_tessera_python_set_by_the_user_wins(tmp_path):
    r = _run(_site(tmp_path), ["ops"], TESSERA_PYTHON="/opt/other/bin/python3")
    assert r.returncode == 7, r.stderr
    assert _fields(r.stdout)["python"] == "/opt/other/bin/python3"


def test_missing_program_is_a_clear_error(tmp_path):
    site = _site(tmp_path, program=None)
    r = _run(site, ["ops"])
    assert r.returncode == 1
    expected = str(site / "tessera" / "bin" / "tessera")
    assert r.stderr.startswith("tessera: [tessera] the command's program is missing or not "
                               f"executable: {expected} (installed by `pip install .`"), r.stderr
    assert "Traceback" not in r.stderr


def test_program_not_executable_is_a_clear_error(tmp_path):
    site = _site(tmp_path)
    exe = site / "tessera" / "bin" / "tessera"
    exe.chmod(0o644)
    r = _run(site, ["ops"])
    assert r.returncode == 1
    assert f"missing or not executable: {exe} " in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_program_started_directly_runs_the_python_of_its_environment(tmp_path):
    """Without the console script (the program installed in a virtual environment,
    started by its path), `tessera run` takes that environment's interpreter."""
    built = ROOT / "build" / "tessera"
    assert os.access(built, os.X_OK), f"{built} is not built: run `make build`"
    env_dir = tmp_path / "env"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = env_dir / "lib" / version / "site-packages"
    (site / "tessera" / "bin").mkdir(parents=True)
    program = site / "tessera" / "bin" / "tessera"
    shutil.copy(built, program)  # finds libtessera in build/ (its build RPATH)
    (env_dir / "bin").mkdir()
    marker = tmp_path / "ran-with"
    python = env_dir / "bin" / version
    python.write_text(f'#!/bin/sh\necho "$0" >>"{marker}"\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (tmp_path / "job.py").write_text("print('job ran')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TESSERA_PYTHON", "PYTHONPATH")}
    r = subprocess.run([str(program), "run", "-n", "1", "job.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[rank 0] job ran" in r.stdout, r.stdout + r.stderr
    assert marker.read_text() == f"{python}\n"
