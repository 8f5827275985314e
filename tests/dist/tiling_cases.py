"""Helpers shared by the distributed test scripts: spans of hand-made tilings."""


def spans_along(shape, axis, sizes, n):
    """Spans over n localities giving locality q the extent of (q, extent) in
    `sizes`, laid out along `axis` in the order of `sizes`; every other axis
    whole."""
    spans = [None] * n
    at = 0
    for q, extent in sizes:
        box = [(0, e) for e in shape]
        box[axis] = (at, at + extent)
        spans[q] = box
        at += extent
    assert at == shape[axis] and None not in spans
    return spans
