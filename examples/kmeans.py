"""k-means clustering of three generated blobs of points in the plane, in
plain NumPy, run on tessera by @tessera.jit (a port of examples/kmeans.tsl).

run: python examples/kmeans.py [points_per_blob] [iterations]
"""

import sys

import numpy as np

import tessera


@tessera.jit
def kmeans(points, initial, iterations):
    k = initial.shape[0]
    centroids = initial
    for _ in range(iterations):
        # Squared distance of every point to every centroid: (n, k).
        d2 = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        labels = np.argmin(d2, axis=1)
        # Each centroid moves to the mean of its points (one-hot matrix product).
        member = (labels[:, None] == np.arange(k)).astype(np.float64)
        centroids = (member.T @ points) / member.sum(axis=0)[:, None]
    return centroids


def make_blobs(per_blob, seed=11):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 6.0], [-6.0, 6.0]])
    return np.concatenate([rng.normal(size=(per_blob, 2)) + c for c in centers])


def main(per_blob=500, iterations=10):
    points = make_blobs(per_blob)
    # Start from one point of each blob.
    initial = points[[0, per_blob, 2 * per_blob]]
    c = kmeans(points, initial, iterations)
    # Sort centroids by x so the output does not depend on the start.
    result = c[np.argsort(c[:, 0])]
    print("centroids:")
    print(result)
    return result


if __name__ == "__main__":
    main(*[int(a) for a in sys.argv[1:]])
