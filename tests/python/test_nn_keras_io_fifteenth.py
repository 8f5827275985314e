"""Features met by the keras-io scripts of issue 30's fifteenth pass (tests/keras_io:
speaker_recognition_using_cnn, packaging_keras_models_for_wide_distribution, ...): Keras 3 on
JAX with the same weights and data where Keras runs them, tf.data's documented meaning for
`tessera.data.Dataset` (TensorFlow is not installed here)."""

import numpy as np
import pytest

import tessera.nn as tn
from tessera.data import Dataset
from test_nn_keras_io_ninth import _same_weights  # the same weights given to both

RNG = np.random.default_rng(0)


# ------------------- packaging_keras_models_for_wide_distribution: tf.data's order of calls
def _firsts(ds, epochs):
    """The first label of every batch, per epoch (a repeated dataset: one iterator)."""
    it = iter(ds)
    per = ds.num_batches() if hasattr(ds, "num_batches") else None
    return [[int(next(it)[1][0]) for _ in range(per)] for _ in range(epochs)]


def _batched(n=40, b=8):
    x = np.arange(n, dtype="float32")[:, None]
    return Dataset.from_tensor_slices((x, np.arange(n))).batch(b)


def test_shuffle_after_batch_shuffles_whole_batches():
    ds = _batched().cache().shuffle(5000).repeat()
    epochs = _firsts(ds, 3)
    for firsts in epochs:  # every batch once, each still 8 consecutive rows
        assert sorted(firsts) == [0, 8, 16, 24, 32]
    assert len({tuple(f) for f in epochs}) > 1  # reshuffled each epoch (tf.data's default)
    for xb, yb in _batched().shuffle(3):
        np.testing.assert_array_equal(yb, np.arange(yb[0], yb[0] + 8))
        np.testing.assert_array_equal(xb[:, 0], yb)


def test_shuffle_without_reshuffling_repeats_the_first_order():
    again = _firsts(_batched().shuffle(10, seed=3, reshuffle_each_iteration=False).repeat(), 3)
    assert again[0] == again[1] == again[2] and sorted(again[0]) == [0, 8, 16, 24, 32]
    x = np.arange(30)
    rows = Dataset.from_tensor_slices(x).shuffle(reshuffle_each_iteration=False).batch(30)
    first = [np.asarray(b).tolist() for b in rows.repeat(2)]
    assert first[0] == first[1] and sorted(first[0]) == x.tolist()
    rows = Dataset.from_tensor_slices(x).shuffle(reshuffle_each_iteration=True).batch(30)
    second = [np.asarray(b).tolist() for b in rows.repeat(2)]
    assert second[0] != second[1]


def test_shuffle_arguments_are_checked():
    with pytest.raises(ValueError, match=r"\[Dataset.shuffle\] after batch\(\) shuffle needs "
                                         r"buffer_size"):
        _batched().shuffle()
    with pytest.raises(TypeError, match=r"\[Dataset.shuffle\] reshuffle_each_iteration must "
                                        r"be a bool or None, got str"):
        _batched().shuffle(4, reshuffle_each_iteration="yes")
    with pytest.raises(TypeError, match="reshuffle_each_iteration must be a bool"):
        Dataset.from_tensor_slices(np.arange(4)).shuffle(reshuffle_each_iteration=1)


def test_map_after_repeat_maps_every_pass():
    def label_is_small(x, y):
        return x, (y < 8).astype("uint8")

    after = _batched().repeat(2).map(label_is_small)
    before = _batched().map(label_is_small).repeat(2)
    got, want = list(after), list(before)
    assert len(got) == len(want) == 10
    for (ga, gb), (wa, wb) in zip(got, want):
        np.testing.assert_array_equal(ga, wa)
        np.testing.assert_array_equal(gb, wb)
        assert gb.dtype == np.uint8
    assert after.cardinality() == 10
    endless = _batched().repeat().map(lambda x, y: ({"image": x}, y))
    it = iter(endless)
    firsts = [int(next(it)[1][0]) for _ in range(12)]  # past the first pass
    assert firsts == [0, 8, 16, 24, 32] * 2 + [0, 8]
    assert endless.cardinality() == -1


# ------------- packaging_keras_models_for_wide_distribution: functional subclassing, surgery
def _mnist_model(lib, as_dict=False):
    class MnistModel(lib.Model):
        def __init__(self, **kwargs):
            image = lib.layers.Input(shape=(None, None, 1), dtype="uint8", name="image")
            inputs = {"image": image} if as_dict else image
            y = lib.layers.Rescaling(1 / 255.0)(image)
            y = lib.layers.Conv2D(4, 3, padding="same", activation="relu")(y)
            y = lib.layers.Conv2D(6, 6, padding="same", activation="relu", strides=2)(y)
            y = lib.layers.GlobalAveragePooling2D()(y)
            y = lib.layers.Dense(5, activation="relu")(y)
            outputs = lib.layers.Dense(3, activation="softmax", name="classification_head")(y)
            super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    return MnistModel()


def _surgery(lib, model):
    y = model.get_layer("classification_head").input
    out = lib.layers.Dense(1, activation="sigmoid", name="binary_head")(y)
    return lib.Model(model.input, out)


def test_functional_subclass_on_uint8_images_and_surgery(keras):
    x = RNG.integers(0, 256, (4, 12, 10, 1)).astype("uint8")
    for as_dict in (False, True):
        tm, km = _mnist_model(tn, as_dict), _mnist_model(keras, as_dict)
        assert type(tm).__name__ == type(km).__name__ == "MnistModel"
        assert [l.name.split("_")[0] for l in tm.layers] == \
            [l.name.split("_")[0] for l in km.layers]
        _same_weights(tm, km)
        feed = {"image": x} if as_dict else x
        np.testing.assert_allclose(tm.predict(feed, verbose=0), km.predict(feed, verbose=0),
                                   rtol=2e-4, atol=2e-5)
        tb, kb = _surgery(tn, tm), _surgery(keras, km)
        assert len(tb.layers) == len(kb.layers)
        _same_weights(tb, kb)
        np.testing.assert_allclose(tb.predict(feed, verbose=0), kb.predict(feed, verbose=0),
                                   rtol=2e-4, atol=2e-5)


# ------------- transformer_asr: a compute_loss override of token ids, a (batch, steps) mask
def _seq2seq(lib):
    class Tagger(lib.Model):
        """Two inputs (features and the shifted tokens), logits per step; compute_loss
        one-hot encodes the integer targets and masks their padding (id 0)."""

        def __init__(self):
            super().__init__()
            self.emb = lib.layers.Embedding(6, 4)
            self.proj = lib.layers.Dense(4)
            self.out = lib.layers.Dense(6)

        def call(self, inputs):
            return self.out(self.proj(inputs[0]) + self.emb(inputs[1]))

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
            one_hot = lib.ops.one_hot(y, 6)
            mask = lib.ops.logical_not(lib.ops.equal(y, 0))
            return super().compute_loss(x, one_hot, y_pred, sample_weight=mask,
                                        training=training)

    return Tagger()


def _token_batches(lib, n=24, steps=5, bs=8):
    rng = np.random.default_rng(3)
    feats = rng.normal(size=(n, steps, 3)).astype("float32")
    tokens = rng.integers(1, 6, (n, steps + 1)).astype("int32")
    tokens[:, -2:] *= rng.random((n, 2)) > 0.5  # padding at the end of some
    (src, dec_in, dec_out) = feats, tokens[:, :-1], tokens[:, 1:]

    class Batches(lib.utils.PyDataset):
        def __len__(self):
            return n // bs

        def __getitem__(self, i):
            rows = slice(i * bs, (i + 1) * bs)
            return (src[rows], dec_in[rows]), dec_out[rows]

    return Batches(), (src, dec_in), dec_out


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_compute_loss_override_of_token_ids_with_a_step_mask(keras, smoothing):
    losses = []
    for lib in (tn, keras):
        ds, x, y = _token_batches(lib)
        m = _seq2seq(lib)
        m(list(x))
        losses.append(m)
    tm, km = losses
    _same_weights(tm, km)
    for lib, m in ((tn, tm), (keras, km)):
        m.compile(optimizer=lib.optimizers.SGD(0.5), loss=lib.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=smoothing))
    ds_t, x, y = _token_batches(tn)
    ds_k, _, _ = _token_batches(keras)
    et = tm.evaluate(list(x), y, batch_size=8, verbose=0)
    ek = km.evaluate(list(x), y, batch_size=8, verbose=0)
    np.testing.assert_allclose(et, ek, rtol=1e-5)
    ht = tm.fit(ds_t, epochs=2, shuffle=False, verbose=0).history["loss"]
    hk = km.fit(ds_k, epochs=2, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ht, hk, rtol=2e-4)
    for a, b in zip(tm.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-4, atol=2e-5)


def test_unbuilt_subclassed_model_fits_a_pydataset_of_input_pairs(keras):
    """fit builds the model from the first batch's (source, target_in) pair, as Keras's
    first step does; its batches were taken as given and failed in NumPy."""
    ds_t, x, y = _token_batches(tn)
    ds_k, _, _ = _token_batches(keras)
    tm, km = _seq2seq(tn), _seq2seq(keras)
    for lib, m in ((tn, tm), (keras, km)):
        m.compile(optimizer="adam", loss=lib.losses.CategoricalCrossentropy(from_logits=True))
    ht = tm.fit(ds_t, epochs=1, verbose=0).history["loss"]
    km.fit(ds_k, epochs=1, verbose=0)
    assert tm.built and len(tm.get_weights()) == len(km.get_weights()) == 5
    assert [w.shape for w in tm.get_weights()] == [tuple(w.shape) for w in km.get_weights()]
    assert np.isfinite(ht[0])
    assert tm.predict(ds_t, verbose=0).shape == km.predict(ds_k, verbose=0).shape == (24, 5, 6)
    assert np.isfinite(tm.evaluate(ds_t, verbose=0))
