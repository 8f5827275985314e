"""Pipeline parallelism's pure parts (tessera.nn.pipeline): the schedules,
the deadlock simulation and the split of a model into stages. The training
itself runs under mpirun: tests/distributed/pipe_fit.py, pipe_errors.py."""

import numpy as np
import pytest

from tessera import nn
from tessera.nn import pipeline as pp


def _check_order(order, m):
    seen = set()
    for action, i in order:
        assert (action, i) not in seen
        if action == "B":
            assert ("F", i) in seen, f"B{i} before F{i} in {order}"
        seen.add((action, i))
    assert seen == {(a, i) for a in "FB" for i in range(m)}


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5])
def test_schedules_bound_order_and_no_deadlock(p):
    for m in range(p, 13):
        orders = {k: [pp.schedule(s, p, m, k) for s in range(p)] for k in pp.SCHEDULES}
        for kind, per_stage in orders.items():
            for s, order in enumerate(per_stage):
                _check_order(order, m)
                want = min(p - s, m) if kind == "1f1b" else m
                assert pp.in_flight(order) == want, (kind, p, m, s, order)
            done = pp.simulate(per_stage)
            assert len(done) == 2 * m * p


def test_1f1b_warm_up_steady_state_cool_down():
    assert pp.schedule(0, 4, 6) == [("F", 0), ("F", 1), ("F", 2), ("F", 3), ("B", 0), ("F", 4),
                                    ("B", 1), ("F", 5), ("B", 2), ("B", 3), ("B", 4), ("B", 5)]
    assert pp.schedule(3, 4, 3 + 1) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2),
                                        ("B", 2), ("F", 3), ("B", 3)]
    assert pp.schedule(1, 2, 3, "gpipe") == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1),
                                             ("B", 2)]


def test_simulate_finds_a_deadlock_and_bad_orders():
    orders = [pp.schedule(s, 2, 4) for s in range(2)]
    # the last stage running B1 before B0: stage 0 waits for B0's cotangent
    orders[1] = [("F", 0), ("F", 1), ("B", 1), ("B", 0), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]
    with pytest.raises(RuntimeError, match=r"^\[simulate\] deadlock: stage 0 at recv B0"):
        pp.simulate(orders)
    with pytest.raises(ValueError, match=r"stage 1 runs the backward of micro-batch 0 before"):
        pp.simulate([pp.schedule(0, 2, 2), [("B", 0), ("F", 0), ("F", 1), ("B", 1)]])
    with pytest.raises(ValueError, match=r"stage 0's order must run F and B of each"):
        pp.simulate([[("F", 0), ("F", 0)]])


def test_schedule_errors():
    with pytest.raises(ValueError, match=r"^\[schedule\] 2 micro-batches for 4 stages: a "
                                         r"pipeline needs at least as many micro-batches"):
        pp.schedule(0, 4, 2)
    with pytest.raises(ValueError, match=r"unknown schedule 'zb': use one of \['1f1b', "):
        pp.schedule(0, 2, 2, "zb")
    with pytest.raises(ValueError, match=r"stage must be an int in \[0, 2\), got 2"):
        pp.schedule(2, 2, 4)


def test_bubble():
    assert pp.bubble(4, 8) == 3 / 11
    assert pp.bubble(1, 5) == 0.0


def _mlp():
    model = nn.Sequential([nn.Dense(16, activation="tanh", name="d1"),
                           nn.Dense(12, name="d2"), nn.Activation("relu", name="act"),
                           nn.Dense(8, activation="tanh", name="d3"), nn.Dense(3, name="out")],
                          input_shape=(5,))
    return model


def _skip():
    inp = nn.Input((6,))
    h1 = nn.Dense(16, activation="tanh", name="d1")(inp)
    h2 = nn.Dense(16, activation="relu", name="d2")(h1)
    h3 = nn.Dense(16, activation="tanh", name="d3")(h2)
    out = nn.Dense(3, name="out")(nn.Add(name="add")([h3, h1]))
    return nn.Model(inp, out)


def _names(layers):
    return [layer.name for layer in layers]


def test_split_before_named_layers():
    plan = pp.plan_stages(_mlp(), 3, ["d2", "out"])
    assert [_names(ls) for ls in plan.layers] == [["d1"], ["d2", "act", "d3"], ["out"]]
    assert [len(f) for f in plan.feeds] == [0, 1, 1]
    assert [len(s) for s in plan.sends] == [1, 1, 0]
    assert plan.sends[0][0] is plan.feeds[1][0]


def test_a_skip_connection_crosses_every_cut_it_spans():
    plan = pp.plan_stages(_skip(), 3, ["d2", "d3"])
    # d1's output goes to d2 and, through stage 1, to the Add in stage 2
    assert [len(c) for c in plan.sends[:-1]] == [1, 2]
    assert plan.sends[0][0] in plan.sends[1]
    assert _names(plan.layers[2]) == ["d3", "add", "out"]


def test_split_errors_name_the_layers():
    model = _mlp()
    with pytest.raises(ValueError, match=r"^\[fit\] pipeline_split names layer 'nope', which "
                                         r"the model does not have; its layers: \['d1', 'd2', "):
        pp.plan_stages(model, 2, ["nope"])
    with pytest.raises(ValueError, match=r"names 2 layer\(s\), which makes 3 stages, but the "
                                         r"mesh's pipeline axis has 2 localities"):
        pp.plan_stages(model, 2, ["d2", "d3"])
    with pytest.raises(ValueError, match=r"in the order the model runs them, got \['d3', 'd2'\]"):
        pp.plan_stages(model, 3, ["d3", "d2"])
    with pytest.raises(ValueError, match=r"names 'd1', the model's first layer"):
        pp.plan_stages(model, 2, ["d1"])
    with pytest.raises(TypeError, match=r"pipeline_split must be a list of layer names, got str"):
        pp.plan_stages(model, 2, "d2")


def _wide(branches):
    inp = nn.Input((4,))
    hs = [nn.Dense(3, name=f"b{k}")(inp) for k in range(branches)]
    cat = nn.Concatenate(name="cat")(hs)
    return nn.Model(inp, nn.Dense(2, name="out")(nn.Dense(8, name="mix")(cat)))


def test_a_cut_carrying_too_many_tensors_is_refused():
    with pytest.raises(ValueError, match=r"^\[fit\] pipeline_split: the cut before layer 'cat' "
                                         r"\(stage 0 to 1\) carries 5 tensors \(made by layer "
                                         r"'b0', layer 'b1', .*layer 'b4'\); at most 4 may "
                                         r"cross a cut"):
        pp.plan_stages(_wide(5), 2, ["cat"])
    assert len(pp.plan_stages(_wide(4), 2, ["cat"]).sends[0]) == 4


def test_automatic_split_balances_parameters_and_avoids_wide_cuts():
    model = nn.Sequential([nn.Dense(100, name="a"), nn.Dense(10, name="b"),
                           nn.Dense(10, name="c"), nn.Dense(100, name="d")], input_shape=(10,))
    # parameters a 1100, b 1010, c 110, d 1100; the largest stage of each cut:
    # before b 2220, before c 2110, before d 2220
    plan = pp.plan_stages(model, 2)
    assert [_names(ls) for ls in plan.layers] == [["a", "b"], ["c", "d"]]
    plan = pp.plan_stages(model, 4)
    assert [_names(ls) for ls in plan.layers] == [["a"], ["b"], ["c"], ["d"]]
    # the 5 branches of _wide(5) are never cut across
    plan = pp.plan_stages(_wide(5), 2)
    assert all(len(c) <= pp.MAX_CUT_TENSORS for c in plan.sends)
    # a stage of weightless layers alone is never chosen
    model = nn.Sequential([nn.Flatten(name="flat"), nn.Dense(4, name="a"),
                           nn.Activation("relu", name="r"), nn.Dense(2, name="b")],
                          input_shape=(2, 3))
    plan = pp.plan_stages(model, 2)
    assert [_names(ls) for ls in plan.layers] in ([["flat", "a"], ["r", "b"]],
                                                  [["flat", "a", "r"], ["b"]])
    with pytest.raises(ValueError, match=r"cannot be cut into 3 stages that each hold trainable"):
        pp.plan_stages(model, 3)
    with pytest.raises(ValueError, match=r"the model has 2 layers, too few for the 3 stages"):
        pp.plan_stages(nn.Sequential([nn.Dense(2), nn.Dense(2)], input_shape=(3,)), 3)


def test_a_subclassed_model_stays_whole():
    class Sub(nn.Model):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Dense(4, name="a"), nn.Dense(2, name="b")

        def call(self, x):
            return self.b(self.a(x) * 2.0)

    model = Sub()
    model.build((3,))
    with pytest.raises(ValueError, match=r"the model has 1 layers, too few for the 2 stages of "
                                         r"the mesh's pipeline axis; '.*' stay whole \(a "
                                         r"subclassed model's call"):
        pp.plan_stages(model, 2)


def test_one_locality_runs_the_same_script_unsplit():
    model = _mlp()
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = np.ones((8, 5), dtype=np.float32), np.arange(8) % 3
    h = model.fit(x, y, batch_size=4, verbose=0, pipeline_split=["d3"], microbatches=2)
    assert model._pipeline is None and len(h.history["loss"]) == 1
    with pytest.raises(ValueError, match=r"pipeline_split names layer 'nope', which the model"):
        model.fit(x, y, batch_size=4, verbose=0, pipeline_split=["nope"])


def test_measured_layer_times_drive_the_automatic_split():
    model = _skip()
    times = pp.measure_layers(model, rows=8, repeats=1)
    assert set(times) == {"d1", "d2", "d3", "add", "out"}
    assert all(t > 0 for t in times.values())
    # costs override the parameter counts: a slow last layer gets a stage alone
    mlp = nn.Sequential([nn.Dense(100, name="a"), nn.Dense(10, name="b"),
                         nn.Dense(10, name="c"), nn.Dense(100, name="d")], input_shape=(10,))
    plan = pp.plan_stages(mlp, 2, costs={"a": 1.0, "b": 1.0, "c": 1.0, "d": 5.0})
    assert [_names(ls) for ls in plan.layers] == [["a", "b", "c"], ["d"]]


def _four_dense(seed=3):
    return nn.Sequential([nn.Dense(16, activation="tanh", name=f"h{i}") for i in range(3)]
                         + [nn.Dense(4, name="out")], input_shape=(8,), seed=seed)


def _pending(model):
    from tessera.nn.layers import DeferredValues

    return sorted(f"{layer.name}/{n}" for layer in model.layers
                  if isinstance(layer._values, DeferredValues)
                  for n in layer._values.pending())


def test_pipeline_ranks_draw_weights_on_first_read(monkeypatch):
    # On a locality of a pipeline (TESSERA_MESH pipeline > 1) a model's
    # initial weights are drawn when first read: bitwise the draw made at
    # once, whatever is read first.
    want = _four_dense().get_weights()
    monkeypatch.setenv("TESSERA_MESH", "data=1,pipeline=2")
    model = _four_dense()
    assert len(_pending(model)) == 8
    out = model.get_layer("out")
    # (layer.weights are Variables: reading their values draws them)
    assert [w.numpy().shape for w in out.weights] == [(16, 4), (4,)]  # drawn: out's two
    assert _pending(model) == [f"h{i}/{n}" for i in range(3) for n in ("bias", "kernel")]
    got = model.get_weights()
    assert not _pending(model)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_deferred_draws_copy_and_stand_ins(monkeypatch):
    from tessera.nn.layers import peek_value

    want = _four_dense().get_weights()
    monkeypatch.setenv("TESSERA_MESH", "pipeline=4")
    model = _four_dense()
    h0 = model.get_layer("h0")
    # the shapes without drawing anything
    stand = model._weight_stand_ins()
    assert {v: a.shape for v, a in stand.items()} == \
        {v: tuple(p.shape) for v, (_, p) in model._owner.items()}
    assert len(_pending(model)) == 8
    # a peek draws without keeping
    assert np.array_equal(peek_value(h0, "kernel"), want[0])
    assert len(_pending(model)) == 8
    # dict() and a copy read every value, drawn
    got = dict(h0._values)
    assert all(isinstance(a, np.ndarray) for a in got.values())
    assert np.array_equal(got["kernel"], want[0]) and np.array_equal(got["bias"], want[1])
    # a value set before its draw replaces the draw
    model.get_layer("h1").set_weights([np.ones((16, 16), "float32"), np.zeros(16, "float32")])
    assert np.array_equal(model.get_weights()[2], np.ones((16, 16)))


def test_no_deferral_without_a_pipeline(monkeypatch):
    monkeypatch.setenv("TESSERA_MESH", "data=2,tensor=2")
    assert not _pending(_four_dense())
    monkeypatch.setenv("TESSERA_MESH", "pipeline=two")  # reported where the mesh is made
    assert not _pending(_four_dense())


def test_set_weights_replaces_a_pending_draw_without_drawing_it(monkeypatch):
    from tessera.nn.layers import DeferredValues

    monkeypatch.setenv("TESSERA_MESH", "pipeline=2")
    model = _four_dense()
    before = DeferredValues.drawn
    model.get_layer("h0").set_weights([np.full((8, 16), 2.0), np.zeros(16)])
    assert DeferredValues.drawn == before
    got = model.get_layer("h0").get_weights()
    assert got[0].dtype == np.float32 and np.array_equal(got[0], np.full((8, 16), 2.0))
