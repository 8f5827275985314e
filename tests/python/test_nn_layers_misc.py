"""HashedCrossing and SpectralNormalization against Keras 3 (on JAX where Keras
runs them; HashedCrossing needs TensorFlow in Keras, so its bins are checked
against the values Keras's own docs and tests give)."""

import numpy as np
import pytest

import tessera.nn as nn


def test_hashed_crossing_bins_are_keras():
    # keras/src/layers/preprocessing/hashed_crossing_test.py's values
    feat1 = np.array(["A", "B", "A", "B", "A"])
    feat2 = np.array([101, 101, 101, 102, 102])
    out = nn.layers.HashedCrossing(num_bins=5)((feat1, feat2))
    assert out.dtype == np.int64 and out.tolist() == [1, 4, 1, 1, 3]
    hot = nn.layers.HashedCrossing(num_bins=5, output_mode="one_hot")((feat1, feat2))
    assert hot.dtype == np.float32 and hot.shape == (5, 5)
    np.testing.assert_array_equal(hot, np.eye(5, dtype=np.float32)[[1, 4, 1, 1, 3]])
    assert int(nn.layers.HashedCrossing(num_bins=10)((np.array("A"), np.array(101)))) == 1
    # shapes and dtypes as Keras's: (batch, 1) kept, a scalar stays a scalar
    col = nn.layers.HashedCrossing(5, dtype="int32")((feat1[:, None], feat2[:, None]))
    assert col.shape == (5, 1) and col.dtype == np.int32 and col[:, 0].tolist() == out.tolist()
    assert nn.layers.HashedCrossing(5, output_mode="one_hot")(
        (np.array("A"), np.array(101))).shape == (5,)
    # order matters (a cross is not symmetric), three features chain
    assert nn.layers.HashedCrossing(1000)((feat2, feat2, feat2)).shape == (5,)
    assert nn.layers.HashedCrossing(2**31 - 1)((feat1, feat2)).tolist() != \
        nn.layers.HashedCrossing(2**31 - 1)((feat2, feat1)).tolist()


def test_hashed_crossing_errors_name_the_layer():
    layer = nn.layers.HashedCrossing(num_bins=10)
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] must be called on a list or tuple"):
        layer(np.array(1))
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] must be called on at least two"):
        layer([np.array(1)])
    with pytest.raises(ValueError, match=r"shape \(\), \(batch_size,\) or \(batch_size, 1\), "
                                         r"got \(1, 1, 1\)"):
        layer((np.ones((1, 1, 1), int), np.ones((1, 1, 1), int)))
    with pytest.raises(ValueError, match=r"integer or string dtype, got \['float64'"):
        layer((np.array([1.0]), np.array([1.0])))
    with pytest.raises(ValueError, match=r"the same shape"):
        layer((np.array([1, 2]), np.array([1])))
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] num_bins must be a positive int"):
        nn.layers.HashedCrossing(0)
    with pytest.raises(ValueError, match=r"output_mode"):
        nn.layers.HashedCrossing(4, output_mode="multi_hot")
    with pytest.raises(TypeError, match=r"\[HashedCrossing\] .* preprocessing layers run eagerly"):
        x = nn.Input((1,), dtype="int64")
        layer((x, x))
