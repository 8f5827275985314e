"""Keras 3 user programs written with keras.ops (issue 30): custom layers, losses,
metrics, regularizers and constraints as keras-io examples and blog posts write them.
Each program takes the library (keras or tessera.nn) as `keras` and builds a model; only
the import differs. tests/python/test_nn_user_ops_programs.py runs each under both."""

import numpy as np


class Program:
    """What a program gives the harness: the model (built, not compiled), its data, how
    to compile it, and the classes load_model needs."""

    def __init__(self, model, x, y, loss, metrics=(), custom_objects=None, optimizer="sgd",
                 lr=0.05, adjust=None):
        self.model, self.x, self.y, self.loss = model, x, y, loss
        self.metrics, self.custom_objects = list(metrics), dict(custom_objects or {})
        self.optimizer, self.lr = optimizer, lr
        self.adjust = adjust  # changes the first library's initial weights (both get them)


def _data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _labels(n, k, seed=1):
    return np.random.default_rng(seed).integers(0, k, n)


def rms_norm(keras):
    ops = keras.ops

    class RMSNorm(keras.layers.Layer):
        def __init__(self, epsilon=1e-6, **kwargs):
            super().__init__(**kwargs)
            self.epsilon = epsilon

        def build(self, input_shape):
            self.scale = self.add_weight(name="scale", shape=(input_shape[-1],),
                                         initializer="ones")

        def call(self, x):
            x = ops.cast(x, "float32")
            var = ops.mean(ops.square(x), axis=-1, keepdims=True)
            return x * ops.rsqrt(var + self.epsilon) * self.scale

        def get_config(self):
            return {**super().get_config(), "epsilon": self.epsilon}

    inp = keras.Input((6, 8))
    h = keras.layers.Dense(8)(inp)
    h = RMSNorm(name="rms")(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    out = keras.layers.Dense(3)(h)
    return Program(keras.Model(inp, out), _data((24, 6, 8)), _labels(24, 3),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   ["accuracy"], {"RMSNorm": RMSNorm})


def rotary_embedding(keras):
    ops = keras.ops

    class RotaryEmbedding(keras.layers.Layer):
        def __init__(self, max_wavelength=10000, **kwargs):
            super().__init__(**kwargs)
            self.max_wavelength = max_wavelength

        def call(self, x):
            seq_len, dim = ops.shape(x)[1], ops.shape(x)[-1]
            inv_freq = 1.0 / (self.max_wavelength ** (ops.arange(0, dim, 2, dtype="float32")
                                                      / dim))
            pos = ops.arange(seq_len, dtype="float32")
            freqs = ops.einsum("i,j->ij", pos, inv_freq)
            sin, cos = ops.sin(freqs), ops.cos(freqs)
            x1, x2 = x[..., ::2], x[..., 1::2]
            rotated = ops.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
            return ops.reshape(rotated, ops.shape(x))

        def get_config(self):
            return {**super().get_config(), "max_wavelength": self.max_wavelength}

    inp = keras.Input((5, 8))
    h = keras.layers.Dense(8)(inp)
    h = RotaryEmbedding()(h)
    h = keras.layers.Flatten()(h)
    out = keras.layers.Dense(2)(h)
    return Program(keras.Model(inp, out), _data((16, 5, 8)), _data((16, 2), 3), "mse",
                   custom_objects={"RotaryEmbedding": RotaryEmbedding})


def swiglu_geglu(keras):
    ops = keras.ops

    class SwiGLU(keras.layers.Layer):
        def __init__(self, hidden, out, **kwargs):
            super().__init__(**kwargs)
            self.hidden, self.out = hidden, out
            self.proj = keras.layers.Dense(2 * hidden, use_bias=False)
            self.down = keras.layers.Dense(out, use_bias=False)

        def call(self, x):
            a, b = ops.split(self.proj(x), 2, axis=-1)
            return self.down(ops.silu(a) * b)

        def get_config(self):
            return {**super().get_config(), "hidden": self.hidden, "out": self.out}

    class GEGLU(keras.layers.Layer):
        def __init__(self, hidden, **kwargs):
            super().__init__(**kwargs)
            self.hidden = hidden
            self.proj = keras.layers.Dense(2 * hidden)

        def call(self, x):
            h = self.proj(x)
            return ops.gelu(h[..., : self.hidden], approximate=False) * h[..., self.hidden:]

        def get_config(self):
            return {**super().get_config(), "hidden": self.hidden}

    inp = keras.Input((4, 6))
    h = SwiGLU(8, 6)(inp)
    h = GEGLU(5)(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    out = keras.layers.Dense(1)(h)
    return Program(keras.Model(inp, out), _data((16, 4, 6)), _data((16, 1), 2), "mse",
                   custom_objects={"SwiGLU": SwiGLU, "GEGLU": GEGLU})


def causal_attention(keras):
    ops = keras.ops

    class CausalSelfAttention(keras.layers.Layer):
        def __init__(self, num_heads, key_dim, **kwargs):
            super().__init__(**kwargs)
            self.num_heads, self.key_dim = num_heads, key_dim
            self.qkv = keras.layers.Dense(3 * num_heads * key_dim)
            self.out = keras.layers.Dense(num_heads * key_dim)

        def call(self, x):
            b, t = ops.shape(x)[0], ops.shape(x)[1]
            qkv = ops.reshape(self.qkv(x), (b, t, 3, self.num_heads, self.key_dim))
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
            scores = ops.einsum("bqhd,bkhd->bhqk", q, k) / ops.sqrt(float(self.key_dim))
            i = ops.arange(t)[:, None]
            j = ops.arange(t)[None, :]
            causal = i >= j
            scores = ops.where(causal[None, None], scores, -1e9)
            upper = ops.triu(ops.ones((t, t)), k=1)
            scores = scores - 1e9 * upper * 0.0 + ops.tril(ops.zeros((t, t)))
            weights = ops.softmax(scores, axis=-1)
            ctx = ops.einsum("bhqk,bkhd->bqhd", weights, v)
            return self.out(ops.reshape(ctx, (b, t, self.num_heads * self.key_dim)))

        def get_config(self):
            return {**super().get_config(), "num_heads": self.num_heads,
                    "key_dim": self.key_dim}

    inp = keras.Input((6, 8))
    h = CausalSelfAttention(2, 4)(inp)
    out = keras.layers.Dense(5)(h)
    y = _labels(12 * 6, 5).reshape(12, 6)
    return Program(keras.Model(inp, out), _data((12, 6, 8)), y,
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   custom_objects={"CausalSelfAttention": CausalSelfAttention},
                   optimizer="adam", lr=0.01)


def focal_loss(keras):
    ops = keras.ops

    class FocalLoss(keras.losses.Loss):
        def __init__(self, gamma=2.0, alpha=0.25, reduction="sum_over_batch_size",
                     name="focal_loss"):
            super().__init__(reduction=reduction, name=name)
            self.gamma, self.alpha = gamma, alpha

        def call(self, y_true, y_pred):
            y_true = ops.cast(y_true, y_pred.dtype)
            y_pred = ops.clip(y_pred, keras.backend.epsilon(), 1.0 - keras.backend.epsilon())
            p_t = y_true * y_pred + (1.0 - y_true) * (1.0 - y_pred)
            alpha_t = y_true * self.alpha + (1.0 - y_true) * (1.0 - self.alpha)
            loss = -alpha_t * ops.power(1.0 - p_t, self.gamma) * ops.log(p_t)
            return ops.mean(loss, axis=-1)

        def get_config(self):
            return {**super().get_config(), "gamma": self.gamma, "alpha": self.alpha}

    inp = keras.Input((7,))
    h = keras.layers.Dense(6, activation="relu")(inp)
    out = keras.layers.Dense(4, activation="sigmoid")(h)
    y = (np.random.default_rng(4).random((24, 4)) > 0.6).astype("float32")
    return Program(keras.Model(inp, out), _data((24, 7)), y, FocalLoss(reduction="sum"),
                   [keras.metrics.BinaryAccuracy()], {"FocalLoss": FocalLoss})


def dice_loss(keras):
    ops = keras.ops

    class DiceLoss(keras.losses.Loss):
        def __init__(self, smooth=1.0, **kwargs):
            super().__init__(**kwargs)
            self.smooth = smooth

        def call(self, y_true, y_pred):
            y_true = ops.cast(y_true, "float32")
            inter = ops.sum(y_true * y_pred, axis=(1, 2))
            union = ops.sum(y_true, axis=(1, 2)) + ops.sum(y_pred, axis=(1, 2))
            return 1.0 - (2.0 * inter + self.smooth) / (union + self.smooth)

        def get_config(self):
            return {**super().get_config(), "smooth": self.smooth}

    inp = keras.Input((6, 6, 2))
    h = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inp)
    out = keras.layers.Conv2D(1, 1, activation="sigmoid")(h)
    y = (np.random.default_rng(5).random((16, 6, 6, 1)) > 0.5).astype("float32")
    return Program(keras.Model(inp, out), _data((16, 6, 6, 2)), y,
                   DiceLoss(reduction="mean", name="dice"), custom_objects={"DiceLoss": DiceLoss},
                   lr=0.5)


def contrastive_siamese(keras):
    ops = keras.ops

    def euclidean_distance(vects):
        a, b = vects
        return ops.norm(a - b, axis=1, keepdims=True)

    def contrastive_loss(y_true, y_pred, margin=1.0):
        square_pred = ops.square(y_pred)
        margin_square = ops.square(ops.maximum(margin - y_pred, 0.0))
        return ops.mean((1 - y_true) * square_pred + y_true * margin_square)

    tower_in = keras.Input((6,))
    tower = keras.Model(tower_in, keras.layers.Dense(4, activation="tanh")(tower_in))
    a, b = keras.Input((6,)), keras.Input((6,))
    dist = keras.layers.Lambda(euclidean_distance, output_shape=(1,))([tower(a), tower(b)])
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.BatchNormalization()(dist))
    y = _labels(24, 2).astype("float32")
    return Program(keras.Model([a, b], out), [_data((24, 6)), _data((24, 6), 7)], y,
                   contrastive_loss, custom_objects={
                       "euclidean_distance": euclidean_distance,
                       "contrastive_loss": contrastive_loss})


def label_smoothing(keras):
    ops = keras.ops

    def smoothed_crossentropy(y_true, y_pred, smoothing=0.1, classes=5):
        onehot = ops.one_hot(ops.cast(ops.squeeze(y_true, axis=-1), "int32"), classes)
        target = onehot * (1.0 - smoothing) + smoothing / classes
        logp = ops.log_softmax(y_pred, axis=-1)
        return -ops.sum(target * logp, axis=-1)

    inp = keras.Input((8,))
    out = keras.layers.Dense(5)(keras.layers.Dense(8, activation="gelu")(inp))
    return Program(keras.Model(inp, out), _data((24, 8)), _labels(24, 5).reshape(-1, 1),
                   smoothed_crossentropy,
                   ["sparse_categorical_accuracy"],
                   {"smoothed_crossentropy": smoothed_crossentropy})


def fbeta_metric(keras):
    ops = keras.ops

    class FBeta(keras.metrics.Metric):
        def __init__(self, num_classes, beta=2.0, name="fbeta", **kwargs):
            super().__init__(name=name, **kwargs)
            self.num_classes, self.beta = num_classes, beta
            self.tp = self.add_weight(name="tp", shape=(num_classes,), initializer="zeros")
            self.fp = self.add_weight(name="fp", shape=(num_classes,), initializer="zeros")
            self.fn = self.add_weight(name="fn", shape=(num_classes,), initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            true = ops.one_hot(ops.cast(ops.reshape(y_true, (-1,)), "int32"), self.num_classes)
            pred = ops.one_hot(ops.argmax(y_pred, axis=-1), self.num_classes)
            self.tp.assign_add(ops.sum(true * pred, axis=0))
            self.fp.assign_add(ops.sum((1.0 - true) * pred, axis=0))
            self.fn.assign_add(ops.sum(true * (1.0 - pred), axis=0))

        def result(self):
            b2 = self.beta ** 2
            score = ((1 + b2) * self.tp) / ((1 + b2) * self.tp + b2 * self.fn + self.fp + 1e-7)
            return ops.mean(score)

        def reset_state(self):
            for v in (self.tp, self.fp, self.fn):
                v.assign(ops.zeros((self.num_classes,)))

        def get_config(self):
            return {**super().get_config(), "num_classes": self.num_classes, "beta": self.beta}

    inp = keras.Input((6,))
    out = keras.layers.Dense(3)(inp)
    return Program(keras.Model(inp, out), _data((40, 6)), _labels(40, 3),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   [FBeta(3)], {"FBeta": FBeta}, lr=0.3)


def custom_regularizer(keras):
    ops = keras.ops

    class OrthoReg(keras.regularizers.Regularizer):
        def __init__(self, factor=0.01):
            self.factor = factor

        def __call__(self, w):
            gram = ops.matmul(ops.transpose(w), w)
            eye = ops.eye(ops.shape(w)[-1])
            return self.factor * ops.sum(ops.square(gram - eye))

        def get_config(self):
            return {"factor": self.factor}

    inp = keras.Input((6,))
    h = keras.layers.Dense(4, kernel_regularizer=OrthoReg(0.05))(inp)
    out = keras.layers.Dense(2, kernel_regularizer=keras.regularizers.L2(0.01))(h)
    return Program(keras.Model(inp, out), _data((24, 6)), _data((24, 2), 8), "mse",
                   custom_objects={"OrthoReg": OrthoReg})


def custom_constraint(keras):
    ops = keras.ops

    class CenterAround(keras.constraints.Constraint):
        def __init__(self, ref_value):
            self.ref_value = ref_value

        def __call__(self, w):
            return w - ops.mean(w) + self.ref_value

        def get_config(self):
            return {"ref_value": self.ref_value}

    class UnitNormRows(keras.constraints.Constraint):
        def __call__(self, w):
            return w / (keras.ops.sqrt(ops.sum(ops.square(w), axis=0, keepdims=True)) + 1e-7)

    def clip_bias(b):  # a function as a constraint (Keras takes any callable)
        return ops.clip(b, -0.02, 0.02)

    inp = keras.Input((5,))
    h = keras.layers.Dense(4, kernel_constraint=CenterAround(0.5))(inp)
    out = keras.layers.Dense(2, kernel_constraint=UnitNormRows(), bias_constraint=clip_bias)(h)
    return Program(keras.Model(inp, out), _data((24, 5)), _data((24, 2), 9), "mse",
                   custom_objects={"CenterAround": CenterAround, "UnitNormRows": UnitNormRows,
                                   "clip_bias": clip_bias})


def window_mask(keras):
    ops = keras.ops

    class WindowMask(keras.layers.Layer):
        """Keeps activations inside [low, high]; elsewhere a learned fill value."""

        def __init__(self, low=-0.5, high=0.5, **kwargs):
            super().__init__(**kwargs)
            self.low, self.high = low, high

        def build(self, input_shape):
            self.fill = self.add_weight(shape=(), initializer="zeros", name="fill")

        def call(self, x):
            inside = ops.logical_and(ops.greater_equal(x, self.low), ops.less_equal(x, self.high))
            outside = ops.logical_not(inside)
            kept = ops.where(inside, x, ops.zeros_like(x) + self.fill)
            frac = ops.mean(ops.cast(outside, "float32"), axis=-1, keepdims=True)
            return ops.concatenate([kept, frac], axis=-1)

        def get_config(self):
            return {**super().get_config(), "low": self.low, "high": self.high}

    inp = keras.Input((6,))
    h = WindowMask()(keras.layers.Dense(6)(inp))
    out = keras.layers.Dense(1)(h)
    return Program(keras.Model(inp, out), _data((24, 6)), _data((24, 1), 10), "mse",
                   custom_objects={"WindowMask": WindowMask})


def top_k_sort(keras):
    ops = keras.ops

    class TopKPool(keras.layers.Layer):
        def __init__(self, k=3, **kwargs):
            super().__init__(**kwargs)
            self.k = k

        def call(self, x):
            values, indices = ops.top_k(x, k=self.k, sorted=True)
            order = ops.argsort(x, axis=-1)
            ascending = ops.take_along_axis(x, order, axis=-1)
            pos = ops.cast(indices, "float32") / ops.cast(ops.shape(x)[-1], "float32")
            return ops.concatenate([values, pos, ascending[:, :2]], axis=-1)

        def get_config(self):
            return {**super().get_config(), "k": self.k}

    inp = keras.Input((8,))
    h = TopKPool(3)(keras.layers.Dense(8)(inp))
    out = keras.layers.Dense(2)(h)
    return Program(keras.Model(inp, out), _data((24, 8)), _data((24, 2), 11), "mse",
                   custom_objects={"TopKPool": TopKPool})


def segment_pool(keras):
    ops = keras.ops

    class FeatureGroups(keras.layers.Layer):
        """Sums features into groups (ops.segment_sum over the transposed features) and
        scatters a group's sum back to a fixed slot."""

        def __init__(self, groups=(0, 0, 1, 1, 2, 2, 2, 0), **kwargs):
            super().__init__(**kwargs)
            self.groups = tuple(groups)

        def call(self, x):
            ids = ops.convert_to_tensor(self.groups, dtype="int32")
            summed = ops.segment_sum(ops.transpose(x), ids, num_segments=3)
            pooled = ops.transpose(summed)
            maxed = ops.transpose(ops.segment_max(ops.transpose(x), ids, num_segments=3))
            slots = ops.scatter(ops.convert_to_tensor([[0], [2]]), ops.ones((2,)), (4,))
            return ops.concatenate([pooled, maxed, pooled[:, :1] * slots], axis=-1)

        def get_config(self):
            return {**super().get_config(), "groups": list(self.groups)}

    inp = keras.Input((8,))
    h = FeatureGroups()(keras.layers.Dense(8)(inp))
    out = keras.layers.Dense(2)(h)
    return Program(keras.Model(inp, out), _data((24, 8)), _data((24, 2), 12), "mse",
                   custom_objects={"FeatureGroups": FeatureGroups})


def cumsum_positions(keras):
    ops = keras.ops

    class PositionsFromMask(keras.layers.Layer):
        """RoBERTa-style position ids: cumulative count of non-padding tokens."""

        def __init__(self, vocab, length, dim, **kwargs):
            super().__init__(**kwargs)
            self.vocab, self.length, self.dim = vocab, length, dim
            self.tokens = keras.layers.Embedding(vocab, dim)
            self.positions = keras.layers.Embedding(length + 1, dim)

        def call(self, ids):
            mask = ops.cast(ops.not_equal(ids, 0), "int32")
            pos = ops.cumsum(mask, axis=1) * mask
            return self.tokens(ids) + self.positions(pos)

        def get_config(self):
            return {**super().get_config(), "vocab": self.vocab, "length": self.length,
                    "dim": self.dim}

    inp = keras.Input((6,), dtype="int32")
    h = PositionsFromMask(10, 6, 4)(inp)
    out = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(h))
    ids = np.random.default_rng(13).integers(0, 10, (24, 6))
    ids[:, 4:] = 0
    return Program(keras.Model(inp, out), ids.astype("int32"), _data((24, 1), 14), "mse",
                   custom_objects={"PositionsFromMask": PositionsFromMask}, lr=0.2)


def squeeze_excite(keras):
    ops = keras.ops

    class SqueezeExcite(keras.layers.Layer):
        def __init__(self, ratio=4, **kwargs):
            super().__init__(**kwargs)
            self.ratio = ratio

        def build(self, input_shape):
            c = input_shape[-1]
            self.reduce = keras.layers.Dense(max(c // self.ratio, 1), activation="relu")
            self.expand = keras.layers.Dense(c, activation="sigmoid")

        def call(self, x):
            s = ops.mean(x, axis=(1, 2), keepdims=True)
            return x * self.expand(self.reduce(s))

        def get_config(self):
            return {**super().get_config(), "ratio": self.ratio}

    inp = keras.Input((6, 6, 3))
    h = keras.layers.Conv2D(8, 3, padding="same")(inp)
    h = SqueezeExcite()(h)
    out = keras.layers.Dense(2)(keras.layers.GlobalMaxPooling2D()(h))
    return Program(keras.Model(inp, out), _data((16, 6, 6, 3)), _labels(16, 2),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   custom_objects={"SqueezeExcite": SqueezeExcite})


def patch_extraction(keras):
    ops = keras.ops

    class Patches(keras.layers.Layer):
        def __init__(self, patch_size, **kwargs):
            super().__init__(**kwargs)
            self.patch_size = patch_size

        def call(self, images):
            patches = ops.image.extract_patches(images, size=self.patch_size)
            b = ops.shape(patches)[0]
            n = ops.shape(patches)[1] * ops.shape(patches)[2]
            return ops.reshape(patches, (b, n, ops.shape(patches)[-1]))

        def get_config(self):
            return {**super().get_config(), "patch_size": self.patch_size}

    class PatchesByReshape(keras.layers.Layer):
        def __init__(self, patch_size, **kwargs):
            super().__init__(**kwargs)
            self.patch_size = patch_size

        def call(self, images):
            p = self.patch_size
            _, h, w, c = images.shape
            x = ops.reshape(images, (-1, h // p, p, w // p, p, c))
            x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
            return ops.reshape(x, (-1, (h // p) * (w // p), p * p * c))

        def get_config(self):
            return {**super().get_config(), "patch_size": self.patch_size}

    inp = keras.Input((8, 8, 2))
    a = keras.layers.Dense(4)(Patches(4)(inp))
    b = keras.layers.Dense(4)(PatchesByReshape(4)(inp))
    h = keras.layers.Flatten()(keras.layers.Concatenate()([a, b]))
    out = keras.layers.Dense(3)(h)
    return Program(keras.Model(inp, out), _data((16, 8, 8, 2)), _labels(16, 3),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   custom_objects={"Patches": Patches, "PatchesByReshape": PatchesByReshape})


def learnable_temperature(keras):
    ops = keras.ops

    class CosineClassifier(keras.layers.Layer):
        """CLIP-style logits: cosine similarity scaled by a learned exp(log temperature)."""

        def __init__(self, classes, **kwargs):
            super().__init__(**kwargs)
            self.classes = classes

        def build(self, input_shape):
            self.centers = self.add_weight(shape=(input_shape[-1], self.classes),
                                           initializer="glorot_uniform", name="centers")
            self.log_temp = self.add_weight(
                shape=(), name="log_temp",
                initializer=keras.initializers.Constant(np.log(1 / 0.07)))

        def call(self, x):
            x = x / ops.norm(x, axis=-1, keepdims=True)
            c = self.centers / ops.norm(self.centers, axis=0, keepdims=True)
            scale = ops.exp(ops.minimum(self.log_temp, 4.6))
            return scale * ops.matmul(x, c)

        def get_config(self):
            return {**super().get_config(), "classes": self.classes}

    inp = keras.Input((6,))
    out = CosineClassifier(3)(keras.layers.Dense(5)(inp))
    return Program(keras.Model(inp, out), _data((24, 6)), _labels(24, 3),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   custom_objects={"CosineClassifier": CosineClassifier}, lr=0.01)


def build_and_output_shape(keras):
    ops = keras.ops

    class PairwiseProducts(keras.layers.Layer):
        """Factorisation-machine style interactions, shape computed by hand."""

        def __init__(self, factors=3, **kwargs):
            super().__init__(**kwargs)
            self.factors = factors

        def build(self, input_shape):
            self.v = self.add_weight(shape=(input_shape[-1], self.factors),
                                     initializer="random_normal", name="v")
            self.built = True

        def call(self, x):
            sum_sq = ops.square(ops.matmul(x, self.v))
            sq_sum = ops.matmul(ops.square(x), ops.square(self.v))
            return 0.5 * ops.sum(sum_sq - sq_sum, axis=1, keepdims=True)

        def compute_output_shape(self, input_shape):
            return (input_shape[0], 1)

        def get_config(self):
            return {**super().get_config(), "factors": self.factors}

    model = keras.Sequential([keras.Input((7,)), PairwiseProducts(3),
                              keras.layers.Dense(1)])
    return Program(model, _data((24, 7)), _data((24, 1), 15), "mse",
                   custom_objects={"PairwiseProducts": PairwiseProducts})


def nested_layers(keras):
    ops = keras.ops

    class ResidualBlock(keras.layers.Layer):
        def __init__(self, units, dropout=0.0, **kwargs):
            super().__init__(**kwargs)
            self.units, self.dropout = units, dropout
            self.norm = keras.layers.LayerNormalization(epsilon=1e-5)
            self.ff1 = keras.layers.Dense(units * 2, activation="relu")
            self.ff2 = keras.layers.Dense(units)
            self.drop = keras.layers.Dropout(dropout)

        def call(self, x, training=None):
            h = self.ff2(self.ff1(self.norm(x)))
            return x + self.drop(h, training=training)

        def get_config(self):
            return {**super().get_config(), "units": self.units, "dropout": self.dropout}

    class Tower(keras.layers.Layer):
        def __init__(self, units, depth, **kwargs):
            super().__init__(**kwargs)
            self.units, self.depth = units, depth
            self.blocks = [ResidualBlock(units) for _ in range(depth)]

        def call(self, x, training=None):
            for block in self.blocks:
                x = block(x, training=training)
            return ops.relu(x)

        def get_config(self):
            return {**super().get_config(), "units": self.units, "depth": self.depth}

    inp = keras.Input((6,))
    out = keras.layers.Dense(2)(Tower(6, 2)(inp))
    return Program(keras.Model(inp, out), _data((24, 6)), _data((24, 2), 16), "mse",
                   custom_objects={"ResidualBlock": ResidualBlock, "Tower": Tower})


def vae_sampling(keras):
    ops = keras.ops

    class Sampling(keras.layers.Layer):
        """keras-io's VAE: z = mean + exp(log_var / 2) * epsilon."""

        def __init__(self, seed=1337, **kwargs):
            super().__init__(**kwargs)
            self.seed = seed
            self.seed_generator = keras.random.SeedGenerator(seed)

        def call(self, inputs):
            z_mean, z_log_var = inputs
            batch, dim = ops.shape(z_mean)[0], ops.shape(z_mean)[1]
            epsilon = keras.random.normal(shape=(batch, dim), seed=self.seed_generator)
            return z_mean + ops.exp(0.5 * z_log_var) * epsilon

        def get_config(self):
            return {**super().get_config(), "seed": self.seed}

    class KLDivergence(keras.layers.Layer):
        def __init__(self, weight=1e-3, **kwargs):
            super().__init__(**kwargs)
            self.weight = weight

        def call(self, inputs):
            mu, log_var = inputs
            kl = -0.5 * (1 + log_var - ops.square(mu) - ops.exp(log_var))
            self.add_loss(self.weight * ops.mean(ops.sum(kl, axis=1)))
            return mu

        def get_config(self):
            return {**super().get_config(), "weight": self.weight}

    inp = keras.Input((6,))
    h = keras.layers.Dense(5, activation="relu")(inp)
    z_mean = keras.layers.Dense(2, name="z_mean")(h)
    z_log_var = keras.layers.Dense(2, name="z_log_var")(h)
    z = Sampling()([KLDivergence()([z_mean, z_log_var]), z_log_var])
    out = keras.layers.Dense(6)(keras.layers.Dense(5, activation="relu")(z))

    def tiny_noise(weights):
        # z_log_var's kernel 0 and bias -40: the noise (exp(-20) ~ 2e-9) leaves the
        # losses comparable with Keras's to rounding, through the sampling code
        weights[4] = np.zeros_like(weights[4])
        weights[5] = np.full_like(weights[5], -40.0)
        return weights

    x = _data((24, 6))
    return Program(keras.Model(inp, out), x, x, "mse", adjust=tiny_noise, lr=0.02,
                   custom_objects={"Sampling": Sampling, "KLDivergence": KLDivergence})


def gumbel_softmax(keras):
    ops = keras.ops

    class GumbelSoftmax(keras.layers.Layer):
        """Relaxed one-hot samples when training; the hard one-hot argmax otherwise."""

        def __init__(self, temperature=0.5, noise=1.0, **kwargs):
            super().__init__(**kwargs)
            self.temperature, self.noise = temperature, noise
            self.seed_generator = keras.random.SeedGenerator(7)

        def call(self, logits, training=None):
            if training:
                u = keras.random.uniform(ops.shape(logits), minval=1e-6, maxval=1.0 - 1e-6,
                                         seed=self.seed_generator)
                gumbel = -ops.log(-ops.log(u))
                return ops.softmax((logits + self.noise * gumbel) / self.temperature, axis=-1)
            return ops.one_hot(ops.argmax(logits, axis=-1), ops.shape(logits)[-1])

        def get_config(self):
            return {**super().get_config(), "temperature": self.temperature,
                    "noise": self.noise}

    inp = keras.Input((6,))
    # noise 0 keeps fit comparable with Keras (the uniform draws differ); the random
    # draw and -log(-log(u)) still run in the step
    codes = GumbelSoftmax(temperature=2.0, noise=0.0)(keras.layers.Dense(4)(inp))
    out = keras.layers.Dense(2)(codes)
    return Program(keras.Model(inp, out), _data((24, 6)), _data((24, 2), 17), "mse",
                   custom_objects={"GumbelSoftmax": GumbelSoftmax})


def compute_loss_override(keras):
    ops = keras.ops

    class ConfidencePenalty(keras.Model):
        """Backend-agnostic custom training: Keras's compute_loss plus an entropy bonus."""

        def __init__(self, classes=3, beta=0.1, **kwargs):
            super().__init__(**kwargs)
            self.classes, self.beta = classes, beta
            self.hidden = keras.layers.Dense(8, activation="tanh")
            self.logits = keras.layers.Dense(classes)

        def call(self, x):
            return self.logits(self.hidden(x))

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            ce = super().compute_loss(x, y, y_pred, sample_weight, training)
            probs = ops.softmax(y_pred, axis=-1)
            entropy = -ops.sum(probs * ops.log_softmax(y_pred, axis=-1), axis=-1)
            return ce - self.beta * ops.mean(entropy)

        def get_config(self):
            return {"classes": self.classes, "beta": self.beta}

    x = _data((24, 5))
    model = ConfidencePenalty()
    model(x[:2])
    return Program(model, x, _labels(24, 3),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   ["accuracy"], {"ConfidencePenalty": ConfidencePenalty}, lr=0.1)


def masked_sequence_loss(keras):
    ops = keras.ops

    def masked_loss(y_true, y_pred):
        """keras-io's translation example: padding tokens (0) carry no loss."""
        loss = ops.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
        mask = ops.cast(ops.not_equal(y_true, 0), loss.dtype)
        return ops.sum(loss * mask) / ops.sum(mask)

    def masked_accuracy(y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        match = ops.cast(ops.equal(y_true, ops.cast(ops.argmax(y_pred, axis=-1), "int32")),
                         "float32")
        mask = ops.cast(ops.not_equal(y_true, 0), "float32")
        return ops.sum(match * mask) / ops.sum(mask)

    class MaskedMeanPool(keras.layers.Layer):
        """Mean over the unmasked time steps; the mask stops here."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True

        def call(self, x, mask=None):
            if mask is None:
                return ops.mean(x, axis=1)
            m = ops.expand_dims(ops.cast(mask, x.dtype), -1)
            return ops.sum(x * m, axis=1) / ops.maximum(ops.sum(m, axis=1), 1.0)

        def compute_mask(self, inputs, mask=None):
            return None

    inp = keras.Input((7,), dtype="int32")
    emb = keras.layers.Embedding(12, 6, mask_zero=True)(inp)
    pooled = MaskedMeanPool()(emb)
    context = keras.layers.RepeatVector(7)(keras.layers.Dense(6, activation="tanh")(pooled))
    out = keras.layers.Dense(12)(keras.layers.Concatenate()([emb, context]))
    ids = np.random.default_rng(18).integers(1, 12, (24, 7))
    ids[:8, 5:] = 0
    ids[8:16, 3:] = 0
    targets = np.roll(ids, -1, axis=1) * (ids != 0)
    return Program(keras.Model(inp, out), ids.astype("int32"), targets.astype("int32"),
                   masked_loss, [masked_accuracy],
                   {"MaskedMeanPool": MaskedMeanPool, "masked_loss": masked_loss,
                    "masked_accuracy": masked_accuracy}, optimizer="adam", lr=0.01)
