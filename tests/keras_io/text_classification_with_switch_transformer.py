# Modeled on keras-io examples/nlp/text_classification_with_switch_transformer.py (Keras 3
# form); written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

vocab_size = 20000  # Only consider the top 20k words
num_tokens_per_example = 40  # the first 40 words of each review (200 in the example)
# In place of keras.datasets.imdb.load_data(num_words=vocab_size): lists of word ids,
# shrunk; a fifth of the words tell the label (ids 1-10 or 11-20), to learn.
rng = np.random.default_rng(0)
def review(label):
    ids = rng.integers(21, vocab_size, rng.integers(20, 120))
    tell = rng.random(len(ids)) < 0.2
    ids[tell] = rng.integers(1, 11, tell.sum()) + 10 * label
    return list(ids)
y_train = rng.integers(0, 2, 320)
x_train = [review(label) for label in y_train]
y_val = rng.integers(0, 2, 64)
x_val = [review(label) for label in y_val]
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")
x_train = keras.utils.pad_sequences(x_train, maxlen=num_tokens_per_example)
x_val = keras.utils.pad_sequences(x_val, maxlen=num_tokens_per_example)

embed_dim = 32  # Embedding size for each token.
num_heads = 2  # Number of attention heads
ff_dim = 32  # Hidden layer size in feedforward network.
num_experts = 10  # Number of experts used in the Switch Transformer.
batch_size = 8  # Batch size (50 in the example).
learning_rate = 0.001  # Learning rate.
dropout_rate = 0.25  # Dropout rate.
num_epochs = 2  # Number of epochs (3 in the example).
num_tokens_per_batch = batch_size * num_tokens_per_example  # Total number of tokens per batch.
print(f"Number of tokens per batch: {num_tokens_per_batch}")


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = ops.shape(x)[-1]
        positions = ops.arange(start=0, stop=maxlen, step=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def create_feedforward_network(ff_dim, embed_dim, name=None):
    return keras.Sequential(
        [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)], name=name
    )


def load_balanced_loss(router_probs, expert_mask):
    """An auxiliary loss pushing the tokens' routing and the router's probability mass
    towards a uniform share among the experts."""
    num_experts = ops.shape(expert_mask)[-1]
    # the fraction of the tokens routed to each expert
    density = ops.mean(expert_mask, axis=0)
    # the fraction of the router's probability mass given to each expert
    density_proxy = ops.mean(router_probs, axis=0)
    loss = ops.mean(density_proxy * density) * ops.cast((num_experts**2), "float32")
    return loss


class Router(layers.Layer):
    def __init__(self, num_experts, expert_capacity):
        self.num_experts = num_experts
        self.route = layers.Dense(units=num_experts)
        self.expert_capacity = expert_capacity
        super().__init__()
        self.seed_generator = keras.random.SeedGenerator(1337)  # (JAX needs seeded draws)

    def call(self, inputs, training=False):
        # inputs: [tokens_per_batch, embed_dim]; router_logits: [tokens_per_batch, num_experts]
        router_logits = self.route(inputs)
        if training:
            # noise, for exploration across the experts
            router_logits += keras.random.uniform(
                shape=router_logits.shape, minval=0.9, maxval=1.1, seed=self.seed_generator
            )
        router_probs = keras.activations.softmax(router_logits, axis=-1)
        # the top-1 expert of each token and its probability
        expert_gate, expert_index = ops.top_k(router_probs, k=1)
        # [tokens_per_batch, 1, num_experts]
        expert_mask = ops.one_hot(expert_index, self.num_experts)
        aux_loss = load_balanced_loss(router_probs, expert_mask)
        self.add_loss(aux_loss)
        # each expert takes at most expert_capacity tokens: a token's position among its
        # expert's, and the tokens beyond the capacity dropped
        position_in_expert = ops.cast(ops.cumsum(expert_mask, axis=0) * expert_mask, "int32")
        expert_mask *= ops.cast(
            ops.less(ops.cast(position_in_expert, "int32"), self.expert_capacity), "float32"
        )
        expert_mask_flat = ops.sum(expert_mask, axis=-1)
        expert_gate *= expert_mask_flat
        # combined_tensor: [tokens_per_batch, num_experts, expert_capacity]
        combined_tensor = ops.expand_dims(
            expert_gate
            * expert_mask_flat
            * ops.squeeze(ops.one_hot(expert_index, self.num_experts), 1),
            -1,
        ) * ops.squeeze(ops.one_hot(position_in_expert, self.expert_capacity), 1)
        # dispatch_tensor: 1 where a token goes to an expert's slot
        dispatch_tensor = ops.cast(combined_tensor, "float32")
        return dispatch_tensor, combined_tensor


class Switch(layers.Layer):
    def __init__(self, num_experts, embed_dim, ff_dim, num_tokens_per_batch, capacity_factor=1):
        self.num_experts = num_experts
        self.embed_dim = embed_dim
        self.experts = [create_feedforward_network(ff_dim, embed_dim)
                        for _ in range(num_experts)]
        self.expert_capacity = num_tokens_per_batch // self.num_experts
        self.router = Router(self.num_experts, self.expert_capacity)
        super().__init__()

    def call(self, inputs):
        batch_size = ops.shape(inputs)[0]
        num_tokens_per_example = ops.shape(inputs)[1]
        # inputs: [num_tokens_per_batch, embed_dim]
        inputs = ops.reshape(inputs, [num_tokens_per_batch, self.embed_dim])
        dispatch_tensor, combine_tensor = self.router(inputs)
        # expert_inputs: [num_experts, expert_capacity, embed_dim]
        expert_inputs = ops.einsum("ab,acd->cdb", inputs, dispatch_tensor)
        expert_inputs = ops.reshape(
            expert_inputs, [self.num_experts, self.expert_capacity, self.embed_dim]
        )
        # to the experts
        expert_input_list = ops.unstack(expert_inputs, axis=0)
        expert_output_list = [
            self.experts[idx](expert_input) for idx, expert_input in enumerate(expert_input_list)
        ]
        # expert_outputs: [expert_capacity, num_experts, embed_dim]
        expert_outputs = ops.stack(expert_output_list, axis=1)
        # expert_outputs_combined: [tokens_per_batch, embed_dim]
        expert_outputs_combined = ops.einsum("abc,xba->xc", expert_outputs, combine_tensor)
        # outputs: [batch_size, num_tokens_per_example, embed_dim]
        outputs = ops.reshape(
            expert_outputs_combined, [batch_size, num_tokens_per_example, self.embed_dim]
        )
        return outputs


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ffn, dropout_rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        # a feedforward network or a switch layer of experts
        self.ffn = ffn
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(dropout_rate)
        self.dropout2 = layers.Dropout(dropout_rate)

    def call(self, inputs, training=False):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


def create_classifier():
    switch = Switch(num_experts, embed_dim, ff_dim, num_tokens_per_batch)
    transformer_block = TransformerBlock(embed_dim, num_heads, switch)

    inputs = layers.Input(shape=(num_tokens_per_example,))
    embedding_layer = TokenAndPositionEmbedding(num_tokens_per_example, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(dropout_rate)(x)
    x = layers.Dense(ff_dim, activation="relu")(x)
    x = layers.Dropout(dropout_rate)(x)
    outputs = layers.Dense(2, activation="softmax")(x)

    classifier = keras.Model(inputs=inputs, outputs=outputs)
    return classifier


def run_experiment(classifier):
    classifier.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    history = classifier.fit(
        x_train, y_train, batch_size=batch_size, epochs=num_epochs,
        validation_data=(x_val, y_val),
    )
    return history


classifier = create_classifier()
run_experiment(classifier)
