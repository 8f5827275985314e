"""tessera.nn.visualization: draw_bounding_boxes' pixels against outlines
computed here another way (Keras's needs OpenCV), draw_segmentation_masks
against Keras's, and the galleries rendered to PNG files with matplotlib's
Agg backend (plot_image_gallery and plot_segmentation_mask_gallery compared
with Keras's PNGs pixel for pixel)."""

import numpy as np
import pytest

import tessera.nn as nn

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.image as mpimg  # noqa: E402 - after choosing the Agg backend

VIS = nn.visualization
RNG = np.random.default_rng(7)


def _outline(H, W, x1, y1, x2, y2, t):
    """Pixels of a rectangle's outline t wide, as a set difference: inside
    the outer rectangle and not strictly inside the inner one."""
    lo, hi = t // 2, t - 1 - t // 2
    ys, xs = np.mgrid[0:H, 0:W]
    outer = (xs >= x1 - lo) & (xs <= x2 + hi) & (ys >= y1 - lo) & (ys <= y2 + hi)
    inner = (xs > x1 + hi) & (xs < x2 - lo) & (ys > y1 + hi) & (ys < y2 - lo)
    return outer & ~inner


@pytest.mark.parametrize("t", [1, 2, 3, 4])
def test_draw_bounding_boxes_paints_the_outlines(t):
    img = RNG.integers(0, 255, (2, 30, 40, 3)).astype(np.uint8)
    boxes = np.array([[[5, 4, 20, 16], [30, 20, 45, 35]], [[0, 0, 10, 10], [3, 3, 8, 8]]],
                     np.float32)
    labels = np.array([[0, 3], [-1, 1]])
    color = (255, 10, 0)
    out = VIS.draw_bounding_boxes(img, {"boxes": boxes, "labels": labels}, "xyxy", color=color,
                                  line_thickness=t)
    assert out.dtype == np.uint8 and out.shape == img.shape
    for i in range(2):
        want = np.zeros((30, 40), bool)
        for j in range(2):
            if labels[i, j] != -1:
                want |= _outline(30, 40, *boxes[i, j].astype(int), t)
        np.testing.assert_array_equal(out[i][want], np.broadcast_to(color, (want.sum(), 3)))
        np.testing.assert_array_equal(out[i][~want], img[i][~want])


def test_draw_bounding_boxes_formats_scaling_and_channels_first():
    img = RNG.uniform(0, 1, (1, 20, 20, 3)).astype(np.float32)
    rel = {"boxes": np.array([[[0.1, 0.2, 0.6, 0.9]]]), "labels": np.array([[2]])}
    out = VIS.draw_bounding_boxes(img, rel, "rel_xyxy", color=(0, 255, 0), line_thickness=1)
    want = _outline(20, 20, 2, 4, 12, 18, 1)
    np.testing.assert_array_equal(out[0][want], np.broadcast_to((0, 255, 0), (want.sum(), 3)))
    np.testing.assert_array_equal(out[0][~want], (img[0] * 255).astype(np.uint8)[~want])
    first = VIS.draw_bounding_boxes(np.moveaxis(img, -1, 1), rel, "rel_xyxy", color=(0, 255, 0),
                                    line_thickness=1, data_format="channels_first")
    np.testing.assert_array_equal(np.moveaxis(first, 1, -1), out)


def test_draw_bounding_boxes_errors():
    img = np.zeros((1, 8, 8, 3), np.uint8)
    d = {"boxes": np.zeros((1, 1, 4)), "labels": np.zeros((1, 1))}
    with pytest.raises(ValueError, match=r"\[draw_bounding_boxes\] images must be a batch"):
        VIS.draw_bounding_boxes(img[0], d, "xyxy")
    with pytest.raises(TypeError, match=r"bounding_boxes must be a dict"):
        VIS.draw_bounding_boxes(img, d["boxes"], "xyxy")
    with pytest.raises(ValueError, match=r"must have 'boxes' and 'labels'"):
        VIS.draw_bounding_boxes(img, {"boxes": d["boxes"]}, "xyxy")
    with pytest.raises(ValueError, match=r"color must have one value per channel"):
        VIS.draw_bounding_boxes(img, d, "xyxy", color=(1, 2))


@pytest.mark.parametrize("kw", [dict(), dict(num_classes=5, alpha=0.3),
                                dict(blend=False, num_classes=4),
                                dict(ignore_index=2, num_classes=4),
                                dict(num_classes=3, color_mapping={0: (9, 9, 9), 1: (255, 0, 0),
                                                                   2: (0, 0, 255)})])
def test_draw_segmentation_masks_matches_keras(keras, kw):
    img = RNG.uniform(0, 255, (2, 9, 11, 3)).astype(np.float32)
    masks = RNG.integers(0, 4, (2, 9, 11, 1)).astype(np.int32)
    k = np.asarray(keras.visualization.draw_segmentation_masks(img, masks, **kw))
    t = VIS.draw_segmentation_masks(img, masks, **kw)
    assert t.dtype == k.dtype and t.shape == k.shape
    np.testing.assert_allclose(t.astype(np.float32), k.astype(np.float32), atol=1)
    first = VIS.draw_segmentation_masks(np.moveaxis(img, -1, 1), np.moveaxis(masks, -1, 1),
                                        data_format="channels_first", **kw)
    np.testing.assert_array_equal(first, t)


def test_draw_segmentation_masks_errors():
    img = np.zeros((1, 4, 4, 3), np.float32)
    with pytest.raises(TypeError, match=r"segmentation_masks must be integers"):
        VIS.draw_segmentation_masks(img, np.zeros((1, 4, 4, 1), np.float32))
    with pytest.raises(ValueError, match=r"must be \(batch, height, width, 1\)"):
        VIS.draw_segmentation_masks(img, np.zeros((1, 4, 4), np.int32))
    with pytest.raises(ValueError, match=r"missing \[1\]"):
        VIS.draw_segmentation_masks(img, np.ones((1, 4, 4, 1), np.int32), num_classes=2,
                                    color_mapping={0: (1, 1, 1)})


def _png(path):
    a = mpimg.imread(str(path))
    assert a.ndim == 3 and a.shape[0] > 10 and a.shape[1] > 10
    return a


def test_image_gallery_png_is_keras_png(keras, tmp_path):
    img = RNG.uniform(0, 1, (4, 16, 16, 3)).astype(np.float32)
    kw = dict(value_range=(0, 1), y_true=np.array([0, 1, 1, 0]), label_map={0: "cat", 1: "dog"},
              dpi=40)
    VIS.plot_image_gallery(img, path=tmp_path / "t.png", **kw)
    keras.visualization.plot_image_gallery(img, path=str(tmp_path / "k.png"), **kw)
    t, k = _png(tmp_path / "t.png"), _png(tmp_path / "k.png")
    assert t.shape == k.shape
    np.testing.assert_array_equal(t, k)


def test_segmentation_gallery_png_is_keras_png(keras, tmp_path):
    img = RNG.uniform(0, 255, (2, 12, 12, 3)).astype(np.float32)
    masks = RNG.integers(0, 3, (2, 12, 12, 1)).astype(np.int32)
    kw = dict(num_classes=3, y_true=masks, y_pred=masks[::-1], dpi=40)
    VIS.plot_segmentation_mask_gallery(img, path=tmp_path / "t.png", **kw)
    keras.visualization.plot_segmentation_mask_gallery(img, path=str(tmp_path / "k.png"), **kw)
    t, k = _png(tmp_path / "t.png"), _png(tmp_path / "k.png")
    assert t.shape == k.shape
    np.testing.assert_allclose(t, k, atol=2 / 255)


def test_bounding_box_gallery_draws_boxes_and_names(tmp_path):
    img = np.full((2, 40, 40, 3), 255, np.uint8)
    truth = {"boxes": np.array([[[4, 4, 36, 36]], [[10, 10, 30, 30]]], np.float32),
             "labels": np.array([[0], [1]])}
    pred = {"boxes": np.array([[[8, 8, 20, 20]], [[-1, -1, -1, -1]]], np.float32),
            "labels": np.array([[1], [-1]])}
    path = tmp_path / "boxes.png"
    VIS.plot_bounding_box_gallery(img, "xyxy", y_true=truth, y_pred=pred, line_thickness=3,
                                  class_mapping={0: "cat", 1: "dog"}, legend=True, rows=1,
                                  cols=2, path=path, scale=4, dpi=50)
    png = _png(path)[..., :3]

    def near(color):
        return (np.abs(png - np.asarray(color) / 255.0).max(-1) < 0.05).sum()

    assert near((0, 188, 212)) > 50 and near((255, 235, 59)) > 20
    notes = VIS._notes(truth, "xyxy", 40, 40, {0: "cat", 1: "dog"}, (1, 2, 3), 1.0, 2, "t")
    assert [n[0][2] for n in notes] == ["cat", "dog"]
    assert notes[0][0][:2] == (4 + 3, 4 + 24 + 2 + 3)  # inside: too close to the top


def test_galleries_need_matplotlib_and_check_arguments(monkeypatch, tmp_path):
    img = np.zeros((2, 8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match=r"y_true or y_pred need a label_map"):
        VIS.plot_image_gallery(img, y_true=[0, 1], path=tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"either path .* or show=True"):
        VIS.plot_image_gallery(img, path=tmp_path / "x.png", show=True)
    with pytest.raises(ValueError, match=r"legend=True or legend_handles"):
        VIS.plot_bounding_box_gallery(img, "xyxy", legend=True, legend_handles=[1])
    monkeypatch.setattr(VIS, "plt", None)
    for call in (lambda: VIS.plot_image_gallery(img),
                 lambda: VIS.plot_bounding_box_gallery(img, "xyxy"),
                 lambda: VIS.plot_segmentation_mask_gallery(img, 2)):
        with pytest.raises(ImportError, match=r"needs the matplotlib package"):
            call()
    # drawing needs no matplotlib
    VIS.draw_segmentation_masks(img, np.zeros((2, 8, 8, 1), np.int32), num_classes=1)
