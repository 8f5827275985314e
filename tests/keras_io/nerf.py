# Modeled on keras-io examples/vision/nerf.py; written for tessera. Keras 3 form: NeRF. Rays of
# each camera pose computed with `ops` (`ops.meshgrid`, `ops.stack`, `ops.broadcast_to`,
# `ops.linspace`) and Fourier-encoded positions (`ops.sin`/`ops.cos` concatenated) in the data
# pipeline, a keras.utils.PyDataset of (rays, t values) and images for tf.data's map/zip/batch
# (drop_remainder); an 8-layer MLP on `Input((num_pos, 2 * 3 * POS_ENCODE_DIMS + 3))` with a
# `layers.concatenate` skip; volume rendering on the graph's tensors (`ops.reshape` to the fixed
# batch, `ops.sigmoid`, `ops.relu`, `ops.exp`, `ops.cumprod` made exclusive by a shifted
# `ops.concatenate`, `ops.sum`); a `NeRF` model whose overridden `compile(optimizer, loss_fn)`
# makes two `keras.metrics.Mean` trackers given by a `metrics` property; a TrainMonitor
# rendering with `predict` after each epoch; novel views along a spherical path (the pose
# matrices by `ops.cos`/`ops.sin`) rendered with `rand=False`. The example's train_step/test_step
# (tf.GradientTape, `tf.image.psnr`) as `call` rendering the batch and `compute_loss` /
# `compute_metrics` overrides (`ops.psnr`) updating the trackers, as Keras on JAX runs them;
# `ops.cumprod` has no `exclusive` (tf.math.cumprod's). 40 views of a generated scene (a shaded
# sphere of radius 1 at the origin, rendered in NumPy by ray-sphere intersection from poses on
# the example's sphere path) in place of tiny_nerf_data.npz; 16x16 images (100x100), 16 samples
# per ray (32), 4 encoding frequencies (16), 5 epochs (20), 10 novel views (120), GIF by Pillow
# in place of imageio and the mp4.
import os

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt
from PIL import Image

keras.utils.set_random_seed(42)
rng = np.random.default_rng(42)

BATCH_SIZE = 5
NUM_SAMPLES = 16
POS_ENCODE_DIMS = 4
EPOCHS = 5
H = W = 16
focal = np.float32(0.5 * W / np.tan(0.5 * 0.69))  # tiny_nerf's field of view


def get_translation_t(t):
    """Get the translation matrix for movement in t."""
    matrix = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, t], [0, 0, 0, 1]]
    return ops.convert_to_tensor(matrix, dtype="float32")


def get_rotation_phi(phi):
    """Get the rotation matrix for movement in phi."""
    matrix = [[1, 0, 0, 0], [0, ops.cos(phi), -ops.sin(phi), 0],
              [0, ops.sin(phi), ops.cos(phi), 0], [0, 0, 0, 1]]
    return ops.convert_to_tensor(matrix, dtype="float32")


def get_rotation_theta(theta):
    """Get the rotation matrix for movement in theta."""
    matrix = [[ops.cos(theta), 0, -ops.sin(theta), 0], [0, 1, 0, 0],
              [ops.sin(theta), 0, ops.cos(theta), 0], [0, 0, 0, 1]]
    return ops.convert_to_tensor(matrix, dtype="float32")


def pose_spherical(theta, phi, t):
    """The camera to world matrix for theta, phi and t."""
    c2w = get_translation_t(t)
    c2w = get_rotation_phi(phi / 180.0 * np.pi) @ c2w
    c2w = get_rotation_theta(theta / 180.0 * np.pi) @ c2w
    c2w = np.array([[-1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]) @ c2w
    return np.asarray(c2w, dtype="float32")


def get_rays(height, width, focal, pose):
    """Origin points and direction vectors of a pose's rays."""
    i, j = ops.meshgrid(ops.arange(width, dtype="float32"), ops.arange(height, dtype="float32"),
                        indexing="xy")
    transformed_i = (i - width * 0.5) / focal
    transformed_j = (j - height * 0.5) / focal
    directions = ops.stack([transformed_i, -transformed_j, -ops.ones_like(i)], axis=-1)
    camera_matrix = pose[:3, :3]
    height_width_focal = pose[:3, -1]
    transformed_dirs = directions[..., None, :]
    camera_dirs = transformed_dirs * camera_matrix
    ray_directions = ops.sum(camera_dirs, axis=-1)
    ray_origins = ops.broadcast_to(height_width_focal, ops.shape(ray_directions))
    return (ray_origins, ray_directions)


def make_scene(pose):
    """The view of a shaded sphere of radius 1 at the origin from a pose (black elsewhere)."""
    o, d = (np.asarray(a, "float64") for a in get_rays(H, W, focal, pose))
    b = np.sum(o * d, -1)
    c = np.sum(o * o, -1) - 1.0
    a = np.sum(d * d, -1)
    disc = b * b - a * c
    t = (-b - np.sqrt(np.maximum(disc, 0))) / a
    normal = o + t[..., None] * d
    color = np.clip(0.5 + 0.5 * normal * np.array([1.0, 0.6, -0.8]), 0, 1)
    return np.where((disc > 0)[..., None], color, 0.0).astype("float32")


poses = np.stack([pose_spherical(theta, -30.0, 4.0)
                  for theta in rng.uniform(0.0, 360.0, 40)])
images = np.stack([make_scene(p) for p in poses])
(num_images, H, W, _) = images.shape
print("images", images.shape, "poses", poses.shape, "focal", float(focal))

plt.imshow(images[np.random.randint(low=0, high=num_images)])
plt.savefig("nerf_image.png")
plt.close()


def encode_position(x):
    """Fourier features of a position."""
    positions = [x]
    for i in range(POS_ENCODE_DIMS):
        for fn in [ops.sin, ops.cos]:
            positions.append(fn(2.0**i * x))
    return ops.concatenate(positions, axis=-1)


def render_flat_rays(ray_origins, ray_directions, near, far, num_samples, rand=False):
    """The rays' sample points, flattened and encoded, and their t values."""
    t_vals = ops.linspace(near, far, num_samples)
    if rand:
        shape = list(ray_origins.shape[:-1]) + [num_samples]
        noise = np.random.uniform(size=shape).astype("float32") * (far - near) / num_samples
        t_vals = t_vals + noise
    rays = ray_origins[..., None, :] + (ray_directions[..., None, :] * t_vals[..., None])
    rays_flat = ops.reshape(rays, [-1, 3])
    rays_flat = encode_position(rays_flat)
    return (rays_flat, t_vals)


def map_fn(pose):
    (ray_origins, ray_directions) = get_rays(height=H, width=W, focal=focal, pose=pose)
    (rays_flat, t_vals) = render_flat_rays(ray_origins=ray_origins,
                                           ray_directions=ray_directions, near=2.0, far=6.0,
                                           num_samples=NUM_SAMPLES, rand=True)
    return (np.asarray(rays_flat), np.asarray(t_vals))


class RayBatches(keras.utils.PyDataset):
    """((rays_flat, t_vals), images) batches of BATCH_SIZE poses, remainder dropped, shuffled
    each epoch, new ray noise each time (the example's map, zip, shuffle, batch)."""

    def __init__(self, images, poses, **kwargs):
        super().__init__(**kwargs)
        self.images, self.poses = images, poses
        self.order = np.arange(len(images))

    def __len__(self):
        return len(self.images) // BATCH_SIZE

    def __getitem__(self, idx):
        take = self.order[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        rays = [map_fn(p) for p in self.poses[take]]
        return ((np.stack([r[0] for r in rays]), np.stack([r[1] for r in rays])),
                self.images[take])

    def on_epoch_end(self):
        self.order = rng.permutation(len(self.images))


split_index = int(num_images * 0.8)
train_ds = RayBatches(images[:split_index], poses[:split_index])
val_ds = RayBatches(images[split_index:], poses[split_index:])


def get_nerf_model(num_layers, num_pos):
    inputs = keras.Input(shape=(num_pos, 2 * 3 * POS_ENCODE_DIMS + 3))
    x = inputs
    for i in range(num_layers):
        x = layers.Dense(units=64, activation="relu")(x)
        if i % 4 == 0 and i > 0:
            # Inject residual connection.
            x = layers.concatenate([x, inputs], axis=-1)
    outputs = layers.Dense(units=4)(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def exclusive_cumprod(x):
    """tf.math.cumprod(x, axis=-1, exclusive=True)."""
    ones = ops.ones_like(x[..., :1])
    return ops.cumprod(ops.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)


def render_rgb_depth(model, rays_flat, t_vals, rand=True, train=True):
    if train:
        predictions = model(rays_flat)
    else:
        predictions = model.predict(rays_flat, verbose=0)
    predictions = ops.reshape(predictions, (BATCH_SIZE, H, W, NUM_SAMPLES, 4))

    rgb = ops.sigmoid(predictions[..., :-1])
    sigma_a = ops.relu(predictions[..., -1])

    delta = t_vals[..., 1:] - t_vals[..., :-1]
    if rand:
        delta = ops.concatenate(
            [delta, ops.broadcast_to([1e10], (BATCH_SIZE, H, W, 1))], axis=-1)
        alpha = 1.0 - ops.exp(-sigma_a * delta)
    else:
        delta = ops.concatenate([delta, ops.broadcast_to([1e10], (BATCH_SIZE, 1))], axis=-1)
        alpha = 1.0 - ops.exp(-sigma_a * delta[:, None, None, :])

    exp_term = 1.0 - alpha
    epsilon = 1e-10
    transmittance = exclusive_cumprod(exp_term + epsilon)
    weights = alpha * transmittance
    rgb = ops.sum(weights[..., None] * rgb, axis=-2)

    if rand:
        depth_map = ops.sum(weights * t_vals, axis=-1)
    else:
        depth_map = ops.sum(weights * t_vals[:, None, None], axis=-1)
    return (rgb, depth_map)


class NeRF(keras.Model):
    def __init__(self, nerf_model):
        super().__init__()
        self.nerf_model = nerf_model

    def compile(self, optimizer, loss_fn):
        super().compile(optimizer=optimizer)
        self.loss_fn = loss_fn
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.psnr_metric = keras.metrics.Mean(name="psnr")

    def call(self, rays):
        (rays_flat, t_vals) = rays
        rgb, _ = render_rgb_depth(model=self.nerf_model, rays_flat=rays_flat, t_vals=t_vals,
                                  rand=True)
        return rgb

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return self.loss_fn(y, y_pred)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        psnr = ops.psnr(y, y_pred, max_val=1.0)
        self.loss_tracker.update_state(self.loss_fn(y, y_pred))
        self.psnr_metric.update_state(psnr)
        return {"loss": self.loss_tracker.result(), "psnr": self.psnr_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.psnr_metric]


(test_rays_flat, test_t_vals), test_imgs = train_ds[0]
loss_list = []


class TrainMonitor(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        loss = logs["loss"]
        loss_list.append(loss)
        test_recons_images, depth_maps = render_rgb_depth(
            model=self.model.nerf_model, rays_flat=test_rays_flat, t_vals=test_t_vals,
            rand=True, train=False)
        fig, ax = plt.subplots(nrows=1, ncols=3, figsize=(20, 5))
        ax[0].imshow(keras.utils.array_to_img(test_recons_images[0]))
        ax[0].set_title(f"Predicted Image: {epoch:03d}")
        ax[1].imshow(keras.utils.array_to_img(depth_maps[0, ..., None]))
        ax[1].set_title(f"Depth Map: {epoch:03d}")
        ax[2].plot(loss_list)
        ax[2].set_xticks(np.arange(0, EPOCHS + 1, 5.0))
        ax[2].set_title(f"Loss Plot: {epoch:03d}")
        fig.savefig(f"images/{epoch:03d}.png")
        plt.close()


num_pos = H * W * NUM_SAMPLES
nerf_model = get_nerf_model(num_layers=8, num_pos=num_pos)

model = NeRF(nerf_model)
model.compile(optimizer=keras.optimizers.Adam(), loss_fn=keras.losses.MeanSquaredError())

if not os.path.exists("images"):
    os.makedirs("images")

model.fit(train_ds, validation_data=val_ds, batch_size=BATCH_SIZE, epochs=EPOCHS,
          callbacks=[TrainMonitor()])

nerf_model = model.nerf_model
test_recons_images, depth_maps = render_rgb_depth(
    model=nerf_model, rays_flat=test_rays_flat, t_vals=test_t_vals, rand=True, train=False)
print("reconstruction MSE:", float(np.mean((np.asarray(test_recons_images) - test_imgs) ** 2)),
      "- predicting black:", float(np.mean(test_imgs ** 2)))

fig, axes = plt.subplots(nrows=5, ncols=3, figsize=(10, 20))
for ax, ori_img, recons_img, depth_map in zip(axes, test_imgs, test_recons_images, depth_maps):
    ax[0].imshow(keras.utils.array_to_img(ori_img))
    ax[0].set_title("Original")
    ax[1].imshow(keras.utils.array_to_img(recons_img))
    ax[1].set_title("Reconstructed")
    ax[2].imshow(keras.utils.array_to_img(np.asarray(depth_map)[..., None]), cmap="inferno")
    ax[2].set_title("Depth Map")
plt.savefig("nerf_reconstructions.png")
plt.close()

rgb_frames = []
batch_flat = []
batch_t = []
for index, theta in enumerate(np.linspace(0.0, 360.0, 11, endpoint=False)):
    c2w = pose_spherical(theta, -30.0, 4.0)
    ray_oris, ray_dirs = get_rays(H, W, focal, c2w)
    rays_flat, t_vals = render_flat_rays(ray_oris, ray_dirs, near=2.0, far=6.0,
                                         num_samples=NUM_SAMPLES, rand=False)
    if index % BATCH_SIZE == 0 and index > 0:
        batched_flat = ops.stack(batch_flat, axis=0)
        batch_flat = [rays_flat]
        batched_t = ops.stack(batch_t, axis=0)
        batch_t = [t_vals]
        rgb, _ = render_rgb_depth(nerf_model, batched_flat, batched_t, rand=False, train=False)
        temp_rgb = [np.clip(255 * np.asarray(img), 0.0, 255.0).astype(np.uint8) for img in rgb]
        rgb_frames = rgb_frames + temp_rgb
    else:
        batch_flat.append(rays_flat)
        batch_t.append(t_vals)

frames = [Image.fromarray(f) for f in rgb_frames]
frames[0].save("rgb_video.gif", save_all=True, append_images=frames[1:], duration=33)
print("novel views:", len(rgb_frames))
