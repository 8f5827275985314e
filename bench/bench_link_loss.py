"""Time from a pulled cable to the launcher's error, and to the whole job gone.

    .venv/bin/python bench/bench_link_loss.py [--build build] [--trials 3] [--peer-timeout 60]

Needs root (network namespaces). Three emulated hosts (tests/distributed/netns/hosts.sh),
4 ranks of a small data-parallel loop (tests/distributed/netns/long_train.py) started on node1
through an rsh agent; once they train, node2's link is brought down. Measured per trial: seconds
from the link going down to the launcher's last line, to its exit, and to the moment no process
of the job is left on any host. The peer, in the same run: plain `mpirun` with Open MPI's
defaults (and the network given, without which it does not start), stopped after
--peer-timeout seconds if it has not ended by then.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

from machine import machine_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOSTS_SH = os.path.join(ROOT, "tests", "distributed", "netns", "hosts.sh")
SCRIPT = os.path.join(ROOT, "tests", "distributed", "netns", "long_train.py")


def hosts(*args):
    return subprocess.run([HOSTS_SH, *args], capture_output=True, text=True)


def trial(prefix, cmd, started, timeout):
    """(s to last line, s to exit, s to no process left, last line); None for what did not happen."""
    up = hosts("up", prefix, "3")
    if up.returncode != 0:
        sys.exit(f"bench_link_loss: cannot make the hosts: {up.stderr.strip()}")
    try:
        p = subprocess.Popen([HOSTS_SH, "run", prefix, "node1", "exec " + cmd], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        lines, stamps = [], []

        def read():
            for line in p.stdout:
                lines.append(line.rstrip("\n"))
                stamps.append(time.time())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.time() + 90
        while not any(started in line for line in lines):
            if time.time() > deadline or p.poll() is not None:
                sys.exit("bench_link_loss: the job did not start:\n" + "\n".join(lines))
            time.sleep(0.05)
        time.sleep(1)
        n_before = len(lines)
        hosts("link", prefix, "node2", "down")
        cut = time.time()
        exited = gone = None
        while time.time() - cut < timeout:
            if exited is None and p.poll() is not None:
                exited = time.time() - cut
            if gone is None and not hosts("pids", prefix).stdout.split():
                gone = time.time() - cut
            if exited is not None and gone is not None:
                break
            time.sleep(0.05)
        reader.join(1)
        last = (stamps[-1] - cut, lines[-1]) if len(lines) > n_before else (None, "")
        return last[0], exited, gone, last[1]
    finally:
        hosts("down", prefix)


def fmt(x, timeout):
    return f"{x:5.1f} s" if x is not None else f">{timeout:.0f} s"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--peer-timeout", type=float, default=60)
    args = ap.parse_args()
    tessera = os.path.abspath(os.path.join(args.build, "tessera"))
    print(machine_line())
    print("job: 4 ranks (node1: 2, node2: 1, node3: 1), node2's link brought down while training")
    prefix = f"bl{os.getpid()}"
    agent = f"/tmp/tessera-netns/{prefix}/agent"
    ours = f"{tessera} run -n 4 --hosts node1:2,node2:1,node3:1 --mca plm_rsh_agent {agent} {SCRIPT}"
    results = []
    for k in range(args.trials):
        r = trial(prefix, ours, "[rank 0@node1] training", 30)
        results.append(r)
        print(f"tessera run, trial {k + 1}: error after {fmt(r[0], 30)}, launcher gone after {fmt(r[1], 30)}, "
              f"every process gone after {fmt(r[2], 30)}: {r[3]}")
    python = os.environ.get("TESSERA_PYTHON", sys.executable)
    peer = (f"env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 4 --host node1:2,node2:1,node3:1 "
            f"--mca plm_rsh_agent {agent} --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include "
            f"10.77.0.0/24 -x PYTHONPATH --tag-output {python} {SCRIPT}")
    p = trial(prefix, peer, "[1,0]<stdout>:training", args.peer_timeout)
    print(f"mpirun (Open MPI defaults): error after {fmt(p[0], args.peer_timeout)}, mpirun gone after "
          f"{fmt(p[1], args.peer_timeout)}, every process gone after {fmt(p[2], args.peer_timeout)}")
    med = [statistics.median(r[i] for r in results if r[i] is not None) if all(r[i] is not None for r in results)
           else None for i in range(3)]
    print(f"median of {args.trials}: error {fmt(med[0], 30)}, every process gone {fmt(med[2], 30)}"
          + (f"; mpirun: every process gone {p[2] / med[2]:.1f}x later" if med[2] and p[2] else
             f"; mpirun had not ended after {args.peer_timeout:.0f} s" if p[2] is None else ""))


if __name__ == "__main__":
    main()
