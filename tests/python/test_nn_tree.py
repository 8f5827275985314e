"""tessera.nn.tree against keras.tree (Keras 3 on JAX, the oracle): every
function on lists, tuples, namedtuples, dicts, OrderedDicts and None leaves."""

import collections
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import pytest  # noqa: E402

from tessera.nn import tree  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps
ktree = keras.tree

Point = collections.namedtuple("Point", ["x", "y"])
STRUCTS = [
    1,
    None,
    [],
    [1, [2, 3], (4, None)],
    {"b": 1, "a": [2, {"d": 3, "c": 4}]},
    collections.OrderedDict([("z", 1), ("a", (2, 3))]),
    (Point(1, [2, 3]), {"k": Point(None, 5)}),
    [{"x": ()}, [[7]]],
]


@pytest.mark.parametrize("s", STRUCTS, ids=range(len(STRUCTS)))
def test_functions_match_keras(s):
    assert tree.is_nested(s) == ktree.is_nested(s)
    assert tree.flatten(s) == ktree.flatten(s)
    assert tree.flatten_with_path(s) == ktree.flatten_with_path(s)
    flat = [f"v{i}" for i in range(len(ktree.flatten(s)))]
    got, want = tree.pack_sequence_as(s, flat), ktree.pack_sequence_as(s, flat)
    assert got == want and type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)
    f = lambda v: None if v is None else str(v) * 2  # noqa: E731
    assert tree.map_structure(f, s) == ktree.map_structure(f, s)
    assert tree.map_structure(lambda a, b: (a, b), s, s) == ktree.map_structure(
        lambda a, b: (a, b), s, s)
    assert tree.map_structure(lambda v: 0, s, none_is_leaf=False) == ktree.map_structure(
        lambda v: 0, s, none_is_leaf=False)
    assert tree.lists_to_tuples(s) == ktree.lists_to_tuples(s)
    for top_down in (True, False):
        seen, kseen = [], []
        tree.traverse(lambda n: seen.append(n), s, top_down=top_down)
        ktree.traverse(lambda n: kseen.append(n), s, top_down=top_down)
        assert seen == kseen
    g = lambda n: tree.MAP_TO_NONE if isinstance(n, list) and len(n) == 2 else None  # noqa
    kg = lambda n: ktree.MAP_TO_NONE if isinstance(n, list) and len(n) == 2 else None  # noqa
    assert tree.traverse(g, s) == ktree.traverse(kg, s)
    tree.assert_same_structure(s, ktree.map_structure(lambda v: 0, s))
    tree.assert_same_paths(s, s)


def test_map_shape_structure_and_up_to_match_keras():
    s = {"a": (None, 3), "b": [(2, 4), [5]]}
    f = lambda shape: tuple(0 if d is None else d for d in shape)  # noqa: E731
    assert tree.map_shape_structure(f, s) == ktree.map_shape_structure(f, s)
    shallow = [1, {"a": 2}]
    deep = [[1, 2], {"a": (3, 4)}]
    assert tree.map_structure_up_to(shallow, len, deep) == ktree.map_structure_up_to(
        shallow, len, deep)


@pytest.mark.parametrize("a,b", [([1, 2], (1, 2)), ([1, [2]], [1, 2]), ({"a": 1}, {"b": 1}),
                                 ([1], [1, 2])])
def test_different_structures_raise_as_keras(a, b):
    with pytest.raises(ValueError):
        ktree.assert_same_structure(a, b)
    with pytest.raises(ValueError, match=r"\[tree\] `a` and `b` don't have the same"):
        tree.assert_same_structure(a, b)
    with pytest.raises(ValueError, match="same nested structure"):
        tree.map_structure(lambda x, y: x, a, b)


def test_paths_and_pack_errors():
    tree.assert_same_paths([1, 2], (3, 4))
    ktree.assert_same_paths([1, 2], (3, 4))
    with pytest.raises(ValueError, match=r"only in `a`: \[\(1,\)\]"):
        tree.assert_same_paths([1, 2], [3])
    with pytest.raises(ValueError, match=r"\[tree.pack_sequence_as\] .* 3 leaves, .* 2 items"):
        tree.pack_sequence_as([1, [2, 3]], [1, 2])
