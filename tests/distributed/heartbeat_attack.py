"""Heartbeats under attack (run by ctest as dist_heartbeat_attack_<scenario>_n2).

usage: heartbeat_attack.py TESSERA_CLI SCENARIO

Runs heartbeat_rank.py (copied under a name of its own) on 2 ranks under
`tessera run` with TESSERA_FAILURE_TIMEOUT=3. Once both ranks are running,
this process finds their heartbeat sockets (/proc/<pid>/fd and
/proc/net/udp), captures some of their datagrams on the loopback interface
(AF_PACKET, where this process may) and, for a few seconds, sends them:

- junk: datagrams of every wrong size;
- forgeries: datagrams of the right size with a made-up MAC, saying
  "goodbye" and "rank r failed"; and, in the layout heartbeats had before
  they were authenticated, a "goodbye" and a "failed" notice carrying the job
  id read from a captured datagram (which stopped a healthy job, blaming a
  healthy rank);
- replays of captured datagrams from this process's own socket, and (with a
  raw socket, where this process may) from the sender's own address and
  port;
- a flood of forgeries.

Then it lets the ranks go on (heartbeat_rank.py), and checks, by scenario:

- every scenario: the heartbeat sockets are bound to loopback (all ranks are
  on this host), not to every address.
- finish: every rank got the job's secret from the launcher and took it out
  of its environment (heartbeat_rank.py), the job ends normally ("ok" from
  every rank), and each rank's
  line "ignored N heartbeat datagrams" counts the junk, the forgeries, the
  replays from elsewhere and (with a raw socket) the replays.
- stop: the last rank stops itself (SIGSTOP) after the attack: it is still
  named, within the failure timeout plus slack, and the job is gone.
- mpirun: as finish, under plain mpirun (no launcher: rank 0 draws the
  secret and gives it to the other rank through MPI at start-up).
"""

import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 3.0
EARLY = 1.5
SLACK = 3.0
ATTACK_SECONDS = 4.0


def fail(msg, lines):
    for t, line in lines:
        print(f"{t:7.2f} {line}")
    sys.exit("FAIL: " + msg)


def rank_pids(name):
    """The pids of the Python processes running the script `name`."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"python" in os.path.basename(args[0]) and any(name.encode() in a for a in args):
            pids.append(int(pid))
    return pids


def udp_sockets(pids):
    """(ip, port) of every IPv4 UDP socket the processes hold."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                m = re.match(r"socket:\[(\d+)\]", link)
                if m:
                    inodes.add(m.group(1))
        except OSError:
            continue
    found = []
    with open("/proc/net/udp") as f:
        next(f)
        for line in f:
            fields = line.split()
            ip_hex, port_hex = fields[1].split(":")
            if fields[9] in inodes:
                found.append((socket.inet_ntoa(struct.pack("<I", int(ip_hex, 16))),
                              int(port_hex, 16)))
    return found


def capture(ports, seconds):
    """Datagrams to `ports` seen on lo: (src, sport, dst, dport, payload); [] where this
    process may not capture."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        s.bind(("lo", 0))
    except (OSError, AttributeError) as e:
        print(f"note: no capture on lo ({e}): the replays are not tested")
        return []
    s.settimeout(0.2)
    out = []
    end = time.time() + seconds
    while time.time() < end:
        try:
            frame, addr = s.recvfrom(65536)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14 + 20 + 8:
            continue
        ip = frame[14:]
        ihl = (ip[0] & 15) * 4
        if ip[0] >> 4 != 4 or ip[9] != 17:
            continue
        sport, dport = struct.unpack("!HH", ip[ihl:ihl + 4])
        if dport in ports:
            out.append((socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport,
                        bytes(ip[ihl + 8:])))
    s.close()
    return out


def spoofer():
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    except OSError as e:
        print(f"note: no raw socket ({e}): the replays from the sender's address are not tested")
        return None


def send_spoofed(raw, src, sport, dst, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), random.getrandbits(16), 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    raw.sendto(ip + udp, (dst, 0))


def forgeries(job, ranks):
    """Datagrams that tell a rank goodbye or that a rank failed, with no valid MAC."""
    out = []
    for to in range(ranks):
        frm = (to + 1) % ranks
        for kind, subject in ((2, -1), (3, to), (3, frm)):
            # The authenticated layout: launch, seq, kind, from, to, subject,
            # cut_off, by, silent, a made-up MAC.
            out.append(struct.pack("<QQiiiiiid", job, 2**40, kind, frm, to, subject, 0, 0, 9.0)
                       + os.urandom(32))
            # The layout before: job id, kind, from, to, subject, cut_off, silent.
            out.append(struct.pack("<Qiiiiixxxxd", job, kind, frm, to, subject, 0, 9.0))
    return out


def main():
    cli, scenario = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="tessera-hb-attack-")
    name = f"heartbeat_rank_{os.getpid()}_{int(time.time() * 1000) % 10**9}.py"
    script = os.path.join(work, name)
    shutil.copy(os.path.join(HERE, "heartbeat_rank.py"), script)
    go = os.path.join(work, "go")
    env = dict(os.environ, TESSERA_FAILURE_TIMEOUT=str(TIMEOUT), TESSERA_TEST_GO=go,
               TESSERA_TEST_LOSS="stop" if scenario == "stop" else "none")
    cmd = [cli, "run", "-n", "2", script]
    if scenario == "mpirun":
        env.update(TESSERA_TEST_NO_LAUNCHER="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env.pop("TESSERA_JOB_KEY", None)
        python = os.environ.get("TESSERA_PYTHON", sys.executable)
        # Each rank's output in files of its own: two ranks' lines on one
        # pipe can be merged mid-line by mpirun, which hid "ready" and "ok".
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", "2",
               "--output-filename", os.path.join(work, "out"), python, script]
    start = time.time()
    own = open(os.path.join(work, "mpirun.out"), "w+") if scenario == "mpirun" else None
    p = subprocess.Popen(cmd, stdout=own or subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    timer = threading.Timer(120, p.kill)
    timer.start()
    lines = []
    ready = threading.Event()

    def read():
        for line in p.stdout:
            lines.append((time.time() - start, line.rstrip("\n")))
            if sum(1 for _, x in lines if x.endswith("] ready")) == 2:
                ready.set()
        ready.set()

    def read_files():
        # Under mpirun: each rank's files (out/1/rank.R/stdout, stderr) as the
        # launcher's "[rank R] " lines, read again until the job ends (what
        # mpirun itself prints, a copy of the same, is kept as "mpirun: ...").
        seen = {}
        while True:
            done = p.poll() is not None
            for rank in range(2):
                for stream in ("stdout", "stderr"):
                    path = os.path.join(work, "out", "1", f"rank.{rank}", stream)
                    try:
                        with open(path) as f:
                            text = f.read()
                    except OSError:
                        continue
                    complete = text.split("\n")[:-1] if not done else text.splitlines()
                    for line in complete[seen.get(path, 0):]:
                        lines.append((time.time() - start, f"[rank {rank}] {line}"))
                    seen[path] = len(complete)
            if sum(1 for _, x in lines if x.endswith("] ready")) == 2:
                ready.set()
            if done:
                own.seek(0)
                lines.extend((time.time() - start, "mpirun: " + line.rstrip("\n")) for line in own)
                break
            time.sleep(0.05)
        ready.set()

    reader = threading.Thread(target=read_files if scenario == "mpirun" else read)
    reader.start()
    ready.wait(60)
    if p.poll() is not None:
        reader.join()
        fail("the job ended before the attack", lines)

    socks = []
    for _ in range(50):
        socks = udp_sockets(rank_pids(name))
        if len(socks) >= 2:
            break
        time.sleep(0.1)
    if len(socks) != 2:
        fail(f"expected the 2 ranks' heartbeat sockets, found {socks}", lines)
    print("heartbeat sockets:", socks)
    # Every rank is on this host: the sockets listen on loopback only.
    if any(ip != "127.0.0.1" for ip, _ in socks):
        fail(f"heartbeat sockets not bound to loopback: {socks}", lines)
    ports = {port for _, port in socks}
    captured = capture(ports, 1.5)
    print(f"captured {len(captured)} heartbeat datagrams")
    job = struct.unpack("<Q", captured[0][4][:8])[0] if captured else random.getrandbits(64)

    me = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    raw = spoofer() if captured else None
    sent = {"junk": 0, "forged": 0, "elsewhere": 0, "spoofed": 0}
    end = time.time() + ATTACK_SECONDS
    forged = forgeries(job, 2)
    while time.time() < end:
        for ip, port in socks:
            for size in (0, 1, 8, 39, 40, 41, 79, 81, 160, 1400):
                me.sendto(os.urandom(size), (ip, port))
                sent["junk"] += 1
            for d in forged:
                me.sendto(d, (ip, port))
                sent["forged" if len(d) == 80 else "junk"] += 1
        for src, sport, dst, dport, payload in captured:
            me.sendto(payload, (dst, dport))
            sent["elsewhere"] += 1
            if raw is not None:
                send_spoofed(raw, src, sport, dst, dport, payload)
                sent["spoofed"] += 1
        # The flood: forgeries as fast as this process sends, for a moment.
        flood_end = time.time() + 0.2
        while time.time() < flood_end:
            for ip, port in socks:
                me.sendto(forged[0], (ip, port))
                sent["forged"] += 1
        time.sleep(0.05)
    print("sent:", sent)
    if p.poll() is not None:
        reader.join()
        fail("the attack ended the job", lines)
    open(go, "w").close()
    status = p.wait()
    timer.cancel()
    reader.join()
    shutil.rmtree(work, ignore_errors=True)
    text = [line for _, line in lines]
    failures = [line for line in text
                if "has not been heard from" in line or "heard from none" in line]

    if scenario in ("finish", "mpirun"):
        if sum(1 for line in text if line.endswith("] key ok")) != 2:
            fail("a rank did not find its secret taken out of its environment", lines)
        if status != 0 or sum(1 for line in text if line.endswith("] ok")) != 2:
            fail(f"the job did not end normally (status {status})", lines)
        if failures:
            fail("a failure was declared", lines)
        for rank in range(2):
            pattern = (r"rank \d ignored (\d+) heartbeat datagrams on [0-9.:]+: (\d+) junk, "
                       r"(\d+) forged \(MAC did not match\), (\d+) replayed or of another "
                       r"launch, (\d+) from an address other than the sender's")
            m = next((re.search(pattern, line) for line in text
                      if line.startswith(f"[rank {rank}]") and "ignored" in line), None)
            if not m:
                fail(f"rank {rank} did not say what it ignored", lines)
            total, junk, forged_n, replayed, elsewhere = map(int, m.groups())
            print(f"rank {rank}: ignored {total}: {junk} junk, {forged_n} forged, "
                  f"{replayed} replayed, {elsewhere} from elsewhere")
            if junk == 0 or forged_n == 0:
                fail(f"rank {rank} counted no junk or no forgeries", lines)
            if sent["elsewhere"] and elsewhere == 0:
                fail(f"rank {rank} counted no replays from another address", lines)
            if sent["spoofed"] and replayed == 0:
                fail(f"rank {rank} counted no replays from the sender's address", lines)
    elif scenario == "stop":
        lost = next((float(m.group(1)) for line in text
                     if (m := re.search(r"lost at (\d+\.\d+)", line))), None)
        if status == 0 or lost is None:
            fail("the victim was not lost, or the job succeeded", lines)
        err = next((t for t, line in lines
                    if "RuntimeError:" in line and "has not been heard from" in line), None)
        if err is None or not any("rank 1 on host" in line for line in failures):
            fail("no error names the stopped rank 1", lines)
        delay = start + err - lost
        # Not much earlier than the timeout: a rank starved by a loaded machine
        # (CI runs two tests at once) may have sent its last heartbeat a little
        # before it printed the stop, so up to EARLY seconds early counts too.
        if not (TIMEOUT <= delay + EARLY and delay < TIMEOUT + SLACK):
            fail(f"the error came {delay:.1f} s after the loss (timeout {TIMEOUT} s)", lines)
        last = text[-1] if text else ""
        if not re.match(r"^tessera run: rank 1 of 2 on host .* was not heard from", last):
            fail(f"the last line does not name rank 1: {last}", lines)
        print(f"named {delay:.1f} s after the stop")
    else:
        sys.exit(f"unknown scenario {scenario}")
    for t, line in lines:
        print(f"{t:7.2f} {line}")
    print("PASS")


if __name__ == "__main__":
    main()
