"""The order Keras lists a user layer's weights in: the layer's own, then its sublayers in
the order it assigned them (functional.graph_layers)."""

from __future__ import annotations

__all__ = ["keras_order"]


def keras_order(layer, used: list) -> list:
    """The layers a user layer's call used, in the order Keras lists their
    weights: the layer's own first, then the layers it holds as attributes
    in the order it assigned them (lists, tuples and dicts of layers too,
    each sublayer with its own in turn), then any others in call order."""
    wanted = {id(l) for l in used}
    ordered, placed, visited = [], set(), set()

    def visit(obj):
        if isinstance(obj, (list, tuple)):
            for v in obj:
                visit(v)
        elif isinstance(obj, dict):
            for v in obj.values():
                visit(v)
        elif hasattr(obj, "_is_custom") and hasattr(obj, "params") and id(obj) not in visited:
            visited.add(id(obj))
            if id(obj) in wanted and id(obj) not in placed:
                placed.add(id(obj))
                ordered.append(obj)
            for name, v in vars(obj).items():
                if not name.startswith("_") or name == "_layers":
                    visit(v)

    visit(layer)
    return ordered + [l for l in used if id(l) not in placed]
