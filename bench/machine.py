"""What every Python benchmark prints first: the machine; and a free local port
for the benchmarks that start PyTorch process groups."""

import os
import platform
import socket


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
