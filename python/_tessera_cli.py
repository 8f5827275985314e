"""The ``tessera`` command of an installed tessera (``pip install .``).

pip makes ``<env>/bin/tessera`` from the entry point in pyproject.toml
(``tessera = "_tessera_cli:main"``); it runs :func:`main`, which replaces
itself (``os.execv``: the same process, so signals, exit status and
``tessera run``'s clean-up of a job work as when the program is started
directly) with the C++ front end that the same install put beside this module,
``tessera/bin/tessera``, next to the library it links.

Why a console script and not the executable itself in the wheel's scripts: the
console script knows the interpreter it was installed for (``sys.executable``,
which pip wrote into its first line), and an executable does not.
``tessera run`` starts Python scripts with ``TESSERA_PYTHON``; when that is
unset, this sets it to that interpreter, so every rank runs this environment's
Python and imports this installed tessera, wherever the command is called from
and whichever environment is active. This is a module of its own, outside the
``tessera`` package, so that starting the command does not import NumPy, the
extension and the runtime only to exec a program.
"""

import os
import sys

__all__ = ["main", "program_path"]


def program_path():
    """The path of the C++ front end installed with this module."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "tessera", "bin", "tessera")


def main(argv=None):
    """Run ``tessera ARGS...``: exec the installed program with ``argv`` (default
    ``sys.argv[1:]``). Returns 1 (with a message on stderr) only when it cannot."""
    args = sys.argv[1:] if argv is None else list(argv)
    program = program_path()
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        print(f"tessera: [tessera] the command's program is missing or not executable: {program} "
              "(installed by `pip install .` with the tessera package; reinstall tessera)",
              file=sys.stderr)
        return 1
    if not os.environ.get("TESSERA_PYTHON") and sys.executable:
        os.environ["TESSERA_PYTHON"] = sys.executable
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(program, [program, *args])
    except OSError as error:
        print(f"tessera: [tessera] cannot start the command's program: {program}: "
              f"{error.strerror}", file=sys.stderr)
        return 1
    return 1  # not reached: execv returns only by raising


if __name__ == "__main__":
    sys.exit(main())
