"""What the geometric image layers do to a dict {"images",
"bounding_boxes": {"boxes", "labels"}, "segmentation_masks", "labels"}, as
Keras's: one draw moves the images, their boxes (given in the layer's
bounding_box_format) and their masks (nearest interpolation); class
"labels" and any other key pass unchanged.

A layer taking dicts provides `_targets_draw(a, training)` (None: leave
everything as it is), `_targets_images(a, draw, interpolation)` and
`_targets_boxes(xyxy, draw, H, W)` returning the moved xyxy boxes and the
output (height, width); boxes are then clipped to the output image, a box
left without area getting label -1 (keras.utils.bounding_boxes
.clip_to_image_size)."""

from __future__ import annotations

import numpy as np

from .. import bounding_boxes as bb
from ..symbolic import user_location



def _located(kind, message):
    return kind(f"{message} (at {user_location()})")


def box_format(fmt, where):
    """The layer's bounding_box_format argument, checked (None allowed)."""
    if fmt is None:
        return None
    if not isinstance(fmt, str) or fmt.lower() not in bb.SUPPORTED_FORMATS:
        raise _located(ValueError,
                       f"[{where}] bounding_box_format must be None or one of "
                       f"{list(bb.SUPPORTED_FORMATS)}, got {fmt!r}")
    return fmt.lower()


def _boxes_in(layer, data, n, batched):
    where = layer.kind
    boxes = data["bounding_boxes"]
    if layer.bounding_box_format is None:
        raise _located(ValueError,
                       f"[{where}] the input has 'bounding_boxes' but the layer's "
                       f"bounding_box_format is None: pass bounding_box_format='xyxy' (or the "
                       f"format of the boxes) to {where}")
    if not isinstance(boxes, dict) or "boxes" not in boxes or "labels" not in boxes:
        got = sorted(boxes) if isinstance(boxes, dict) else type(boxes).__name__
        raise _located(ValueError,
                       f"[{where}] bounding_boxes must be a dict with 'boxes' and 'labels', "
                       f"got {got}")
    try:
        b = np.asarray(boxes["boxes"], np.float32)
        labels = np.asarray(boxes["labels"])
    except (TypeError, ValueError) as e:
        raise _located(ValueError,
                       f"[{where}] bounding_boxes must hold arrays of numbers (lists of boxes "
                       f"padded to one count per image): {e}") from None
    want = 3 if batched else 2
    if b.ndim != want or b.shape[-1] != 4 or (batched and b.shape[0] != n):
        shape = "(batch, boxes, 4) with the images' batch" if batched else "(boxes, 4)"
        raise _located(ValueError,
                       f"[{where}] bounding_boxes['boxes'] must be {shape} for images of "
                       f"{'a batch of ' + str(n) if batched else 'one image'}, got shape "
                       f"{b.shape}")
    if labels.shape[:want - 1] != b.shape[:-1]:
        raise _located(ValueError,
                       f"[{where}] bounding_boxes['labels'] must have one entry per box "
                       f"{b.shape[:-1]}, got shape {labels.shape}")
    if not batched:
        b, labels = b[None], labels[None]
    return boxes, b, labels


def _masks_in(layer, data, a, images_of, batched):
    where = layer.kind
    m = np.asarray(data["segmentation_masks"])
    rank = 4 if batched else 3
    channel = m.ndim == rank
    if m.ndim not in (rank - 1, rank):
        raise _located(ValueError,
                       f"[{where}] segmentation_masks must have the images' rank ({rank}, or "
                       f"{rank - 1} without a channel axis), got shape {m.shape}")
    if not channel:
        m = m[..., None] if layer.data_format != "channels_first" else \
            np.expand_dims(m, -3)
    mask, back = images_of(m, where, layer.data_format)
    if mask.shape[:3] != a.shape[:3]:
        raise _located(ValueError,
                       f"[{where}] segmentation_masks must match the images' batch, height and "
                       f"width {a.shape[:3]}, got {mask.shape[:3]}")

    def unwrap(out):
        out = back(out)
        if channel:
            return out
        return out[..., 0] if layer.data_format != "channels_first" else out.take(0, axis=-3)
    return mask, unwrap


def call_on_dict(layer, data, training, images_of):
    """The layer applied to a dict of images and their targets (see the
    module's docstring); images_of is image_preprocessing._images."""
    where = layer.kind
    if "images" not in data:
        raise _located(ValueError,
                       f"[{where}] a dict input needs 'images' (and optionally "
                       f"'bounding_boxes', 'segmentation_masks', 'labels'), got keys "
                       f"{sorted(data)}")
    a, back = images_of(data["images"], where, layer.data_format)
    batched = np.asarray(data["images"]).ndim == 4
    n, H, W = a.shape[0], a.shape[1], a.shape[2]
    boxes = _boxes_in(layer, data, n, batched) if "bounding_boxes" in data else None
    masks = _masks_in(layer, data, a, images_of, batched) if "segmentation_masks" in data \
        else None
    draw = layer._targets_draw(a, training)
    out = dict(data)
    out["images"] = back(a if draw is None else layer._targets_images(a, draw, None))
    if masks is not None:
        m, unwrap = masks
        out["segmentation_masks"] = unwrap(m if draw is None else
                                           layer._targets_images(m, draw, "nearest"))
    if boxes is not None:
        given, b, labels = boxes
        if draw is not None:
            fmt = layer.bounding_box_format
            xyxy = bb.convert_format(b, fmt, "xyxy", H, W)
            moved, (h, w) = layer._targets_boxes(xyxy, draw, H, W)
            clipped = bb.clip_to_image_size({"boxes": moved.astype(np.float32),
                                             "labels": labels}, h, w)
            b = bb.convert_format(clipped["boxes"], "xyxy", fmt, h, w)
            labels = clipped["labels"]
        if not batched:
            b, labels = b[0], labels[0]
        out["bounding_boxes"] = dict(given, boxes=b, labels=labels)
    return out
