# Tensor parallelism (docs/parallelism.md): a small GPT block split over a
# tensor group (attention by heads, the MLP by columns then rows, the
# embedding and the output projection by vocabulary, the cross-entropy
# computed without gathering the logits), trained next to the same model on
# one process. Run with
#     tessera run -n 2 examples/tensor_parallel_gpt.py
# (any -n up to the 5 heads works: the tensor group is every locality). Exits
# non-zero when the split model's losses differ from the one-process model's
# by more than 1e-5 relative.
import sys

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

mesh = dist.Mesh(tensor=dist.size())
tp = mesh.group("tensor")

TEXT = "in the beginning god created the heaven and the earth. " * 40
chars = sorted(set(TEXT))  # 15 characters: uneven over 2 or 4 members
ids = np.array([chars.index(c) for c in TEXT])
CONTEXT, D, HEADS = 16, 20, 5
starts = np.arange(0, len(ids) - CONTEXT - 1, 7)
x = ids[starts[:, None] + np.arange(CONTEXT)]
y = ids[starts[:, None] + np.arange(CONTEXT) + 1]


def gpt(group):
    """One pre-LayerNorm block; split over `group` when it is not None."""
    split = group is not None
    inp = nn.Input(shape=(CONTEXT,), dtype="int32")
    h = (nn.VocabParallelEmbedding(len(chars), D, group=group) if split
         else nn.Embedding(len(chars), D))(inp)
    a = nn.LayerNormalization()(h)
    attention = (nn.ParallelMultiHeadAttention(HEADS, D // HEADS, group=group) if split
                 else nn.MultiHeadAttention(HEADS, D // HEADS))
    h = nn.Add()([h, attention(a, a, use_causal_mask=True)])
    m = nn.LayerNormalization()(h)
    if split:
        m = nn.RowParallelDense(D, group=group)(
            nn.ColumnParallelDense(4 * D, activation="gelu", group=group)(m))
    else:
        m = nn.Dense(D)(nn.Dense(4 * D, activation="gelu")(m))
    h = nn.LayerNormalization()(nn.Add()([h, m]))
    logits = (nn.ColumnParallelDense(len(chars), group=group) if split
              else nn.Dense(len(chars)))(h)
    model = nn.Model(inp, logits, seed=1)
    loss = (nn.VocabParallelSparseCategoricalCrossentropy(len(chars), group=group) if split
            else nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.compile(optim.Adam(1e-3), loss, metrics=["accuracy"])
    return model


def train(model):
    # data_parallel=False: every member sees every batch (the mesh has no data axis).
    return model.fit(x, y, batch_size=32, epochs=10, shuffle=False, verbose=0,
                     data_parallel=False).history


split, whole = gpt(tp), gpt(None)
h_split, h_whole = train(split), train(whole)
logits = split.layers[-1]
attention = next(l for l in split.layers if isinstance(l, nn.ParallelMultiHeadAttention))
print(f"rank {dist.rank()}: logits of classes {logits._span} of {len(chars)}, "
      f"heads {attention._span} of {HEADS}")
if dist.rank() == 0:
    for epoch in range(0, 10, 3):
        print(f"epoch {epoch + 1}: loss {h_split['loss'][epoch]:.6f} split over {tp.size}, "
              f"{h_whole['loss'][epoch]:.6f} on one; accuracy "
              f"{h_split['accuracy'][epoch]:.4f}, {h_whole['accuracy'][epoch]:.4f}")
worst = max(abs(a - b) / abs(b) for a, b in zip(h_split["loss"], h_whole["loss"]))
print(f"rank {dist.rank()}: largest relative difference {worst:.1e}")
sys.exit(0 if worst <= 1e-5 else 1)
