"""Peak memory of a pipeline stage under 1F1B and GPipe (docs/parallelism.md,
"Pipeline parallelism"): an MLP with wide activations and small weights, cut
into 2 stages, 8 micro-batches of 2048 rows; each rank prints its stage's peak
RSS above its RSS before fit. Run with

    tessera run -n 2 --mesh pipeline=2 bench/bench_pipeline_memory.py 1f1b
    tessera run -n 2 --mesh pipeline=2 bench/bench_pipeline_memory.py gpipe

(one schedule per process: the peak of a process only grows)."""
import resource
import sys

import numpy as np

from tessera import nn

kind = sys.argv[1] if len(sys.argv) > 1 else "1f1b"
model = nn.Sequential([nn.Dense(256, activation="tanh", name=n) for n in "abcd"]
                      + [nn.Dense(10, name="e")], input_shape=(64,), seed=1)
model.compile("sgd", "sparse_categorical_crossentropy")
x = np.random.default_rng(0).normal(size=(16384, 64)).astype("float32")
y = np.arange(len(x)) % 10
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model.fit(x, y, batch_size=len(x), epochs=2, verbose=0, microbatches=8, pipeline_schedule=kind,
          pipeline_split=["c"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{kind}: stage {model._pipeline.stage}: peak RSS {(peak - before) / 1024:.0f} MiB above "
      "the RSS before fit")
