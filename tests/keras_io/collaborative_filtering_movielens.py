# Modeled on keras-io examples/structured_data/collaborative_filtering_movielens.py
# (ops.sigmoid in place of tf.nn.sigmoid, learning_rate= in place of lr=); written for
# tessera. User and movie
# embeddings, their dot product and biases predict a rating.
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

# In place of MovieLens's ratings.csv (a download read with pandas): ratings drawn from
# hidden user and movie tastes, with MovieLens's non-sequential ids, shrunk.
rng = np.random.default_rng(0)
n_users, n_movies, n_ratings = 200, 400, 8000
user_taste = rng.normal(size=(n_users, 4))
movie_taste = rng.normal(size=(n_movies, 4))
raw_user_ids = rng.choice(np.arange(1, 5 * n_users), n_users, replace=False)
raw_movie_ids = rng.choice(np.arange(1, 50 * n_movies), n_movies, replace=False)
u = rng.integers(0, n_users, n_ratings)
m = rng.integers(0, n_movies, n_ratings)
score = (user_taste[u] * movie_taste[m]).sum(axis=1)
ratings = np.clip(np.round(2 * (3.0 + score)) / 2, 0.5, 5.0).astype(np.float32)
ratings_user_id, ratings_movie_id = raw_user_ids[u], raw_movie_ids[m]

# The ids are not sequential: encode them as indices.
user_ids = list(dict.fromkeys(ratings_user_id.tolist()))
user2user_encoded = {x: i for i, x in enumerate(user_ids)}
userencoded2user = {i: x for i, x in enumerate(user_ids)}
movie_ids = list(dict.fromkeys(ratings_movie_id.tolist()))
movie2movie_encoded = {x: i for i, x in enumerate(movie_ids)}
movie_encoded2movie = {i: x for i, x in enumerate(movie_ids)}
user = np.array([user2user_encoded[x] for x in ratings_user_id])
movie = np.array([movie2movie_encoded[x] for x in ratings_movie_id])

num_users = len(user2user_encoded)
num_movies = len(movie_encoded2movie)
min_rating = min(ratings)
max_rating = max(ratings)
print(
    "Number of users: {}, Number of Movies: {}, Min rating: {}, Max rating: {}".format(
        num_users, num_movies, min_rating, max_rating
    )
)

order = np.random.RandomState(42).permutation(n_ratings)  # df.sample(frac=1)
x = np.stack([user, movie], axis=1)[order]
# Targets scaled to [0, 1]: easier to train.
y = ((ratings - min_rating) / (max_rating - min_rating))[order]
train_indices = int(0.9 * n_ratings)
x_train, x_test, y_train, y_test = (
    x[:train_indices],
    x[train_indices:],
    y[:train_indices],
    y[train_indices:],
)

EMBEDDING_SIZE = 50


class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.num_users = num_users
        self.num_movies = num_movies
        self.embedding_size = embedding_size
        self.user_embedding = layers.Embedding(
            num_users,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(
            num_movies,
            embedding_size,
            embeddings_initializer="he_normal",
            embeddings_regularizer=keras.regularizers.l2(1e-6),
        )
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = layers.Dot(axes=1)([user_vector, movie_vector])
        # The biases added in
        x = dot_user_movie + user_bias + movie_bias
        # The sigmoid keeps the rating between 0 and 1
        return ops.sigmoid(x)


model = RecommenderNet(num_users, num_movies, EMBEDDING_SIZE)
model.compile(
    loss=keras.losses.BinaryCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=0.001),
)

history = model.fit(
    x=x_train,
    y=y_train,
    batch_size=64,
    epochs=3,  # 5 in the example
    verbose=1,
    validation_data=(x_test, y_test),
)

plt.plot(history.history["loss"])
plt.plot(history.history["val_loss"])
plt.title("model loss")
plt.ylabel("loss")
plt.xlabel("epoch")
plt.legend(["train", "test"], loc="upper left")
plt.savefig(os.path.join(tempfile.gettempdir(), "loss.png"))
plt.close()

# The top 10 recommendations for one user, among the movies they did not rate.
user_id = ratings_user_id[np.random.randint(n_ratings)]
movies_watched_by_user = set(ratings_movie_id[ratings_user_id == user_id].tolist())
movies_not_watched = [x for x in movie_ids if x not in movies_watched_by_user]
movies_not_watched = [[movie2movie_encoded.get(x)] for x in movies_not_watched]
user_encoder = user2user_encoded.get(user_id)
user_movie_array = np.hstack(([[user_encoder]] * len(movies_not_watched), movies_not_watched))
ratings_pred = model.predict(user_movie_array).flatten()
top_ratings_indices = ratings_pred.argsort()[-10:][::-1]
recommended_movie_ids = [movie_encoded2movie.get(movies_not_watched[x][0])
                         for x in top_ratings_indices]
print("Showing recommendations for user: {}".format(user_id))
print("Top 10 movie recommendations:", recommended_movie_ids)
