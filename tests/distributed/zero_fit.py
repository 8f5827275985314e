# ZeRO stages 1, 2 and 3 in fit under `tessera run -n N` (N = 2 or 4, every
# locality on the data axis): against the same fit on one locality
# (data_parallel=False, computed here by every rank with no collective):
# losses and weights within float tolerance in normal mode, and bitwise
# (SHA-256 of the weights and of the optimizer state) with
# deterministic=True, with and without clipnorm, for SGD with momentum, Adam,
# Nadam and Lamb (trust ratios from the whole weights and directions); the
# optimizer state held as slices during fit (checked in a callback), whole
# after it and on demand during it (validation, predict and get_weights in
# callbacks under stage 3); checkpoints written under ZeRO on N localities
# resumed on one and the other way round (with N = 4 also from a data axis of
# 2 to one of 4 and back); bad input. Prints "ok" on every rank.
import hashlib
import os
import tempfile

import numpy as np

import tessera.distributed as dist
from tessera import nn, optim

R, N = dist.rank(), dist.size()
assert N in (2, 4), N

rng = np.random.default_rng(5)
X = rng.standard_normal((64, 7)).astype(np.float32)
Y = np.tanh(X @ rng.standard_normal((7, 3))).astype(np.float32)


def model(opt):
    m = nn.Sequential([nn.Dense(13, activation="relu"), nn.Dense(9, activation="tanh"),
                       nn.Dense(3)], input_shape=(7,), seed=3)
    m.BUCKET_BYTES = 256  # several buckets, members cut across slices
    m.compile(opt, "mse")
    return m


def digest(m):
    h = hashlib.sha256()
    for w in m.get_weights():
        h.update(np.ascontiguousarray(w).tobytes())
    state = m._opt_state
    for k in sorted(state):
        h.update(k.encode())
        h.update(np.ascontiguousarray(state[k]).tobytes())
    return h.hexdigest()


def fit(opt, one, epochs=3, **kw):
    m = model(opt())
    h = m.fit(X, Y, batch_size=16, epochs=epochs, verbose=0, seed=2,
              data_parallel=False if one else None, **kw)
    return m, h.history["loss"]


OPTS = {"sgd": lambda clip=None: optim.SGD(0.05, momentum=0.9, clipnorm=clip),
        "adam": lambda clip=None: optim.Adam(1e-2, clipnorm=clip),
        "nadam": lambda clip=None: optim.Nadam(1e-2, clipnorm=clip),
        "lamb": lambda clip=None: optim.Lamb(1e-2, weight_decay=0.01, clipnorm=clip)}


class Held(nn.callbacks.Callback):
    """During fit: the optimizer state is this member's slices (and under
    stage 3 the parameters too), never whole."""

    def __init__(self, stage):
        super().__init__()
        self.stage, self.seen = stage, 0

    def on_train_batch_end(self, batch, logs=None):
        z = self.model._zero
        assert z is not None and z.plan.stage == self.stage
        values = [self.model._owner[v][0]._values[self.model._owner[v][1].name]
                  for v in self.model._params(True)]
        whole = sum(np.asarray(a).size for a in values if a is not None)
        params = sum(z.plan.n)
        held_opt = sum(np.asarray(a).size for a in z.opt.values() if np.ndim(a))
        kinds = len([s for s in z.plan.state if not s.scalar]) // len(z.plan.buckets)
        assert held_opt == kinds * sum(z.plan.k), (held_opt, kinds, z.plan.k)
        assert held_opt < kinds * params, (held_opt, params)
        if self.stage == 3:
            assert all(self.model._owner[v][0]._values[self.model._owner[v][1].name] is None
                       for v in self.model._params(True))
            assert sum(np.asarray(a).size for a in z.params) == sum(z.plan.k)
        else:
            assert whole == params
        self.seen += 1


# On 4 localities (2 cores, ranks oversubscribed: CI's time) the optimizers
# whose update reads more than the element (Adam's moments, Lamb's trust
# ratios from the whole weights); SGD with momentum and Nadam on 2 only.
OPTS_N = {k: v for k, v in OPTS.items() if N == 2 or k in ("adam", "lamb")}


def check_normal():
    for name, opt in OPTS_N.items():
        ref, l_ref = fit(opt, True)
        for stage in (1, 2, 3):
            held = Held(stage)
            m, l_m = fit(opt, False, zero=stage, callbacks=[held])
            assert held.seen == 12, held.seen
            assert m._zero is None  # whole again after fit
            np.testing.assert_allclose(l_m, l_ref, rtol=1e-5, err_msg=f"{name} zero={stage}")
            for a, b in zip(m.get_weights(), ref.get_weights()):
                np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5,
                                           err_msg=f"{name} zero={stage}")
            assert sorted(m._opt_state) == sorted(ref._opt_state)
            for k in ref._opt_state:
                np.testing.assert_allclose(m._opt_state[k], ref._opt_state[k], rtol=2e-3,
                                           atol=1e-6, err_msg=f"{name} zero={stage} {k}")


def check_whole_on_demand():
    # During fit under stage 3 the model holds slices; validation (evaluate),
    # predict and get_weights in a callback gather them on every member, and
    # training goes on from the slices.
    class Ask(nn.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            assert all(a.shape == b.shape for a, b in zip(self.model.get_weights(),
                                                          ref.get_weights()))
            self.out = self.model.predict(X[:5], verbose=0)

    opt = OPTS["adam"]
    ref = model(opt())
    h_ref = ref.fit(X, Y, batch_size=16, epochs=3, verbose=0, seed=2, data_parallel=False,
                    validation_data=(X[:32], Y[:32])).history
    m, ask = model(opt()), Ask()
    h = m.fit(X, Y, batch_size=16, epochs=3, verbose=0, seed=2, zero=3, callbacks=[ask],
              validation_data=(X[:32], Y[:32])).history
    np.testing.assert_allclose(h["val_loss"], h_ref["val_loss"], rtol=1e-5)
    np.testing.assert_allclose(h["loss"], h_ref["loss"], rtol=1e-5)
    np.testing.assert_allclose(ask.out, ref.predict(X[:5], verbose=0), rtol=1e-4, atol=1e-6)


def check_clipnorm_normal():
    # a norm that clips every step
    ref, l_ref = fit(lambda: OPTS["adam"](0.05), True)
    for stage in (1, 2, 3):
        m, l_m = fit(lambda: OPTS["adam"](0.05), False, zero=stage)
        np.testing.assert_allclose(l_m, l_ref, rtol=1e-5, err_msg=f"clipnorm zero={stage}")
        for a, b in zip(m.get_weights(), ref.get_weights()):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def check_bitwise():
    for name, opt in OPTS_N.items():
        for clip in (None, 0.05):
            ref, l_ref = fit(lambda: opt(clip), True, deterministic=True)
            want = digest(ref)
            for stage in (0, 1, 2, 3):
                m, l_m = fit(lambda: opt(clip), False, deterministic=True, zero=stage)
                assert l_m == l_ref, (name, clip, stage, l_m, l_ref)
                assert digest(m) == want, (name, clip, stage)


def check_bitwise_empty_chunks():
    # The last batch of 58 rows by 14 has 2 rows for 8 chunks: some chunks
    # are empty, and on 4 localities two members hold only empty ones. ZeRO
    # 3's deterministic step still runs each chunk's gathers on every member
    # (fit gives an empty chunk a row of zeros of weight 0, whose gradient is
    # dropped).
    def run(one, **kw):
        m = model(OPTS["adam"](0.05))
        h = m.fit(X[:58], Y[:58], batch_size=14, epochs=2, verbose=0, seed=2,
                  deterministic=True, data_parallel=False if one else None, **kw)
        return m, h.history["loss"]

    ref, l_ref = run(True)
    for stage in (2, 3):
        m, l_m = run(False, zero=stage)
        assert l_m == l_ref, (stage, l_m, l_ref)
        assert digest(m) == digest(ref), stage


def check_resume():
    # 2 epochs, a checkpoint, 2 more: bitwise the 4 epochs in one go, with
    # the checkpoint written and read under ZeRO on N localities or on one.
    opt = OPTS["adam"]
    ref, _ = fit(opt, True, epochs=4, deterministic=True)
    want = digest(ref)
    folder = tempfile.mkdtemp(prefix=f"zero-resume-{R}-")
    for first, then in ((3, None), (None, 2), (1, 3)):
        path = os.path.join(folder, f"ck-{first}-{then}.tsr")
        m = model(opt())
        m.fit(X, Y, batch_size=16, epochs=2, verbose=0, seed=2, deterministic=True,
              data_parallel=False if first is None else None, zero=first or 0)
        m.save_checkpoint(path)
        m2 = model(opt())
        m2.fit(X, Y, batch_size=16, epochs=4, verbose=0, seed=2, deterministic=True,
               data_parallel=False if then is None else None, zero=then or 0, resume_from=path)
        assert digest(m2) == want, (first, then)
    # distributed checkpoints (checkpoint_dir): written under zero=2 on N
    # localities, every locality its share of the whole state
    run = os.path.join(folder, "dir")
    if R == 0:
        os.makedirs(run)
    dist.barrier()
    shared = dist.broadcast(np.frombuffer(run.encode(), dtype=np.uint8).copy())
    run = bytes(np.asarray(shared, dtype=np.uint8)).decode()
    m = model(opt())
    m.fit(X, Y, batch_size=16, epochs=2, verbose=0, seed=2, deterministic=True, zero=2,
          checkpoint_dir=run)
    m2 = model(opt())
    m2.fit(X, Y, batch_size=16, epochs=4, verbose=0, seed=2, deterministic=True, zero=3,
           resume_from=run)
    assert digest(m2) == want


def check_errors():
    m = model(optim.Adam())
    for bad in (5, -1, True, "2", 1.0):
        try:
            m.fit(X, Y, batch_size=16, epochs=1, verbose=0, zero=bad)
        except ValueError as e:
            assert str(e) == f"[fit] zero (the ZeRO stage) must be 0, 1, 2 or 3, got {bad!r} " \
                "(argument zero=)", str(e)
        else:
            raise AssertionError(bad)
    # one data member: every stage is plain training
    one, _ = fit(OPTS["adam"], True, deterministic=True)
    for stage in (1, 2, 3):
        m1, _ = fit(OPTS["adam"], True, deterministic=True, zero=stage)
        assert digest(m1) == digest(one)
    # Keras's per-weight clipnorm would clip each slice to the norm: refused
    try:
        model(nn.optimizers.Adam(clipnorm=1.0)).fit(X, Y, batch_size=16, epochs=1, verbose=0,
                                                     zero=1)
    except ValueError as e:
        assert "clipping each weight's gradient to a norm (Keras's clipnorm=1.0) is not " \
            "supported under ZeRO (zero=1" in str(e), str(e)
    else:
        raise AssertionError("per-weight clipnorm under ZeRO")
    try:
        model(nn.optimizers.Adam(gradient_accumulation_steps=2)).fit(
            X, Y, batch_size=16, epochs=1, verbose=0, zero=2)
    except ValueError as e:
        assert "gradient_accumulation_steps=2 is not supported under ZeRO (zero=2)" in str(e), \
            str(e)
    else:
        raise AssertionError("gradient accumulation under ZeRO")
    try:
        model(nn.optimizers.Adam(use_ema=True)).fit(X, Y, batch_size=16, epochs=1, verbose=0,
                                                     zero=1)
    except ValueError as e:
        assert "Adam(use_ema=True) is not supported under ZeRO or pipeline stages" in str(e), \
            str(e)
    else:
        raise AssertionError("use_ema under ZeRO")
    os.environ["TESSERA_ZERO"] = "7"
    try:
        m.fit(X, Y, batch_size=16, epochs=1, verbose=0)
    except ValueError as e:
        assert "TESSERA_ZERO in the environment" in str(e), str(e)
    else:
        raise AssertionError("TESSERA_ZERO")
    finally:
        del os.environ["TESSERA_ZERO"]


def on_mesh(text):
    """The job's mesh as `tessera run --mesh text` would give it (a fresh
    tessera.distributed.mesh(); text None: every locality on the data axis)."""
    if text is None:
        os.environ.pop("TESSERA_MESH", None)
    else:
        os.environ["TESSERA_MESH"] = text
    dist._job_mesh = None


def check_resume_across_meshes():
    # N = 4: a checkpoint written under ZeRO on a data axis of 2
    # (--mesh data=2,tensor=2: the tensor members of a plain model train the
    # same rows) resumes on a data axis of 4, and the other way round, bitwise
    # the uninterrupted one-locality run
    opt = OPTS["adam"]
    ref, _ = fit(opt, True, epochs=4, deterministic=True)
    folder = tempfile.mkdtemp(prefix=f"zero-mesh-{R}-")
    for first, then in (("data=2,tensor=2", None), (None, "data=2,tensor=2")):
        path = os.path.join(folder, f"ck-{first is None}.tsr")
        on_mesh(first)
        m = model(opt())
        m.fit(X, Y, batch_size=16, epochs=2, verbose=0, seed=2, deterministic=True, zero=2)
        assert m._data_axis(None)[1] == (2 if first else 4)
        m.save_checkpoint(path)
        on_mesh(then)
        m2 = model(opt())
        m2.fit(X, Y, batch_size=16, epochs=4, verbose=0, seed=2, deterministic=True, zero=3,
               resume_from=path)
        assert m2._data_axis(None)[1] == (2 if then else 4)
        assert digest(m2) == digest(ref), (first, then)
    on_mesh(None)


if N == 2:  # nothing in it depends on the number of localities
    check_errors()
check_normal()
check_whole_on_demand()
check_clipnorm_normal()
check_bitwise()
check_bitwise_empty_chunks()
check_resume()
if N == 4:
    check_resume_across_meshes()
print(f"rank {R}: ok", flush=True)
