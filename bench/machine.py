"""What every Python benchmark prints first: the machine; a free local port
for the benchmarks that start PyTorch process groups, and how their workers
end."""

import os
import platform
import socket
import sys


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's guess)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    return f"machine: {cpu_model()}, {os.cpu_count()} cores"


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def end_torch_worker(dist) -> None:
    """Ends a PyTorch worker whose work is done and written: destroys its
    process group, then leaves without the interpreter's teardown, where
    gloo's threads now and then abort the process ("terminate called without
    an active exception", after destroy_process_group too), which failed a
    launch whose figures were already out."""
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
