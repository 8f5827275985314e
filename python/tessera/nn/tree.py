"""keras.tree: nested structures of lists, tuples, namedtuples and dicts, with
Keras 3's semantics (its optree backend): None is a leaf, a dict's children go in
sorted key order (an OrderedDict's in insertion order), rebuilt structures keep
their types and key order, and an empty container is a node without leaves."""

from __future__ import annotations

import collections

__all__ = ["MAP_TO_NONE", "assert_same_paths", "assert_same_structure", "flatten",
           "flatten_with_path", "is_nested", "lists_to_tuples", "map_shape_structure",
           "map_structure", "map_structure_up_to", "pack_sequence_as", "traverse"]


class MAP_TO_NONE:  # noqa: N801 - Keras's name
    """What a traverse function returns to put None in place of a sub-tree."""


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(structure):
    """True for a list, tuple, namedtuple or dict (a node); False for a leaf."""
    return isinstance(structure, (list, tuple, dict))


def _keys(node):
    """The children's keys (paths' parts) in Keras's order."""
    if isinstance(node, dict):
        keys = list(node)
        if isinstance(node, collections.OrderedDict):
            return keys
        try:
            return sorted(keys)
        except TypeError:
            return sorted(keys, key=repr)
    return list(range(len(node)))


def _children(node):
    return [node[k] for k in _keys(node)]


def _rebuild(node, children):
    """A node like `node` holding `children` (in _keys order)."""
    if isinstance(node, dict):
        by_key = dict(zip(_keys(node), children))
        if isinstance(node, collections.defaultdict):
            out = collections.defaultdict(node.default_factory)
            out.update((k, by_key[k]) for k in node)
            return out
        return type(node)((k, by_key[k]) for k in node)
    if _is_namedtuple(node):
        return type(node)(*children)
    if isinstance(node, tuple):
        return tuple(children) if type(node) is tuple else type(node)(children)
    return list(children) if type(node) is list else type(node)(children)


def flatten(structure):
    """The leaves of structure, depth first."""
    if not is_nested(structure):
        return [structure]
    return [leaf for c in _children(structure) for leaf in flatten(c)]


def flatten_with_path(structure):
    """[(path, leaf)]: each leaf with the tuple of keys and indices leading to it."""
    if not is_nested(structure):
        return [((), structure)]
    return [((k,) + p, leaf) for k in _keys(structure)
            for p, leaf in flatten_with_path(structure[k])]


def _same(a, b, where="`a` and `b`"):
    if is_nested(a) != is_nested(b):
        raise ValueError(f"[tree] {where} don't have the same nested structure: {a!r} and "
                         f"{b!r} differ")
    if not is_nested(a):
        return
    if (type(a) is not type(b) and not (isinstance(a, dict) and isinstance(b, dict))) or \
            _keys(a) != _keys(b):
        raise ValueError(f"[tree] {where} don't have the same nested structure: "
                         f"{type(a).__name__} {_keys(a)} and {type(b).__name__} {_keys(b)}")
    for x, y in zip(_children(a), _children(b)):
        _same(x, y, where)


def assert_same_structure(a, b, check_types=None):
    """A ValueError unless a and b nest the same containers the same way."""
    _same(a, b)


def assert_same_paths(a, b):
    """A ValueError unless a and b have the same set of leaf paths (types may differ)."""
    pa = {p for p, _ in flatten_with_path(a)}
    pb = {p for p, _ in flatten_with_path(b)}
    if pa != pb:
        raise ValueError(f"[tree] `a` and `b` don't have the same paths: only in `a`: "
                         f"{sorted(pa - pb, key=repr)}, only in `b`: {sorted(pb - pa, key=repr)}")


def map_structure(func, *structures, none_is_leaf=True):
    """func applied to the leaves of the structures (which must nest alike),
    in the first structure's shape. none_is_leaf=False keeps None as None."""
    if not structures:
        raise ValueError("[tree.map_structure] must be given at least one structure")
    for s in structures[1:]:
        _same(structures[0], s, "the structures")

    def go(*nodes):
        first = nodes[0]
        if not is_nested(first):
            if first is None and not none_is_leaf:
                return None
            return func(*nodes)
        kids = [_children(n) for n in nodes]
        return _rebuild(first, [go(*c) for c in zip(*kids)])

    return go(*structures)


def map_structure_up_to(shallow_structure, func, *structures):
    """func applied to the sub-trees of structures found at shallow_structure's leaves."""
    def go(shallow, *nodes):
        if not is_nested(shallow):
            return func(*nodes)
        for n in nodes:
            if not is_nested(n) or len(_keys(n)) != len(_keys(shallow)):
                raise ValueError(f"[tree.map_structure_up_to] {n!r} does not have the "
                                 f"structure of {shallow!r} at this level")
        return _rebuild(shallow, [go(s, *c) for s, *c in zip(
            _children(shallow), *[_children(n) for n in nodes])])

    return go(shallow_structure, *structures)


def pack_sequence_as(structure, flat_sequence):
    """flat_sequence's items put into structure's shape (flatten's inverse)."""
    flat = list(flat_sequence)
    need = len(flatten(structure))
    if len(flat) != need:
        raise ValueError(f"[tree.pack_sequence_as] the structure has {need} leaves, the flat "
                         f"sequence {len(flat)} items")
    it = iter(flat)

    def go(node):
        if not is_nested(node):
            return next(it)
        return _rebuild(node, [go(c) for c in _children(node)])

    return go(structure)


def traverse(func, structure, top_down=True):
    """func on every sub-tree, depth first: top down, a non-None result replaces
    the sub-tree and stops the descent; bottom up, it replaces the rebuilt
    sub-tree. MAP_TO_NONE as a result puts None."""
    def result(r):
        return None if r is MAP_TO_NONE else r

    def go(node):
        if top_down:
            r = func(node)
            if r is not None:
                return result(r)
            if not is_nested(node):
                return node
            return _rebuild(node, [go(c) for c in _children(node)])
        if is_nested(node):
            node = _rebuild(node, [go(c) for c in _children(node)])
        r = func(node)
        return node if r is None else result(r)

    return go(structure)


def lists_to_tuples(structure):
    """structure with every list made a tuple."""
    return traverse(lambda n: tuple(n) if isinstance(n, list) else None, structure,
                    top_down=False)


def _is_shape(x):
    return isinstance(x, (list, tuple)) and all(isinstance(e, (int, type(None))) for e in x)


def map_shape_structure(func, structure):
    """map_structure where shape tuples (lists or tuples of ints and None) are leaves."""
    if _is_shape(structure) or not is_nested(structure):
        return func(structure)
    return _rebuild(structure, [map_shape_structure(func, c) for c in _children(structure)])
