"""keras.visualization: draw_bounding_boxes and draw_segmentation_masks in
NumPy, and the galleries plot_image_gallery, plot_bounding_box_gallery and
plot_segmentation_mask_gallery with matplotlib (optional: only the
galleries need it, and say so when it is missing, as Keras's).

Keras draws boxes and their class names with OpenCV; tessera draws the
rectangles itself (the same colours and thickness) and, having no font
renderer, leaves class names out of draw_bounding_boxes' pixels: the
bounding-box gallery writes them as matplotlib text where OpenCV would put
them."""

from __future__ import annotations

import math

import numpy as np

from . import bounding_boxes as bb
from ._config import SETTINGS
from .symbolic import user_location

try:
    import matplotlib.pyplot as plt
    from matplotlib import patches
except ImportError:  # matplotlib is optional: only the galleries need it
    plt = patches = None

__all__ = ["draw_bounding_boxes", "draw_segmentation_masks", "plot_bounding_box_gallery",
           "plot_image_gallery", "plot_segmentation_mask_gallery"]


def _error(kind, where, message):
    return kind(f"[{where}] {message} (at {user_location()})")


def _batch(images, where):
    a = np.asarray(images)
    if a.ndim != 4:
        raise _error(ValueError, where,
                     f"images must be a batch (batch, height, width, channels), got shape "
                     f"{a.shape}")
    if a.dtype.kind not in "iuf":
        raise _error(TypeError, where, f"images must be numbers, got dtype {a.dtype}")
    return a


def _data_format(data_format, where):
    fmt = data_format or SETTINGS["image_data_format"]
    if fmt not in ("channels_last", "channels_first"):
        raise _error(ValueError, where,
                     f"data_format must be 'channels_last' or 'channels_first', got {fmt!r}")
    return fmt


def _color(color, where, name="color"):
    c = np.asarray(color)
    if c.ndim != 1 or c.dtype.kind not in "iuf":
        raise _error(ValueError, where, f"{name} must be a list of numbers (RGB), got {color!r}")
    return c


def _paint_rectangle(img, x1, y1, x2, y2, color, thickness):
    """The outline of the rectangle with corners (x1, y1), (x2, y2)
    (inclusive pixels) as bands `thickness` pixels wide centred on its edges
    (an even width reaching one pixel further out than in), clipped to img."""
    H, W = img.shape[:2]
    x1, x2 = min(x1, x2), max(x1, x2)
    y1, y2 = min(y1, y2), max(y1, y2)
    lo = thickness // 2  # pixels outside the edge line
    hi = thickness - 1 - lo  # pixels inside it

    def fill(r0, r1, c0, c1):
        r0, c0 = max(r0, 0), max(c0, 0)
        r1, c1 = min(r1, H - 1), min(c1, W - 1)
        if r0 <= r1 and c0 <= c1:
            img[r0:r1 + 1, c0:c1 + 1] = color

    fill(y1 - lo, y1 + hi, x1 - lo, x2 + hi)  # top
    fill(y2 - lo, y2 + hi, x1 - lo, x2 + hi)  # bottom
    fill(y1 - lo, y2 + hi, x1 - lo, x1 + hi)  # left
    fill(y1 - lo, y2 + hi, x2 - lo, x2 + hi)  # right


def _as_uint8(images):
    """Keras's conversion of images to draw on: floats in [0, 1] scaled to
    255, other floats clipped to [0, 255]; then uint8."""
    if images.dtype.kind == "f" and images.size > 0:
        images = np.clip(images, 0, 1) * 255 if images.max() <= 1.0 else \
            np.clip(images, 0, 255)
    return images.astype(np.uint8)


def _boxes_xyxy(bounding_boxes, fmt, H, W, where):
    if not isinstance(bounding_boxes, dict):
        raise _error(TypeError, where,
                     f"bounding_boxes must be a dict with 'boxes' and 'labels', got "
                     f"{type(bounding_boxes).__name__}")
    if "boxes" not in bounding_boxes or "labels" not in bounding_boxes:
        raise _error(ValueError, where,
                     f"bounding_boxes must have 'boxes' and 'labels', got keys "
                     f"{sorted(bounding_boxes)}")
    boxes = bb.convert_format(np.asarray(bounding_boxes["boxes"]), fmt, "xyxy", H, W)
    labels = np.asarray(bounding_boxes["labels"])
    return boxes, labels


def _text_place(x, y, font_scale, thickness):
    """Where Keras puts a box's class name: above the box, or inside it near
    the image's top edge."""
    font_height = int(font_scale * 12)
    if y - 8 - 2 * font_height > 0:
        return x, y - 8
    return x + 3, y + 2 * font_height + thickness + 3


def _notes(bounding_boxes, fmt, H, W, mapping, color, font_scale, thickness, where):
    """Per image, the class names to write: [(x, y, text, color)]."""
    boxes, labels = _boxes_xyxy(bounding_boxes, fmt, H, W, where)
    conf = bounding_boxes.get("confidences")
    out = []
    for i in range(boxes.shape[0]):
        notes = []
        for j in range(boxes.shape[1]):
            c = int(labels[i][j])
            if c == -1 or not mapping or c not in mapping:
                continue
            text = mapping[c]
            if conf is not None:
                text = f"{text} | {float(np.asarray(conf)[i][j]):.2f}"
            x1, y1 = int(boxes[i, j, 0]), int(boxes[i, j, 1])
            notes.append(_text_place(x1, y1, font_scale, thickness) + (text, color))
        out.append(notes)
    return out


def draw_bounding_boxes(images, bounding_boxes, bounding_box_format, class_mapping=None,
                        color=(128, 128, 128), line_thickness=2, text_thickness=1,
                        font_scale=1.0, data_format=None):
    """A uint8 copy of images (batch, h, w, c) with the outline of each box
    of bounding_boxes {"boxes" (batch, n, 4), "labels" (batch, n)} drawn in
    color, line_thickness pixels wide (boxes labelled -1 skipped), like
    keras.visualization.draw_bounding_boxes. Float images in [0, 1] are
    scaled to 255. class_mapping's names are not written into the pixels
    (Keras's need OpenCV): plot_bounding_box_gallery shows them."""
    where = "draw_bounding_boxes"
    a = _batch(images, where)
    fmt = _data_format(data_format, where)
    if isinstance(line_thickness, bool) or not isinstance(line_thickness, (int, np.integer)) \
            or line_thickness < 1:
        raise _error(ValueError, where,
                     f"line_thickness must be a positive int, got {line_thickness!r}")
    if fmt == "channels_first":
        a = np.moveaxis(a, 1, -1)
    H, W = a.shape[1], a.shape[2]
    boxes, labels = _boxes_xyxy(bounding_boxes, bounding_box_format, H, W, where)
    if boxes.ndim != 3 or boxes.shape[0] != a.shape[0]:
        raise _error(ValueError, where,
                     f"boxes must be (batch, boxes, 4) with the images' batch {a.shape[0]}, "
                     f"got shape {boxes.shape}")
    out = _as_uint8(a).copy()
    paint = _color(color, where)
    if paint.shape[0] != out.shape[-1]:
        raise _error(ValueError, where,
                     f"color must have one value per channel ({out.shape[-1]}), got {color!r}")
    for i in range(out.shape[0]):
        for j in range(boxes.shape[1]):
            if int(labels[i][j]) == -1:
                continue
            x1, y1, x2, y2 = (int(v) for v in boxes[i, j].astype(np.int32))
            _paint_rectangle(out[i], x1, y1, x2, y2, paint, int(line_thickness))
    return np.moveaxis(out, -1, 1) if fmt == "channels_first" else out


def _palette(num_classes):
    """Keras's default colours: class i gets (i * (2^25 - 1, 2^15 - 1,
    2^21 - 1)) mod 255."""
    base = np.array([2 ** 25 - 1, 2 ** 15 - 1, 2 ** 21 - 1])
    return [((i * base) % 255).tolist() for i in range(num_classes)]


def draw_segmentation_masks(images, segmentation_masks, num_classes=None, color_mapping=None,
                            alpha=0.8, blend=True, ignore_index=-1, data_format=None):
    """images (batch, h, w, c) with each class k of the integer masks
    (batch, h, w, 1) painted in its colour (color_mapping[k], or Keras's
    palette) and blended by alpha (uint8), like
    keras.visualization.draw_segmentation_masks: classes 0 .. num_classes -
    1 are painted (num_classes defaults to the largest class, as Keras's),
    pixels of ignore_index keep the image. blend=False gives the painted
    images as float32, unblended."""
    where = "draw_segmentation_masks"
    a = _batch(images, where)
    fmt = _data_format(data_format, where)
    m = np.asarray(segmentation_masks)
    if fmt == "channels_first":
        a, m = np.moveaxis(a, 1, -1), np.moveaxis(m, 1, -1)
    if m.dtype.kind not in "iu":
        raise _error(TypeError, where,
                     f"segmentation_masks must be integers (class indices), got dtype {m.dtype}")
    if m.ndim != 4 or m.shape[-1] != 1 or m.shape[:3] != a.shape[:3]:
        raise _error(ValueError, where,
                     f"segmentation_masks must be (batch, height, width, 1) matching the "
                     f"images {a.shape[:3]}, got shape {m.shape}")
    if not 0 <= alpha <= 1:
        raise _error(ValueError, where, f"alpha must be in [0, 1], got {alpha!r}")
    if num_classes is None:
        num_classes = int(m.max())
    if color_mapping is None:
        colors = _palette(num_classes)
    else:
        missing = [k for k in range(num_classes) if k not in color_mapping]
        if missing:
            raise _error(ValueError, where,
                         f"color_mapping must give a colour for every class 0 .. "
                         f"{num_classes - 1}, missing {missing}")
        colors = [color_mapping[k] for k in range(num_classes)]
    images = a.astype(np.float32)
    painted = images.copy()
    classes = m[..., 0]
    for k, c in enumerate(colors):
        painted[classes == k] = np.asarray(c, np.float32)
    if not blend:
        return painted
    out = images * (1 - alpha) + painted * alpha
    out = np.where((classes != ignore_index)[..., None], out, images)
    return np.clip(out, 0, 255).astype(np.uint8)


def _need_matplotlib(where):
    if plt is None:
        raise _error(ImportError, where,
                     "needs the matplotlib package (an optional dependency of tessera): "
                     "pip install matplotlib")


def _gallery(images, notes, where, y_true=None, y_pred=None, label_map=None, rows=None,
             cols=None, value_range=(0, 255), scale=2, path=None, show=None, transparent=True,
             dpi=60, legend_handles=None, data_format=None):
    """plot_image_gallery, with notes: per image, texts to write on it."""
    _need_matplotlib(where)
    if path is not None and show:
        raise _error(ValueError, where, "give either path (to save) or show=True, not both")
    if (y_true is not None or y_pred is not None) and label_map is None:
        raise _error(ValueError, where, "y_true or y_pred need a label_map to name the labels")
    a = _batch(images, where)
    if _data_format(data_format, where) == "channels_first":
        a = np.moveaxis(a, 1, -1)
    show = show if show is not None else path is None
    n = a.shape[0]
    rows = rows or int(math.ceil(math.sqrt(n)))
    cols = cols or int(math.ceil(n // rows))
    if rows * cols > n or rows < 1 or cols < 1:
        raise _error(ValueError, where,
                     f"rows x cols ({rows} x {cols}) must be at least 1 x 1 and at most the "
                     f"{n} images")
    lo, hi = (float(v) for v in value_range)
    a = (a.astype(np.float32) - lo) / (hi - lo) * 255.0
    fig, axes = plt.subplots(nrows=rows, ncols=cols, figsize=(cols * scale, rows * scale),
                             frameon=False, layout="tight", squeeze=False, sharex="row",
                             sharey="col")
    fig.subplots_adjust(wspace=0, hspace=0)
    if legend_handles is not None:
        fig.legend(handles=legend_handles, loc="lower center")
    for k in range(rows * cols):
        ax = axes[k // cols, k % cols]
        ax.imshow(a[k].astype(np.uint8))
        ax.margins(x=0, y=0)
        ax.axis("off")
        title = []
        if y_true is not None and k < len(y_true):
            title.append(f"Label: {label_map.get(np.asarray(y_true)[k].item(), 'Unknown')}")
        if y_pred is not None and k < len(y_pred):
            title.append(f"Pred: {label_map.get(np.asarray(y_pred)[k].item(), 'Unknown')}")
        if title:
            ax.set_title("  ".join(title), fontsize=8)
        for x, y, text, color in (notes[k] if notes else ()):
            ax.text(x, y, text, color=np.asarray(color) / 255.0, fontsize=8)
    if path is not None:
        plt.savefig(fname=path, pad_inches=0, bbox_inches="tight", transparent=transparent,
                    dpi=dpi)
        plt.close(fig)
    elif show:
        plt.show()
        plt.close(fig)


def plot_image_gallery(images, y_true=None, y_pred=None, label_map=None, rows=None, cols=None,
                       value_range=(0, 255), scale=2, path=None, show=None, transparent=True,
                       dpi=60, legend_handles=None, data_format=None):
    """A rows x cols grid of the first images (value_range mapped to 0 ..
    255), titled by label_map's names of y_true / y_pred, saved to path or
    shown, like keras.visualization.plot_image_gallery (needs matplotlib)."""
    _gallery(images, None, "plot_image_gallery", y_true, y_pred, label_map, rows, cols,
             value_range, scale, path, show, transparent, dpi, legend_handles, data_format)


def plot_bounding_box_gallery(images, bounding_box_format, y_true=None, y_pred=None,
                              value_range=(0, 255), true_color=(0, 188, 212),
                              pred_color=(255, 235, 59), line_thickness=2, font_scale=1.0,
                              text_thickness=None, class_mapping=None, ground_truth_mapping=None,
                              prediction_mapping=None, legend=False, legend_handles=None,
                              rows=None, cols=None, data_format=None, **kwargs):
    """plot_image_gallery of the images with the boxes of y_true (in
    true_color) and y_pred (in pred_color) drawn, their class names written
    beside them, like keras.visualization.plot_bounding_box_gallery (needs
    matplotlib)."""
    where = "plot_bounding_box_gallery"
    _need_matplotlib(where)
    a = _batch(images, where)
    if _data_format(data_format, where) == "channels_first":
        a = np.moveaxis(a, 1, -1)
    if legend and legend_handles:
        raise _error(ValueError, where, "give legend=True or legend_handles, not both")
    H, W = a.shape[1], a.shape[2]
    thickness = text_thickness or line_thickness
    notes = [[] for _ in range(a.shape[0])]
    for boxes, color, mapping in ((y_true, true_color, ground_truth_mapping or class_mapping),
                                  (y_pred, pred_color, prediction_mapping or class_mapping)):
        if boxes is None:
            continue
        a = draw_bounding_boxes(a, boxes, bounding_box_format, color=color,
                                line_thickness=line_thickness, data_format="channels_last")
        for k, extra in enumerate(_notes(boxes, bounding_box_format, H, W, mapping, color,
                                         font_scale, thickness, where)):
            notes[k] += extra
    if legend:
        legend_handles = [patches.Patch(color=np.array(true_color) / 255.0, label="Ground Truth"),
                          patches.Patch(color=np.array(pred_color) / 255.0, label="Prediction")]
    _gallery(a, notes, where, value_range=value_range, legend_handles=legend_handles, rows=rows,
             cols=cols, **kwargs)


def plot_segmentation_mask_gallery(images, num_classes, value_range=(0, 255), y_true=None,
                                   y_pred=None, color_mapping=None, blend=True, alpha=0.8,
                                   ignore_index=-1, data_format=None, **kwargs):
    """A gallery with one row per image: the image, then its y_true and
    y_pred masks drawn on it (draw_segmentation_masks), like
    keras.visualization.plot_segmentation_mask_gallery (needs matplotlib)."""
    where = "plot_segmentation_mask_gallery"
    _need_matplotlib(where)
    a = _batch(images, where)
    channels_first = _data_format(data_format, where) == "channels_first"
    if channels_first:
        a = np.moveaxis(a, 1, -1)
    drawn = []
    for masks in (y_true, y_pred):
        if masks is None:
            continue
        m = np.asarray(masks)
        if channels_first:
            m = np.moveaxis(m, 1, -1)
        drawn.append(draw_segmentation_masks(a, m.astype(np.int32), num_classes=num_classes,
                                             color_mapping=color_mapping, alpha=alpha,
                                             blend=blend, ignore_index=ignore_index,
                                             data_format="channels_last"))
    tiles = [t for i in range(a.shape[0]) for t in [a[i]] + [d[i] for d in drawn]]
    plot_image_gallery(np.stack(tiles).astype(np.float32), value_range=value_range,
                       rows=a.shape[0], cols=1 + len(drawn), **kwargs)
