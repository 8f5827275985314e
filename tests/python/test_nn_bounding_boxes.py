"""tessera.nn.utils.bounding_boxes against keras.utils.bounding_boxes on JAX
(every format pair, dicts, batched and unbatched boxes, IoU / CIoU, the
anchor codecs, affine_transform), its named errors; and the geometric image
layers on {"images", "bounding_boxes", "segmentation_masks"} dicts against
Keras's transform_* methods given the same draw."""

import numpy as np
import pytest

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
