"""keras.utils.bounding_boxes in NumPy: convert_format between Keras's box
formats, clip_to_image_size, crop, pad, affine_transform, compute_iou,
compute_ciou, and the anchor codecs encode_box_to_deltas /
decode_deltas_to_boxes. Boxes are arrays (..., 4), unbatched (boxes, 4) or
batched (batch, boxes, 4), or dicts {"boxes", "labels"} (convert_format
and clip_to_image_size), as Keras's. The geometric image layers
(layers/image_*.py) transform their "bounding_boxes" with these."""

from __future__ import annotations

import math

import numpy as np

from ._config import SETTINGS
from .symbolic import user_location

__all__ = ["affine_transform", "clip_to_image_size", "compute_ciou", "compute_iou",
           "convert_format", "crop", "decode_deltas_to_boxes", "encode_box_to_deltas", "pad"]

SUPPORTED_FORMATS = ("xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy",
                     "rel_yxyx", "rel_xywh", "rel_center_xywh")


def _error(kind, where, message):
    return kind(f"[{where}] {message} (at {user_location()})")


def _box_array(boxes, where, dtype=None):
    b = np.asarray(boxes) if dtype is None else np.asarray(boxes, dtype)
    if b.dtype.kind not in "iuf":
        raise _error(TypeError, where, f"boxes must be numbers, got dtype {b.dtype}")
    if b.ndim == 0 or b.shape[-1] != 4:
        raise _error(ValueError, where,
                     f"boxes must have a last axis of 4, got shape {b.shape}")
    return b


def _check_format(fmt, where, name="bounding_box_format"):
    f = fmt.lower() if isinstance(fmt, str) else fmt
    if f not in SUPPORTED_FORMATS:
        raise _error(ValueError, where,
                     f"{name} must be one of {list(SUPPORTED_FORMATS)}, got {fmt!r}")
    return f


def _sides(b):
    return b[..., 0:1], b[..., 1:2], b[..., 2:3], b[..., 3:4]


def _to_xyxy(b, fmt, h, w):
    """(x1, y1, x2, y2) columns of boxes b given in fmt."""
    p, q, r, s = _sides(b)
    if fmt == "xyxy":
        return p, q, r, s
    if fmt == "yxyx":
        return q, p, s, r
    if fmt == "xywh":
        return p, q, p + r, q + s
    if fmt == "center_xywh":
        return p - r / 2.0, q - s / 2.0, p + r / 2.0, q + s / 2.0
    if fmt == "center_yxhw":
        return q - s / 2.0, p - r / 2.0, q + s / 2.0, p + r / 2.0
    if fmt == "rel_xyxy":
        return p * w, q * h, r * w, s * h
    if fmt == "rel_yxyx":
        return q * w, p * h, s * w, r * h
    if fmt == "rel_xywh":
        return p * w, q * h, (p + r) * w, (q + s) * h
    # rel_center_xywh
    return (p - r / 2.0) * w, (q - s / 2.0) * h, (p + r / 2.0) * w, (q + s / 2.0) * h


def _from_xyxy(x1, y1, x2, y2, fmt, h, w):
    if fmt == "xyxy":
        cols = (x1, y1, x2, y2)
    elif fmt == "yxyx":
        cols = (y1, x1, y2, x2)
    elif fmt == "xywh":
        cols = (x1, y1, x2 - x1, y2 - y1)
    elif fmt == "center_xywh":
        cols = (x1 + (x2 - x1) / 2.0, y1 + (y2 - y1) / 2.0, x2 - x1, y2 - y1)
    elif fmt == "center_yxhw":
        cols = (y1 + (y2 - y1) / 2.0, x1 + (x2 - x1) / 2.0, y2 - y1, x2 - x1)
    elif fmt == "rel_xyxy":
        cols = (x1 / w, y1 / h, x2 / w, y2 / h)
    elif fmt == "rel_yxyx":
        cols = (y1 / h, x1 / w, y2 / h, x2 / w)
    elif fmt == "rel_xywh":
        cols = (x1 / w, y1 / h, (x2 - x1) / w, (y2 - y1) / h)
    else:  # rel_center_xywh
        cols = ((x1 + (x2 - x1) / 2.0) / w, (y1 + (y2 - y1) / 2.0) / h, (x2 - x1) / w,
                (y2 - y1) / h)
    return np.concatenate(cols, axis=-1)


def convert_format(boxes, source, target, height=None, width=None, dtype="float32"):
    """Boxes converted from format source to format target (case-insensitive;
    one of SUPPORTED_FORMATS), like keras.utils.bounding_boxes.convert_format.
    A "rel_" format is relative to the image's height and width, which are
    then required (numbers, or arrays broadcasting against (..., 1)). A dict
    {"boxes", ...} comes back as a dict with its "boxes" converted."""
    where = "convert_format"
    if isinstance(boxes, dict):
        if "boxes" not in boxes:
            raise _error(ValueError, where,
                         f"a dict of boxes needs a 'boxes' key, got keys {sorted(boxes)}")
        return dict(boxes, boxes=convert_format(boxes["boxes"], source, target, height, width,
                                                dtype))
    b = _box_array(boxes, where).astype(dtype)
    src = _check_format(source, where, "source")
    dst = _check_format(target, where, "target")
    if (src.startswith("rel_") or dst.startswith("rel_")) and (height is None or width is None):
        raise _error(ValueError, where,
                     f"height and width are needed to convert between relative and absolute "
                     f"formats: source={source!r}, target={target!r}, height={height!r}, "
                     f"width={width!r}")
    if src == dst:
        return b
    h = None if height is None else np.asarray(height, dtype)
    w = None if width is None else np.asarray(width, dtype)
    if src.startswith("rel_") and dst.startswith("rel_"):
        # relative to relative needs no image size (as Keras's: both taken absolute)
        src, dst = src[4:], dst[4:]
    out = _from_xyxy(*_to_xyxy(b, src, h, w), dst, h, w)
    return out.astype(dtype, copy=False)


def _labels_of_kept(boxes, labels):
    area = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1]))
    labels = np.asarray(labels)
    if labels.shape[:area.ndim] != area.shape:
        raise _error(ValueError, "clip_to_image_size",
                     f"labels must have one entry (or row) per box, shape {area.shape}, got "
                     f"{labels.shape}")
    kept = (area > 0).reshape(area.shape + (1,) * (labels.ndim - area.ndim))
    return np.where(kept, labels, np.asarray(-1, labels.dtype))


def clip_to_image_size(bounding_boxes, height=None, width=None, bounding_box_format="xyxy"):
    """Clips {"boxes", "labels"} to the image ("xyxy": [0, width] x [0,
    height]; "rel_xyxy": [0, 1]); a box left without area gets label -1,
    like keras.utils.bounding_boxes.clip_to_image_size."""
    where = "clip_to_image_size"
    if bounding_box_format not in ("xyxy", "rel_xyxy"):
        raise _error(NotImplementedError, where,
                     f"bounding_box_format must be 'xyxy' or 'rel_xyxy' (as Keras's), got "
                     f"{bounding_box_format!r}")
    if not isinstance(bounding_boxes, dict) or "boxes" not in bounding_boxes:
        raise _error(ValueError, where,
                     f"bounding_boxes must be a dict with 'boxes' (and 'labels'), got "
                     f"{type(bounding_boxes).__name__}")
    if bounding_box_format == "xyxy" and (height is None or width is None):
        raise _error(ValueError, where,
                     f"height and width are needed for 'xyxy' boxes, got height={height!r}, "
                     f"width={width!r}")
    b = _box_array(bounding_boxes["boxes"], where)
    if not np.issubdtype(b.dtype, np.floating):
        b = b.astype(np.float32)
    if bounding_box_format == "xyxy":
        hi_x, hi_y = np.asarray(width, b.dtype), np.asarray(height, b.dtype)
    else:
        hi_x = hi_y = np.asarray(1.0, b.dtype)
    x1, y1, x2, y2 = _sides(b)
    out = np.concatenate([np.clip(x1, 0, hi_x), np.clip(y1, 0, hi_y), np.clip(x2, 0, hi_x),
                          np.clip(y2, 0, hi_y)], axis=-1).astype(b.dtype)
    result = dict(bounding_boxes, boxes=out)
    if bounding_boxes.get("labels") is not None:
        result["labels"] = _labels_of_kept(out, bounding_boxes["labels"])
    return result


def _only_xyxy(fmt, where):
    if fmt != "xyxy":
        raise _error(NotImplementedError, where,
                     f"bounding_box_format must be 'xyxy' (as Keras's): convert with "
                     f"convert_format first, got {fmt!r}")


def crop(boxes, top, left, height, width, bounding_box_format="xyxy"):
    """xyxy boxes moved into the window at (top, left) of size (height,
    width) and clipped to it, like keras.utils.bounding_boxes.crop."""
    _only_xyxy(bounding_box_format, "crop")
    b = _box_array(boxes, "crop")
    x1, y1, x2, y2 = _sides(b)
    return np.concatenate([np.clip(x1 - left, 0, width), np.clip(y1 - top, 0, height),
                           np.clip(x2 - left, 0, width), np.clip(y2 - top, 0, height)], -1)


def pad(boxes, top, left, height=None, width=None, bounding_box_format="xyxy"):
    """xyxy boxes shifted by a padding of top rows and left columns, like
    keras.utils.bounding_boxes.pad."""
    _only_xyxy(bounding_box_format, "pad")
    b = _box_array(boxes, "pad")
    x1, y1, x2, y2 = _sides(b)
    return np.concatenate([x1 + left, y1 + top, x2 + left, y2 + top], -1)


def _affine_forward(center_x, center_y, angle, translate_x, translate_y, scale, shear_x,
                    shear_y, height, width):
    """(batch, 2, 3): where a point of the input image goes for a rotation by
    angle degrees about (center_x, center_y) (fractions of (width - 1,
    height - 1)), scaled, sheared (degrees) and moved by translate (fractions
    of the size minus one): the inverse of torchvision's inverse affine
    matrix with the angle and shears negated, as Keras builds it."""
    f = [np.asarray(v, np.float64) for v in
         (angle, translate_x, translate_y, scale, shear_x, shear_y)]
    ang, tx, ty, sc, shx, shy = np.broadcast_arrays(*f)
    rad = math.pi / 180.0
    rot, sx, sy = -ang * rad, -shx * rad, -shy * rad
    cx, cy = center_x * (width - 1), center_y * (height - 1)
    mx, my = cx - tx * (width - 1), cy - ty * (height - 1)
    # rotation-shear matrix [[a, b], [c, d]] (det 1), its inverse scaled
    a = np.cos(rot - sy) / np.cos(sy)
    b = a * np.tan(sx) + np.sin(rot)
    c = -np.sin(rot - sy) / np.cos(sy)
    d = np.cos(rot) - c * np.tan(sx)
    m = np.zeros(ang.shape + (2, 3))
    m[..., 0, 0], m[..., 0, 1] = d * sc, -b * sc
    m[..., 1, 0], m[..., 1, 1] = -c * sc, a * sc
    m[..., 0, 2] = cx - m[..., 0, 0] * mx - m[..., 0, 1] * my
    m[..., 1, 2] = cy - m[..., 1, 0] * mx - m[..., 1, 1] * my
    return m


def _corners_through(b, m):
    """xyxy boxes b (batch, n, 4) through the affine maps m (batch, 2, 3):
    the enclosing xyxy box of the four moved corners."""
    x1, y1, x2, y2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    xs = np.stack([x1, x2, x2, x1], -1)
    ys = np.stack([y1, y1, y2, y2], -1)
    m = m[:, None, None]
    tx = m[..., 0, 0] * xs + m[..., 0, 1] * ys + m[..., 0, 2]
    ty = m[..., 1, 0] * xs + m[..., 1, 1] * ys + m[..., 1, 2]
    return np.stack([tx.min(-1), ty.min(-1), tx.max(-1), ty.max(-1)], -1)


def affine_transform(boxes, angle, translate_x, translate_y, scale, shear_x, shear_y, height,
                     width, center_x=None, center_y=None, bounding_box_format="xyxy"):
    """xyxy boxes (batch, n, 4) through a rotation (angle, degrees),
    translation (fractions), scale and shear (degrees), each (batch,), about
    (center_x, center_y) (fractions, default the centre): the box enclosing
    each moved box, like keras.utils.bounding_boxes.affine_transform.
    Unbatched boxes (n, 4) take one transformation."""
    where = "affine_transform"
    _only_xyxy(bounding_box_format, where)
    b = _box_array(boxes, where)
    single = b.ndim == 2
    if single:
        b = b[None]
    if b.ndim != 3:
        raise _error(ValueError, where,
                     f"boxes must be (boxes, 4) or (batch, boxes, 4), got shape {b.shape}")
    params = [np.reshape(np.asarray(v, np.float64), -1) for v in
              (angle, translate_x, translate_y, scale, shear_x, shear_y)]
    for name, p in zip(("angle", "translate_x", "translate_y", "scale", "shear_x", "shear_y"),
                       params):
        if p.size not in (1, b.shape[0]):
            raise _error(ValueError, where,
                         f"{name} must have one value per image ({b.shape[0]}), got {p.size}")
    params = [np.broadcast_to(p, (b.shape[0],)) for p in params]
    m = _affine_forward(0.5 if center_x is None else center_x,
                        0.5 if center_y is None else center_y, *params, height, width)
    dtype = np.result_type(np.asarray(angle).dtype, np.float32)
    out = _corners_through(b.astype(np.float64), m).astype(dtype)
    return out[0] if single else out


def _rank_ok(b, name, where):
    if b.ndim not in (2, 3):
        raise _error(ValueError, where,
                     f"{name} must be (boxes, 4) or (batch, boxes, 4), got shape {b.shape}")


def _image_hw(image_shape, where):
    if image_shape is None:
        return None, None
    if len(image_shape) != 3:
        raise _error(ValueError, where,
                     f"image_shape must be (height, width, channels), got {image_shape!r}")
    return image_shape[0], image_shape[1]


def compute_iou(boxes1, boxes2, bounding_box_format, use_masking=False, mask_val=-1,
                image_shape=None):
    """The intersection over union of every box of boxes1 with every box of
    boxes2: (M, N), or (batch, M, N) when either is batched, like
    keras.utils.bounding_boxes.compute_iou. use_masking sets mask_val where
    a box has all four values negative (padding)."""
    where = "compute_iou"
    b1, b2 = _box_array(boxes1, where), _box_array(boxes2, where)
    _rank_ok(b1, "boxes1", where)
    _rank_ok(b2, "boxes2", where)
    if "rel" in bounding_box_format and image_shape is None:
        raise _error(ValueError, where,
                     f"a relative format ({bounding_box_format!r}) needs image_shape, got None")
    h, w = _image_hw(image_shape, where)
    b1 = convert_format(b1, bounding_box_format, "yxyx", h, w)
    b2 = convert_format(b2, bounding_box_format, "yxyx", h, w)
    t2 = np.swapaxes(b2, -1, -2)[..., None, :, :] if b2.ndim == 3 else b2.T[None]
    # b1 (..., M, 4) against t2 (..., 1, 4, N): every pair
    y_lo = np.maximum(b1[..., 0:1], t2[..., 0, :])
    x_lo = np.maximum(b1[..., 1:2], t2[..., 1, :])
    y_hi = np.minimum(b1[..., 2:3], t2[..., 2, :])
    x_hi = np.minimum(b1[..., 3:4], t2[..., 3, :])
    inter = np.maximum(y_hi - y_lo, 0) * np.maximum(x_hi - x_lo, 0)
    a1 = (b1[..., 2] - b1[..., 0]) * (b1[..., 3] - b1[..., 1])
    a2 = (b2[..., 2] - b2[..., 0]) * (b2[..., 3] - b2[..., 1])
    union = a1[..., :, None] + a2[..., None, :] - inter
    iou = (inter / (union + np.float32(SETTINGS["epsilon"]))).astype(np.float32)
    if not use_masking:
        return iou
    pad1 = b1.max(-1) < 0
    pad2 = b2.max(-1) < 0
    background = pad1[..., :, None] | pad2[..., None, :]
    return np.where(background, np.asarray(mask_val, iou.dtype), iou)


def compute_ciou(boxes1, boxes2, bounding_box_format, image_shape=None):
    """The complete IoU of matching boxes (..., 4) of boxes1 and boxes2: the
    IoU less the squared centre distance over the squared diagonal of the
    enclosing box and an aspect-ratio term, like
    keras.utils.bounding_boxes.compute_ciou (relative formats refused, as
    Keras's)."""
    where = "compute_ciou"
    if "rel" in bounding_box_format:
        raise _error(ValueError, where,
                     f"relative formats are not taken (as Keras's), got {bounding_box_format!r}")
    h, w = _image_hw(image_shape, where)
    b1 = convert_format(_box_array(boxes1, where), bounding_box_format, "xyxy", h, w)
    b2 = convert_format(_box_array(boxes2, where), bounding_box_format, "xyxy", h, w)
    eps = np.float32(SETTINGS["epsilon"])
    x11, y11, x12, y12 = (b1[..., k] for k in range(4))
    x21, y21, x22, y22 = (b2[..., k] for k in range(4))
    w1, h1 = x12 - x11, y12 - y11 + eps
    w2, h2 = x22 - x21, y22 - y21 + eps
    inter = (np.maximum(np.minimum(x12, x22) - np.maximum(x11, x21), 0) *
             np.maximum(np.minimum(y12, y22) - np.maximum(y11, y21), 0))
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / (union + eps)
    diag = ((np.maximum(x12, x22) - np.minimum(x11, x21)) ** 2 +
            (np.maximum(y12, y22) - np.minimum(y11, y21)) ** 2 + eps)
    dist = ((x11 + x12) / 2 - (x21 + x22) / 2) ** 2 + ((y11 + y12) / 2 - (y21 + y22) / 2) ** 2
    v = np.float32(4 / math.pi ** 2) * (np.arctan(w2 / h2) - np.arctan(w1 / h1)) ** 2
    alpha = v / (v - iou + (1 + eps))
    return (iou - (dist / diag + v * alpha)).astype(np.float32)


def _variance(variance, where):
    if variance is None:
        return None
    v = np.asarray(variance, np.float32)
    if v.ndim == 0 or v.shape[-1] != 4:
        raise _error(ValueError, where, f"variance must have 4 values, got {variance!r}")
    return v


def _centre_format(fmt, where, name):
    if fmt not in ("center_xywh", "center_yxhw"):
        raise _error(ValueError, where,
                     f"{name} must be 'center_xywh' or 'center_yxhw', got {fmt!r}")


def encode_box_to_deltas(anchors, boxes, anchor_format, box_format,
                         encoding_format="center_yxhw", variance=None, image_shape=None):
    """The deltas of boxes ((n, 4) or (batch, n, 4)) from anchors (n, 4):
    centre offsets over the anchor's size and log size ratios in
    encoding_format, divided by variance, like
    keras.utils.bounding_boxes.encode_box_to_deltas."""
    where = "encode_box_to_deltas"
    var = _variance(variance, where)
    _centre_format(encoding_format, where, "encoding_format")
    h, w = _image_hw(image_shape, where)
    a = convert_format(anchors, anchor_format, encoding_format, h, w)
    b = convert_format(boxes, box_format, encoding_format, h, w)
    eps = np.float32(SETTINGS["epsilon"])
    a_size = np.maximum(a[..., 2:], eps)
    b_size = np.maximum(b[..., 2:], eps)
    out = np.concatenate([(b[..., :2] - a[..., :2]) / a_size, np.log(b_size / a_size)], -1)
    return out if var is None else out / var


def decode_deltas_to_boxes(anchors, boxes_delta, anchor_format, box_format,
                           encoded_format="center_yxhw", variance=None, image_shape=None):
    """The boxes in box_format that deltas (from encode_box_to_deltas) give
    on anchors; dicts of levels {level: anchors} and {level: deltas} decode
    level by level, like keras.utils.bounding_boxes.decode_deltas_to_boxes."""
    where = "decode_deltas_to_boxes"
    var = _variance(variance, where)
    _centre_format(encoded_format, where, "encoded_format")
    h, w = _image_hw(image_shape, where)

    def one_level(anchor, delta):
        a = convert_format(anchor, anchor_format, encoded_format, h, w)
        d = _box_array(delta, where).astype(np.float32)
        if var is not None:
            d = d * var
        box = np.concatenate([d[..., :2] * a[..., 2:] + a[..., :2],
                              np.exp(d[..., 2:]) * a[..., 2:]], -1)
        return convert_format(box, encoded_format, box_format, h, w)

    if isinstance(anchors, dict) and isinstance(boxes_delta, dict):
        missing = set(anchors) - set(boxes_delta)
        if missing:
            raise _error(ValueError, where,
                         f"boxes_delta lacks the levels {sorted(missing)} of anchors")
        return {lvl: one_level(anchors[lvl], boxes_delta[lvl]) for lvl in anchors}
    return one_level(anchors, boxes_delta)
