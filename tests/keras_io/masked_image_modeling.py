# Modeled on keras-io examples/vision/masked_image_modeling.py; written for tessera. Keras 3
# form: a masked autoencoder. Augmentation Sequentials (Rescaling, Resizing, RandomCrop,
# RandomFlip) called inside the model and eagerly; a `Patches` layer of
# `ops.image.extract_patches` (for tf.image.extract_patches) and a `Reshape` made in `__init__`,
# with eager helpers that show and stitch the patches back (`ops.split`, `ops.unstack`,
# `ops.concatenate`); a `PatchEncoder` whose mask token is a `keras.Variable` made in
# `__init__`, whose projection and position `Embedding` are made in `build` from the input
# shape, tiling positions by the symbolic batch size (`ops.tile`), masking by `ops.argsort` of
# `keras.random.uniform` draws (a SeedGenerator: Keras on JAX requires one), gathering with
# `ops.take_along_axis` (for `tf.gather(batch_dims=1)`) and repeating the mask token by the
# batch size (`ops.repeat`), returning five tensors, and a `downstream` flag switched after
# training; a ViT encoder on `Input((None, dim))` and a decoder of Flatten, a sigmoid Dense and
# Reshape; a `WarmUpCosine` LearningRateSchedule subclass (`ops.cos`, `ops.where`) called
# eagerly for its plot and given to AdamW, then to SGD(momentum); a `TrainMonitor` callback whose
# `__init__` skips the base class's, calling the model's parts eagerly; a linear probe Sequential
# reusing the trained patch layer, patch encoder and encoder, frozen but for its last layer.
# The example's train_step/test_step (tf.GradientTape, `self.compute_loss(y=, y_pred=)`) as
# `call` returning the masked patches and their reconstruction (the augmentation picked by
# `training`), `compute_loss`/`compute_metrics` overrides calling the base class's on them,
# fit on images alone. 640 + 128 + 128 generated 32x32 images of 10 classes (a tint and a bar at
# the class's height) in place of CIFAR-10, keras.utils.PyDatasets for tf.data (the probe's
# augmentation called on each batch as the example's map); image size 32 (48), patches of 8 (6),
# encoder 32 wide, 2 heads, 2 layers (128, 4, 6), decoder 16 wide, 1 layer (64, 2), batches of
# 64 (256), 3 + 3 epochs (100 + 50).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

SEED = 42
keras.utils.set_random_seed(SEED)
rng = np.random.default_rng(SEED)

BUFFER_SIZE = 1024
BATCH_SIZE = 64
INPUT_SHAPE = (32, 32, 3)
NUM_CLASSES = 10

LEARNING_RATE = 5e-3
WEIGHT_DECAY = 1e-4
EPOCHS = 3

IMAGE_SIZE = 32  # We will resize input images to this size.
PATCH_SIZE = 8  # Size of the patches to be extracted from the input images.
NUM_PATCHES = (IMAGE_SIZE // PATCH_SIZE) ** 2
MASK_PROPORTION = 0.75  # We have found 75% masking to give us the best results.

LAYER_NORM_EPS = 1e-6
ENC_PROJECTION_DIM = 32
DEC_PROJECTION_DIM = 16
ENC_NUM_HEADS = 2
ENC_LAYERS = 2
DEC_NUM_HEADS = 2
DEC_LAYERS = 1
ENC_TRANSFORMER_UNITS = [ENC_PROJECTION_DIM * 2, ENC_PROJECTION_DIM]
DEC_TRANSFORMER_UNITS = [DEC_PROJECTION_DIM * 2, DEC_PROJECTION_DIM]

TINTS = rng.uniform(40, 200, (10, 3))


def make(n):
    x = rng.uniform(0, 90, (n, 32, 32, 3))
    y = rng.integers(0, 10, (n, 1))
    for img, (c,) in zip(x, y):
        img += TINTS[c] * 0.6
        img[3 * c:3 * c + 3, 4:28] = 255
    return np.clip(x, 0, 255).astype("uint8"), y.astype("uint8")


(x_train, y_train), (x_val, y_val), (x_test, y_test) = make(640), make(128), make(128)
print(f"Training samples: {len(x_train)}")
print(f"Validation samples: {len(x_val)}")
print(f"Testing samples: {len(x_test)}")


class Batches(keras.utils.PyDataset):
    """Batches of an array (optionally with labels), shuffled each epoch when asked, mapped by
    `fn` (the example's tf.data from_tensor_slices, shuffle, batch, map)."""

    def __init__(self, x, y=None, shuffle=False, fn=None, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.shuffle, self.fn = x, y, shuffle, fn
        self.order = np.arange(len(x))

    def __len__(self):
        return -(-len(self.x) // BATCH_SIZE)

    def __getitem__(self, idx):
        take = self.order[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        x = self.x[take].astype("float32")
        if self.fn is not None:
            x = np.asarray(self.fn(x))
        return x if self.y is None else (x, self.y[take])

    def on_epoch_end(self):
        if self.shuffle:
            self.order = rng.permutation(len(self.x))


train_ds = Batches(x_train, shuffle=True)
val_ds = Batches(x_val)
test_ds = Batches(x_test)


def get_train_augmentation_model():
    model = keras.Sequential(
        [
            layers.Rescaling(1 / 255.0),
            layers.Resizing(INPUT_SHAPE[0] + 8, INPUT_SHAPE[0] + 8),
            layers.RandomCrop(IMAGE_SIZE, IMAGE_SIZE),
            layers.RandomFlip("horizontal"),
        ],
        name="train_data_augmentation",
    )
    return model


def get_test_augmentation_model():
    model = keras.Sequential(
        [layers.Rescaling(1 / 255.0), layers.Resizing(IMAGE_SIZE, IMAGE_SIZE)],
        name="test_data_augmentation",
    )
    return model


class Patches(layers.Layer):
    def __init__(self, patch_size=PATCH_SIZE, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        # Assuming the image has three channels each patch would be of size
        # (patch_size, patch_size, 3).
        self.resize = layers.Reshape((-1, patch_size * patch_size * 3))

    def call(self, images):
        patches = ops.image.extract_patches(images, size=self.patch_size, padding="valid")
        patches = self.resize(patches)
        return patches

    def show_patched_image(self, images, patches):
        idx = np.random.choice(patches.shape[0])
        print(f"Index selected: {idx}.")
        plt.figure(figsize=(4, 4))
        plt.imshow(keras.utils.array_to_img(images[idx]))
        plt.axis("off")
        plt.savefig("mim_image.png")
        plt.close()
        n = int(np.sqrt(patches.shape[1]))
        plt.figure(figsize=(4, 4))
        for i, patch in enumerate(patches[idx]):
            ax = plt.subplot(n, n, i + 1)
            patch_img = ops.reshape(patch, (self.patch_size, self.patch_size, 3))
            plt.imshow(keras.utils.img_to_array(patch_img))
            plt.axis("off")
        plt.savefig("mim_patches.png")
        plt.close()
        return idx

    def reconstruct_from_patch(self, patch):
        # This utility function takes patches from a *single* image and
        # reconstructs it back into the image. This is useful for the train
        # monitor callback.
        num_patches = patch.shape[0]
        n = int(np.sqrt(num_patches))
        patch = ops.reshape(patch, (num_patches, self.patch_size, self.patch_size, 3))
        rows = ops.split(patch, n, axis=0)
        rows = [ops.concatenate(ops.unstack(x), axis=1) for x in rows]
        reconstructed = ops.concatenate(rows, axis=0)
        return reconstructed


image_batch = train_ds[0]
augmentation_model = get_train_augmentation_model()
augmented_images = augmentation_model(image_batch)
patch_layer = Patches()
patches = patch_layer(images=augmented_images)
random_index = patch_layer.show_patched_image(images=augmented_images, patches=patches)
image = patch_layer.reconstruct_from_patch(patches[random_index])
# Stitching the patches back gives the image they were cut from.
np.testing.assert_allclose(np.asarray(image), np.asarray(augmented_images[random_index]),
                           rtol=1e-6, atol=1e-6)
plt.imshow(np.asarray(image))
plt.axis("off")
plt.savefig("mim_reconstructed.png")
plt.close()


class PatchEncoder(layers.Layer):
    def __init__(self, patch_size=PATCH_SIZE, projection_dim=ENC_PROJECTION_DIM,
                 mask_proportion=MASK_PROPORTION, downstream=False, **kwargs):
        super().__init__(**kwargs)
        self.patch_size = patch_size
        self.projection_dim = projection_dim
        self.mask_proportion = mask_proportion
        self.downstream = downstream
        self.seed_generator = keras.random.SeedGenerator(SEED)
        # This is a trainable mask token initialized randomly from a normal distribution.
        self.mask_token = keras.Variable(
            keras.random.normal([1, patch_size * patch_size * 3]), trainable=True)

    def build(self, input_shape):
        (_, self.num_patches, self.patch_area) = input_shape
        # Create the projection layer for the patches.
        self.projection = layers.Dense(units=self.projection_dim)
        # Create the positional embedding layer.
        self.position_embedding = layers.Embedding(input_dim=self.num_patches,
                                                   output_dim=self.projection_dim)
        # Number of patches that will be masked.
        self.num_mask = int(self.mask_proportion * self.num_patches)

    def call(self, patches):
        # Get the positional embeddings.
        batch_size = ops.shape(patches)[0]
        positions = ops.arange(start=0, stop=self.num_patches, step=1)
        pos_embeddings = self.position_embedding(positions[None, ...])
        pos_embeddings = ops.tile(pos_embeddings, [batch_size, 1, 1])  # (B, patches, dim)
        # Embed the patches.
        patch_embeddings = self.projection(patches) + pos_embeddings  # (B, patches, dim)
        if self.downstream:
            return patch_embeddings
        mask_indices, unmask_indices = self.get_random_indices(batch_size)
        # The encoder input is the unmasked patch embeddings. Here we gather
        # all the patches that should be unmasked.
        unmasked_embeddings = ops.take_along_axis(
            patch_embeddings, unmask_indices[..., None], axis=1)  # (B, unmasked, dim)
        # Get the unmasked and masked position embeddings. We will need them
        # for the decoder.
        unmasked_positions = ops.take_along_axis(pos_embeddings, unmask_indices[..., None],
                                                 axis=1)
        masked_positions = ops.take_along_axis(pos_embeddings, mask_indices[..., None], axis=1)
        # Repeat the mask token number of mask times.
        # Mask tokens replace the masks of the image.
        mask_tokens = ops.repeat(self.mask_token, repeats=self.num_mask, axis=0)
        mask_tokens = ops.repeat(mask_tokens[None, ...], repeats=batch_size, axis=0)
        # Get the masked embeddings for the tokens.
        masked_embeddings = self.projection(mask_tokens) + masked_positions
        return (
            unmasked_embeddings,  # Input to the encoder.
            masked_embeddings,  # First part of input to the decoder.
            unmasked_positions,  # Added to the encoder outputs.
            mask_indices,  # The indices that were masked.
            unmask_indices,  # The indices that were unmaksed.
        )

    def get_random_indices(self, batch_size):
        # Create random indices from a uniform distribution and then split
        # it into mask and unmask indices.
        rand_indices = ops.argsort(
            keras.random.uniform(shape=(batch_size, self.num_patches),
                                 seed=self.seed_generator), axis=-1)
        mask_indices = rand_indices[:, : self.num_mask]
        unmask_indices = rand_indices[:, self.num_mask:]
        return mask_indices, unmask_indices

    def generate_masked_image(self, patches, unmask_indices):
        # Choose a random patch and it corresponding unmask index.
        idx = np.random.choice(patches.shape[0])
        patch = np.asarray(patches[idx])
        unmask_index = np.asarray(unmask_indices[idx])
        # Build a numpy array of same shape as patch.
        new_patch = np.zeros_like(patch)
        # Iterate of the new_patch and plug the unmasked patches.
        for i in range(unmask_index.shape[0]):
            new_patch[unmask_index[i]] = patch[unmask_index[i]]
        return new_patch, idx


patch_encoder = PatchEncoder()
(unmasked_embeddings, masked_embeddings, unmasked_positions, mask_indices,
 unmask_indices) = patch_encoder(patches=patches)
print("unmasked", tuple(unmasked_embeddings.shape), "masked", tuple(masked_embeddings.shape))
# Every patch is either masked or not, once.
both = np.sort(np.concatenate([np.asarray(mask_indices), np.asarray(unmask_indices)], axis=1))
assert (both == np.arange(NUM_PATCHES)).all()

new_patch, random_index = patch_encoder.generate_masked_image(patches, unmask_indices)
plt.figure(figsize=(10, 10))
plt.subplot(1, 2, 1)
img = patch_layer.reconstruct_from_patch(new_patch)
plt.imshow(keras.utils.array_to_img(img))
plt.axis("off")
plt.title("Masked")
plt.subplot(1, 2, 2)
img = augmented_images[random_index]
plt.imshow(keras.utils.array_to_img(img))
plt.axis("off")
plt.title("Original")
plt.savefig("mim_masked.png")
plt.close()


def mlp(x, dropout_rate, hidden_units):
    for units in hidden_units:
        x = layers.Dense(units, activation=keras.activations.gelu)(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def create_encoder(num_heads=ENC_NUM_HEADS, num_layers=ENC_LAYERS):
    inputs = layers.Input((None, ENC_PROJECTION_DIM))
    x = inputs
    for _ in range(num_layers):
        x1 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=ENC_PROJECTION_DIM, dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, x])
        x3 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x2)
        x3 = mlp(x3, hidden_units=ENC_TRANSFORMER_UNITS, dropout_rate=0.1)
        x = layers.Add()([x3, x2])
    outputs = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x)
    return keras.Model(inputs, outputs, name="mae_encoder")


def create_decoder(num_layers=DEC_LAYERS, num_heads=DEC_NUM_HEADS, image_size=IMAGE_SIZE):
    inputs = layers.Input((NUM_PATCHES, ENC_PROJECTION_DIM))
    x = layers.Dense(DEC_PROJECTION_DIM)(inputs)
    for _ in range(num_layers):
        x1 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=DEC_PROJECTION_DIM, dropout=0.1)(x1, x1)
        x2 = layers.Add()([attention_output, x])
        x3 = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x2)
        x3 = mlp(x3, hidden_units=DEC_TRANSFORMER_UNITS, dropout_rate=0.1)
        x = layers.Add()([x3, x2])
    x = layers.LayerNormalization(epsilon=LAYER_NORM_EPS)(x)
    x = layers.Flatten()(x)
    pre_final = layers.Dense(units=image_size * image_size * 3, activation="sigmoid")(x)
    outputs = layers.Reshape((image_size, image_size, 3))(pre_final)
    return keras.Model(inputs, outputs, name="mae_decoder")


class MaskedAutoencoder(keras.Model):
    def __init__(self, train_augmentation_model, test_augmentation_model, patch_layer,
                 patch_encoder, encoder, decoder, **kwargs):
        super().__init__(**kwargs)
        self.train_augmentation_model = train_augmentation_model
        self.test_augmentation_model = test_augmentation_model
        self.patch_layer = patch_layer
        self.patch_encoder = patch_encoder
        self.encoder = encoder
        self.decoder = decoder

    def call(self, images, training=False):
        # The example's calculate_loss, up to the loss: the masked patches and their
        # reconstruction.
        if training:
            augmented_images = self.train_augmentation_model(images)
        else:
            augmented_images = self.test_augmentation_model(images)
        patches = self.patch_layer(augmented_images)
        (unmasked_embeddings, masked_embeddings, unmasked_positions, mask_indices,
         unmask_indices) = self.patch_encoder(patches)
        encoder_outputs = self.encoder(unmasked_embeddings)
        encoder_outputs = encoder_outputs + unmasked_positions
        decoder_inputs = ops.concatenate([encoder_outputs, masked_embeddings], axis=1)
        decoder_outputs = self.decoder(decoder_inputs)
        decoder_patches = self.patch_layer(decoder_outputs)
        loss_patch = ops.take_along_axis(patches, mask_indices[..., None], axis=1)
        loss_output = ops.take_along_axis(decoder_patches, mask_indices[..., None], axis=1)
        return loss_patch, loss_output

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss_patch, loss_output = y_pred
        return super().compute_loss(x=x, y=loss_patch, y_pred=loss_output,
                                    sample_weight=sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        loss_patch, loss_output = y_pred
        return super().compute_metrics(x, loss_patch, loss_output, sample_weight)


train_augmentation_model = get_train_augmentation_model()
test_augmentation_model = get_test_augmentation_model()
patch_layer = Patches()
patch_encoder = PatchEncoder()
encoder = create_encoder()
decoder = create_decoder()

mae_model = MaskedAutoencoder(
    train_augmentation_model=train_augmentation_model,
    test_augmentation_model=test_augmentation_model,
    patch_layer=patch_layer,
    patch_encoder=patch_encoder,
    encoder=encoder,
    decoder=decoder,
)

test_images = test_ds[0]


class TrainMonitor(keras.callbacks.Callback):
    def __init__(self, epoch_interval=None):
        self.epoch_interval = epoch_interval

    def on_epoch_end(self, epoch, logs=None):
        if self.epoch_interval and epoch % self.epoch_interval == 0:
            test_augmented_images = self.model.test_augmentation_model(test_images)
            test_patches = self.model.patch_layer(test_augmented_images)
            (test_unmasked_embeddings, test_masked_embeddings, test_unmasked_positions,
             test_mask_indices, test_unmask_indices) = self.model.patch_encoder(test_patches)
            test_encoder_outputs = self.model.encoder(test_unmasked_embeddings)
            test_encoder_outputs = test_encoder_outputs + test_unmasked_positions
            test_decoder_inputs = ops.concatenate(
                [test_encoder_outputs, test_masked_embeddings], axis=1)
            test_decoder_outputs = self.model.decoder(test_decoder_inputs)

            # Show a maksed patch image.
            test_masked_patch, idx = self.model.patch_encoder.generate_masked_image(
                test_patches, test_unmask_indices)
            print(f"\nIdx chosen: {idx}")
            original_image = np.asarray(test_augmented_images[idx])
            masked_image = self.model.patch_layer.reconstruct_from_patch(test_masked_patch)
            reconstructed_image = np.asarray(test_decoder_outputs[idx])

            fig, ax = plt.subplots(nrows=1, ncols=3, figsize=(15, 5))
            ax[0].imshow(original_image)
            ax[0].set_title(f"Original: {epoch:03d}")
            ax[1].imshow(np.asarray(masked_image))
            ax[1].set_title(f"Masked: {epoch:03d}")
            ax[2].imshow(reconstructed_image)
            ax[2].set_title(f"Resonstructed: {epoch:03d}")
            plt.savefig(f"mim_monitor_{epoch}.png")
            plt.close()


class WarmUpCosine(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, learning_rate_base, total_steps, warmup_learning_rate, warmup_steps):
        super().__init__()
        self.learning_rate_base = learning_rate_base
        self.total_steps = total_steps
        self.warmup_learning_rate = warmup_learning_rate
        self.warmup_steps = warmup_steps
        self.pi = np.pi

    def __call__(self, step):
        if self.total_steps < self.warmup_steps:
            raise ValueError("Total_steps must be larger or equal to warmup_steps.")
        cos_annealed_lr = ops.cos(
            self.pi * (ops.cast(step, "float32") - self.warmup_steps)
            / float(self.total_steps - self.warmup_steps))
        learning_rate = 0.5 * self.learning_rate_base * (1 + cos_annealed_lr)
        if self.warmup_steps > 0:
            if self.learning_rate_base < self.warmup_learning_rate:
                raise ValueError("Learning_rate_base must be larger or equal to "
                                 "warmup_learning_rate.")
            slope = (self.learning_rate_base - self.warmup_learning_rate) / self.warmup_steps
            warmup_rate = slope * ops.cast(step, "float32") + self.warmup_learning_rate
            learning_rate = ops.where(step < self.warmup_steps, warmup_rate, learning_rate)
        return ops.where(step > self.total_steps, 0.0, learning_rate)


total_steps = int((len(x_train) / BATCH_SIZE) * EPOCHS)
warmup_epoch_percentage = 0.15
warmup_steps = int(total_steps * warmup_epoch_percentage)
scheduled_lrs = WarmUpCosine(learning_rate_base=LEARNING_RATE, total_steps=total_steps,
                             warmup_learning_rate=0.0, warmup_steps=warmup_steps)

lrs = [float(scheduled_lrs(step)) for step in range(total_steps)]
plt.plot(lrs)
plt.xlabel("Step", fontsize=14)
plt.ylabel("LR", fontsize=14)
plt.savefig("mim_lrs.png")
plt.close()

train_callbacks = [TrainMonitor(epoch_interval=2)]
optimizer = keras.optimizers.AdamW(learning_rate=scheduled_lrs, weight_decay=WEIGHT_DECAY)
mae_model.compile(optimizer=optimizer, loss=keras.losses.MeanSquaredError(), metrics=["mae"])
history = mae_model.fit(train_ds, epochs=EPOCHS, validation_data=val_ds,
                        callbacks=train_callbacks)

loss, mae = mae_model.evaluate(test_ds)
print(f"Loss: {loss:.2f}")
print(f"MAE: {mae:.2f}")

# Extract the augmentation layers.
train_augmentation_model = mae_model.train_augmentation_model
test_augmentation_model = mae_model.test_augmentation_model

# Extract the patchers.
patch_layer = mae_model.patch_layer
patch_encoder = mae_model.patch_encoder
patch_encoder.downstream = True  # Swtich the downstream flag to True.

# Extract the encoder.
encoder = mae_model.encoder

downstream_model = keras.Sequential(
    [
        layers.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
        patch_layer,
        patch_encoder,
        encoder,
        layers.BatchNormalization(),  # Refer to A.1 (Linear probing).
        layers.GlobalAveragePooling1D(),
        layers.Dense(NUM_CLASSES, activation="softmax"),
    ],
    name="linear_probe_model",
)

# Only the final classification layer of the `downstream_model` should be trainable.
for layer in downstream_model.layers[:-1]:
    layer.trainable = False

downstream_model.summary()


def prepare_data(images, labels, is_train=True):
    if is_train:
        augmentation_model = train_augmentation_model
    else:
        augmentation_model = test_augmentation_model
    return Batches(images, labels, shuffle=is_train, fn=augmentation_model)


train_ds = prepare_data(x_train, y_train)
val_ds = prepare_data(x_train, y_train, is_train=False)
test_ds = prepare_data(x_test, y_test, is_train=False)

linear_probe_epochs = 3
linear_prob_lr = 0.1
warm_epoch_percentage = 0.1
steps = int((len(x_train) // BATCH_SIZE) * linear_probe_epochs)

warmup_steps = int(steps * warm_epoch_percentage)
scheduled_lrs = WarmUpCosine(learning_rate_base=linear_prob_lr, total_steps=steps,
                             warmup_learning_rate=0.0, warmup_steps=warmup_steps)

optimizer = keras.optimizers.SGD(learning_rate=scheduled_lrs, momentum=0.9)
downstream_model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                         metrics=["accuracy"])
downstream_model.fit(train_ds, validation_data=val_ds, epochs=linear_probe_epochs)

loss, accuracy = downstream_model.evaluate(test_ds)
accuracy = round(accuracy * 100, 2)
print(f"Accuracy on the test set: {accuracy}%.")
