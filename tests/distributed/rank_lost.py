# Data-parallel training on every rank, during which one rank is lost
# (failure_check.py runs it). TESSERA_TEST_LOSS says how:
#   stop       the last rank stops itself (SIGSTOP) after its 3rd batch;
#   kill       the last rank kills itself (SIGKILL) after its 3rd batch;
#   raise      the last rank raises an exception after its 3rd batch;
#   stop_busy  as stop, and the others compute TESSERA_TEST_BUSY seconds
#              after that batch, in no collective;
#   link       the last rank takes the network down (`ip link set lo down`:
#              the run is alone in a network namespace) after its 3rd batch;
#   none       nobody is lost; rank 0 computes TESSERA_TEST_BUSY seconds
#              after its 3rd batch while the others wait in the all-reduce
#              (a slow rank is no failure).
# Prints "lost at <epoch seconds>" when the rank is lost, "ok" at the end.
import os
import signal
import subprocess
import time

import numpy as np

import tessera
import tessera.distributed as td
from tessera import nn

how = os.environ.get("TESSERA_TEST_LOSS", "none")
busy = float(os.environ.get("TESSERA_TEST_BUSY", "0"))
victim = td.size() - 1


def compute(seconds):
    a = np.random.default_rng(td.rank()).normal(size=(160, 160))
    end = time.time() + seconds
    while time.time() < end:
        a = np.tanh(a @ a)


class Lose(nn.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch != 3 or self.done:
            return
        self.done = True
        lost = how in ("stop", "kill", "stop_busy", "link", "raise")
        if lost and td.rank() == victim:
            print(f"lost at {time.time():.3f}", flush=True)
            if how == "raise":
                raise RuntimeError("rank_lost.py: this rank gives up")
            if how == "link":
                subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
            else:
                os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        if (how == "stop_busy" and td.rank() != victim) or (how == "none" and td.rank() == 0):
            compute(busy)

    done = False


rng = np.random.default_rng(0)
x = rng.normal(size=(512, 32)).astype(np.float32)
y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
model = nn.Sequential([nn.Dense(64, activation="relu"), nn.Dense(64, activation="relu"),
                       nn.Dense(2, activation="softmax")], input_shape=(32,), seed=3)
model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy")
# Training goes on after a network loss (MPI does, through shared memory):
# for far longer than the failure timeout (200 epochs took 3 s on a quiet
# machine, and the run ended before the loss was found), so it ends only by
# the failure being found.
epochs = 20000 if how == "link" else 3
model.fit(x, y, batch_size=64, epochs=epochs, seed=1, verbose=0, callbacks=[Lose()])
print("ok")
