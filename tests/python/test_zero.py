"""ZeRO's shard arithmetic and program text (tessera.nn.zero), on one process:
which elements each member owns, slices and their reassembly, the fixed
blocks of the global norm (against the norm taken whole), the stage setting,
and what each stage's training step does."""

import numpy as np
import pytest

from tessera import nn, optim
from tessera.nn.zero import ZeroPlan, zero_setting


def plan(stage=1, d=4, unit=4):
    shapes = {"a": (3, 5), "b": (7,), "c": (2, 2)}
    return ZeroPlan(stage, d, unit, [["a", "b"], ["c"]], shapes, "float32")


def test_padding_and_ownership():
    p = plan(d=4, unit=8)
    assert p.n == [22, 4]
    assert p.N == [24, 8]  # padded to a multiple of the unit
    assert p.k == [6, 2]  # each member's slice
    with pytest.raises(ValueError, match="8 blocks cannot be shared by 3 members"):
        plan(d=3, unit=8)


def test_slices_cover_every_element_once():
    p = plan(d=4, unit=4)
    rng = np.random.default_rng(0)
    whole = {v: rng.standard_normal(s).astype(np.float32) for v, s in p.shapes.items()}
    for j, bucket in enumerate(p.buckets):
        parts = [p.slices_of(whole, r, j) for r in range(p.d)]
        assert all(len(s) == p.k[j] for s in parts)
        flat = np.concatenate(parts)
        want = np.concatenate([whole[v].ravel() for v in bucket])
        np.testing.assert_array_equal(flat[:p.n[j]], want)
        np.testing.assert_array_equal(flat[p.n[j]:], 0)  # the padding
        np.testing.assert_array_equal(p._split(j, flat)[bucket[0]], whole[bucket[0]])


def test_state_names_and_fresh_state():
    p = plan(d=2, unit=2)
    p.state = list(optim.Adam(0.1).update_code(p.shards, p.grads).state)
    m0 = next(s for s in p.state if s.name == "opt_zp_0_m")
    assert p.whole_state_name(m0, "a") == "opt_a_m"
    # the whole state, per parameter, cut into this member's slices
    whole = {f"opt_{v}_{x}": np.full(s, 2.0, np.float32) for v, s in p.shapes.items()
             for x in "mv"}
    sl = p.state_shards(whole, 1)
    assert sorted(sl) == ["opt_zp_0_m", "opt_zp_0_v", "opt_zp_1_m", "opt_zp_1_v"]
    assert sl["opt_zp_1_v"].shape == (p.k[1],) and (sl["opt_zp_1_v"] == 2.0).all()
    # a fresh state's stand-ins have its shapes and values and take no memory
    params = {v: np.zeros(s, np.float32) for v, s in p.shapes.items()}
    opt = optim.Adagrad(0.1)
    state = opt.update_code(list(p.shapes), ["g0", "g1", "g2"]).state
    stand_in = opt.init_state(params, state, views=True)
    assert stand_in["opt_a_accumulator"].shape == (3, 5)
    assert stand_in["opt_a_accumulator"].strides == (0, 0)
    assert float(stand_in["opt_a_accumulator"][2, 4]) == pytest.approx(0.1)


def test_zero_setting(monkeypatch):
    monkeypatch.delenv("TESSERA_ZERO", raising=False)
    assert zero_setting(None) == 0
    assert zero_setting(3) == 3
    for bad in (4, -1, True, "1", 2.0):
        with pytest.raises(ValueError, match=r"^\[fit\] zero \(the ZeRO stage\) must be 0, 1, 2 or "
                           r"3, got .* \(argument zero=\)$"):
            zero_setting(bad)
    monkeypatch.setenv("TESSERA_ZERO", "2")
    assert zero_setting(None) == 2
    assert zero_setting(0) == 0  # the argument wins
    monkeypatch.setenv("TESSERA_ZERO", "two")
    with pytest.raises(ValueError, match="got 'two' \\(TESSERA_ZERO in the environment, set by "
                       "tessera run --zero\\)"):
        zero_setting(None)


def model(clipnorm=None):
    m = nn.Sequential([nn.Dense(6, activation="tanh"), nn.Dense(3)], input_shape=(4,), seed=2)
    m.BUCKET_BYTES = 64
    m.compile(optim.Adam(0.05, clipnorm=clipnorm), "mse")
    return m


def test_deterministic_clipnorm_from_blocks_is_the_global_norm():
    # deterministic mode takes the global norm from fixed blocks of the
    # buckets (the same blocks ZeRO's slices hold); it clips as the norm taken
    # whole does (clip_by_global_norm, normal mode), within rounding
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    y = rng.standard_normal((32, 3)).astype(np.float32) * 5
    a, b = model(0.1), model(0.1)
    a.fit(x, y, batch_size=32, epochs=3, verbose=0, deterministic=True)
    b.fit(x, y, batch_size=32, epochs=3, verbose=0)
    assert "znorm" in a.train_code and "clip_by_global_norm" in b.train_code
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    c = model()  # and clipping took place
    c.fit(x, y, batch_size=32, epochs=3, verbose=0)
    assert not all(np.allclose(u, v) for u, v in zip(a.get_weights(), c.get_weights()))


@pytest.mark.parametrize("stage,marks", [(1, False), (2, False), (2, True), (3, False)])
def test_step_text(stage, marks):
    m = model()
    m.ZERO2_BUCKET_MARKS = marks
    P, S = m._params(True), m._params(False)
    zp = ZeroPlan(stage, 2, 2, m._bucket_plan(P), {v: m.weights[v].shape for v in P}, "float32")
    m._zero_plans = {zp.key: zp}
    text = m._train_program(P, S, data_parallel=True, zero=zp) and m.train_code
    head = text[text.index("define(train_step"):].split("\n")[0]
    loss_fn = text[:text.index("define(train_step")]
    if stage == 1:  # whole buckets summed from inside the backward pass
        assert "grad_bucket(" in text and "reduce_scatter(" not in text
    else:  # each bucket's gradient reduce-scattered from inside the backward pass:
        # stage 3 gathers each bucket just before its first use, rematerialised, and
        # cuts it into views (bucket_parts); all_gather's gradient rule is the
        # reduce-scatter. Stage 2 marks each whole weight as a member of its bucket
        # (grad_bucket_shard), whose rule reduce-scatters the bucket of gradients:
        # no flat bucket of the weights is made
        assert "grad_bucket(" not in text and "reduce_scatter(" not in text
        whole = "" if stage == 3 else ", " + ", ".join(f"zw_{v}" for v in P)
        assert loss_fn.startswith(f"define(loss_fn, zp_0, zp_1, zp_2, zp_3{whole}, x, y, seed, "
                                  "w, dgroup")
        for j, bucket in enumerate(zp.buckets):
            if marks:
                for m_, v in enumerate(bucket):
                    assert (f"define({v}, grad_bucket_shard(zp_{j}, zw_{v}, \"s{j}\", {m_}, "
                            f"{len(bucket)}, group=dgroup))") in loss_fn
                continue
            made = loss_fn.index(f"define(zf_{j}, remat(lambda(s, ")
            first = f"reshape(zf_{j}[0], " if stage == 3 else f"reshape(zf_{j}[0:"
            assert made < loss_fn.index(f"define({bucket[0]}, {first}")
            if stage == 2:
                assert f"zw_{bucket[0]}" in loss_fn[made:].split("\n")[0]
        if stage == 3:  # cut into views (bucket_parts)
            assert loss_fn.count("bucket_parts(all_gather(s, group=dgroup)") == len(zp.buckets)
        elif not marks:
            assert loss_fn.count("grad_scatter(s, ") == len(zp.buckets)
        if marks:  # no flat bucket of the weights; the first layer's weights marked first
            assert "grad_scatter(" not in text and "remat(" not in loss_fn
            assert loss_fn.index("grad_bucket_shard(zp_3") < loss_fn.index("grad_bucket_shard(zp_1")
        else:  # the first layer's bucket is made before the second layer's
            assert loss_fn.index("(after(zp_3, x)") < loss_fn.index("(after(zp_1, ")
    # stage 3 takes and returns slices; 1 and 2 gather the updated weights
    assert head.startswith("define(train_step, zp_0" if stage == 3 else
                           f"define(train_step, {P[0]}")
    assert text.count("all_gather(zp_") == (0 if stage == 3 else len(zp.buckets))
    assert "opt_zp_0_m" in head and f"opt_{P[0]}_m" not in text


def test_slice_text_takes_each_members_slice():
    # the program text of slice_lines (one branch per member, no whole copy)
    # gives what slices_of gives, padding included
    from tessera import _core

    p = plan(d=4, unit=4)
    rng = np.random.default_rng(3)
    whole = {v: rng.standard_normal(s).astype(np.float32) for v, s in p.shapes.items()}
    lines = p.slice_lines({v: v for v in p.shapes}, ["s0", "s1"])
    names = list(p.shapes)
    text = (f"define(f, {', '.join(names)}, drank, block({', '.join(lines)}, list(s0, s1)))\n"
            "f\n")
    prog = _core.Program(text, "<slices>")
    assert "concatenate(list(ravel(a), ravel(b)))" not in text  # never the whole bucket
    for r in range(p.d):
        got = prog.run([whole[v] for v in names] + [r])
        for j in range(2):
            np.testing.assert_array_equal(got[j], p.slices_of(whole, r, j))


def test_deterministic_stage3_gathers_per_bucket():
    # Deterministic ZeRO 3: no bucket gathered at the step's start; each
    # chunk's loss function gathers each bucket just before its first use
    # (rematerialised), reading the slice undifferentiated, and gives the
    # chunk's whole gradient of the bucket to a one-element stand-in of its
    # shape (grad_local), which the step adds in the fixed order
    m = model()
    P, S = m._params(True), m._params(False)
    zp = ZeroPlan(3, 2, 8, m._bucket_plan(P), {v: m.weights[v].shape for v in P}, "float32")
    m._zero_plans = {zp.key: zp}
    m._deterministic_program(P, S, 4, 8, 2, zero=zp)
    text = m.train_code
    loss_fn, step = text[:text.index("define(train_step")], text[text.index("define(train_step"):]
    B = len(zp.buckets)
    assert "all_gather(zp_" not in step and "bucket_parts(" not in step
    assert loss_fn.count("remat(lambda(s, t, bucket_parts(grad_local(s, all_gather(t, "
                         "group=dgroup))") == B
    stand_ins = ", ".join(f"zd_{b}" for b in range(B))
    shards = ", ".join(f"zp_{b}" for b in range(B))
    for b in range(B):
        assert f"define(zd_{b}, broadcast_to(zeros(1, dtype=\"float32\"), [{zp.N[b]}]))" in step
    for j in range(4):  # every chunk runs (its gathers are collectives)
        assert (f"define(r_{j}, value_and_grad(loss_fn, argnums=[{', '.join(map(str, range(B)))}]"
                f", has_aux=true)({stand_ins}, {shards}, ") in step
    assert m.train_code.count("if(w_0 > 0.0, value_and_grad") == 0
    # the first layer's bucket is gathered before the second layer's
    assert loss_fn.index("(zp_3, after(zt_3, x))") < loss_fn.index("(zp_1, after(zt_1, ")
    assert zp.local_grads is False  # the plan is left as normal mode uses it


@pytest.mark.parametrize("depth,limit,ahead", [(1, 8 << 20, 1), (2, 8 << 20, 2), (3, 8 << 20, 3),
                                               (3, 1, 1), (3, 2 * 288, 2)])
def test_stage3_prefetch_depth(depth, limit, ahead):
    # ZeRO 3's forward pass gathers, with the bucket the first layer uses
    # (zf_3), the next `depth` buckets, at most `limit` bytes of them (at
    # least one), all held back until that layer's input x is ready; the
    # others wait for the input of a later layer
    m = nn.Sequential([nn.Dense(8, activation="tanh") for _ in range(3)] + [nn.Dense(8)],
                      input_shape=(8,), seed=2)
    m.BUCKET_BYTES = 300  # a bucket per layer
    m.compile(optim.Adam(0.05), "mse")
    m.ZERO3_PREFETCH, m.ZERO3_PREFETCH_BYTES = depth, limit
    P, S = m._params(True), m._params(False)
    zp = ZeroPlan(3, 2, 2, m._bucket_plan(P), {v: m.weights[v].shape for v in P}, "float32")
    assert zp.N == [72] * 4  # 288 bytes each
    m._zero_plans = {zp.key: zp}
    m._train_program(P, S, data_parallel=True, zero=zp)
    loss_fn = m.train_code[:m.train_code.index("define(train_step")]
    first_use = loss_fn.index("(x @ ")
    for b in (3, 2, 1, 0):
        made = loss_fn.index(f"define(zf_{b}, remat(")
        if 3 - b <= ahead:
            assert made < first_use and f"(after(zp_{b}, x))" in loss_fn, b
        else:
            assert made > first_use and f"(after(zp_{b}, x))" not in loss_fn, b
