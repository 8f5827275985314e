"""Automatic restart from distributed checkpoints, end to end (ctest dist_ckpt_*).

usage: ckpt_restart.py TESSERA_CLI SCENARIO

The reference is ckpt_train.py on one process without checkpoints
(deterministic mode: the same bits on any number of localities). Then:

  kills    `tessera run -n 2 --max-restarts 3 --checkpoint-dir D`, killing
           rank 1 before the first checkpoint, rank 1 between checkpoints
           on the restarted job, and rank 0 on the third launch
  write    the same, killing a rank half way through writing its shard of a
           checkpoint (rank 1, then rank 0 on the restarted job); the checkpoints
           come from ModelCheckpoint(folder, save_training_state=True)
  resize   4 localities write checkpoints and stop; the job resumes on 2
           and, from a copy, on 3 localities
  giveup   a rank killed on every launch: the launcher gives up after its
           restarts with the last failure and a non-zero status
  corrupt  the newest checkpoint's shard is corrupted and another's manifest
           removed: the restarted job warns, falls back to the newest valid
           one, and removes the bad folders

Each must end with the reference's final weights and optimizer state
(bitwise), no temporaries and no uncommitted folders left in D, and at most
`keep` complete checkpoints.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "ckpt_train.py")
CLI, SCENARIO = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix=f"tessera-ckpt-{SCENARIO}-")
PY = os.environ.get("TESSERA_PYTHON", sys.executable)


def fail(msg):
    sys.exit(f"FAIL ({SCENARIO}): {msg}")


def digest(path):
    with open(path) as f:
        return f.read().split()


def reference(*extra):
    out = os.path.join(WORK, "ref.txt")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_CHECKPOINT_DIR", "TESSERA_RESTART")}
    p = subprocess.run([PY, TRAIN, "--single", "--out", out, *extra], capture_output=True,
                       text=True, timeout=60, env=env)
    if p.returncode:
        fail(f"the reference run failed:\n{p.stdout}\n{p.stderr}")
    return digest(out)


def launch(n, ckdir, *extra, restarts=3, expect=0):
    out = os.path.join(WORK, "out.txt")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [CLI, "run", "-n", str(n), "--max-restarts", str(restarts), "--checkpoint-dir", ckdir,
           TRAIN, "--out", out, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = p.stdout + p.stderr
    print(f"$ {' '.join(cmd)}\n{text}--- status {p.returncode}")
    if (p.returncode == 0) != (expect == 0):
        fail(f"exit status {p.returncode}, expected {'0' if expect == 0 else 'non-zero'}")
    return text, (digest(out) if p.returncode == 0 else None)


def check_folder(ckdir, keep, finished=True):
    """The complete checkpoints in ckdir. After a job that finished, no
    temporary and no uncommitted folder may be left (a job that was stopped
    may leave them: the next start removes them)."""
    complete = []
    for root, _, files in os.walk(ckdir):
        for name in files:
            if name.startswith(".tessera-") and finished:
                fail(f"a temporary was left: {os.path.join(root, name)}")
    for name in os.listdir(ckdir):
        path = os.path.join(ckdir, name)
        if not os.path.exists(os.path.join(path, "manifest.json")):
            if finished:
                fail(f"an uncommitted checkpoint folder was left: {path}")
            continue
        complete.append(name)
    if not 1 <= len(complete) <= keep + (not finished):  # a stop may come before the pruning
        fail(f"expected 1 to {keep} complete checkpoints, found {sorted(complete)}")
    return sorted(complete, key=lambda s: int(s.split("-")[1]))


def restarts(text):
    """(k, N, from) of each restart line; the line before must name the failure."""
    found = re.findall(r"^(.*)\ntessera run: restart (\d+) of (\d+) from (.*)$", text, re.M)
    for before, k, _, _ in found:
        if not re.match(r"tessera run: rank \d of \d \(pid \d+\) was killed by signal 9 "
                        r"\(SIGKILL\)", before):
            fail(f"restart {k} does not follow a line naming the failed rank: {before!r}")
    return [f[1:] for f in found]


ref = reference()
D = os.path.join(WORK, "ckpts")
if SCENARIO == "kills":
    text, got = launch(2, D, "--kill", "0:1:4", "--kill", "1:1:15", "--kill", "2:0:27")
    r = restarts(text)
    if [k for k, _, _ in r] != ["1", "2", "3"]:
        fail(f"expected restarts 1, 2, 3 of 3, got {r}")
    if not r[0][2].startswith("the start (no complete checkpoint") or \
            not r[1][2].endswith("/ckpt-12") or not r[2][2].endswith("/ckpt-24"):
        fail(f"the restarts should start from the start, ckpt-12 and ckpt-24: {r}")
    if text.count("[rank 0] [fit] resuming from ") != 2:
        fail("the restarted jobs did not report what they resumed from")
elif SCENARIO == "write":
    text, got = launch(2, D, "--kill", "0:1:12:write", "--kill", "1:0:18:write", "--callback")
    r = restarts(text)
    if len(r) != 2 or not r[0][2].endswith("/ckpt-6") or not r[1][2].endswith("/ckpt-12"):
        fail(f"expected two restarts, from ckpt-6 then ckpt-12, got {r}")
elif SCENARIO == "resize":
    ref = reference("--chunks", "12")
    launch(4, D, "--chunks", "12", "--stop", "20", restarts=0, expect=1)
    written = check_folder(D, 2, finished=False)
    if written[-2:] != ["ckpt-12", "ckpt-18"]:
        fail(f"4 localities should have left ckpt-18 as the newest, found {written}")
    D3 = os.path.join(WORK, "ckpts3")
    shutil.copytree(D, D3)
    text, got = launch(2, D, "--chunks", "12")
    if "(epoch 2, batch 6, update 18; written by 4 localities)" not in text:
        fail("resuming on 2 localities did not report the 4-locality checkpoint ckpt-18")
    if got != ref:
        fail(f"resumed on 2 localities: {got}, uninterrupted: {ref}")
    check_folder(D, 2)
    text, got = launch(3, D3, "--chunks", "12")
    if "written by 4 localities" not in text:
        fail("resuming on 3 localities did not report the 4-locality checkpoint")
    D = D3
elif SCENARIO == "giveup":
    text, got = launch(2, D, "--kill", "0:1:3", "--kill", "1:1:9", restarts=1, expect=1)
    if not re.search(r"^tessera run: giving up after 1 restart; the last failure: rank 1 of 2 "
                     r"\(pid \d+\) was killed by signal 9 \(SIGKILL\)", text, re.M):
        fail("no 'giving up' line naming the last failure")
    shutil.rmtree(WORK, ignore_errors=True)
    print("ok")
    sys.exit(0)
elif SCENARIO == "corrupt":
    launch(2, D, "--keep", "3", "--stop", "25", restarts=0, expect=1)
    written = check_folder(D, 3, finished=False)
    if written[-3:] != ["ckpt-12", "ckpt-18", "ckpt-24"]:
        fail(f"expected ckpt-12, ckpt-18, ckpt-24, found {written}")
    shard = os.path.join(D, "ckpt-24", "shard-00001-of-00002.bin")
    with open(shard, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 1]))
    os.unlink(os.path.join(D, "ckpt-18", "manifest.json"))
    text, got = launch(2, D, "--keep", "3")
    if not re.search(r"ckpt-24 is not a valid checkpoint: shard .*shard-00001-of-00002.bin: "
                     r"checksum mismatch \(corrupted\); removed it and falling back to the "
                     r"previous one", text):
        fail("no warning naming the corrupted shard")
    if "resuming from " + os.path.join(D, "ckpt-12") not in text:
        fail("did not fall back to ckpt-12")
else:
    fail(f"unknown scenario {SCENARIO!r}")

if got != ref:
    fail(f"final weights {got}, uninterrupted run {ref}")
check_folder(D, 3)
shutil.rmtree(WORK, ignore_errors=True)
print("ok")
