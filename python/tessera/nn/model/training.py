"""The training loop: Model.fit and what it needs (checkpoint folders, resuming,
the step's state, per-rank chunks, progress lines)."""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time

import numpy as np

from ... import _core
from ... import data as _data
from ... import distributed as _dist
from .. import callbacks as _cb
from .. import checkpoints as _ck
from .. import pipeline as _pipeline
from .._config import SETTINGS, capped_epochs, capped_steps
from ..callbacks import History, ModelCheckpoint
from ..checkpoints import CheckpointDir
from ..given_batches import GivenBatches
from ..training_state import apply_training_state, load_training_state
from ..sample_weights import weight_arrays, weight_flags
from ..step_overrides import refuse_split, step_trace_for
from ..tape_steps import fit_tape_steps, trains_on_own_data, uses_tape_steps
from ..random import default_seed, program_seed
from ..symbolic import user_location
from ..varlen import keeps_graph
from ..zero import zero_setting
from ._common import PyDataset, _fmt, _from_py_dataset
from .eager import fit_eagerly, warn_traced_anyway


class TrainingMixin:
    """Model.fit: the training loop (batches, callbacks, checkpoints, resuming,
    distributed chunks), mixed into Model."""

    @keeps_graph
    def fit(self, x=None, y=None, batch_size=None, epochs: int = 1, verbose="auto",
            callbacks=None, validation_split: float = 0.0, validation_data=None,
            shuffle: bool = True, class_weight=None, sample_weight=None, initial_epoch: int = 0,
            steps_per_epoch=None, validation_steps=None, validation_batch_size=None,
            validation_freq: int = 1, seed=None, nan_policy: str = "stop",
            data_parallel=None, deterministic=False, resume_from=None, check_inputs=True,
            checkpoint_dir=None, checkpoint_every="epoch", keep_checkpoints=3, zero=None,
            pipeline_split=None, microbatches=None, pipeline_schedule="1f1b"):
        """Trains for `epochs` passes over (x, y) in mini-batches, like Keras's
        fit (x, y: arrays, lists of arrays for several inputs/outputs, or a
        tessera.data.Dataset of (x, y[, sample_weight]) batches). Returns a
        History. Data is checked before the first step (labels in range,
        finite inputs, lengths), naming the first bad sample.

        Under `tessera run -n N` (data_parallel None or True) every locality
        takes its share of each global batch of `batch_size` rows (from a
        Dataset, it reads only those rows), and the gradients are summed
        across the localities (weighted by share, in buckets fixed at compile
        time), so the parameters stay identical; the loss and metrics printed
        are those of the whole batch. Only locality 0 prints.

        deterministic=True (or a number of chunks) makes the result bitwise
        the same for any number of localities and threads (docs/nn.md).
        resume_from=path continues from a checkpoint written by
        save_checkpoint or ModelCheckpoint(save_training_state=True): the same
        steps follow as in the run that wrote it.

        checkpoint_dir=DIR writes distributed checkpoints of the training
        state into DIR (every locality its share, asynchronously) every
        `checkpoint_every` ('epoch', a number of updates, or both in a list),
        keeping the last `keep_checkpoints`. Each fit call is a run of its
        own (DIR/fit<k>-<run id>-<identity>): when its run already has a
        valid checkpoint (a relaunch of the same job, the same fit call,
        model and data), fit resumes from the newest, history included.
        TESSERA_CHECKPOINT_DIR (set by `tessera run --checkpoint-dir`) gives
        DIR when neither this nor a ModelCheckpoint names one;
        checkpoint_dir=False turns that off (docs/nn.md, docs/resilience.md).

        Under a mesh (the mesh of the model's tensor-parallel layers, or
        tessera.distributed.mesh() from `tessera run --mesh`) the data
        parallelism runs over the mesh's data group only. zero=1, 2 or 3
        (default: TESSERA_ZERO, set by `tessera run --zero`, else 0) shards
        the optimizer state (1), also the gradients (2), also the parameters
        (3) over the data group (docs/parallelism.md, "ZeRO").

        Under a mesh with a pipeline axis (`tessera run --mesh pipeline=P`),
        the model is cut into P stages, one per locality of the axis: before
        each layer named in `pipeline_split` (P - 1 names), or where the
        stages' measured times are most even; each global batch is cut
        into `microbatches` micro-batches per data locality (default
        TESSERA_MICROBATCHES, else 2 P), run in the order of
        `pipeline_schedule` ("1f1b" or "gpipe"). See docs/parallelism.md,
        "Pipeline parallelism"."""
        if self._compiled is None:
            raise RuntimeError("[fit] call model.compile(optimizer, loss, metrics) first")
        # None: 0, or after utils.set_random_seed the global stream's next (the shuffles and
        # dropout draws follow the global seed, as Keras's)
        seed = default_seed() if seed is None else seed
        # a GAN's train_step (sub-models, tapes, optimizers), or one given data not
        # shaped as the model's inputs (it slices or reshapes them before calling the model)
        if uses_tape_steps(self) or trains_on_own_data(self, x):
            if self.run_eagerly:
                warn_traced_anyway(self)
            return fit_tape_steps(
                self, x, y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                callbacks=callbacks, shuffle=shuffle, initial_epoch=initial_epoch,
                steps_per_epoch=steps_per_epoch, seed=seed, validation_split=validation_split,
                validation_data=validation_data, class_weight=class_weight,
                sample_weight=sample_weight, resume_from=resume_from,
                checkpoint_dir=checkpoint_dir, zero=zero, pipeline_split=pipeline_split,
                data_parallel=data_parallel, deterministic=deterministic)
        if self.run_eagerly:  # compile(run_eagerly=True): the step run on each batch's values
            return fit_eagerly(
                self, x, y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                callbacks=callbacks, validation_split=validation_split,
                validation_data=validation_data, shuffle=shuffle, class_weight=class_weight,
                sample_weight=sample_weight, initial_epoch=initial_epoch,
                steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
                validation_batch_size=validation_batch_size, validation_freq=validation_freq,
                seed=seed, nan_policy=nan_policy, data_parallel=data_parallel,
                deterministic=deterministic, resume_from=resume_from,
                checkpoint_dir=checkpoint_dir, zero=zero, pipeline_split=pipeline_split)
        self._check_loss_reductions()
        if nan_policy not in ("stop", "continue"):
            raise ValueError(f"[fit] nan_policy must be 'stop' or 'continue', got {nan_policy!r}")
        for name, v in (("epochs", epochs), ("initial_epoch", initial_epoch)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"[fit] {name} must be an int >= 0, got {v!r}")
        if steps_per_epoch is not None and (isinstance(steps_per_epoch, bool) or not isinstance(
                steps_per_epoch, int) or steps_per_epoch <= 0):
            raise ValueError(f"[fit] steps_per_epoch must be a positive int, got "
                             f"{steps_per_epoch!r}")
        epochs, steps_per_epoch = capped_epochs(epochs), capped_steps(steps_per_epoch)
        if not isinstance(validation_split, (int, float)) or not 0 <= validation_split < 1:
            raise ValueError(f"[fit] validation_split must be in [0, 1), got {validation_split!r}")
        self._build_from_first_batch(x, "fit")
        if isinstance(x, PyDataset) and not self._inputs:
            # A PyDataset of images alone for a model built by its first batch (a compute_loss
            # override reading no labels: masked_image_modeling): built first, so that its
            # batches get placeholder labels as arrays given alone do (Keras gives y=None)
            # (and one of a tuple of inputs: nerf's ((rays, t values), images))
            first = x[0]
            first = tuple(first) if isinstance(first, list) else first  # (Keras: a tuple)
            inputs = first[0] if isinstance(first, tuple) else first
            if isinstance(inputs, (tuple, list)) and inputs and \
                    all(isinstance(a, np.ndarray) for a in inputs):
                self._ensure_built([np.asarray(a) for a in inputs])
            elif not isinstance(first, (tuple, dict)):
                self._ensure_built([np.asarray(first)])
        x = _from_py_dataset(x, "fit", steps_per_epoch, seed if shuffle else None,
                             self._batch_form("fit"))
        if validation_data is not None:
            validation_data = _from_py_dataset(validation_data, "fit", form=self._batch_form("fit"))
        is_ds = isinstance(x, _data.Dataset)
        if is_ds:
            if y is not None or sample_weight is not None or class_weight is not None:
                raise ValueError("[fit] with a Dataset, labels and sample weights come from the "
                                 "dataset: y, sample_weight and class_weight must be None")
            # batch_size is ignored, as Keras's fit ignores it for a tf.data Dataset or a
            # PyDataset (their batches are the data's own)
            if validation_split:
                raise ValueError("[fit] validation_split needs arrays; pass validation_data")
            ds = x
            self.__dict__["_labels_given"] = True
            if ds.batch_size is None:
                raise ValueError("[fit] the Dataset is not batched: call ds.batch(batch_size)")
            if not self.built:
                spec = ds.element_spec
                n_in = len(self._inputs) or 1  # not built: one input
                shapes = [tuple(s.shape) for s in spec[:n_in]]
                self.build(shapes if len(shapes) > 1 else shapes[0])
            self._specialize([tuple(s.shape) for s in ds.element_spec[:len(self._inputs)]],
                             "fit", verbose)
            ds = self._dataset_with_padded_labels(ds)
            n_parts = self._dataset_parts(ds, "fit")
            ds, weighted = self._dataset_weights(ds, "fit")
            spec = ds.element_spec
            n_in, n_out = len(self._inputs), len(self._outputs)
            if n_parts == n_in:
                raise ValueError("[fit] the dataset has no labels: its elements must be (x, y) "
                                 "or (x, y, sample_weight)")
            self._label_specs_from([np.zeros((0,) + tuple(s.shape), s.dtype)
                                    for s in spec[n_in:n_in + n_out]])
            if check_inputs:
                self._validate_dataset(ds, n_in, n_out)
            batch_size = ds.batch_size
        else:
            if batch_size is None:
                batch_size = 32
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
                raise ValueError(f"[fit] batch_size must be a positive int, got {batch_size!r}")
            xs = self._prepare_x(x, "fit")
            self._specialize([a.shape[1:] for a in xs], "fit", verbose)
            n = len(xs[0])
            self.__dict__["_labels_given"] = y is not None  # (a traced train_step's data)
            if y is None:
                y = self._no_labels(n, "fit")
            ys = self._prepare_y(y, n, "fit")
            if check_inputs:
                self._check_finite(xs, "fit")
            sw = self._prepare_sw(sample_weight, class_weight, ys, n, "fit")
            if validation_split:
                cut = int(n * (1 - validation_split))
                if cut == 0 or cut == n:
                    raise ValueError(f"[fit] validation_split {validation_split} of {n} samples "
                                     "leaves no training or no validation samples")
                # (the weights in the shape given: evaluate checks them as fit did)
                given = self.__dict__.get("_sw_given")
                validation_data = ([a[cut:] for a in xs] if len(xs) > 1 else xs[0][cut:],
                                   [a[cut:] for a in ys] if len(ys) > 1 else ys[0][cut:],
                                   None if sw is None else
                                   [None if g is None else a[cut:].reshape((-1,) + g)
                                    for a, g in zip(sw, given)] if isinstance(sw, list) else
                                   sw[cut:].reshape((-1,) + tuple(given or ())))
                xs, ys = [a[:cut] for a in xs], [a[:cut] for a in ys]
                sw = None if sw is None else [a[:cut] for a in sw] if isinstance(sw, list) \
                    else sw[:cut]
                n = cut
            if n == 0:
                raise ValueError("[fit] x is empty")
            self._label_specs_from(ys)
            weighted = weight_flags(sw)
            arrays = tuple(xs + ys + weight_arrays(sw))
            ds = _data.Dataset.from_tensor_slices(arrays)
            if shuffle:
                ds = ds.shuffle(seed=seed)
            ds = ds.batch(batch_size)
        stage = zero_setting(zero)
        pipe = _pipeline.setup(self, pipeline_split, microbatches, pipeline_schedule,
                               deterministic, data_parallel, rows=batch_size, zero=stage)
        self._pipeline = pipe  # this locality's stage (pipeline.StageStep), or None
        if pipe is not None or stage:
            refuse_split(self, "training in pipeline stages or under ZeRO")
        if pipe is not None:  # (ZeRO shards each stage's state over its data group: pipe.zero)
            dgroup, n_ranks, rank = pipe.dg, pipe.d, pipe.data_rank
            world = _dist.size()
        else:
            dgroup, n_ranks, rank = self._data_axis(data_parallel)
            world = _dist.size() if n_ranks > 1 else 1
        split = pipe is not None or stage or n_ranks > 1 or \
            self._chunk_count(deterministic, n_ranks)
        if split:
            self._check_loss_reductions(split=True)
        rows = None if is_ds else n
        n_batches = ds.num_batches()
        if world > 1:
            self._same_data_everywhere(rows, n_batches, batch_size, world)
        if pipe is not None:  # the data axis shares the batches; stages share the model
            chunks = pipe.chunks if pipe.deterministic else 0
            plan = None
        else:
            chunks = self._chunk_count(deterministic, n_ranks)
            plan = self._zero_plan(stage, n_ranks, chunks)
        if getattr(self._compiled.optimizer, "use_ema", False) and (pipe is not None or
                                                                   plan is not None):
            raise ValueError(f"[fit] {type(self._compiled.optimizer).__name__}(use_ema=True) is "
                             "not supported under ZeRO or pipeline stages (their optimizer "
                             "state is held in parts)")
        if n_ranks > 1 and batch_size < n_ranks and not chunks:
            raise ValueError(f"[fit] batch_size {batch_size} is smaller than the {n_ranks} "
                             "localities sharing each batch")
        if verbose == "auto":
            verbose = 1
        # one printer: locality 0 of the world under data parallelism or a mesh
        lead = _dist.rank() == 0 if n_ranks > 1 or dgroup is not None or pipe is not None \
            else True
        verbose = verbose if lead else 0
        zkey = (plan.key,) if plan is not None else ()
        if pipe is not None:
            prog = pipe.program(weighted)
        elif chunks:
            prog = self._program(("train_det", chunks // n_ranks, chunks, n_ranks, weighted)
                                 + zkey)
        elif n_ranks > 1:
            prog = self._program(("train_dp", self.BUCKET_BYTES, self.OVERLAP_BACKWARD, weighted)
                                 + zkey)
        else:
            prog = self._program(("train", weighted))
        # a PyDataset's or generator's batches, read as given: their shapes may change
        given = isinstance(ds, GivenBatches)
        opt = self._compiled.optimizer
        P, S = self._params(True), self._params(False)
        if self._opt_state is None or set(self._opt_state) != set(self._opt_vars):
            # under ZeRO a fresh state is never made whole: read-only stand-ins
            # of its shapes (no memory) until _zero_begin makes the slices
            # pipeline stages: the same stand-ins (every stage's state is
            # made whole only on demand); begin() makes the stage's own
            self._opt_state = opt.init_state(
                self._weight_stand_ins() if pipe is not None else self.weights,
                self._opt_statevars, views=plan is not None or pipe is not None)
        trace = step_trace_for(self, "train", weighted) if pipe is None and not chunks and \
            n_ranks == 1 else None  # a train_step override's logs
        sizes = trace.sizes() if trace is not None else self._metric_sizes()
        start_epoch, start_batch, acc0 = initial_epoch, 0, None
        steps = n_batches if steps_per_epoch is None else (
            steps_per_epoch if n_batches is None else min(steps_per_epoch, n_batches))
        callbacks, ckpts = self._checkpoint_dir(callbacks, checkpoint_dir, checkpoint_every,
                                                keep_checkpoints, verbose)
        # what a checkpoint of this fit's run must agree with (checkpoints.py)
        limits = {"epochs": epochs, "steps": steps, "initial_epoch": initial_epoch,
                  "batch_size": batch_size,
                  "metric_shapes": [list(np.zeros(s).shape) for s in sizes]}
        state = None
        backups = [c for c in (callbacks or []) if isinstance(c, _cb.BackupAndRestore)]
        if resume_from is None and backups:
            resume_from = backups[0]._restore_path()  # a backup of an interrupted run
        try:
            if ckpts is not None:
                state = ckpts.restore(self, world, _dist.rank() if world > 1 else 0, dict(
                    limits, data={"rows": rows, "batches": n_batches, "batch_size": batch_size}),
                    wants=lambda layout: _ck.resume_wants(self, layout, plan, pipe, dgroup))
            if state is None and resume_from is not None:
                if os.path.isdir(resume_from):
                    state = self._resume_from_folder(os.fspath(resume_from), limits, world,
                                                     (plan, pipe, dgroup))
                else:
                    state = load_training_state(self, resume_from)
        except BaseException:
            if ckpts is not None:
                ckpts.finish(abandon=True)  # unlocks the folder
            raise
        if state is not None:
            start_epoch, start_batch, acc0 = state["epoch"], state["batch"], state.get("acc")
            seed = state.get("seed", seed)
        history = History()
        self.history = history
        for past in (state or {}).get("history") or []:  # the epochs a resumed run did
            history._add(past["epoch"], dict(past["logs"]))
        cbs = _cb.CallbackList(callbacks, history=history, model=self,
                               params={"verbose": verbose, "epochs": epochs, "steps": steps})
        if any(isinstance(c, _cb.ProgbarLogger) for c in cbs.callbacks):
            verbose = 0  # the user's ProgbarLogger prints instead, as in Keras
        self.stop_training = False
        self._fit_settings = {"seed": seed, "batch_size": batch_size}
        tiling = _core.deterministic()
        if chunks:
            _core.set_deterministic(True)
        names = trace.names if trace is not None else self._metric_log_names()
        # nan_policy='continue': each step is handed the weights and optimizer
        # state (the model and fit drop their references, Program.run
        # consumes its arguments), so the step frees the old arrays at their
        # last use instead of holding them beside the new ones. 'stop' keeps
        # them, to give them back when the loss is not finite.
        hand_over = nan_policy == "continue" and pipe is None
        if plan is not None:
            self._zero_begin(plan, rank, dgroup, P)
        if pipe is not None:
            pipe.begin()  # only this stage's weights and state from here on
        finished = False
        try:
            cbs.on_train_begin()
            for epoch in range(start_epoch, epochs):
                cbs.on_epoch_begin(epoch)
                start = time.perf_counter()
                first = start_batch if epoch == start_epoch else 0
                if acc0 is not None and epoch == start_epoch:
                    total_loss, seen = acc0["loss"], acc0["seen"]
                    totals = [np.asarray(t, dtype=np.float64) for t in acc0["totals"]]
                else:
                    total_loss, seen = 0.0, 0
                    totals = [np.zeros(s) for s in sizes]
                logs = {}
                # each locality reads only its rows of every global batch (in
                # deterministic mode, its chunks are those same rows)
                shard = {"num_shards": n_ranks, "shard_index": rank} if n_ranks > 1 else {}
                batches = ds.epoch_batches(epoch, start_batch=first, **shard)
                b = first - 1
                for batch in batches:
                    b = batch.index
                    if steps is not None and b >= steps:
                        break
                    it = self._iteration
                    cbs.on_train_batch_begin(b)
                    arrays = list(batch.arrays)
                    if given and self._enter_batch(arrays, b, "fit", verbose,
                                                   ("train", weighted)):
                        if pipe is not None or chunks or n_ranks > 1:
                            raise NotImplementedError(
                                f"[fit] batch {b} of {ds.what} has other shapes than the "
                                "batch before: batches of varying shapes train in one process "
                                "without deterministic= or pipeline stages (pad them to one "
                                f"shape) (at {user_location()})")
                        prog = self._program(("train", weighted))
                    n = batch.global_size
                    lr = self._learning_rate(it)
                    state = self._step_state(P, S) if pipe is None else None
                    if hand_over:
                        self._hand_over_state(P, S)
                    group_args = [dgroup, rank] if n_ranks > 1 else []
                    if pipe is not None:
                        args = pipe.args(arrays, n, it, lr, seed)
                    elif chunks:
                        args = state + self._chunk_args(
                            arrays, n, chunks, n_ranks, rank, seed, it,
                            fill_empty=plan is not None and plan.stage == 3) + [it, lr] \
                            + group_args
                    else:
                        extra = []
                        if n_ranks > 1:
                            extra = [len(arrays[0]) / n] + group_args
                        args = state + arrays + [it, lr, program_seed(seed, it, 64, rank)] \
                            + extra
                    if hand_over:
                        state = None  # only `args` holds them now, and run empties it
                    t_step = _core._trace_now()
                    try:
                        if pipe is not None:
                            loss, mets = pipe.take(prog.run(args))
                            new_p = new_o = new_s = ()
                        else:
                            loss, mets, new_p, new_o, new_s = prog.run(args,
                                                                       consume=hand_over)
                    except Exception as e:
                        # A step that failed part way may leave gradient
                        # buckets waiting for members; the next would meet them.
                        if n_ranks > 1:
                            _core._drop_gradient_buckets()
                        if hand_over:
                            note = ("[fit] the step failed after fit handed it the weights and "
                                    "optimizer state (nan_policy='continue'), which it may have "
                                    "freed: the model has no weights now; resume from a "
                                    "checkpoint (fit(resume_from=...)) or build it again")
                            if not hasattr(e, "add_note"):  # Python < 3.11
                                raise RuntimeError(note) from e
                            e.add_note(note)
                            raise
                        if self._zero is not None:
                            self._zero_restore(state, P, S)
                        raise
                    _core._trace_step(it, t_step, _core._trace_now())
                    loss = float(loss)
                    if not math.isfinite(loss) and nan_policy == "stop" and not cbs.stops_on_nan:
                        if self._zero is not None:
                            self._zero_restore(state, P, S)
                        raise FloatingPointError(
                            f"[fit] the loss became {loss} at epoch {epoch + 1}, step {b + 1} "
                            f"(update {it + 1}); the weights are those before this step. Lower "
                            "the learning rate, check the data, or pass nan_policy='continue'")
                    del args, state
                    if self._zero is not None:
                        self._zero_take(new_p, new_o, P)
                    else:
                        for v, a in zip(P, new_p):
                            self._set(v, a)
                        for v, a in zip(self._opt_vars, new_o):
                            self._opt_state[v] = a
                    for v, a in zip(S, new_s):
                        self._set(v, a)
                    # Only the model holds the new state now: the next step is
                    # handed it alone (hand_over), not beside these names.
                    new_p = new_o = new_s = a = None
                    self._iteration += 1
                    seen += n
                    total_loss += loss * n
                    mets = self._split_sums(mets, sizes, chunks or pipe is not None)
                    for t, m in zip(totals, mets):
                        t += np.asarray(m, dtype=np.float64).reshape(t.shape)
                    if trace is not None:  # Keras's logs: what train_step returns
                        logs = dict(zip(names, trace.results(totals)))
                    else:
                        logs = {"loss": total_loss / seen}
                        logs.update(zip(names, self._metric_results(totals)))
                    self._position = {"epoch": epoch, "batch": b + 1,
                                      "acc": {"loss": total_loss, "seen": seen,
                                              "totals": [t.copy() for t in totals]}}
                    if verbose == 1:
                        self._progress(epoch, epochs, b + 1, steps, logs, start)
                    if pipe is not None and ckpts is not None:
                        pipe.whole()  # a checkpoint may be written now: the whole model
                    cbs.on_train_batch_end(b, dict(logs))
                    if self.stop_training:
                        break
                if seen == 0:
                    raise ValueError("[fit] the data gave no batches in this epoch")
                self._position = {"epoch": epoch + 1, "batch": 0, "acc": None}
                if trace is None:
                    self._hold_metric_state(total_loss, seen, totals)  # model.metrics
                self._end_epoch(epoch, epochs, logs, start, cbs, history, verbose,
                                (validation_data, validation_batch_size or batch_size,
                                 validation_steps, validation_freq))
                if self.stop_training:
                    break
            self._ema_finalize()
            cbs.on_train_end(dict(history.history and {k: v[-1] for k, v in
                                                       history.history.items()}))
            finished = True
        finally:
            if finished:
                self._zero_end()  # whole weights and state again (a collective)
                if pipe is not None:
                    pipe.end()  # every stage's weights and state on every locality
            _core.set_deterministic(tiling)
            self.__dict__.pop("_step_frozen", None)  # (a train_step's updated weights)
            if ckpts is not None:
                ckpts.finish(abandon=True)  # fit failed: no commit may wait for the dead
        return history

    def _ema_finalize(self):
        """Keras's end of fit under use_ema: the trainable weights replaced by
        their moving averages (the optimizer's)."""
        opt = self._compiled.optimizer
        if not getattr(opt, "use_ema", False) or not self._opt_state:
            return
        for v in self._params(True):
            average = self._opt_state.get(opt.ema_name("opt_", v))
            if average is not None:
                self._set(v, np.array(average, copy=True))

    def _checkpoint_dir(self, callbacks, checkpoint_dir, every, keep, verbose):
        """(callbacks, CheckpointDir or None): the checkpoint folder of this
        fit, from checkpoint_dir, a ModelCheckpoint naming a folder, or
        TESSERA_CHECKPOINT_DIR; its writer runs after every other callback."""
        callbacks = [] if callbacks is None else list(callbacks)
        named = [c for c in callbacks if isinstance(c, ModelCheckpoint) and c.folder_mode]
        if checkpoint_dir is not None and checkpoint_dir is not False:
            if named:
                raise ValueError(f"[fit] checkpoint_dir={os.fspath(checkpoint_dir)!r} and "
                                 f"ModelCheckpoint({named[0].filepath!r}, "
                                 "save_training_state=True) both name a checkpoint folder; give "
                                 "one")
            ckpts = CheckpointDir(checkpoint_dir, every, keep, verbose)
        elif len(named) > 1:
            raise ValueError(f"[fit] several ModelCheckpoint callbacks name checkpoint folders "
                             f"({[c.filepath for c in named]}); give one")
        elif named:
            c = named[0]
            ckpts = CheckpointDir(c.filepath, c.save_freq, c.keep_checkpoints, c.verbose,
                                  "ModelCheckpoint")
        elif checkpoint_dir is None and os.environ.get("TESSERA_CHECKPOINT_DIR"):
            ckpts = CheckpointDir(os.environ["TESSERA_CHECKPOINT_DIR"], every, keep, verbose)
        else:
            return callbacks, None
        return callbacks + [ckpts], ckpts

    def _resume_from_folder(self, folder, limits, world=1, sharding=(None, None, None)):
        """fit(resume_from=folder): a checkpoint folder (ckpt-<step>), a run's
        folder of them (the newest valid one) or a checkpoint folder holding
        one run, read without changing it and checked whole (of any run).
        With world > 1 localities in the fit, each reads only its block of
        the shards and shares them, each receiving only what it keeps under
        `sharding` = (ZeRO plan, pipeline stage, data group) (docs/scaling.md)."""
        layout, total = _ck._layout(_ck._state_tensors(self), "resume_from")
        expect = {k: v for k, v in limits.items() if k != "initial_epoch"}
        expect.update(layout=layout, total=total)
        if world > 1:  # its errors name the folder and the localities
            found = _ck.read_resume_shared(folder, expect, world, _dist.rank(),
                                           wants=_ck.resume_wants(self, layout, *sharding))
        else:
            found = self._resume_read(folder, expect)
        if found is None:
            raise FileNotFoundError(f"[resume_from] {folder} holds no complete checkpoint "
                                    "(ckpt-<step> folders with a manifest.json)")
        path, manifest, data = found
        header = {"training": manifest["training"], "iteration": manifest["step"]}
        return apply_training_state(self, _ck._tensors_from(manifest, data, path), header, path,
                                    "resume_from")

    @staticmethod
    def _resume_read(folder, expect):
        """fit(resume_from=folder) on one locality: (path, manifest, state
        bytes) of the checkpoint, or None."""
        try:
            if os.path.lexists(os.path.join(folder, _ck.MANIFEST)):
                manifest = _ck.read_manifest(folder, expect)
                found = (folder, manifest, _ck.read_state(folder, manifest))
            else:
                run = _ck.only_run(folder)
                if run:
                    folder = os.path.join(folder, run)
                found = _ck.newest_checkpoint(folder, expect=expect)
        except (OSError, ValueError) as e:
            raise ValueError(f"[resume_from] {folder}: {getattr(e, 'strerror', None) or e}; "
                             "nothing was loaded") from None
        return found

    def _hand_over_state(self, P, S):
        """The model lets go of the weights and optimizer state a step was
        given (fit with nan_policy='continue'); the step's results are set
        back after it."""
        for v in P + S:
            layer, p = self._owner[v]
            layer._values[p.name] = None
        if self._zero is None:
            for v in self._opt_vars:
                self._opt_state[v] = None

    def _step_state(self, P, S) -> list:
        """The weights and optimizer state a training step starts with."""
        if self._zero is not None:
            return self._zero_step_state(P, S)
        values = self.weights
        return ([values[v] for v in P] + [values[v] for v in S]
                + [self._opt_state[v] for v in self._opt_vars])

    def _learning_rate(self, iteration: int) -> float:
        if self._lr_override is not None:
            return self._lr_override
        opt = self._compiled.optimizer
        opt._last_iteration = iteration  # what opt.learning_rate reports, as in Keras
        return opt.rate_at(iteration)

    @staticmethod
    def _split_sums(mets, sizes, chunks):
        """The metric sums of a step as arrays (deterministic mode returns them
        as one flat float64 array)."""
        if not sizes:
            return []
        if chunks:
            flat = np.asarray(mets[0], dtype=np.float64)
            out, off = [], 0
            for s in sizes:
                n = math.prod(s)
                out.append(flat[off:off + n].reshape(s))
                off += n
            return out
        return list(mets)

    def _metric_results(self, totals) -> list:
        out, k = [], 0
        for m, n in zip(self._compiled.all_metrics(), self._metric_counts()):
            stateful = getattr(m, "_stateful", None)
            r = m.stateless_result(totals[k:k + n]) if stateful and stateful() else \
                m.result(totals[k:k + n])
            out.append(float(r) if np.ndim(r) == 0 else [float(v) for v in np.ravel(r)])
            k += n
        return out

    def _check_loss_reductions(self, split=False):
        """fit's compiled losses: reduction=None gives a loss per sample, which has
        no gradient (Keras on JAX raises "Gradient only defined for scalar-output
        functions"); a batch split over localities or chunks weights each part's
        loss by its share of the batch, which only the mean reductions allow."""
        for loss in self._compiled.losses:
            reduction = getattr(loss, "reduction", "sum_over_batch_size")
            if reduction in (None, "none"):
                raise TypeError(
                    f"[fit] the loss {loss.name!r} has reduction={reduction!r}: its value is "
                    "one loss per sample, and training needs a scalar (Keras on JAX raises "
                    "\"Gradient only defined for scalar-output functions\"); compile with "
                    "reduction=\"sum_over_batch_size\" (the default) or \"sum\" to train "
                    "(evaluate averages it, as Keras's loss tracker does) "
                    f"(at {user_location()})")
            if split and reduction not in ("sum_over_batch_size", "mean"):
                raise NotImplementedError(
                    f"[fit] the loss {loss.name!r} has reduction={reduction!r}, which "
                    "data-parallel, deterministic, ZeRO and pipeline training do not support "
                    "yet (they weight each part of a batch by its share, as the mean "
                    "reductions need); fit in one process without deterministic=, or use "
                    f"\"sum_over_batch_size\" (at {user_location()})")

    def _validate_dataset(self, ds, n_in, n_out):
        """Labels and inputs checked once, before training, naming the sample."""
        losses = self._compiled.losses

        def check(c, start, chunk):
            chunk = np.asarray(chunk)
            if c < n_in:
                if chunk.dtype.kind == "f":
                    ok = np.isfinite(chunk).reshape(len(chunk), -1).all(axis=1)
                    if not ok.all():
                        i = start + int(np.argmin(ok))
                        raise ValueError(f"[fit] the dataset's input {c} at sample {i} holds a "
                                         "NaN or infinite value")
                want = tuple(self._inputs[c].shape[1:])
                if tuple(chunk.shape[1:]) != want:
                    raise ValueError(f"[fit] the dataset's input {c} has samples of shape "
                                     f"{tuple(chunk.shape[1:])}, the model expects {want}")
            elif c < n_in + n_out:
                k = c - n_in
                if losses[k] is not None and losses[k].sparse_labels:
                    try:
                        self._check_sparse(chunk, losses[k].whole_output_shape(
                                           tuple(self._outputs[k].shape[1:])),
                                           f"labels {k}" if n_out > 1 else "the labels", "fit",
                                           losses[k])
                    except ValueError as e:
                        msg = str(e)
                        m = re.search(r"\[(\d+)\] \(sample (\d+)\)", msg)
                        if m:
                            i = start + int(m.group(2))
                            msg = msg.replace(m.group(0), f"[{i}] (sample {i})")
                        raise ValueError(msg) from None

        ds.validate(check)

    def _chunk_count(self, deterministic, n_ranks) -> int:
        """The number of chunks per global batch in deterministic mode (0: off)."""
        if deterministic is False or deterministic is None:
            return 0
        chunks = self.DETERMINISTIC_CHUNKS if deterministic is True else deterministic
        if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
            raise ValueError("[fit] deterministic must be True, False or a number of chunks (a "
                             f"positive int), got {deterministic!r}")
        if chunks % n_ranks:
            raise ValueError(f"[fit] deterministic mode cuts each global batch into {chunks} "
                             f"chunks, which {n_ranks} localities cannot share evenly: run on a "
                             f"number of localities that divides {chunks}, or pass "
                             f"deterministic=<chunks> with a multiple of {n_ranks}")
        return chunks

    @staticmethod
    def _chunk_args(arrays, n, chunks, n_ranks, rank, seed, it, fill_empty=False) -> list:
        """This locality's chunks of a global batch of n rows (chunk c: rows
        c*n//chunks up to (c+1)*n//chunks), their shares of the batch and their
        dropout seeds, as the deterministic step takes them: stream by stream
        (x_0.., y_0..), then w_0.., seed_0... `arrays` hold this locality's
        rows, [rank*n//n_ranks, (rank+1)*n//n_ranks): exactly its chunks.
        `fill_empty` (ZeRO 3, whose step runs every chunk: its gathers are
        collectives): an empty chunk is one row of zeros, its share still 0
        (the step drops what it computes)."""
        local = chunks // n_ranks
        mine = range(rank * local, (rank + 1) * local)
        base = rank * n // n_ranks
        bounds = [(c * n // chunks - base, (c + 1) * n // chunks - base) for c in mine]
        out = []
        for a in arrays:
            for lo, hi in bounds:
                if hi == lo and fill_empty:
                    a_ = np.asarray(a)
                    out.append(np.zeros((1,) + a_.shape[1:], dtype=a_.dtype))
                else:
                    out.append(a[lo:hi])
        return (out + [(hi - lo) / n for lo, hi in bounds]
                + [program_seed(seed, it, chunks, c) for c in mine])

    def _training_state(self) -> dict:
        pos = getattr(self, "_position", None) or {"epoch": 0, "batch": 0, "acc": None}
        settings = getattr(self, "_fit_settings", {})
        acc = pos["acc"]
        if acc is not None:  # the epoch's running sums, as JSON
            acc = dict(acc, totals=[np.asarray(t).tolist() for t in acc["totals"]])
        return {"iteration": self._iteration, "epoch": pos["epoch"], "batch": pos["batch"],
                "acc": acc, "seed": settings.get("seed", 0), "lr_override": self._lr_override}

    @staticmethod
    def _live() -> bool:
        """A progress bar redrawn in place: only on a terminal, and not under
        mpirun (which forwards output line by line)."""
        return sys.stdout.isatty() and "OMPI_COMM_WORLD_SIZE" not in os.environ and \
            SETTINGS["interactive_logging"]

    def _progress(self, epoch, epochs, b, n, logs, start):
        if not self._live():
            return
        width = 24
        if n:
            done = int(width * b / n)
            bar = "=" * max(0, done - 1) + (">" if done < width else "=") + "." * (width - done)
            msg = f"\rEpoch {epoch + 1}/{epochs} [{bar}] {b}/{n}"
        else:
            msg = f"\rEpoch {epoch + 1}/{epochs} {b}"
        msg += "".join(f" - {k} {_fmt(v)}" for k, v in logs.items())
        msg += f" - {time.perf_counter() - start:.1f}s"
        sys.stdout.write(msg)
        sys.stdout.flush()

    def _end_epoch(self, epoch, epochs, logs, start, cbs, history, verbose, validation):
        """An epoch's end in fit (compiled or run_eagerly): the validation when
        `validation` = (data, batch size, steps, freq) says so, on_epoch_end (which may
        add to the logs: learning_rate), the History and the progress line."""
        logs = dict(logs)
        data, batch_size, steps, freq = validation
        if data is not None and (epoch + 1) % freq == 0:
            # in batches of validation_batch_size, else fit's, as Keras (a model whose call
            # depends on the batch, the switch transformer's fixed tokens per batch,
            # validates as it trains; callbacks count its batches)
            vlogs = self._validate(data, batch_size, steps, cbs)
            logs.update({f"val_{k}": v for k, v in vlogs.items()})
        took = time.perf_counter() - start
        cbs.on_epoch_end(epoch, logs)
        history._add(epoch, logs)
        if verbose:
            self._progress_end(epoch, epochs, logs, took)

    def _progress_end(self, epoch, epochs, logs, took):
        parts = [f"Epoch {epoch + 1}/{epochs}"]
        parts += [f"{k} {_fmt(v)}" for k, v in logs.items()]
        parts.append(f"{took:.2f}s")
        if not SETTINGS["interactive_logging"]:  # keras.config.disable_interactive_logging()
            logging.getLogger("tessera.nn").info(" - ".join(parts))
            return
        end = "\r" if self._live() else ""
        sys.stdout.write(end + " - ".join(parts) + " " * 10 + "\n")
        sys.stdout.flush()
