"""Tests of `tessera run` as a cluster launcher.

usage: cluster.py TESSERA CASE

Cases on emulated hosts (network namespaces made by hosts.sh, ranks started
through an rsh agent that enters them, each with a fresh environment as ssh
gives): hosts, env_list, mesh_2d, network, start_errors, rank_dies, slurm, link_down,
heartbeat_stop, sigterm, sigint, sigkill. Exit status 77 (ctest: skipped) where namespaces cannot be made.
Cases on this machine alone: local_sigterm, local_sigint, local_sigkill, options, output_dir,
output_dir_restarts, partial_lines.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DIST = os.path.dirname(HERE)
HOSTS_SH = os.path.join(HERE, "hosts.sh")
TESSERA = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
PREFIX = f"ts{os.getpid()}"
NETDIR = f"/tmp/tessera-netns/{PREFIX}"
AGENT = ["--mca", "plm_rsh_agent", f"{NETDIR}/agent"]


BOILERPLATE = re.compile(r"^-{20,}$|^ORTE |^mpirun noticed|^Primary job|^WARNING: Open MPI", re.M)


def no_boilerplate(out):
    """Open MPI's own messages stay hidden without --verbose."""
    if BOILERPLATE.search(out):
        fail("Open MPI's message shown without --verbose", out)


def fail(msg, output=""):
    print(output)
    print(f"FAIL: {msg}")
    sys.exit(1)


def hosts(*args, check=True):
    return subprocess.run([HOSTS_SH, *args], capture_output=True, text=True, check=check)


def pids():
    return hosts("pids", PREFIX).stdout.split()


def command(run_args):
    """The shell command that runs `tessera run ARGS` (exec: same pid)."""
    return "exec " + " ".join(_quote(a) for a in [TESSERA, "run", *run_args])


def _quote(a):
    return a if re.fullmatch(r"[\w@%+=:,./-]+", a) else "'" + a.replace("'", "'\\''") + "'"


def on_node1(run_args, env=None, **kw):
    """`tessera run ARGS` started on node1, as a user logged in there."""
    return subprocess.Popen([HOSTS_SH, "run", PREFIX, "node1", command(run_args)], env=env or os.environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def run_on_node1(run_args, env=None, timeout=120):
    p = on_node1(run_args, env)
    out, _ = p.communicate(timeout=timeout)
    return p.returncode, out


class Output:
    """The lines of a process's output, read by a thread as they come."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern, timeout):
        """Fail unless a line matches within timeout seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(re.search(pattern, line) for line in self.lines):
                return
            if not self.thread.is_alive():
                break
            time.sleep(0.05)
        fail(f"no line matching {pattern!r} within {timeout} s", self.text())

    def finish(self, timeout):
        """Wait up to timeout seconds for the end of the output."""
        self.thread.join(timeout)
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        return self.text()

    def text(self):
        return "\n".join(self.lines)


def wait_gone(what, timeout):
    """Seconds until what() is empty, or fail naming what is left."""
    start = time.time()
    while time.time() - start < timeout:
        if not what():
            return time.time() - start
        time.sleep(0.1)
    left = what()
    listing = subprocess.run(["ps", "-o", "pid,ppid,pgid,args", "-p", ",".join(left)], capture_output=True,
                             text=True).stdout
    fail(f"processes left {timeout} s later:\n{listing}")


# ---------------------------------------------------------------- cases on emulated hosts

def case_hosts():
    # Collectives over three hosts from a hostfile (2 + 1 + 1 slots).
    hostfile = f"{NETDIR}/hostfile-211"
    with open(hostfile, "w") as f:
        f.write("# three hosts\nnode1 slots=2\nnode2 slots=1  # one slot\nnode3 slots=1\n")
    code, out = run_on_node1(["-n", "4", "--hostfile", hostfile, *AGENT, os.path.join(DIST, "collectives.tsl")])
    print(out)
    if code != 0 or not re.search(r"^\[rank 3@node3\] ok$", out, re.M):
        fail("collectives.tsl over 3 hosts")
    # Data-parallel training, one rank per host, against one process.
    code, out = run_on_node1(["-n", "3", "--hosts", "node1:1,node2:1,node3:1", *AGENT,
                              os.path.join(DIST, "dp_fit.py")])
    print(out)
    if code != 0 or "ok" not in out:
        fail("dp_fit.py over 3 hosts")
    # The environment: default variables, -x from the environment and with a
    # value, a variable not named (absent), threads from each host's cores.
    env = dict(os.environ, OMP_SCHEDULE="static", MY_LIST="a b", SECRET_VAR="1")
    code, out = run_on_node1(["-n", "5", "--hostfile", f"{NETDIR}/hostfile", *AGENT, "-x", "MY_LIST", "-x",
                              "MY_FLAG=on", os.path.join(HERE, "env_check.py"),
                              f"PYTHONPATH={env['PYTHONPATH']}", "OMP_SCHEDULE=static", "MY_LIST=a b",
                              "MY_FLAG=on", "-SECRET_VAR"], env)
    print(out)
    if code != 0 or "[rank 0@node1] env ok on 3 hosts" not in out:
        fail("environment on 3 hosts")


def case_mesh_2d():
    # A 2-D mesh across two hosts: the tensor groups (consecutive ranks) each
    # within a host, the data groups across them. Tensor-parallel layers
    # trained with fit on the data axis, plain and under ZeRO, against one
    # process (tests/distributed/zero_mesh.py); the placement as documented.
    code, out = run_on_node1(["-n", "4", "--hosts", "node1:2,node2:2", *AGENT,
                              "--mesh", "data=2,tensor=2", os.path.join(DIST, "zero_mesh.py")],
                             timeout=300)
    print(out)
    if code != 0 or not re.search(r"^\[rank 3@node2\] rank 3: ok$", out, re.M):
        fail("zero_mesh.py on a data=2 x tensor=2 mesh over 2 hosts")
    code, out = run_on_node1(["-n", "4", "--hosts", "node1:2,node2:2", *AGENT,
                              "--mesh", "data=2,tensor=2", os.path.join(DIST, "mesh_env.py")])
    print(out)
    if code != 0 or not re.search(r"^\[rank 3@node2\] rank 3: ok$", out, re.M):
        fail("mesh_env.py on a data=2 x tensor=2 mesh over 2 hosts")


def case_env_list():
    # A user's own mca_base_env_list (Open MPI refuses it beside -x): tessera
    # adds its variables to the list instead.
    env = dict(os.environ, OMPI_MCA_mca_base_env_list="MY_OTHER=x", OMP_SCHEDULE="static")
    code, out = run_on_node1(["-n", "3", "--hostfile", f"{NETDIR}/hostfile", *AGENT, "-x", "MY_FLAG=on",
                              os.path.join(HERE, "env_check.py"), "MY_OTHER=x", "MY_FLAG=on",
                              "OMP_SCHEDULE=static", f"PYTHONPATH={env['PYTHONPATH']}"], env)
    print(out)
    if code != 0 or "[rank 0@node1] env ok on 2 hosts" not in out:
        fail("mca_base_env_list")


def case_network():
    # node1 and node2 have a second interface on a network that reaches
    # nothing. The launcher's choice of network makes the job work...
    code, out = run_on_node1(["-n", "4", "--hosts", "node1:2,node2:2", *AGENT, os.path.join(DIST, "collectives.tsl")])
    print(out)
    if code != 0 or not re.search(r"^\[rank 3@node2\] ok$", out, re.M):
        fail("collectives with a second interface on two hosts")
    # ...and when the user's own setting lets Open MPI try that network, the
    # job is stopped (not left hanging) with the setting to use.
    start = time.time()
    code, out = run_on_node1(["-n", "4", "--hosts", "node1:2,node2:2", *AGENT, "--mca", "btl_tcp_if_exclude",
                              "127.0.0.1/8", os.path.join(DIST, "collectives.tsl")], timeout=90)
    elapsed = time.time() - start
    print(out)
    print(f"--- status {code} after {elapsed:.1f} s")
    want = "--mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24"
    if code == 0 or want not in out.strip().splitlines()[-1]:
        fail(f"the last line does not say: {want}")
    no_boilerplate(out)


def case_start_errors():
    # A host that does not exist: the remote shell's own words, on one line.
    code, out = run_on_node1(["-n", "4", "--hosts", "node1:2,node7:2", *AGENT, os.path.join(DIST, "collectives.tsl")])
    print(out)
    want = "tessera run: could not start Open MPI's daemon (orted) on a remote host: Cannot open network namespace"
    if code == 0 or want not in out.strip().splitlines()[-1]:
        fail(f"the last line does not say: {want}")
    no_boilerplate(out)
    # More ranks than slots.
    code, out = run_on_node1(["-n", "5", "--hosts", "node1:2,node2:2", *AGENT, os.path.join(DIST, "collectives.tsl")])
    print(out)
    if code == 0 or "the hosts have fewer slots than the 5 ranks asked for" not in out.strip().splitlines()[-1]:
        fail("more ranks than slots")
    no_boilerplate(out)


def case_rank_dies():
    # A rank killed on node3 while the others wait for it in a collective: the
    # last line names it and its host, and the whole job is gone in seconds.
    env = dict(os.environ, TESSERA_TEST_DEATH="kill")
    start = time.time()
    p = on_node1(["-n", "4", "--hosts", "node1:2,node2:1,node3:1", *AGENT, os.path.join(DIST, "rank_dies.py")], env)
    out = Output(p).finish(60)
    took = time.time() - start
    print(out)
    last = out.strip().splitlines()[-1]
    want = r"^tessera run: rank 3 of 4 \(pid \d+ on node3\) was killed by signal 9 \(SIGKILL\); the other ranks"
    if p.returncode == 0 or not re.search(want, last):
        fail(f"the last line does not match {want}")
    no_boilerplate(out)
    gone = wait_gone(pids, 10)
    print(f"launcher done after {took:.1f} s, every process gone {gone:.1f} s later")


def case_slurm():
    # Inside a SLURM allocation (emulated: SLURM is not installed here, and
    # Open MPI's SLURM components, which would start daemons with srun, are
    # turned off and the hosts given to mpirun after --): -n comes from
    # SLURM_NTASKS, and the hosts tessera reads from the node list decide the
    # network and the [rank r@host] labels.
    env = dict(os.environ, SLURM_JOB_ID="77", SLURM_NTASKS="3", SLURM_JOB_NODELIST="node[1-3]")
    code, out = run_on_node1(["--verbose", *AGENT, "--", "--mca", "ras", "^slurm", "--mca", "plm", "^slurm",
                              "--mca", "ess", "^slurm", "--host", "node1,node2,node3",
                              os.path.join(DIST, "collectives.tsl")], env)
    print(out)
    if code != 0 or not re.search(r"^\[rank 2@node3\] ok$", out, re.M):
        fail("3 ranks from SLURM_NTASKS on the hosts of SLURM_JOB_NODELIST")
    if "-n 3 " not in out or "--mca btl_tcp_if_include 10.77.0.0/24" not in out:
        fail("-n from SLURM_NTASKS and the network from the node list")
    # A job SLURM requeues keeps its id, and its fits resume their runs.
    code, out = run_on_node1(["--checkpoint-dir", f"{NETDIR}/slurm-ck", *AGENT, "--",
                              "--mca", "ras", "^slurm", "--mca", "plm", "^slurm", "--mca", "ess",
                              "^slurm", "--host", "node1,node2,node3",
                              os.path.join(DIST, "collectives.tsl")], env)
    if code != 0 or "run id slurm77 (TESSERA_RUN_ID=slurm77 continues it)" not in out:
        print(out)
        fail("the run id of a SLURM job is slurm<SLURM_JOB_ID>")


def start_training(n=4, env=None):
    p = on_node1(["-n", str(n), "--hosts", "node1:2,node2:1,node3:1", *AGENT, os.path.join(HERE, "long_train.py")],
                 env=env)
    out = Output(p)
    out.wait_for(r"^\[rank 0@node1\] training$", 60)
    time.sleep(1)  # a few steps
    return p, out


def case_link_down():
    p, output = start_training()
    hosts("link", PREFIX, "node2", "down")
    cut = time.time()
    out = output.finish(30)
    took = time.time() - cut
    print(out)
    print(f"--- status {p.returncode} {took:.1f} s after the link went down")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if p.returncode in (0, None) or not re.search(r"host node2 \(rank 2 of 4\)", last):
        fail("the last line does not name node2 and rank 2")
    no_boilerplate(out)
    gone = wait_gone(pids, max(0.5, 15 - took))
    print(f"job gone {took + gone:.1f} s after the link went down")


def case_heartbeat_stop():
    """Authenticated heartbeats across hosts (node1 and node2 have a second,
    dead interface): rank 2 on node2 stopped (SIGSTOP) is named by the
    heartbeats within TESSERA_FAILURE_TIMEOUT, and no rank missed or refused
    its peers' heartbeats before."""
    timeout = 3.0
    p, output = start_training(env=dict(os.environ, TESSERA_FAILURE_TIMEOUT=str(timeout)))
    time.sleep(timeout + 1)  # every rank would have warned of a peer never heard from by now
    ns = f"{PREFIX}-node2"
    victim = None
    listed = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    for pid in listed.split():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        python = b"python" in os.path.basename(args[0])
        if python and any(a.endswith(b"long_train.py") for a in args):
            victim = int(pid)
    if victim is None:
        fail("no rank process on node2", output.text())
    os.kill(victim, signal.SIGSTOP)
    stopped = time.time()
    named = r"RuntimeError: .*rank 2 on host node2 \(10\.77\.0\.2\) has not been heard from"
    output.wait_for(named, timeout + 4)
    took = time.time() - stopped
    out = output.finish(30)
    print(out)
    print(f"--- status {p.returncode}; rank 2 named {took:.1f} s after it stopped")
    if took < timeout - 0.5:
        fail(f"rank 2 was named {took:.1f} s after it stopped, before the timeout")
    for bad in ("received no heartbeat", "heartbeat datagrams on"):
        if bad in out:
            fail(f"a rank missed or refused its peers' heartbeats ({bad!r})", out)
    wait_gone(pids, 15)


def case_signal(sig):
    def run():
        p, output = start_training()
        os.kill(p.pid, sig)
        gone = wait_gone(pids, 10)
        print(output.finish(2))
        print(f"{signal.Signals(sig).name} of the launcher: job gone after {gone:.1f} s "
              f"(launcher status {p.returncode})")
        if sig != signal.SIGKILL and p.returncode != 128 + sig:
            fail(f"launcher status {p.returncode}, expected {128 + sig}")
    return run


# ---------------------------------------------------------------- cases on this machine

def local_signal(sig):
    def run():
        tmp = tempfile.mkdtemp()
        script = os.path.join(tmp, f"train_{os.getpid()}_{sig}.py")
        name = os.path.basename(script)

        def left():
            found = subprocess.run(["pgrep", "-f", name], capture_output=True, text=True).stdout.split()
            return [q for q in found if int(q) != os.getpid()]

        try:
            shutil.copy(os.path.join(HERE, "long_train.py"), script)
            p = subprocess.Popen([TESSERA, "run", "-n", "2", script], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            output = Output(p)
            output.wait_for(r"^\[rank 0\] training$", 60)
            os.kill(p.pid, sig)
            gone = wait_gone(left, 10)
            print(output.finish(2))
            print(f"{signal.Signals(sig).name} of the launcher: every process gone after {gone:.1f} s")
        finally:
            for q in left():  # what a failed run left behind
                os.kill(int(q), signal.SIGKILL)
            shutil.rmtree(tmp)
    return run


def case_options():
    def cli(*args):
        p = subprocess.run([TESSERA, "run", *args], capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    code, out = cli("--help")
    for opt in ["-n N", "--hosts", "--hostfile", "--mca KEY VALUE", "-x VAR[=VALUE]", "--bind-to", "--map-by",
                "--threads", "--output-dir", "--trace", "--verbose", "--help", "--  "]:
        if opt not in out:
            fail(f"--help does not list {opt}", out)
    tsl = os.path.join(DIST, "one_rank.tsl")
    cases = [
        (["-n", "0", tsl], "-n must be a positive integer, got '0'"),
        (["-n", "2", "--threads", "x", tsl], "--threads must be a positive integer, got 'x'"),
        (["-n", "2", "--bind-to", "cores", tsl], "--bind-to must be one of"),
        (["-n", "2", "--map-by", "nod", tsl], "got 'nod'"),
        (["-n", "2", "--mca", "btl"], "--mca needs a KEY and a VALUE"),
        (["-n", "2", "-x", "TESSERA_SURELY_UNSET_VAR", tsl], "no variable TESSERA_SURELY_UNSET_VAR"),
        (["-n", "2", "-x", "1BAD=2", tsl], "'1BAD=2' is not VAR or VAR=VALUE"),
        (["-n", "2", "--hostfile", "/nonexistent/hosts", tsl], "cannot read '/nonexistent/hosts'"),
        (["-n", "2", "--hosts", "a:0", tsl], "the slots of 'a:0' must be a positive integer"),
        (["-n", "2", "--hosts", "a", "--hostfile", "f", tsl], "--hosts or --hostfile, not both"),
        (["-n", "2", "--bogus", tsl], "unknown option '--bogus'"),
        (["-n", "2", "--", "--display-map"], "no program after '--'"),
    ]
    for args, want in cases:
        code, out = cli(*args)
        if code == 0 or want not in out:
            fail(f"tessera run {' '.join(args)}: expected an error containing {want!r}", out)
    # A hostfile line Open MPI would refuse, named by file and line.
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
        f.write("# hosts\nnode1 slots=2\nnode2 slots=two\n")
    try:
        code, out = cli("-n", "2", "--hostfile", f.name, tsl)
        if code == 0 or f"{f.name}:3: slots must be a positive integer, got 'slots=two'" not in out:
            fail("a bad hostfile line", out)
    finally:
        os.unlink(f.name)
    # Launcher inputs are bounded before they are expanded or read, and
    # refused before mpirun starts, naming the option, variable or file.
    long_name = "h" * 57
    cases = [
        (["-n", "2", "--hostfile", "/dev/zero", tsl],
         "[run] the hostfile is not a regular file: a character device (--hostfile /dev/zero)"),
        (["-n", "2", "--hosts", f"localhost,{long_name}", tsl],
         f"[run] a host name is too long for Open MPI: '{long_name}' has 57 characters"),
    ]
    for args, want in cases:
        code, out = cli(*args)
        if code == 0 or want not in out or "exit status" in out:
            fail(f"tessera run {' '.join(args)}: expected an error containing {want!r}", out)
    slurm = dict(os.environ, SLURM_JOB_ID="1", SLURM_NTASKS="2",
                 SLURM_JOB_NODELIST="n[1-99999]x[1-99999]")
    p = subprocess.run([TESSERA, "run", tsl], capture_output=True, text=True, timeout=60, env=slurm)
    want = "it names 9999800001 hosts, more than the 65536 tessera run accepts (SLURM_JOB_NODELIST="
    if p.returncode == 0 or want not in p.stderr:
        fail("a SLURM node list of 10^10 hosts", p.stdout + p.stderr)
    # Options after -- go to mpirun as they are.
    code, out = cli("-n", "2", "--verbose", "--", "--display-map", os.path.join(DIST, "collectives.tsl"))
    if code != 0 or "Data for JOB" not in out or "[rank 1] ok" not in out:
        fail("-- --display-map", out)
    print("ok")


def case_partial_lines():
    n = 3
    p = subprocess.run([TESSERA, "run", "-n", str(n), os.path.join(HERE, "partial_lines.py")],
                       capture_output=True, text=True, timeout=60)
    lines = (p.stdout + p.stderr).splitlines()
    print("\n".join(lines))
    if p.returncode != 0:
        fail("partial_lines.py failed")
    for r in range(n):
        want = [f"[rank {r}] {r}<{r}{r}{r}:{k}{r}>" for k in range(30)]
        got = [line for line in lines if line.startswith(f"[rank {r}] ")]
        if sorted(got) != sorted(want):
            fail(f"rank {r}'s lines: {sorted(set(got) ^ set(want))[:6]}")
    print("ok")


def case_output_dir_n4():
    # Every rank's log is written (the logs are opened at a rank's first
    # line, not all at start), with whole lines from chunks mpirun interleaves.
    n = 4
    tmp = tempfile.mkdtemp()
    try:
        logs = os.path.join(tmp, "logs")
        p = subprocess.run([TESSERA, "run", "-n", str(n), "--output-dir", logs,
                            os.path.join(HERE, "partial_lines.py")],
                           capture_output=True, text=True, timeout=90)
        out = p.stdout + p.stderr
        print(out)
        if p.returncode != 0 or "[rank" in out:
            fail("the job succeeds and its lines go to the files only", out)
        if sorted(os.listdir(logs)) != [f"rank-{r}.log" for r in range(n)]:
            fail(f"files in the log directory: {os.listdir(logs)}")
        for r in range(n):
            with open(os.path.join(logs, f"rank-{r}.log")) as f:
                got = f.read().splitlines()
            want = [f"{r}<{r}{r}{r}:{k}{r}>" for k in range(30)]
            if sorted(got) != sorted(want):
                fail(f"rank-{r}.log: {sorted(set(got) ^ set(want))[:6]}")
    finally:
        shutil.rmtree(tmp)
    print("ok")


def case_output_dir():
    tmp = tempfile.mkdtemp()
    try:
        logs = os.path.join(tmp, "logs")
        os.makedirs(logs)
        with open(os.path.join(logs, "rank-7.log"), "w") as f:
            f.write("an older run's\n")
        # Names that are not the logs of a rank: left alone (a rank number
        # beyond 64 bits was an IndexError: stol).
        odd = ["rank-99999999999999999999.log", "rank-007.log", "rank-1.log.old"]
        for name in odd:
            with open(os.path.join(logs, name), "w") as f:
                f.write("not a log of this run\n")
        p = subprocess.run([TESSERA, "run", "-n", "2", "--output-dir", logs, os.path.join(DIST, "rank_fails.tsl")],
                           capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        print(out)
        if p.returncode == 0 or "[rank" in out:
            fail("with --output-dir the ranks' lines go to the files only")
        if not re.search(r"^tessera run: rank 1 of 2 failed \(exit code 1\): RuntimeError: \[assert\]", out, re.M):
            fail("the launcher's summary is still shown")
        if sorted(os.listdir(logs)) != sorted(["rank-0.log", "rank-1.log", *odd]):
            fail(f"files in the log directory: {os.listdir(logs)}")
        with open(os.path.join(logs, "rank-1.log")) as f:
            text = f.read()
        if "rank one gives up" not in text or "tessera-run" in text:
            fail("rank-1.log", text)
    finally:
        shutil.rmtree(tmp)
    print("ok")


def case_output_dir_restarts():
    # With --max-restarts, every launch appends to the ranks' logs after a
    # line of its own: the failed launch's traceback is kept.
    tmp = tempfile.mkdtemp()
    try:
        logs = os.path.join(tmp, "logs")
        os.makedirs(logs)
        with open(os.path.join(logs, "rank-1.log"), "w") as f:
            f.write("an older run's\n")
        # A checkpoint folder whose step does not fit a number is no
        # checkpoint (it was an IndexError: stol when the launcher looked for
        # the newest one to restart from).
        ckpts = os.path.join(tmp, "ckpts")
        os.makedirs(os.path.join(ckpts, "ckpt-99999999999999999999"))
        with open(os.path.join(ckpts, "ckpt-99999999999999999999", "manifest.json"), "w") as f:
            f.write("{}")
        p = subprocess.run([TESSERA, "run", "-n", "2", "--max-restarts", "2", "--output-dir", logs,
                            "--checkpoint-dir", ckpts, os.path.join(HERE, "restart_log.py")],
                           capture_output=True, text=True, timeout=60)
        out = p.stdout + p.stderr
        print(out)
        if p.returncode != 0 or "restart 1 of 2" not in out or "Error" in out.split("restart 1")[1]:
            fail("the job restarts once and succeeds", out)
        header = re.compile(r"^=== launch (\d) of 3, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC ===$",
                            re.M)
        for r in range(2):
            with open(os.path.join(logs, f"rank-{r}.log")) as f:
                text = f.read()
            print(f"--- rank-{r}.log\n{text}")
            # Each launch's lines after its header (a rank's stdout and
            # stderr may come in either order within a launch).
            parts = header.split(text)
            if parts[0] != "" or parts[1::2] != ["1", "2"]:
                fail(f"rank-{r}.log: a header for launch 1 and for launch 2, at the start of each",
                     text)
            first, second = parts[2], parts[4]
            want = [f"rank {r} launch 0 starts"]
            if r == 1:
                want += ["Traceback (most recent call last):",
                         "RuntimeError: rank 1 fails on launch 0"]
            for w in want:
                if w not in first:
                    fail(f"rank-{r}.log: no {w!r} in the first launch's lines", text)
            if second.split("\n")[1:3] != [f"rank {r} launch 1 starts", f"rank {r} launch 1 done"]:
                fail(f"rank-{r}.log: the second launch's lines", text)
            if "an older run's" in text or "launch 3 of 3" in text:
                fail(f"rank-{r}.log: made fresh by the first launch, one line per launch", text)
    finally:
        shutil.rmtree(tmp)
    print("ok")


NETNS_CASES = {
    "hosts": case_hosts,
    "env_list": case_env_list,
    "mesh_2d": case_mesh_2d,
    "network": case_network,
    "start_errors": case_start_errors,
    "rank_dies": case_rank_dies,
    "slurm": case_slurm,
    "link_down": case_link_down,
    "heartbeat_stop": case_heartbeat_stop,
    "sigterm": case_signal(signal.SIGTERM),
    "sigint": case_signal(signal.SIGINT),
    "sigkill": case_signal(signal.SIGKILL),
}
LOCAL_CASES = {
    "local_sigterm": local_signal(signal.SIGTERM),
    "local_sigint": local_signal(signal.SIGINT),
    "local_sigkill": local_signal(signal.SIGKILL),
    "options": case_options,
    "output_dir": case_output_dir,
    "output_dir_restarts": case_output_dir_restarts,
    "output_dir_n4": case_output_dir_n4,
    "partial_lines": case_partial_lines,
}


def main():
    if CASE in LOCAL_CASES:
        LOCAL_CASES[CASE]()
        return
    # Namespaces of an earlier run that was killed outright (no cleanup then).
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for stale in sorted(set(re.findall(r"^ts(\d+)-", listed, re.M))):
        if not os.path.exists(f"/proc/{stale}"):
            hosts("down", f"ts{stale}", check=False)
    up = hosts("up", PREFIX, "3", check=False)
    if up.returncode == 77:
        print(f"SKIP: {up.stderr.strip()}")
        sys.exit(77)
    # ctest's timeout sends SIGTERM: the namespaces go anyway.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        if up.returncode != 0:
            fail(f"hosts.sh up: {up.stderr}")
        NETNS_CASES[CASE]()
    finally:
        hosts("down", PREFIX, check=False)
    print("PASS")


if __name__ == "__main__":
    main()
