"""keras.utils' image functions: img_to_array, array_to_img, load_img,
save_img (Pillow images, as Keras's). Files read are untrusted: opened without
following a link planted in their place, their size and their claimed pixel
count bounded before decoding, every error naming the file. Files written go
to a fresh temporary in the target folder, then are renamed."""

from __future__ import annotations

import io
import os
import pathlib
import tempfile
import warnings

import numpy as np

from ._config import SETTINGS
from ._directory_datasets import _MAX_IMAGE_PIXELS
from .ops import image as _ops_image
from .symbolic import user_location

_MAX_FILE_BYTES = 1 << 30
_RESAMPLE = ("nearest", "bilinear", "bicubic", "hamming", "box", "lanczos")


def _pil(where):
    try:
        from PIL import Image  # noqa: PLC0415 - optional dependency, only for images
    except ImportError:
        raise ImportError(f"[utils.{where}] needs Pillow (pip install pillow)") from None
    return Image


def _format(where, data_format):
    if data_format not in (None, "channels_last", "channels_first"):
        raise ValueError(f"[utils.{where}] data_format must be 'channels_last' or "
                         f"'channels_first', got {data_format!r}")
    return data_format or SETTINGS["image_data_format"]


def img_to_array(img, data_format=None, dtype=None):
    """A Pillow image (or array) as a float32 array (height, width, channels)."""
    fmt = _format("img_to_array", data_format)
    x = np.asarray(img, dtype=dtype or "float32")
    if x.ndim == 2:
        return x[None] if fmt == "channels_first" else x[..., None]
    if x.ndim != 3:
        raise ValueError(f"[utils.img_to_array] an image of rank 2 or 3 expected, got shape "
                         f"{x.shape}")
    return x.transpose(2, 0, 1) if fmt == "channels_first" else x


def array_to_img(x, data_format=None, scale=True, dtype=None):
    """A (height, width, 1|3|4) array as a Pillow image (L, RGB, RGBA; I for
    one channel above 255); scale maps [min, max] to [0, 255] first."""
    Image = _pil("array_to_img")
    fmt = _format("array_to_img", data_format)
    x = np.array(x, dtype=dtype or "float32")
    if x.ndim != 3:
        raise ValueError(f"[utils.array_to_img] one image of rank 3 expected, got shape "
                         f"{x.shape}")
    if fmt == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        top = np.max(x)
        if top != 0:
            x /= top
        x *= 255
    c = x.shape[2]
    if c in (3, 4):
        return Image.fromarray(x.astype("uint8"), "RGB" if c == 3 else "RGBA")
    if c == 1:
        if np.max(x) > 255:
            return Image.fromarray(x[:, :, 0].astype("int32"), "I")
        return Image.fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"[utils.array_to_img] 1, 3 or 4 channels expected, got shape {x.shape}")


def _read_untrusted(path, where):
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        hint = " (a symbolic link: not followed)" if os.path.islink(path) else ""
        raise OSError(e.errno, f"[utils.{where}] cannot open {path}{hint}: {e.strerror}") \
            from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(_MAX_FILE_BYTES + 1)
    if len(data) > _MAX_FILE_BYTES:
        raise ValueError(f"[utils.{where}] {path} is larger than {_MAX_FILE_BYTES} bytes")
    return data


def load_img(path, color_mode="rgb", target_size=None, interpolation="nearest",
             keep_aspect_ratio=False):
    """A Pillow image read from path (or a BytesIO), converted to color_mode
    ('grayscale', 'rgb', 'rgba') and resized to target_size (height, width)."""
    Image = _pil("load_img")
    if color_mode not in ("grayscale", "rgb", "rgba"):
        raise ValueError(f"[utils.load_img] color_mode must be 'grayscale', 'rgb' or 'rgba', "
                         f"got {color_mode!r}")
    if target_size is not None and interpolation not in _RESAMPLE:
        raise ValueError(f"[utils.load_img] interpolation must be one of {list(_RESAMPLE)}, got "
                         f"{interpolation!r}")
    if isinstance(path, io.BytesIO):
        name, data = "<BytesIO>", path.getvalue()
    elif isinstance(path, (str, bytes, pathlib.Path)):
        name = os.fsdecode(path)
        data = _read_untrusted(name, "load_img")
    else:
        raise TypeError(f"[utils.load_img] path must be a path or an io.BytesIO, got "
                        f"{type(path).__name__}")
    try:
        img = Image.open(io.BytesIO(data))
        if img.width * img.height > _MAX_IMAGE_PIXELS:
            raise ValueError(f"[utils.load_img] {name} claims {img.width}x{img.height} pixels, "
                             f"more than {_MAX_IMAGE_PIXELS} (a decompression bomb?)")
        img.load()
    except Image.DecompressionBombError as e:
        raise ValueError(f"[utils.load_img] {name} claims more pixels than allowed: {e}") \
            from None
    except (OSError, SyntaxError) as e:
        raise ValueError(f"[utils.load_img] {name} is not a readable image: {e}") from None
    if color_mode == "grayscale":
        if img.mode not in ("L", "I;16", "I"):
            img = img.convert("L")
    elif img.mode != color_mode.upper():
        img = img.convert(color_mode.upper())
    if target_size is None:
        return img
    th, tw = (int(v) for v in target_size)
    if (tw, th) == img.size:
        return img
    resample = getattr(Image, "Resampling", Image)
    method = getattr(resample, interpolation.upper())
    if not keep_aspect_ratio:
        return img.resize((tw, th), method)
    w, h = img.size
    ch, cw = min(h, (w * th) // tw), min(w, (h * tw) // th)
    top, left = (h - ch) // 2, (w - cw) // 2
    return img.resize((tw, th), method, box=[left, top, left + cw, top + ch])


def save_img(path, x, data_format=None, file_format=None, scale=True, **kwargs):
    """Writes the array x as an image file (format from file_format or the
    path's suffix), through a temporary in the same folder renamed into place."""
    Image = _pil("save_img")
    path = os.fsdecode(path)
    if file_format is None:
        file_format = pathlib.Path(path).suffix[1:].lower()
    if file_format and file_format.lower() == "jpg":
        file_format = "jpeg"
    if not file_format or file_format.upper() not in Image.registered_extensions().values() \
            and file_format.upper() not in Image.SAVE:
        raise ValueError(f"[utils.save_img] {path}: no image format from file_format="
                         f"{file_format!r} or the suffix (png, jpeg, bmp, ...)")
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and file_format.lower() == "jpeg":
        warnings.warn("The JPEG format does not support RGBA images, converting to RGB.")
        img = img.convert("RGB")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="." + file_format, dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            img.save(f, format=file_format, **kwargs)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def smart_resize(x, size, interpolation="bilinear", data_format="channels_last", **kwargs):
    """An image (height, width, channels) or a batch of them resized to `size`
    without distorting it, as keras.preprocessing.image.smart_resize: the largest
    centered crop with the aspect ratio of `size`, then resized to it."""
    where = f"[preprocessing.image.smart_resize] (at {user_location()})"
    if kwargs:
        raise TypeError(f"{where} unexpected keyword arguments: {sorted(kwargs)}")
    if not isinstance(size, (list, tuple)) or len(size) != 2 or \
            not all(isinstance(n, (int, np.integer)) and n > 0 for n in size):
        raise ValueError(f"{where} size must be (height, width), 2 positive ints; got {size!r}")
    fmt = _format("smart_resize", data_format)
    img = np.asarray(x)
    if img.ndim not in (3, 4):
        raise ValueError(f"{where} an image (height, width, channels) or a batch of them "
                         f"(batch, height, width, channels) expected; got shape {img.shape}")
    h_axis = img.ndim - 3 if fmt == "channels_last" else img.ndim - 2
    height, width = img.shape[h_axis], img.shape[h_axis + 1]
    th, tw = int(size[0]), int(size[1])
    crop_h = max(min(height, int(float(width * th) / tw)), 1)
    crop_w = max(min(width, int(float(height * tw) / th)), 1)
    top, left = int(float(height - crop_h) / 2), int(float(width - crop_w) / 2)
    index = [slice(None)] * img.ndim
    index[h_axis] = slice(top, top + crop_h)
    index[h_axis + 1] = slice(left, left + crop_w)
    return np.asarray(_ops_image.resize(img[tuple(index)], (th, tw), interpolation=interpolation,
                                        data_format=fmt))
