"""tessera.nn.utils.bounding_boxes against keras.utils.bounding_boxes on JAX
(every format pair, dicts, batched and unbatched boxes, IoU / CIoU, the
anchor codecs, affine_transform), its named errors; and the geometric image
layers on {"images", "bounding_boxes", "segmentation_masks"} dicts against
Keras's transform_* methods given the same draw."""

import numpy as np
import pytest

import tessera
import tessera.data  # noqa: F401 - Dataset
import tessera.nn as nn

BB = nn.utils.bounding_boxes
RNG = np.random.default_rng(30)
FORMATS = ["xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy", "rel_yxyx",
           "rel_xywh", "rel_center_xywh"]


def _xyxy(shape, H=60, W=80):
    """Random valid xyxy boxes inside an H x W image."""
    lo = RNG.uniform(0, 1, shape + (2,)) * [W * 0.7, H * 0.7]
    size = RNG.uniform(0.1, 1, shape + (2,)) * [W * 0.3, H * 0.3]
    return np.concatenate([lo, lo + size], -1).astype(np.float32)


def _same(t, k, atol=1e-4):
    t, k = np.asarray(t), np.asarray(k)
    assert t.shape == k.shape, (t.shape, k.shape)
    np.testing.assert_allclose(t, k, atol=atol, rtol=1e-5)


def _kbb(keras):
    return keras.utils.bounding_boxes


@pytest.mark.parametrize("source", FORMATS)
def test_convert_format_matches_keras_for_every_pair(keras, source):
    boxes = BB.convert_format(_xyxy((2, 5)), "xyxy", source, height=60, width=80)
    for target in FORMATS:
        k = _kbb(keras).convert_format(boxes.copy(), source, target, height=60, width=80)
        _same(BB.convert_format(boxes, source, target, height=60, width=80), k)
        # unbatched, and upper-case names as Keras takes them
        k1 = _kbb(keras).convert_format(boxes[0].copy(), source.upper(), target, height=60,
                                        width=80)
        _same(BB.convert_format(boxes[0], source.upper(), target, height=60, width=80), k1)


def test_convert_format_takes_dicts_dtype_and_per_image_sizes(keras):
    d = {"boxes": _xyxy((3,)), "labels": np.array([1, 2, 0])}
    t = BB.convert_format(d, "xyxy", "rel_center_xywh", height=60, width=80)
    k = _kbb(keras).convert_format(dict(d), "xyxy", "rel_center_xywh", height=60, width=80)
    assert set(t) == {"boxes", "labels"} and t["labels"] is d["labels"]
    _same(t["boxes"], k["boxes"])
    assert d["boxes"].shape == (3, 4)  # the caller's dict keeps its boxes
    ints = np.array([[10, 20, 30, 40]])
    _same(BB.convert_format(ints, "xyxy", "xywh", dtype="float64"),
          _kbb(keras).convert_format(ints, "xyxy", "xywh"))
    assert BB.convert_format(ints, "xyxy", "xywh", dtype="float64").dtype == np.float64
    b = _xyxy((2, 3))
    h, w = np.array([60.0, 30.0]).reshape(2, 1, 1), np.array([80.0, 40.0]).reshape(2, 1, 1)
    _same(BB.convert_format(b, "xyxy", "rel_xyxy", height=h, width=w),
          _kbb(keras).convert_format(b, "xyxy", "rel_xyxy", height=h, width=w))


def test_convert_format_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"\[convert_format\] target must be one of"):
        BB.convert_format(_xyxy((2,)), "xyxy", "xyz")
    with pytest.raises(ValueError, match=r"\[convert_format\] height and width are needed"):
        BB.convert_format(_xyxy((2,)), "xyxy", "rel_xyxy")
    with pytest.raises(ValueError, match=r"last axis of 4, got shape \(2, 3\)"):
        BB.convert_format(np.zeros((2, 3)), "xyxy", "xywh")
    with pytest.raises(ValueError, match=r"a dict of boxes needs a 'boxes' key"):
        BB.convert_format({"labels": [1]}, "xyxy", "xywh")
    with pytest.raises(TypeError, match=r"boxes must be numbers"):
        BB.convert_format(np.array([["a", "b", "c", "d"]]), "xyxy", "xywh")


@pytest.mark.parametrize("fmt,hw", [("xyxy", (50, 70)), ("rel_xyxy", (None, None))])
def test_clip_to_image_size_matches_keras(keras, fmt, hw):
    b = _xyxy((2, 4)) * 1.2 - 10
    if fmt == "rel_xyxy":
        b = b / 60.0
    b[0, 0] = [-5, -5, -1, -1]  # left without area: label -1
    d = {"boxes": b, "labels": np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int32)}
    t = BB.clip_to_image_size(d, *hw, bounding_box_format=fmt)
    k = _kbb(keras).clip_to_image_size(dict(d), *hw, bounding_box_format=fmt)
    _same(t["boxes"], k["boxes"])
    np.testing.assert_array_equal(t["labels"], np.asarray(k["labels"]))
    assert t["labels"][0, 0] == -1


def test_clip_to_image_size_errors():
    with pytest.raises(NotImplementedError, match=r"\[clip_to_image_size\].*'xywh'"):
        BB.clip_to_image_size({"boxes": _xyxy((2,))}, 5, 5, bounding_box_format="xywh")
    with pytest.raises(ValueError, match=r"height and width are needed"):
        BB.clip_to_image_size({"boxes": _xyxy((2,))})
    with pytest.raises(ValueError, match=r"must be a dict with 'boxes'"):
        BB.clip_to_image_size(_xyxy((2,)), 5, 5)


def test_crop_and_pad_match_keras(keras):
    b = _xyxy((2, 5))
    _same(BB.crop(b, 10, 20, 40, 30), _kbb(keras).crop(b, 10, 20, 40, 30))
    _same(BB.crop(b[0], 3, 4, 20, 25), _kbb(keras).crop(b[0], 3, 4, 20, 25))
    _same(BB.pad(b, 7, 9), _kbb(keras).pad(b, 7, 9))
    for fn, args in ((BB.crop, (1, 2, 3, 4)), (BB.pad, (1, 2))):
        with pytest.raises(NotImplementedError, match=r"must be 'xyxy'"):
            fn(b, *args, bounding_box_format="xywh")


@pytest.mark.parametrize("kw", [dict(angle=[30.0, -75.0]),
                                dict(angle=[10.0, 0.0], translate_x=[0.1, -0.2],
                                     translate_y=[0.0, 0.3], scale=[1.2, 0.8]),
                                dict(shear_x=[15.0, -10.0], shear_y=[5.0, 20.0],
                                     center_x=0.3, center_y=0.6)])
def test_affine_transform_matches_keras(keras, kw):
    b = _xyxy((2, 4))
    args = dict(angle=[0.0, 0.0], translate_x=[0.0, 0.0], translate_y=[0.0, 0.0],
                scale=[1.0, 1.0], shear_x=[0.0, 0.0], shear_y=[0.0, 0.0])
    args.update(kw)
    arrays = {k: np.asarray(v, np.float32) if isinstance(v, list) else v
              for k, v in args.items()}
    k = _kbb(keras).affine_transform(b, height=60, width=80, **arrays)
    _same(BB.affine_transform(b, height=60, width=80, **arrays), k, atol=2e-3)
    # one image's boxes unbatched, with its own transformation
    one = {n: v[:1] if isinstance(v, np.ndarray) else v for n, v in arrays.items()}
    _same(BB.affine_transform(b[0], height=60, width=80, **one), np.asarray(k)[0], atol=2e-3)


def test_affine_transform_checks_its_arguments():
    with pytest.raises(ValueError, match=r"angle must have one value per image \(2\), got 3"):
        BB.affine_transform(_xyxy((2, 3)), np.zeros(3), 0, 0, 1, 0, 0, 10, 10)


@pytest.mark.parametrize("fmt", ["xyxy", "yxyx", "center_xywh", "rel_xyxy"])
@pytest.mark.parametrize("ranks", [(2, 2), (3, 3), (2, 3), (3, 2)])
def test_compute_iou_matches_keras(keras, fmt, ranks):
    b1 = _xyxy((2, 4))
    b2 = np.concatenate([b1[:, :2] + 3, _xyxy((2, 3))], 1)
    b1, b2 = b1[0] if ranks[0] == 2 else b1, b2[0] if ranks[1] == 2 else b2
    shape = (60, 80, 3)
    b1 = BB.convert_format(b1, "xyxy", fmt, 60, 80)
    b2 = BB.convert_format(b2, "xyxy", fmt, 60, 80)
    k = _kbb(keras).compute_iou(b1, b2, fmt, image_shape=shape)
    _same(BB.compute_iou(b1, b2, fmt, image_shape=shape), k, atol=1e-5)


def test_compute_iou_masks_padding_boxes(keras):
    b1, b2 = _xyxy((2, 4)), _xyxy((2, 3))
    b1[0, 1] = -1
    b2[1, 2] = -1
    k = _kbb(keras).compute_iou(b1, b2, "xyxy", use_masking=True, mask_val=-7)
    t = BB.compute_iou(b1, b2, "xyxy", use_masking=True, mask_val=-7)
    _same(t, k, atol=1e-5)
    assert (t[0, 1] == -7).all() and (t[1, :, 2] == -7).all()
    with pytest.raises(ValueError, match=r"needs image_shape"):
        BB.compute_iou(b1, b2, "rel_xyxy")
    with pytest.raises(ValueError, match=r"boxes1 must be \(boxes, 4\)"):
        BB.compute_iou(np.zeros((1, 1, 1, 4)), b2, "xyxy")


@pytest.mark.parametrize("fmt", ["xyxy", "center_yxhw", "xywh"])
def test_compute_ciou_matches_keras(keras, fmt):
    b1 = _xyxy((2, 5))
    b2 = b1 + RNG.uniform(-6, 6, b1.shape).astype(np.float32)
    b2[..., 2:] = np.maximum(b2[..., 2:], b2[..., :2] + 1)
    b1, b2 = (BB.convert_format(v, "xyxy", fmt) for v in (b1, b2))
    _same(BB.compute_ciou(b1, b2, fmt), _kbb(keras).compute_ciou(b1, b2, fmt), atol=1e-5)
    with pytest.raises(ValueError, match=r"\[compute_ciou\] relative formats"):
        BB.compute_ciou(b1, b2, "rel_xyxy")


@pytest.mark.parametrize("kw", [dict(), dict(variance=[0.1, 0.1, 0.2, 0.2]),
                                dict(encoding_format="center_xywh", box_format="rel_xyxy",
                                     image_shape=(60, 80, 3))])
def test_box_delta_codecs_match_keras_and_invert(keras, kw):
    anchors = _xyxy((6,))
    boxes = _xyxy((2, 6))
    box_format = kw.pop("box_format", "xyxy")
    if box_format != "xyxy":
        boxes = BB.convert_format(boxes, "xyxy", box_format, 60, 80)
    enc_kw = dict(kw)
    enc = BB.encode_box_to_deltas(anchors, boxes, "xyxy", box_format, **enc_kw)
    _same(enc, _kbb(keras).encode_box_to_deltas(anchors, boxes, "xyxy", box_format, **enc_kw))
    dec_kw = dict(kw)
    if "encoding_format" in dec_kw:
        dec_kw["encoded_format"] = dec_kw.pop("encoding_format")
    dec = BB.decode_deltas_to_boxes(anchors, enc, "xyxy", box_format, **dec_kw)
    _same(dec, _kbb(keras).decode_deltas_to_boxes(anchors, enc, "xyxy", box_format, **dec_kw))
    _same(dec, boxes, atol=1e-3)
    levels = BB.decode_deltas_to_boxes({"p3": anchors}, {"p3": enc}, "xyxy", box_format,
                                       **dec_kw)
    _same(levels["p3"], dec)


def test_box_delta_codecs_errors():
    a = _xyxy((3,))
    with pytest.raises(ValueError, match=r"variance must have 4 values"):
        BB.encode_box_to_deltas(a, a, "xyxy", "xyxy", variance=[1, 2])
    with pytest.raises(ValueError, match=r"encoding_format must be 'center_xywh'"):
        BB.encode_box_to_deltas(a, a, "xyxy", "xyxy", encoding_format="xyxy")
    with pytest.raises(ValueError, match=r"encoded_format must be"):
        BB.decode_deltas_to_boxes(a, a, "xyxy", "xyxy", encoded_format="xywh")
    with pytest.raises(ValueError, match=r"lacks the levels \['p4'\]"):
        BB.decode_deltas_to_boxes({"p4": a}, {"p3": a}, "xyxy", "xyxy")


# ------------------------------------------------ the geometric layers on dicts

IMG = RNG.uniform(0, 255, (2, 20, 24, 3)).astype(np.float32)
MASK = RNG.integers(0, 4, (2, 20, 24, 1)).astype(np.float32)
BOXES = np.array([[[2, 3, 10, 12], [5, 5, 20, 18], [14, 1, 23, 9]],
                  [[0, 0, 4, 4], [6, 8, 18, 19], [3, 10, 12, 17]]], np.float32)
LABELS = np.array([[1, 2, 3], [4, 5, 6]], np.int32)


def _keras_layer(keras, name, kw):
    layer = getattr(keras.layers, name)(bounding_box_format="xyxy", **kw)
    layer.build(IMG.shape)
    return layer


def _keras_targets(keras, name, kw, transformation, boxes=BOXES, labels=LABELS):
    """Keras's images, masks and xyxy boxes for one draw (images and masks
    compiled: Keras's eager JAX ops take seconds per call)."""
    import jax

    layer = _keras_layer(keras, name, kw)
    images = jax.jit(lambda v: layer.transform_images(v, transformation, training=True))(IMG)
    masks = jax.jit(lambda v: layer.transform_segmentation_masks(v, transformation,
                                                                 training=True))(MASK)
    out = layer.transform_bounding_boxes({"boxes": boxes.copy(), "labels": labels.copy()},
                                         transformation, training=True)
    return np.asarray(images), np.asarray(masks), np.asarray(out["boxes"]), \
        np.asarray(out["labels"])


def _tessera_targets(layer, draw, fmt="xyxy", boxes=BOXES, labels=LABELS):
    """tessera's dict output for the draw given (the layer's draw replaced)."""
    layer._targets_draw = lambda a, training: draw
    layer.bounding_box_format = fmt
    if fmt != "xyxy":
        boxes = BB.convert_format(boxes, "xyxy", fmt, 20, 24)
    out = layer({"images": IMG, "segmentation_masks": MASK,
                 "bounding_boxes": {"boxes": boxes, "labels": labels}})
    got = out["bounding_boxes"]
    h, w = out["images"].shape[1:3]
    return out["images"], out["segmentation_masks"], \
        BB.convert_format(got["boxes"], fmt, "xyxy", h, w), got["labels"]


def _masks_agree(t, k):
    """Nearest-neighbour masks: equal but for coordinates within float
    rounding of a half pixel (tessera maps them in float64, Keras float32)."""
    t, k = np.asarray(t), np.asarray(k)
    assert t.shape == k.shape
    assert np.mean(np.abs(t - k) > 1e-3) < 0.01


def _compare(keras, name, kw, layer, draw, transformation, fmt="xyxy", img_atol=0.05):
    ti, tm, tb, tl = _tessera_targets(layer, draw, fmt)
    ki, km, kb, kl = _keras_targets(keras, name, kw, transformation)
    _same(ti, ki, atol=img_atol)
    _masks_agree(tm, km)
    _same(tb, kb, atol=2e-3)
    np.testing.assert_array_equal(tl, kl)


@pytest.mark.parametrize("fmt", ["xyxy", "rel_yxyx", "center_xywh"])
@pytest.mark.parametrize("mode", ["horizontal", "vertical", "horizontal_and_vertical"])
def test_flip_moves_images_masks_and_boxes_as_keras(keras, mode, fmt):
    flips = np.array([True, False])
    _compare(keras, "RandomFlip", dict(mode=mode), nn.RandomFlip(mode), flips,
             {"flips": flips.reshape(2, 1, 1, 1), "input_shape": IMG.shape}, fmt)


def test_rotation_moves_images_masks_and_boxes_as_keras(keras):
    import jax.numpy as jnp

    deg = np.array([17.0, -130.0], np.float32)
    k = _keras_layer(keras, "RandomRotation", dict(factor=0.5, fill_mode="constant"))
    zero, one = jnp.zeros(2), jnp.ones(2)
    matrix = k._compute_affine_matrix(0.5, 0.5, jnp.asarray(deg), zero, zero, one, zero, zero,
                                      20, 24)
    tr = {"angle": deg, "rotation_matrix": matrix, "image_height": 20, "image_width": 24,
          "batch_size": 2}
    _compare(keras, "RandomRotation", dict(factor=0.5, fill_mode="constant"),
             nn.RandomRotation(0.5, fill_mode="constant"), deg, tr)


@pytest.mark.parametrize("fmt", ["xyxy", "rel_xywh"])
def test_zoom_moves_images_masks_and_boxes_as_keras(keras, fmt):
    zooms = np.array([[0.73, 0.81], [1.27, 1.17]], np.float32)  # (width, height) zooms
    tr = {"width_zoom": zooms[:, :1], "height_zoom": zooms[:, 1:], "input_shape": IMG.shape}
    kw = dict(height_factor=0.4, width_factor=0.4)
    _compare(keras, "RandomZoom", kw, nn.RandomZoom(**kw), zooms, tr, fmt)


@pytest.mark.parametrize("fmt", ["xyxy", "center_yxhw"])
def test_translation_moves_images_masks_and_boxes_as_keras(keras, fmt):
    shifts = np.array([[3.6, -2.0], [-7.2, 5.0]], np.float32)
    kw = dict(height_factor=0.3, width_factor=0.3, fill_mode="nearest")
    _compare(keras, "RandomTranslation", kw, nn.RandomTranslation(**kw), shifts,
             {"translations": shifts, "input_shape": IMG.shape}, fmt)


@pytest.mark.parametrize("fmt", ["xyxy", "rel_xyxy"])
def test_shear_moves_images_masks_and_boxes_as_keras(keras, fmt):
    shear = np.array([[0.23, -0.13], [-0.31, 0.27]], np.float32)
    kw = dict(x_factor=0.3, y_factor=0.3, fill_mode="constant")
    _compare(keras, "RandomShear", kw, nn.RandomShear(**kw), shear,
             {"shear_factor": shear, "input_shape": IMG.shape}, fmt)


def test_perspective_moves_images_masks_and_boxes_as_keras(keras):
    t = nn.RandomPerspective(scale=0.3, seed=4)
    apply, start, end = t._draw(2, 20, 24)
    apply = np.array([True, False])
    tr = {"apply_perspective": apply, "start_points": start, "end_points": end,
          "input_shape": IMG.shape}
    _compare(keras, "RandomPerspective", dict(scale=0.3), t, (apply, start, end), tr)


@pytest.mark.parametrize("size", [(12, 16), (30, 10)])
def test_center_crop_moves_images_masks_and_boxes_as_keras(keras, size):
    if size[0] <= 20:
        _compare(keras, "CenterCrop", dict(height=size[0], width=size[1]),
                 nn.CenterCrop(*size), True, {"input_shape": IMG.shape})
        return
    # an image smaller than the window is cropped to its aspect ratio and
    # resized: Keras resizes masks bilinearly too (values between classes),
    # tessera by nearest neighbour, so masks keep their classes
    ti, tm, tb, tl = _tessera_targets(nn.CenterCrop(*size), True)
    ki, km, kb, kl = _keras_targets(keras, "CenterCrop", dict(height=size[0], width=size[1]),
                                    {"input_shape": IMG.shape})
    _same(ti, ki, atol=0.05)
    _same(tb, kb, atol=2e-3)
    np.testing.assert_array_equal(tl, kl)
    crop = MASK[:, :, 9:15]  # the aspect-ratio window: 20 x int(20 * 10 / 30), centred
    rows = np.clip(np.floor((np.arange(30) + 0.5) * 20 / 30), 0, 19).astype(int)
    cols = np.clip(np.floor((np.arange(10) + 0.5) * 6 / 10), 0, 5).astype(int)
    np.testing.assert_array_equal(tm, crop[:, rows][:, :, cols])


@pytest.mark.parametrize("kw", [dict(), dict(crop_to_aspect_ratio=True),
                                dict(pad_to_aspect_ratio=True), dict(interpolation="nearest")])
def test_resizing_moves_boxes_and_masks_as_keras(keras, kw):
    size = dict(height=16, width=30)
    ti, tm, tb, tl = _tessera_targets(nn.Resizing(**size, **kw), True)
    k = _keras_layer(keras, "Resizing", dict(size, **kw))
    out = k.transform_bounding_boxes({"boxes": BOXES.copy(), "labels": LABELS.copy()},
                                     (20, 24), training=True)
    _same(tb, out["boxes"], atol=2e-3)
    np.testing.assert_array_equal(tl, np.asarray(out["labels"]))
    _masks_agree(tm, k.transform_segmentation_masks(MASK, (20, 24)))
    _same(ti, k.transform_images(IMG, (20, 24)), atol=0.05)


def test_random_crop_moves_boxes_with_the_window(keras):
    # Keras 3.15 subtracts the window's top from x and its left from y and
    # clips only at 0: the same answer when top == left and the boxes lie in it
    inside = np.array([[[6, 7, 12, 13], [9, 8, 15, 16]]] * 2, np.float32)
    ti, tm, tb, tl = _tessera_targets(nn.RandomCrop(12, 14), (5, 5), boxes=inside,
                                      labels=LABELS[:, :2])
    ki, km, kb, kl = _keras_targets(keras, "RandomCrop", dict(height=12, width=14), (5, 5),
                                    boxes=inside, labels=LABELS[:, :2])
    _same(ti, ki)
    _same(tm, km)
    _same(tb, kb)
    # tessera's rule where they differ: x by left, y by top, clipped to the window
    layer = nn.RandomCrop(10, 12)
    moved, size = layer._targets_boxes(np.array([[[2, 3, 30, 9]]], np.float32), (1, 4),
                                       20, 24)
    _same(moved, np.array([[[0, 2, 12, 8]]], np.float32))
    assert size == (10, 12)


def test_boxes_leaving_the_image_get_label_minus_one():
    shifts = np.array([[30.0, 0.0]], np.float32)
    layer = nn.RandomTranslation(0.1, 0.1, bounding_box_format="xyxy")
    layer._targets_draw = lambda a, training: shifts
    out = layer({"images": IMG[:1], "bounding_boxes": {"boxes": BOXES[:1],
                                                       "labels": LABELS[:1]}})
    np.testing.assert_array_equal(out["bounding_boxes"]["labels"], [[-1, -1, -1]])
    assert (out["bounding_boxes"]["boxes"][..., 0] == 24).all()


def test_dict_call_draws_as_the_array_call_and_keeps_other_keys():
    a = nn.RandomRotation(0.2, seed=3, bounding_box_format="xyxy")
    b = nn.RandomRotation(0.2, seed=3)
    extra = np.arange(2)
    out = a({"images": IMG, "labels": extra, "bounding_boxes": {"boxes": BOXES,
                                                               "labels": LABELS}})
    _same(out["images"], b(IMG))
    assert out["labels"] is extra
    deg = nn.RandomRotation(0.2, seed=3)._draw_affine(2, 20, 24)
    want = BB.clip_to_image_size({"boxes": BB.affine_transform(BOXES, deg, 0, 0, 1, 0, 0, 20,
                                                               24), "labels": LABELS}, 20, 24)
    _same(out["bounding_boxes"]["boxes"], want["boxes"])
    # unbatched images take unbatched boxes and masks without a channel axis
    one = a({"images": IMG[0], "segmentation_masks": MASK[0, ..., 0],
             "bounding_boxes": {"boxes": BOXES[0], "labels": LABELS[0]}})
    assert one["images"].shape == (20, 24, 3) and one["segmentation_masks"].shape == (20, 24)
    assert one["bounding_boxes"]["boxes"].shape == (3, 4)
    # training=False leaves everything as given
    same = a({"images": IMG, "bounding_boxes": {"boxes": BOXES, "labels": LABELS}},
             training=False)
    _same(same["images"], IMG)
    _same(same["bounding_boxes"]["boxes"], BOXES)


def test_no_boxes_and_ragged_boxes():
    layer = nn.RandomZoom(0.2, seed=1, bounding_box_format="xyxy")
    out = layer({"images": IMG, "bounding_boxes": {"boxes": np.zeros((2, 0, 4)),
                                                    "labels": np.zeros((2, 0))}})
    assert out["bounding_boxes"]["boxes"].shape == (2, 0, 4)
    with pytest.raises(ValueError, match=r"\[RandomZoom\] bounding_boxes must hold arrays of "
                                         r"numbers"):
        layer({"images": IMG, "bounding_boxes": {"boxes": [[[1, 2, 3, 4]], []],
                                                 "labels": [[1], []]}})


def test_channels_first_dicts():
    layer = nn.RandomFlip("horizontal", data_format="channels_first", bounding_box_format="xyxy")
    layer._targets_draw = lambda a, training: np.array([True, True])
    out = layer({"images": np.moveaxis(IMG, -1, 1), "segmentation_masks": MASK[..., 0],
                 "bounding_boxes": {"boxes": BOXES, "labels": LABELS}})
    _same(np.moveaxis(out["images"], 1, -1), IMG[:, :, ::-1])
    _same(out["segmentation_masks"], MASK[:, :, ::-1, 0])
    _same(out["bounding_boxes"]["boxes"][..., 0], 24 - BOXES[..., 2])


@pytest.mark.parametrize("call,match", [
    (lambda: nn.RandomFlip()({"images": IMG, "bounding_boxes": {"boxes": BOXES,
                                                               "labels": LABELS}}),
     r"\[RandomFlip\] the input has 'bounding_boxes' but the layer's bounding_box_format is "
     r"None"),
    (lambda: nn.RandomZoom(0.1, bounding_box_format="xyxz"),
     r"\[RandomZoom\] bounding_box_format must be None or one of"),
    (lambda: nn.CenterCrop(4, 4, bounding_box_format="xyxy")(
        {"images": IMG, "bounding_boxes": {"boxes": BOXES[0], "labels": LABELS[0]}}),
     r"\[CenterCrop\] bounding_boxes\['boxes'\] must be \(batch, boxes, 4\)"),
    (lambda: nn.Resizing(4, 4, bounding_box_format="xyxy")(
        {"images": IMG, "bounding_boxes": {"boxes": BOXES}}),
     r"\[Resizing\] bounding_boxes must be a dict with 'boxes' and 'labels'"),
    (lambda: nn.RandomCrop(4, 4)({"images": IMG, "segmentation_masks": MASK[:1]}),
     r"\[RandomCrop\] segmentation_masks must match the images' batch"),
    (lambda: nn.RandomTranslation(0.1, 0.1)({"bounding_boxes": {}}),
     r"\[RandomTranslation\] a dict input needs 'images'"),
    (lambda: nn.RandomShear(0.1, bounding_box_format="xyxy")(
        {"images": IMG, "bounding_boxes": {"boxes": BOXES, "labels": LABELS[:, :2]}}),
     r"labels'\] must have one entry per box"),
])
def test_dict_errors_name_the_layer_and_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("layer", [nn.RandomContrast(0.2), nn.RandomElasticTransform()])
def test_layers_without_box_rules_refuse_dicts(layer):
    with pytest.raises(TypeError, match=rf"\[{layer.kind}\] takes an array of images, got a "
                                        r"dict"):
        layer({"images": IMG})


def test_layers_map_over_a_dataset_of_dicts():
    data = tessera.data.Dataset.from_tensor_slices(
        {"images": IMG, "segmentation_masks": MASK,
         "bounding_boxes": {"boxes": BOXES, "labels": LABELS}}).batch(2)
    layer = nn.RandomFlip("horizontal", seed=0, bounding_box_format="xyxy")
    flips = nn.RandomFlip("horizontal", seed=0)._draw(2)
    (out,) = list(data.map(layer))
    want = np.where(flips[:, None, None, None], IMG[:, :, ::-1], IMG)
    _same(out["images"], want)
    _same(out["segmentation_masks"], np.where(flips[:, None, None, None], MASK[:, :, ::-1], MASK))
    x1 = np.where(flips[:, None], 24 - BOXES[..., 2], BOXES[..., 0])
    _same(out["bounding_boxes"]["boxes"][..., 0], x1)
