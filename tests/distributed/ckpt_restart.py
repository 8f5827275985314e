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
  forged   the newest checkpoint's manifest is changed (epoch 10**18) and its
           checksum recomputed: the relaunch falls back to the previous one
  folds    ckpt_folds.py: a 3-fold cross-validation and a loop of
           fit(epochs=1), ranks killed in the second fold and in the loop:
           every fit trains its epochs, each relaunch resumes every fit from
           its own run, and every fit ends as without checkpoints

Each must end with the reference's final weights and optimizer state
(bitwise), no temporaries and no uncommitted folders left in D, and at most
`keep` complete checkpoints.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "ckpt_train.py")
FOLDS = os.path.join(HERE, "ckpt_folds.py")
CLI, SCENARIO = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix=f"tessera-ckpt-{SCENARIO}-")
PY = os.environ.get("TESSERA_PYTHON", sys.executable)


def fail(msg):
    sys.exit(f"FAIL ({SCENARIO}): {msg}")


def digest(path):
    with open(path) as f:
        return f.read().split()


def reference(*extra, script=TRAIN, read=digest):
    out = os.path.join(WORK, "ref.txt")
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_CHECKPOINT_DIR", "TESSERA_RESTART", "TESSERA_RUN_ID")}
    p = subprocess.run([PY, script, "--single", "--out", out, *extra], capture_output=True,
                       text=True, timeout=60, env=env)
    if p.returncode:
        fail(f"the reference run failed:\n{p.stdout}\n{p.stderr}")
    return read(out)


def launch(n, ckdir, *extra, restarts=3, expect=0, script=TRAIN, read=digest):
    out = os.path.join(WORK, "out.txt")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [CLI, "run", "-n", str(n), "--max-restarts", str(restarts), "--checkpoint-dir", ckdir,
           script, "--out", out, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    text = p.stdout + p.stderr
    print(f"$ {' '.join(cmd)}\n{text}--- status {p.returncode}")
    if (p.returncode == 0) != (expect == 0):
        fail(f"exit status {p.returncode}, expected {'0' if expect == 0 else 'non-zero'}")
    return text, (read(out) if p.returncode == 0 else None)


def run_folder(ckdir):
    """The folder of the only run in ckdir (each fit of a job is a run of its
    own: DIR/fit<k>-<run id>-<identity>/ckpt-<step>)."""
    runs = [n for n in os.listdir(ckdir) if os.path.isdir(os.path.join(ckdir, n))]
    if len(runs) != 1:
        fail(f"expected one run folder in {ckdir}, found {sorted(runs)}")
    return os.path.join(ckdir, runs[0])


def check_folder(ckdir, keep, finished=True):
    """The complete checkpoints in ckdir's run. After a job that finished, no
    temporary and no uncommitted folder may be left (a job that was stopped
    may leave them: the next start removes them)."""
    complete = []
    for root, _, files in os.walk(ckdir):
        for name in files:
            if name.startswith(".tessera-") and finished:
                fail(f"a temporary was left: {os.path.join(root, name)}")
    ckdir = run_folder(ckdir)
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
    # a later launch continues that run when given its id (otherwise it starts a new one)
    os.environ["TESSERA_RUN_ID"] = os.path.basename(run_folder(D)).split("-")[1]
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
    run = run_folder(D)
    shard = os.path.join(run, "ckpt-24", "shard-00001-of-00002.bin")
    with open(shard, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 1]))
    os.unlink(os.path.join(run, "ckpt-18", "manifest.json"))
    # a relaunch of the same job (tessera run keeps its run id across restarts)
    os.environ["TESSERA_RUN_ID"] = os.path.basename(run).split("-")[1]
    text, got = launch(2, D, "--keep", "3")
    if not re.search(r"ckpt-24 is not a valid checkpoint: shard .*shard-00001-of-00002.bin: "
                     r"checksum mismatch \(corrupted\); removed it and falling back to the "
                     r"previous one", text):
        fail("no warning naming the corrupted shard")
    if "resuming from " + os.path.join(run, "ckpt-12") not in text:
        fail("did not fall back to ckpt-12")
elif SCENARIO == "forged":
    launch(2, D, "--keep", "3", "--stop", "25", restarts=0, expect=1)
    run = run_folder(D)
    path = os.path.join(run, "ckpt-24", "manifest.json")
    with open(path) as f:
        doc = json.load(f)
    doc["epoch"] = doc["training"]["epoch"] = 10**18
    body = {k: v for k, v in doc.items() if k != "checksum"}
    doc["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                                     .encode()).hexdigest()
    with open(path, "w") as f:
        json.dump(doc, f)
    os.environ["TESSERA_RUN_ID"] = os.path.basename(run).split("-")[1]
    text, got = launch(2, D, "--keep", "3")
    if not re.search(r"ckpt-24 is not a valid checkpoint: .*epoch 10{18}.*falling back", text):
        fail("no warning naming the forged epoch")
    if "resuming from " + os.path.join(run, "ckpt-18") not in text:
        fail("did not fall back to ckpt-18")
elif SCENARIO == "folds":
    def results(path):
        with open(path) as f:
            return json.load(f)

    ref = reference(script=FOLDS, read=results)
    text, got = launch(2, D, "--kill", "0:1:2:13", "--kill", "1:0:5:17", restarts=2,
                       script=FOLDS, read=results)
    if [k for k, _, _ in restarts(text)] != ["1", "2"]:
        fail(f"expected restarts 1 and 2 of 2, got {restarts(text)}")
    for k, (g, r) in enumerate(zip(got, ref)):
        want_epochs = [0, 1, 2] if k < 3 else [0]
        if g["epochs"] != want_epochs or len(g["history"]["loss"]) != len(want_epochs):
            fail(f"fit {k + 1} trained epochs {g['epochs']}, expected {want_epochs}")
        if g["digest"] != r["digest"] or g["updates"] != r["updates"]:
            fail(f"fit {k + 1}: {g['digest']} after {g['updates']} updates; without "
                 f"checkpoints {r['digest']} after {r['updates']}")
        if g["history"] != r["history"]:
            fail(f"fit {k + 1}: history {g['history']}, without checkpoints {r['history']}")
    runs = sorted(os.listdir(D))
    if len([n for n in runs if n.startswith("fit")]) != 6:
        fail(f"expected a run folder per fit, found {runs}")
    shutil.rmtree(WORK, ignore_errors=True)
    print("ok")
    sys.exit(0)
else:
    fail(f"unknown scenario {SCENARIO!r}")

if got != ref:
    fail(f"final weights {got}, uninterrupted run {ref}")
check_folder(D, 3)
shutil.rmtree(WORK, ignore_errors=True)
print("ok")
