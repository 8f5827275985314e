"""tessera.nn's audio features against Keras 3 on JAX (the oracle): the STFT
initializer's kernels, ops.istft (eager, inside a model, its gradient),
STFTSpectrogram (every mode and layout, its weights, set_weights, training and a
gradient checked by finite differences, saving) and MelSpectrogram (eager and in a
model). audio_dataset_from_directory is in test_nn_audio_dataset.py."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.signal  # noqa: E402 - installed with keras (its STFT initializer uses it)

import tessera  # noqa: E402
from tessera import nn as tnn  # noqa: E402
from tessera.nn import ops as tops  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps

kops = keras.ops
RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def close(got, want, rtol=1e-5, atol_scale=2e-6, name=""):
    want = np.asarray(want)
    assert np.asarray(got).shape == want.shape, (name, np.asarray(got).shape, want.shape)
    atol = atol_scale * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


# ------------------------------------------------------------ initializers.STFT
WINDOWS = ["hann", "hamming", "blackman", "bartlett", "boxcar", None,
           np.linspace(0.2, 1.0, 12).astype("float32")]


@pytest.mark.parametrize("side", ["real", "imag"])
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: w if isinstance(w, str) or w is None
                         else "array")
@pytest.mark.parametrize("scaling,periodic", [("density", False), ("spectrum", True),
                                              (None, False)])
def test_stft_initializer_matches_keras(side, window, scaling, periodic):
    want = keras.initializers.STFT(side, window, scaling, periodic)(shape=(12, 1, 9))
    got = tnn.initializers.STFT(side, window, scaling, periodic)((12, 1, 9))
    assert got.dtype == np.float32
    close(got, want, name=f"{side} {scaling} {periodic}")


def test_stft_initializer_names_and_large_kernels():
    assert tnn.initializers.STFTInitializer is tnn.initializers.STFT
    assert tnn.initializers.stft is tnn.initializers.STFT
    assert isinstance(tnn.initializers.get("stft"), tnn.initializers.STFT)
    init = tnn.initializers.STFT("imag", "hamming", "spectrum", True)
    again = tnn.initializers.deserialize(init.get_config())
    np.testing.assert_array_equal(again((8, 1, 5)), init((8, 1, 5)))
    # long frames: angles up to 2 pi * 255 in float32, computed in Keras's order
    want = keras.initializers.STFT("real", "hann")(shape=(256, 1, 257))
    close(tnn.initializers.STFT("real", "hann")((256, 1, 257)), want, atol_scale=1e-7)
    want64 = keras.initializers.STFT("imag", "hann")(shape=(16, 1, 9), dtype="float32")
    got64 = tnn.initializers.STFT("imag", "hann")((16, 1, 9), dtype="float64")
    assert got64.dtype == np.float64
    close(got64, want64, atol_scale=1e-6)


def test_stft_initializer_errors():
    with pytest.raises(ValueError, match=r"\[STFT\] side must be 'real' or 'imag', got 'cos'"):
        tnn.initializers.STFT("cos")
    with pytest.raises(ValueError, match=r"\[STFT\] window 'kaiserr' is not supported"):
        tnn.initializers.STFT("real", "kaiserr")
    with pytest.raises(ValueError, match=r"\[STFT\] scaling must be None, 'density' or"):
        tnn.initializers.STFT("real", "hann", "l2")
    with pytest.raises(ValueError, match=r"\[STFT\] the window must have shape \(8,\)"):
        tnn.initializers.STFT("real", np.ones(5))((8, 1, 5))
    with pytest.raises(ValueError, match=r"\[STFT\] shape must be \(frame_length, 1,"):
        tnn.initializers.STFT()((8, 5))


# ------------------------------------------------------------ ops.istft
SIG = f32(3, 60)
ISTFT_CASES = [
    ("hann", dict(sequence_length=8, sequence_stride=4, fft_length=8)),
    ("hamming_padded_fft", dict(sequence_length=6, sequence_stride=2, fft_length=10,
                                window="hamming")),
    ("no_window", dict(sequence_length=7, sequence_stride=3, fft_length=10, window=None)),
    ("uncentred", dict(sequence_length=8, sequence_stride=3, fft_length=8, center=False)),
    ("array_window_length", dict(sequence_length=5, sequence_stride=2, fft_length=8,
                                 window=np.linspace(0.5, 1.0, 5).astype("float32"),
                                 length=40)),
]


def _spectrum(kw, x=SIG):
    args = {k: v for k, v in kw.items() if k != "length"}
    re, im = kops.stft(x, **args)
    return np.asarray(re), np.asarray(im)


@pytest.mark.parametrize("name,kw", ISTFT_CASES, ids=[c[0] for c in ISTFT_CASES])
def test_istft_eager_matches_keras(name, kw):
    spec = _spectrum(kw)
    want = kops.istft(spec, **kw)
    got = tops.istft(spec, **kw)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    close(got, want, name=name)
    one = tops.istft((spec[0][1], spec[1][1]), **kw)  # a single signal's frames
    close(one, np.asarray(want)[1], name=name)


def test_istft_without_overlap_is_scipys():
    """sequence_stride == fft_length: Keras on JAX passes noverlap=0, which
    jax.scipy.signal.istft takes as its default (nperseg // 2); tessera gives
    what scipy (Keras's NumPy backend) gives."""
    x = f32(2, 48)
    spec = _spectrum(dict(sequence_length=8, sequence_stride=8, fft_length=8,
                          window="hamming", center=False), x)
    win = scipy.signal.get_window("hamming", 8)
    _, want = scipy.signal.istft(spec[0] + 1j * spec[1], window=win, nperseg=8, noverlap=0,
                                 nfft=8, boundary=False, time_axis=-2, freq_axis=-1)
    want = want / win.sum()
    got = tops.istft(spec, 8, 8, 8, window="hamming", center=False)
    close(got, want.astype("float32"))
    close(got, x, atol_scale=1e-5)  # and it is the signal again


class IstftLayer(tnn.Layer):
    """(frames of real, frames of imag) scaled by a weight, then istft."""

    def __init__(self, kw, **kwargs):
        super().__init__(**kwargs)
        self.kw = kw

    def build(self, input_shape):
        self.s = self.add_weight(shape=tuple(input_shape[0][1:]), initializer="ones", name="s")

    def call(self, inputs):
        re, im = inputs
        return tops.istft((re * self.s, im), **self.kw)


def test_istft_in_a_model_and_its_gradient_match_keras():
    import jax  # the oracle's own autodiff
    import jax.numpy as jnp

    kw = dict(sequence_length=8, sequence_stride=3, fft_length=10, window="hann")
    re, im = _spectrum(kw)
    want = np.asarray(kops.istft((re, im), **kw))
    inputs = [tnn.Input(re.shape[1:]), tnn.Input(im.shape[1:])]
    model = tnn.Model(inputs, IstftLayer(kw)(inputs))
    assert model.output_shape == (None,) + want.shape[1:]
    close(model.predict([re, im], batch_size=3, verbose=0), want)

    target = RNG.standard_normal(want.shape).astype("float32")

    def kloss(s):
        y = kops.istft((jnp.asarray(re) * s, jnp.asarray(im)), **kw)
        return jnp.mean(jnp.square(y - target))

    grad = np.asarray(jax.grad(kloss)(jnp.ones(re.shape[1:], "float32")))
    model.compile(tessera.optim.SGD(1.0), "mse")
    model.fit([re, im], target, batch_size=3, epochs=1, shuffle=False, verbose=0)
    close(1.0 - model.get_weights()[0], grad, rtol=2e-4, atol_scale=2e-5)


def test_istft_errors():
    spec = _spectrum(dict(sequence_length=8, sequence_stride=4, fft_length=8))
    with pytest.raises(ValueError, match=r"\[ops.istft\] sequence_stride must be a positive"):
        tops.istft(spec, 8, 0, 8)
    with pytest.raises(ValueError, match=r"\[ops.istft\] x must be a \(real, imaginary\) pair"):
        tops.istft(spec[0], 8, 4, 8)
    with pytest.raises(ValueError, match=r"\[ops.istft\] x must have rank 2 or more"):
        tops.istft((spec[0][0, 0], spec[1][0, 0]), 8, 4, 8)
    with pytest.raises(ValueError, match=r"\[ops.istft\] fft_length 8 must be at least"):
        tops.istft(spec, 10, 4, 8)
    with pytest.raises(ValueError, match=r"\[ops.istft\] window must be 'hann', 'hamming'"):
        tops.istft(spec, 8, 4, 8, window="blackman")
    with pytest.raises(ValueError, match=r"\[ops.istft\] window must have shape \(8,\)"):
        tops.istft(spec, 8, 4, 8, window=np.ones(6, "float32"))


# ------------------------------------------------------------ STFTSpectrogram
MODES = ["log", "magnitude", "psd", "real", "imag", "angle", "stft"]
LAYOUTS = [
    ("valid", dict()),
    ("same_expanded", dict(padding="same", expand_dims=True)),
    ("channels_first", dict(data_format="channels_first")),
    ("channels_first_expanded_hamming", dict(data_format="channels_first", expand_dims=True,
                                             window="hamming", scaling="spectrum",
                                             periodic=True, padding="same")),
    ("no_window_defaults", dict(window=None, scaling=None, frame_step=None, fft_length=None)),
]
WAVES = f32(2, 150, 3)


def _stft_args(kw):
    args = dict(frame_length=24, frame_step=10, fft_length=32)
    args.update(kw)
    return args


def _waves(kw):
    if kw.get("data_format") == "channels_first":
        return np.ascontiguousarray(np.swapaxes(WAVES, 1, 2))
    return WAVES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,kw", LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_stft_spectrogram_eager_matches_keras(mode, name, kw):
    x = _waves(kw)
    k = keras.layers.STFTSpectrogram(mode=mode, **_stft_args(kw))
    t = tnn.layers.STFTSpectrogram(mode=mode, **_stft_args(kw))
    want = np.asarray(k(x))
    got = t(x)
    assert t.compute_output_shape((None,) + x.shape[1:]) == \
        tuple(k.compute_output_shape((None,) + x.shape[1:]))
    # log of a small magnitude and the angle near the negative real axis amplify rounding
    close(got, want, rtol=2e-5, atol_scale=2e-5 if mode in ("log", "angle") else 2e-6,
          name=f"{mode} {name}")
    assert [w.path for w in t.weights] == [w.path for w in k.weights]
    for a, b in zip(t.get_weights(), k.get_weights()):
        close(a, b, atol_scale=1e-7)


@pytest.mark.parametrize("mode,kw", [("log", dict()), ("stft", dict(padding="same",
                                                                    expand_dims=True)),
                                     ("angle", dict(data_format="channels_first"))])
def test_stft_spectrogram_in_a_model_matches_keras(mode, kw):
    x = _waves(kw)
    k = keras.layers.STFTSpectrogram(mode=mode, **_stft_args(kw))
    want = np.asarray(k(x))
    inp = tnn.Input(x.shape[1:])
    layer = tnn.layers.STFTSpectrogram(mode=mode, **_stft_args(kw))
    model = tnn.Model(inp, layer(inp))
    assert model.output_shape == (None,) + want.shape[1:]
    close(model.predict(x, batch_size=2, verbose=0), want, rtol=2e-5, atol_scale=2e-5)


def test_stft_spectrogram_set_weights_from_keras_and_trainable_flag():
    k = keras.layers.STFTSpectrogram(mode="magnitude", frame_length=16, frame_step=8,
                                     trainable=False)
    x = WAVES[:, :100]
    k.build(x.shape)
    new = [RNG.standard_normal(w.shape).astype("float32") for w in k.get_weights()]
    k.set_weights(new)
    t = tnn.layers.STFTSpectrogram(mode="magnitude", frame_length=16, frame_step=8,
                                   trainable=False)
    t.build(x.shape)
    t.set_weights(new)
    close(t(x), k(x), name="set_weights")
    assert len(t.trainable_weights) == len(k.trainable_weights) == 0
    assert len(t.non_trainable_weights) == len(k.non_trainable_weights) == 2
    real = tnn.layers.STFTSpectrogram(mode="real", frame_length=16)
    real.build(x.shape)
    assert [w.name for w in real.weights] == ["real_kernel"]
    assert len(real.trainable_weights) == 1
    imag = tnn.layers.STFTSpectrogram(mode="imag", frame_length=16)
    imag.build(x.shape)
    assert [w.name for w in imag.weights] == ["imag_kernel"]


def _reference_log_spectrogram(x, real_kernel, imag_kernel, step):
    """The layer's mode 'log' in float64 NumPy (valid padding, channels last)."""
    length = real_kernel.shape[0]
    frames = (x.shape[1] - length) // step + 1
    idx = np.arange(frames)[:, None] * step + np.arange(length)
    cut = np.transpose(x, (0, 2, 1))[:, :, idx]  # (batch, channels, frames, length)
    re = cut @ real_kernel[:, 0, :]
    im = cut @ imag_kernel[:, 0, :]
    mag = np.sqrt(np.maximum(re * re + im * im, 1e-7))
    out = np.log(np.maximum(mag, 1e-7))  # (batch, channels, frames, bins)
    return np.transpose(out, (0, 2, 1, 3)).reshape(x.shape[0], frames, -1)


def test_stft_spectrogram_trains_with_the_finite_difference_gradient():
    """One SGD step (rate 1) moves each kernel by minus the gradient of the mean
    squared error, which central differences of a float64 NumPy reference give."""
    x = WAVES[:, :80, :2].astype("float32")
    layer = tnn.layers.STFTSpectrogram(mode="log", frame_length=12, frame_step=6,
                                       fft_length=16)
    inp = tnn.Input(x.shape[1:])
    model = tnn.Model(inp, layer(inp))
    w0 = [w.astype(np.float64) for w in model.get_weights()]
    out = _reference_log_spectrogram(x.astype(np.float64), *w0, 6)
    close(model.predict(x, verbose=0), out, rtol=1e-4, atol_scale=1e-5)
    target = RNG.standard_normal(out.shape)

    def loss(real, imag):
        return np.mean((_reference_log_spectrogram(x.astype(np.float64), real, imag, 6)
                        - target) ** 2)

    model.compile(tessera.optim.SGD(1.0), "mse")
    model.fit(x, target.astype("float32"), batch_size=2, epochs=1, shuffle=False, verbose=0)
    step = [a - b for a, b in zip(w0, model.get_weights())]
    h = 1e-5
    for which in (0, 1):
        for pos in [(0, 0, 0), (3, 0, 2), (7, 0, 5), (11, 0, 8)]:
            up = [w.copy() for w in w0]
            down = [w.copy() for w in w0]
            up[which][pos] += h
            down[which][pos] -= h
            fd = (loss(*up) - loss(*down)) / (2 * h)
            assert abs(step[which][pos] - fd) <= 1e-3 * abs(fd) + 1e-5, (which, pos,
                                                                         step[which][pos], fd)


def test_stft_spectrogram_saves_and_loads(tmp_path):
    inp = tnn.Input((120, 2))
    layer = tnn.layers.STFTSpectrogram(mode="psd", frame_length=20, frame_step=5,
                                       window="hamming", padding="same")
    model = tnn.Model(inp, layer(inp))
    x = WAVES[:, :120, :2]
    path = str(tmp_path / "stft.keras")
    model.save(path)
    again = tnn.load_model(path)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    config = layer.get_config()
    kconfig = keras.layers.STFTSpectrogram(mode="psd", frame_length=20, frame_step=5,
                                           window="hamming", padding="same").get_config()
    for key in ("mode", "frame_length", "frame_step", "fft_length", "window", "periodic",
                "scaling", "padding", "data_format", "expand_dims"):
        assert config[key] == kconfig[key], key


def test_stft_spectrogram_errors():
    w = tnn.layers.STFTSpectrogram
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] frame_step must be a positive"):
        w(frame_length=16, frame_step=17)
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] fft_length must be at least"):
        w(frame_length=16, fft_length=8)
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] mode must be one of log"):
        w(mode="power")
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] scaling must be None"):
        w(scaling="l1")
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] padding must be 'valid'"):
        w(padding="causal")
    with pytest.raises(ValueError, match=r"\[STFTSpectrogram\] window 'hannn' is not"):
        w(window="hannn")
    with pytest.warns(UserWarning, match="power of two"):
        w(frame_length=16, fft_length=24)
    with pytest.raises(TypeError, match=r"\[STFTSpectrogram\].*float16, float32 or float64"):
        w(frame_length=8)(np.ones((1, 32, 1), "int32"))
    with pytest.raises(ValueError, match=r"(?i)STFTSpectrogram.*(rank|ndim)"):
        w(frame_length=8)(np.ones((32, 1), "float32"))
    # (an Input((None, 1)) of unknown length is taken, as Keras's: test_nn_keras_io_eighth.py)


# ------------------------------------------------------------ MelSpectrogram
SPEECH = f32(2, 900)
MEL_CASES = [
    ("defaults_small_fft", dict(fft_length=128, sequence_stride=32, num_mel_bins=20)),
    ("hamming_shorter_frames_linear", dict(fft_length=128, sequence_stride=50,
                                           sequence_length=100, window="hamming",
                                           sampling_rate=8000, num_mel_bins=16, min_freq=50.0,
                                           max_freq=3000, power_to_db=False, mag_exp=1.0)),
    ("top_db_ref_power", dict(fft_length=64, sequence_stride=16, num_mel_bins=8, top_db=20.0,
                              ref_power=2.0, min_power=1e-3)),
    ("no_window", dict(fft_length=64, sequence_stride=16, window=None, num_mel_bins=10)),
]


@pytest.mark.parametrize("name,kw", MEL_CASES, ids=[c[0] for c in MEL_CASES])
def test_mel_spectrogram_matches_keras(name, kw):
    k = keras.layers.MelSpectrogram(**kw)
    t = tnn.layers.MelSpectrogram(**kw)
    want = np.asarray(k(SPEECH))
    got = t(SPEECH)
    assert got.dtype == np.float32
    close(got, want, rtol=1e-5, atol_scale=1e-5, name=name)
    close(t(SPEECH[1]), np.asarray(k(SPEECH[1])), rtol=1e-5, atol_scale=1e-5, name=name)
    assert tuple(t.compute_output_shape((2, 900))) == want.shape
    assert tuple(t.compute_output_shape((900,))) == want.shape[1:]
    inp = tnn.Input((900,))
    model = tnn.Model(inp, t(inp))
    assert model.output_shape == (None,) + want.shape[1:]
    close(model.predict(SPEECH, batch_size=2, verbose=0), want, rtol=1e-5, atol_scale=1e-5,
          name=name)


def test_mel_spectrogram_frames_when_the_stride_divides_length_plus_one():
    """31 samples, stride 16: the centred stft has 2 frames, Keras's eager output too;
    Keras's compute_output_shape says 3 (its formula), tessera's the 2 it computes."""
    k = keras.layers.MelSpectrogram(fft_length=16, sequence_stride=16, num_mel_bins=4)
    t = tnn.layers.MelSpectrogram(fft_length=16, sequence_stride=16, num_mel_bins=4)
    x = f32(2, 31)
    want = np.asarray(k(x))
    assert want.shape == (2, 4, 2)
    close(t(x), want, rtol=1e-5, atol_scale=1e-5)
    assert tuple(t.compute_output_shape((2, 31))) == want.shape
    inp = tnn.Input((31,))
    assert tnn.Model(inp, t(inp)).output_shape == (None, 4, 2)


def test_mel_weight_matrix_and_config_match_keras():
    k = keras.layers.MelSpectrogram(num_mel_bins=24, sampling_rate=22050)
    t = tnn.layers.MelSpectrogram(num_mel_bins=24, sampling_rate=22050)
    want = np.asarray(k.linear_to_mel_weight_matrix(24, 1025, 22050, 20.0, 11025))
    close(tnn.layers.audio.mel_weight_matrix(24, 1025, 22050, 20.0, 11025), want,
          atol_scale=1e-5)
    kc, tc = k.get_config(), t.get_config()
    for key in ("fft_length", "sequence_stride", "sequence_length", "window", "sampling_rate",
                "num_mel_bins", "min_freq", "max_freq", "power_to_db", "top_db", "mag_exp",
                "min_power", "ref_power"):
        assert tc[key] == kc[key], key
    again = tnn.layers.MelSpectrogram.from_config(tc)
    long = f32(1, 2500)
    np.testing.assert_array_equal(again(long), t(long))


def test_mel_spectrogram_errors():
    with pytest.raises(ValueError, match=r"\[MelSpectrogram\] fft_length must be at least "
                                         r"sequence_length"):
        tnn.layers.MelSpectrogram(fft_length=64, sequence_length=128)
    with pytest.raises(ValueError, match=r"\[MelSpectrogram\] window must be 'hann'"):
        tnn.layers.MelSpectrogram(window="blackman")
    with pytest.raises(ValueError, match=r"\[MelSpectrogram\] num_mel_bins must be an int"):
        tnn.layers.MelSpectrogram(num_mel_bins=0)
    with pytest.raises(ValueError, match=r"\[MelSpectrogram\] layer .* takes \(time,\) or"):
        tnn.layers.MelSpectrogram(fft_length=64)(np.ones((2, 3, 200), "float32"))
    with pytest.raises(ValueError, match=r"\[MelSpectrogram\] layer .* needs the time axis's "
                                         r"length inside a model"):
        tnn.layers.MelSpectrogram(fft_length=64)(tnn.Input((None,)))
