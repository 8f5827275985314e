# Modeled on keras-io examples/keras_recipes/memory_efficient_embeddings.py (Keras 3 form);
# written for tessera. In place of the MovieLens 1M download, pandas and the CSV datasets:
# 12,000 ratings of 600 users and 400 movies (movies drawn with Zipf-like popularity), each
# rating drawn from hidden tastes (3 + 1.5 u.m, rounded into 1..5); the ids arrive as integers
# (Keras's StringLookup needs TensorFlow), so the lookups are tables of positions taken with
# ops.take; blocks of 40 / 120 / 240 movies (400 / 1300 / rest there), embeddings 32 / 16 / 8
# (64 / 32 / 16); 3 epochs, as the example.
import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import layers, ops

rng = np.random.default_rng(0)
num_users, num_movies, num_ratings = 600, 400, 12000
user_taste = rng.normal(size=(num_users, 4))
movie_taste = rng.normal(size=(num_movies, 4))
popularity = 1.0 / np.arange(1, num_movies + 1) ** 0.8
movie_of_rank = rng.permutation(num_movies)
user_id = rng.integers(0, num_users, num_ratings)
movie_id = movie_of_rank[rng.choice(num_movies, num_ratings, p=popularity / popularity.sum())]
score = 3 + 1.5 * np.sum(user_taste[user_id] * movie_taste[movie_id], axis=1) / 2
rating = np.clip(np.round(score), 1, 5).astype("float32")
print(f"Number of users: {len(np.unique(user_id))}")
print(f"Number of movies: {len(np.unique(movie_id))}")
print(f"Number of ratings: {num_ratings}")

random_selection = rng.random(num_ratings) <= 0.85
train_data = {"user_id": user_id[random_selection], "movie_id": movie_id[random_selection]}
eval_data = {"user_id": user_id[~random_selection], "movie_id": movie_id[~random_selection]}
train_target, eval_target = rating[random_selection], rating[~random_selection]
print(f"Train data split: {len(train_target)}")
print(f"Eval data split: {len(eval_target)}")

learning_rate = 0.001
batch_size = 128
num_epochs = 3
base_embedding_dim = 32


def run_experiment(model):
    # Compile the model.
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.MeanSquaredError(),
        metrics=[keras.metrics.MeanAbsoluteError(name="mae")],
    )
    # Fit the model with the training data.
    history = model.fit(
        train_data,
        train_target,
        batch_size=batch_size,
        epochs=num_epochs,
        validation_data=(eval_data, eval_target),
    )
    return history


def embedding_encoder(vocabulary_size, embedding_dim, name=None):
    return layers.Embedding(input_dim=vocabulary_size, output_dim=embedding_dim,
                            name=f"{name}_embedding" if name else None)


def create_baseline_model():
    # Receive the user as an input.
    user_input = layers.Input(name="user_id", shape=(), dtype="int32")
    # Get user embedding.
    user_embedding = embedding_encoder(num_users, base_embedding_dim, name="user")(user_input)

    # Receive the movie as an input.
    movie_input = layers.Input(name="movie_id", shape=(), dtype="int32")
    # Get embedding.
    movie_embedding = embedding_encoder(num_movies, base_embedding_dim,
                                        name="movie")(movie_input)

    # Compute dot product similarity between user and movie embeddings.
    logits = layers.Dot(axes=1, name="dot_similarity")([user_embedding, movie_embedding])
    # Convert to rating scale.
    prediction = keras.activations.sigmoid(logits) * 5
    # Create the model.
    model = keras.Model(inputs=[user_input, movie_input], outputs=prediction,
                        name="baseline_model")
    return model


baseline_model = create_baseline_model()
baseline_model.summary()

history = run_experiment(baseline_model)

plt.plot(history.history["loss"])
plt.plot(history.history["val_loss"])
plt.title("model loss")
plt.ylabel("loss")
plt.xlabel("epoch")
plt.legend(["train", "eval"], loc="upper left")
plt.close()


class QREmbedding(layers.Layer):
    """The quotient-remainder trick: two small tables whose rows, multiplied, give
    each index its own vector."""

    def __init__(self, vocabulary_size, embedding_dim, num_buckets, name=None):
        super().__init__(name=name)
        self.num_buckets = num_buckets
        self.q_embeddings = layers.Embedding(vocabulary_size // num_buckets + 1, embedding_dim)
        self.r_embeddings = layers.Embedding(num_buckets, embedding_dim)

    def call(self, inputs):
        # Get the quotient index.
        quotient_index = ops.floor_divide(inputs, self.num_buckets)
        # Get the remainder index.
        remainder_index = ops.mod(inputs, self.num_buckets)
        # Lookup the quotient_embedding using the quotient_index.
        quotient_embedding = self.q_embeddings(quotient_index)
        # Lookup the remainder_embedding using the remainder_index.
        remainder_embedding = self.r_embeddings(remainder_index)
        # Use multiplication as a combiner operation
        return quotient_embedding * remainder_embedding


class MDEmbedding(layers.Layer):
    """Mixed-dimension embeddings: popular movies get wide vectors, the others
    narrow ones projected to the full width."""

    def __init__(self, blocks_vocabulary, blocks_embedding_dims, base_embedding_dim,
                 name=None):
        super().__init__(name=name)
        self.num_blocks = len(blocks_vocabulary)

        # Vocabulary to block, and to the position inside the block (0: not in it).
        self.vocab_to_block = np.full(num_movies, -1, dtype="int32")
        self.block_positions = []
        for block_idx, block_vocab in enumerate(blocks_vocabulary):
            self.vocab_to_block[block_vocab] = block_idx
            positions = np.zeros(num_movies, dtype="int32")
            positions[block_vocab] = np.arange(1, len(block_vocab) + 1)
            self.block_positions.append(positions)

        self.block_embedding_encoders = []
        self.block_embedding_projectors = []

        # Create block embedding encoders and projectors.
        for idx in range(self.num_blocks):
            vocabulary = blocks_vocabulary[idx]
            embedding_dim = blocks_embedding_dims[idx]
            self.block_embedding_encoders.append(
                embedding_encoder(len(vocabulary) + 1, embedding_dim)
            )
            if embedding_dim == base_embedding_dim:
                self.block_embedding_projectors.append(layers.Lambda(lambda x: x))
            else:
                self.block_embedding_projectors.append(layers.Dense(units=base_embedding_dim))

    def call(self, inputs):
        # Get block index for each input item.
        block_indicies = ops.take(self.vocab_to_block, inputs)
        # Initialize output embeddings to zeros.
        embeddings = ops.zeros(shape=(ops.shape(inputs)[0], base_embedding_dim))
        # Generate embeddings from blocks.
        for idx in range(self.num_blocks):
            # Lookup embeddings from the current block.
            block_embeddings = self.block_embedding_encoders[idx](
                ops.take(self.block_positions[idx], inputs))
            # Project embeddings to base_embedding_dim.
            block_embeddings = self.block_embedding_projectors[idx](block_embeddings)
            # Create a mask to filter out embeddings of items that do not belong to the
            # current block.
            mask = ops.expand_dims(ops.cast(block_indicies == idx, "float32"), 1)
            # Set the embeddings for the items not belonging to the current block to zeros.
            block_embeddings = block_embeddings * mask
            # Add the block embeddings to the final embeddings.
            embeddings += block_embeddings

        return embeddings


movie_frequencies = np.bincount(movie_id, minlength=num_movies)
sorted_movie_vocabulary = np.argsort(-movie_frequencies, kind="stable")

movie_blocks_vocabulary = [
    sorted_movie_vocabulary[:40],  # high popularity movies block
    sorted_movie_vocabulary[40:160],  # normal popularity movies block
    sorted_movie_vocabulary[160:],  # low popularity movies block
]

movie_blocks_embedding_dims = [32, 16, 8]

user_embedding_num_buckets = num_users // 50


def create_memory_efficient_model():
    # Take the user as an input.
    user_input = layers.Input(name="user_id", shape=(), dtype="int32")
    # Get user embedding.
    user_embedding = QREmbedding(
        vocabulary_size=num_users,
        embedding_dim=base_embedding_dim,
        num_buckets=user_embedding_num_buckets,
        name="user_embedding",
    )(user_input)

    # Take the movie as an input.
    movie_input = layers.Input(name="movie_id", shape=(), dtype="int32")
    # Get embedding.
    movie_embedding = MDEmbedding(
        blocks_vocabulary=movie_blocks_vocabulary,
        blocks_embedding_dims=movie_blocks_embedding_dims,
        base_embedding_dim=base_embedding_dim,
        name="movie_embedding",
    )(movie_input)

    # Compute dot product similarity between user and movie embeddings.
    logits = layers.Dot(axes=1, name="dot_similarity")([user_embedding, movie_embedding])
    # Convert to rating scale.
    prediction = keras.activations.sigmoid(logits) * 5
    # Create the model.
    model = keras.Model(inputs=[user_input, movie_input], outputs=prediction,
                        name="baseline_model")
    return model


memory_efficient_model = create_memory_efficient_model()
memory_efficient_model.summary()
print("parameters:", baseline_model.count_params(), "->", memory_efficient_model.count_params())

history = run_experiment(memory_efficient_model)

plt.plot(history.history["loss"])
plt.plot(history.history["val_loss"])
plt.title("model loss")
plt.ylabel("loss")
plt.xlabel("epoch")
plt.legend(["train", "eval"], loc="upper left")
plt.close()
