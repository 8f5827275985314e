# A 3-D mesh (docs/parallelism.md, "Tensor x pipeline x data"): a small GPT
# block whose layers are split over the tensor axis, cut into stages along the
# pipeline axis, with the batches shared along the data axis (and ZeRO on each
# stage's data group), trained next to the same model of plain layers on one
# process. Run with
#     tessera run -n 4 --mesh tensor=2,pipeline=2 examples/mesh3d_gpt.py
#     tessera run -n 8 --mesh data=2,tensor=2,pipeline=2 --zero 1 examples/mesh3d_gpt.py
# Prints each locality's model-state bytes during fit (its stage's only) and
# exits non-zero when the loss differs from one process's by more than 1e-5
# relative.
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

mesh = dist.mesh()  # from tessera run --mesh
TEXT = "in the beginning god created the heaven and the earth. " * 8
chars = sorted(set(TEXT))
ids = np.array([chars.index(c) for c in TEXT])
CONTEXT, WIDTH, HEADS = 16, 20, 5
starts = np.arange(0, len(ids) - CONTEXT - 1, 3)[:128]
x = ids[starts[:, None] + np.arange(CONTEXT)]
y = ids[starts[:, None] + np.arange(CONTEXT) + 1]


def gpt(group):
    """One pre-LayerNorm block; split over `group` when it is not None."""
    split = group is not None
    inp = nn.Input(shape=(CONTEXT,), dtype="int32")
    h = (nn.VocabParallelEmbedding(len(chars), WIDTH, group=group, name="emb") if split
         else nn.Embedding(len(chars), WIDTH, name="emb"))(inp)
    a = nn.LayerNormalization(name="ln1")(h)
    attention = (nn.ParallelMultiHeadAttention(HEADS, WIDTH // HEADS, group=group, name="att")
                 if split else nn.MultiHeadAttention(HEADS, WIDTH // HEADS, name="att"))
    h = nn.Add(name="res1")([h, attention(a, a, use_causal_mask=True)])
    m = nn.LayerNormalization(name="ln2")(h)  # stage 1 starts here
    if split:
        m = nn.RowParallelDense(WIDTH, group=group, name="down")(
            nn.ColumnParallelDense(4 * WIDTH, activation="gelu", group=group, name="up")(m))
    else:
        m = nn.Dense(WIDTH, name="down")(nn.Dense(4 * WIDTH, activation="gelu", name="up")(m))
    h = nn.LayerNormalization(name="ln3")(nn.Add(name="res2")([h, m]))
    logits = (nn.ColumnParallelDense(len(chars), group=group, name="logits") if split
              else nn.Dense(len(chars), name="logits"))(h)
    model = nn.Model(inp, logits, seed=1)
    loss = (nn.VocabParallelSparseCategoricalCrossentropy(len(chars), group=group) if split
            else nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(optim.Adam(3e-3), loss)
    return model


class StateBytes(nn.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        self.held = self.model.model_state_bytes()["total"]  # this stage's state only


split, whole = gpt(mesh.group("tensor")), gpt(None)
state = StateBytes()
# --zero and --microbatches reach fit through TESSERA_ZERO and TESSERA_MICROBATCHES
h_split = split.fit(x, y, batch_size=32, epochs=4, shuffle=False, pipeline_split=["ln2"],
                    callbacks=[state]).history["loss"]
h_whole = whole.fit(x, y, batch_size=32, epochs=4, shuffle=False, verbose=0,
                    data_parallel=False).history["loss"]
step = split._pipeline
everything = split.model_state_bytes()["total"]  # after fit: the whole model, gathered
print(f"rank {dist.rank()}: coords {mesh.coords}, stage {step.stage} holds "
      f"{', '.join(layer.name for layer in step.plan.layers[step.stage])}: "
      f"{state.held} bytes of model state during fit ({everything} after fit)")
worst = max(abs(a - b) / abs(b) for a, b in zip(h_split, h_whole))
if dist.rank() == 0:
    print(f"loss {h_split[-1]:.6f} on the mesh {dict(mesh.shape)}, {h_whole[-1]:.6f} on one "
          f"process; largest relative difference {worst:.1e}")
sys.exit(0 if worst <= 1e-5 else 1)
