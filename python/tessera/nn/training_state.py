"""A model's training state in a file: the weights, the optimizer's state and
the training position (iteration, epoch, batch) that fit(resume_from=...),
save_checkpoint and CheckpointDir write, put back all or nothing."""

from __future__ import annotations

import os

import numpy as np

from .weights_file import read_file, set_weights_from


# What a crafted configuration makes the constructors it names raise.
_MALFORMED = (KeyError, IndexError, AttributeError, TypeError, OverflowError, RecursionError,
              ImportError)


def _restore_optimizer(model, tensors, header):
    state = {k[len("optimizer/"):]: v for k, v in tensors.items() if k.startswith("optimizer/")}
    if not state:
        return
    P, S = model._params(True), model._params(False)
    model._update_setup(P, S)
    want = {s.name for s in model._opt_statevars}
    if set(state) != want:
        raise ValueError(f"[load_model] the optimizer state in the file ({sorted(state)[:4]}...) "
                         f"does not match the optimizer's ({sorted(want)[:4]}...)")
    state = model._optimizer_state_of(state, "_local_part")  # whole -> this member's part
    model._opt_state = {k: np.array(v) for k, v in state.items()}
    iteration = header.get("iteration", 0)  # (the file is untrusted)
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ValueError(f"[load_model] the file's iteration must be an int >= 0, got "
                         f"{str(iteration)[:40]!r}")
    model._iteration = iteration


def load_training_state(model, path) -> dict:
    """fit(resume_from=path): weights, optimizer state and training position
    from a checkpoint; the model must be the same architecture."""
    tensors, header = read_file(path, "resume_from")
    training = header.get("training")
    if not isinstance(training, dict):
        raise ValueError(f"[resume_from] {os.fspath(path)} holds no training state (written by "
                         "model.save or save_weights?): write it with save_checkpoint or "
                         "ModelCheckpoint(save_training_state=True)")
    return apply_training_state(model, tensors, header, os.fspath(path), "resume_from")


def apply_training_state(model, tensors: dict, header: dict, source: str, where: str) -> dict:
    """Puts the weights, optimizer state and training position of a
    checkpoint (tensors, and a header with "training" and "iteration") into
    the model: all of it, or nothing."""
    training = header.get("training")

    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    lr = training.get("lr_override") if isinstance(training, dict) else None
    acc = training.get("acc") if isinstance(training, dict) else None
    if not isinstance(training, dict) or not all(
            whole(training.get(k)) for k in ("iteration", "epoch", "batch")) or not (
            lr is None or (isinstance(lr, (int, float)) and not isinstance(lr, bool))) or not (
            acc is None or (isinstance(acc, dict) and {"loss", "seen", "totals"} <= set(acc))):
        raise ValueError(f"[{where}] {source}: the training state is malformed "
                         f"(iteration, epoch, batch, lr_override, acc); nothing was loaded")
    # all or nothing: the model is put back as it was if any part fails
    before = (dict(model.weights), model._opt_state, model._iteration, model._lr_override)
    try:
        set_weights_from(model, tensors, source, where)
        _restore_optimizer(model, tensors, header)
    except BaseException as e:
        for name, value in before[0].items():
            model._set(name, value)
        model._opt_state, model._iteration, model._lr_override = before[1:]
        if isinstance(e, ValueError) and str(e).startswith("["):
            raise
        if isinstance(e, _MALFORMED + (ValueError,)):
            raise ValueError(f"[{where}] {source}: the training state is malformed "
                             f"({type(e).__name__}: {str(e)[:200]}); nothing was loaded") from None
        raise
    model._iteration = training["iteration"]
    model._lr_override = None if lr is None else float(lr)
    return training
