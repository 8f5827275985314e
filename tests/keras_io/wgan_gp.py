# Modeled on keras-io examples/generative/wgan_gp.py; written for tessera. Its train_step is
# written there with TensorFlow: here keras.GradientTape (tessera.nn's) for tf.GradientTape,
# keras.random.normal/uniform for tf.random.*, ops.sqrt/sum/square/mean/shape for tf.*. In place
# of Fashion-MNIST: 256 images of 28x28 with a bright bar at a height given by the class, scaled
# to [-1, 1]; filters / 4 (16 to 128), noise 32 (128 there), batches of 64 (512), 1 epoch (20);
# the GANMonitor callback saves its images with array_to_img as there.
# The gradient penalty takes the gradient of the critic's output with respect to the
# interpolated images inside the critic's tape: tessera differentiates that gradient in turn
# (a second-order gradient); the generator's BatchNormalization moves its statistics at each
# call with training=True, as TensorFlow's step does.
import numpy as np
import tessera.data
import tessera.nn as keras
from tessera.nn import layers, ops

keras.utils.set_random_seed(0)
IMG_SHAPE = (28, 28, 1)
BATCH_SIZE = 64
noise_dim = 32

rng = np.random.default_rng(0)
labels = rng.integers(0, 10, 256)
train_images = rng.integers(0, 64, (256, 28, 28), dtype=np.uint8)
rows = 3 + 2 * labels
train_images[np.arange(256)[:, None], rows[:, None] + np.arange(3)] = 255
train_images = train_images.reshape(train_images.shape[0], *IMG_SHAPE).astype("float32")
train_images = (train_images - 127.5) / 127.5
print(f"Number of examples: {len(train_images)}")
print(f"Shape of the images in the dataset: {train_images.shape[1:]}")


def conv_block(x, filters, activation, kernel_size=(3, 3), strides=(1, 1), padding="same",
               use_bias=True, use_bn=False, use_dropout=False, drop_value=0.5):
    x = layers.Conv2D(filters, kernel_size, strides=strides, padding=padding,
                      use_bias=use_bias)(x)
    if use_bn:
        x = layers.BatchNormalization()(x)
    x = activation(x)
    if use_dropout:
        x = layers.Dropout(drop_value)(x)
    return x


def get_discriminator_model():
    img_input = layers.Input(shape=IMG_SHAPE)
    # Zero pad the input to make the input images size to (32, 32, 1).
    x = layers.ZeroPadding2D((2, 2))(img_input)
    x = conv_block(x, 16, kernel_size=(5, 5), strides=(2, 2), use_bn=False, use_bias=True,
                   activation=layers.LeakyReLU(0.2), use_dropout=False, drop_value=0.3)
    x = conv_block(x, 32, kernel_size=(5, 5), strides=(2, 2), use_bn=False,
                   activation=layers.LeakyReLU(0.2), use_bias=True, use_dropout=True,
                   drop_value=0.3)
    x = conv_block(x, 64, kernel_size=(5, 5), strides=(2, 2), use_bn=False,
                   activation=layers.LeakyReLU(0.2), use_bias=True, use_dropout=True,
                   drop_value=0.3)
    x = conv_block(x, 128, kernel_size=(5, 5), strides=(2, 2), use_bn=False,
                   activation=layers.LeakyReLU(0.2), use_bias=True, use_dropout=False,
                   drop_value=0.3)
    x = layers.Flatten()(x)
    x = layers.Dropout(0.2)(x)
    x = layers.Dense(1)(x)
    return keras.models.Model(img_input, x, name="discriminator")


d_model = get_discriminator_model()
d_model.summary()


def upsample_block(x, filters, activation, kernel_size=(3, 3), strides=(1, 1), up_size=(2, 2),
                   padding="same", use_bn=False, use_bias=True, use_dropout=False,
                   drop_value=0.3):
    x = layers.UpSampling2D(up_size)(x)
    x = layers.Conv2D(filters, kernel_size, strides=strides, padding=padding,
                      use_bias=use_bias)(x)
    if use_bn:
        x = layers.BatchNormalization()(x)
    if activation:
        x = activation(x)
    if use_dropout:
        x = layers.Dropout(drop_value)(x)
    return x


def get_generator_model():
    noise = layers.Input(shape=(noise_dim,))
    x = layers.Dense(4 * 4 * 64, use_bias=False)(noise)
    x = layers.BatchNormalization()(x)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.Reshape((4, 4, 64))(x)
    x = upsample_block(x, 32, layers.LeakyReLU(0.2), strides=(1, 1), use_bias=False,
                       use_bn=True, padding="same", use_dropout=False)
    x = upsample_block(x, 16, layers.LeakyReLU(0.2), strides=(1, 1), use_bias=False,
                       use_bn=True, padding="same", use_dropout=False)
    x = upsample_block(x, 1, layers.Activation("tanh"), strides=(1, 1), use_bias=False,
                       use_bn=True)
    # Crop the image back to (28, 28, 1).
    x = layers.Cropping2D((2, 2))(x)
    return keras.models.Model(noise, x, name="generator")


g_model = get_generator_model()
g_model.summary()


class WGAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim, discriminator_extra_steps=3,
                 gp_weight=10.0):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.d_steps = discriminator_extra_steps
        self.gp_weight = gp_weight

    def compile(self, d_optimizer, g_optimizer, d_loss_fn, g_loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.d_loss_fn = d_loss_fn
        self.g_loss_fn = g_loss_fn

    def gradient_penalty(self, batch_size, real_images, fake_images):
        """The penalty on the critic's gradient at images between the real and fake ones."""
        alpha = keras.random.uniform([batch_size, 1, 1, 1], 0.0, 1.0)
        diff = fake_images - real_images
        interpolated = real_images + alpha * diff
        with keras.GradientTape() as gp_tape:
            gp_tape.watch(interpolated)
            pred = self.discriminator(interpolated, training=True)
        grads = gp_tape.gradient(pred, [interpolated])[0]
        norm = ops.sqrt(ops.sum(ops.square(grads), axis=[1, 2, 3]))
        gp = ops.mean((norm - 1.0) ** 2)
        return gp

    def train_step(self, real_images):
        if isinstance(real_images, tuple):
            real_images = real_images[0]
        batch_size = ops.shape(real_images)[0]
        # The critic is trained d_steps times for each step of the generator.
        for i in range(self.d_steps):
            random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim))
            with keras.GradientTape() as tape:
                fake_images = self.generator(random_latent_vectors, training=True)
                fake_logits = self.discriminator(fake_images, training=True)
                real_logits = self.discriminator(real_images, training=True)
                d_cost = self.d_loss_fn(real_img=real_logits, fake_img=fake_logits)
                gp = self.gradient_penalty(batch_size, real_images, fake_images)
                d_loss = d_cost + gp * self.gp_weight
            d_gradient = tape.gradient(d_loss, self.discriminator.trainable_variables)
            self.d_optimizer.apply_gradients(zip(d_gradient,
                                                 self.discriminator.trainable_variables))
        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim))
        with keras.GradientTape() as tape:
            generated_images = self.generator(random_latent_vectors, training=True)
            gen_img_logits = self.discriminator(generated_images, training=True)
            g_loss = self.g_loss_fn(gen_img_logits)
        gen_gradient = tape.gradient(g_loss, self.generator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(gen_gradient, self.generator.trainable_variables))
        return {"d_loss": d_loss, "g_loss": g_loss}


class GANMonitor(keras.callbacks.Callback):
    def __init__(self, num_img=6, latent_dim=128):
        self.num_img = num_img
        self.latent_dim = latent_dim

    def on_epoch_end(self, epoch, logs=None):
        random_latent_vectors = keras.random.normal(shape=(self.num_img, self.latent_dim))
        generated_images = self.model.generator(random_latent_vectors)
        generated_images = (generated_images * 127.5) + 127.5
        for i in range(self.num_img):
            img = np.asarray(generated_images[i])
            img = keras.utils.array_to_img(img)
            img.save("generated_img_{i}_{epoch}.png".format(i=i, epoch=epoch))


generator_optimizer = keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5, beta_2=0.9)
discriminator_optimizer = keras.optimizers.Adam(learning_rate=0.0002, beta_1=0.5, beta_2=0.9)


def discriminator_loss(real_img, fake_img):
    real_loss = ops.mean(real_img)
    fake_loss = ops.mean(fake_img)
    return fake_loss - real_loss


def generator_loss(fake_img):
    return -ops.mean(fake_img)


epochs = 1
cbk = GANMonitor(num_img=3, latent_dim=noise_dim)
wgan = WGAN(discriminator=d_model, generator=g_model, latent_dim=noise_dim,
            discriminator_extra_steps=3)
wgan.compile(d_optimizer=discriminator_optimizer, g_optimizer=generator_optimizer,
             g_loss_fn=generator_loss, d_loss_fn=discriminator_loss)
history = wgan.fit(train_images, batch_size=BATCH_SIZE, epochs=epochs, callbacks=[cbk])
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
