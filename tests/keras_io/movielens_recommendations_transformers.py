# Modeled on keras-io examples/structured_data/movielens_recommendations_transformers.py (the
# Behavior Sequence Transformer); written for tessera. In place of the MovieLens-1M download and
# pandas: 120 users and 240 movies with generated attributes and genres, each user's ratings drawn
# from a hidden taste (a movie's quality plus the user's liking of its first genre), cut into
# sequences of 4 with a step of 2 as the example does. Its StringLookup layers (TensorFlow under
# Keras 3) are a dict from the string ids to indices applied while loading the data, so the model's
# inputs are int32 indices; `ops.arange` for `tf.range`; the tf.data CSV pipeline is the arrays'
# dict given to fit. Hidden units [64, 32] (256, 128 there), 3 epochs (5), batches of 128 (265).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)

genres = ["Action", "Adventure", "Animation", "Children's", "Comedy", "Crime"]
genres += ["Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical"]
genres += ["Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western"]

num_users, num_movies = 120, 240
users = {
    "user_id": [f"user_{i + 1}" for i in range(num_users)],
    "sex": list(rng.choice(["F", "M"], num_users)),
    "age_group": [f"group_{g}" for g in rng.choice([1, 18, 25, 35, 45, 50, 56], num_users)],
    "occupation": [f"occupation_{o}" for o in rng.integers(0, 21, num_users)],
}
movie_ids = [f"movie_{i + 1}" for i in range(num_movies)]
genre_vectors = (rng.random((num_movies, len(genres))) < 0.15).astype("int64")
first_genre = rng.integers(0, len(genres), num_movies)
genre_vectors[np.arange(num_movies), first_genre] = 1
quality = rng.normal(0, 1, num_movies)
taste = rng.normal(0, 1, (num_users, len(genres)))

# Each user rates 10-30 movies in time order; ratings 1..5 from quality and taste.
sequence_length = 4
step_size = 2


def create_sequences(values, window_size, step_size):
    sequences = []
    start_index = 0
    while True:
        end_index = start_index + window_size
        seq = values[start_index:end_index]
        if len(seq) < window_size:
            seq = values[-window_size:]
            if len(seq) == window_size:
                sequences.append(seq)
            break
        sequences.append(seq)
        start_index += step_size
    return sequences


rows = []
for u in range(num_users):
    seen = rng.choice(num_movies, rng.integers(10, 31), replace=False)
    score = 3 + 1.2 * quality[seen] + 0.8 * taste[u, first_genre[seen]]
    ratings = np.clip(np.round(score + rng.normal(0, 0.3, len(seen))), 1, 5)
    for ids, rs in zip(create_sequences(list(seen), sequence_length, step_size),
                       create_sequences(list(ratings), sequence_length, step_size)):
        rows.append((u, ids, rs))
print(len(rows), "sequences")

CATEGORICAL_FEATURES_WITH_VOCABULARY = {
    "user_id": users["user_id"],
    "movie_id": movie_ids,
    "sex": sorted(set(users["sex"])),
    "age_group": sorted(set(users["age_group"])),
    "occupation": sorted(set(users["occupation"])),
}
USER_FEATURES = ["sex", "age_group", "occupation"]
# The StringLookup(vocabulary=..., mask_token=None, num_oov_indices=0) of each feature.
index_of = {name: {v: i for i, v in enumerate(vocab)}
            for name, vocab in CATEGORICAL_FEATURES_WITH_VOCABULARY.items()}


def make_features(rows):
    feats = {"user_id": [], "sequence_movie_ids": [], "target_movie_id": [],
             "sequence_ratings": [], "sex": [], "age_group": [], "occupation": []}
    target = []
    for u, ids, rs in rows:
        feats["user_id"].append([u])
        feats["sequence_movie_ids"].append(ids[:-1])
        feats["target_movie_id"].append([ids[-1]])
        feats["sequence_ratings"].append(rs[:-1])
        for name in USER_FEATURES:
            feats[name].append([index_of[name][users[name][u]]])
        target.append(rs[-1])
    out = {k: np.asarray(v, "float32" if k == "sequence_ratings" else "int32")
           for k, v in feats.items()}
    return out, np.asarray(target, "float32")


random_selection = rng.random(len(rows)) <= 0.85
train_x, train_y = make_features([r for r, s in zip(rows, random_selection) if s])
test_x, test_y = make_features([r for r, s in zip(rows, random_selection) if not s])


def create_model_inputs():
    return {
        "user_id": keras.Input(name="user_id", shape=(1,), dtype="int32"),
        "sequence_movie_ids": keras.Input(name="sequence_movie_ids",
                                          shape=(sequence_length - 1,), dtype="int32"),
        "target_movie_id": keras.Input(name="target_movie_id", shape=(1,), dtype="int32"),
        "sequence_ratings": keras.Input(name="sequence_ratings",
                                        shape=(sequence_length - 1,), dtype="float32"),
        "sex": keras.Input(name="sex", shape=(1,), dtype="int32"),
        "age_group": keras.Input(name="age_group", shape=(1,), dtype="int32"),
        "occupation": keras.Input(name="occupation", shape=(1,), dtype="int32"),
    }


def encode_input_features(inputs, include_user_id=True, include_user_features=True,
                          include_movie_features=True):
    encoded_transformer_features = []
    encoded_other_features = []
    other_feature_names = []
    if include_user_id:
        other_feature_names.append("user_id")
    if include_user_features:
        other_feature_names.extend(USER_FEATURES)

    for feature_name in other_feature_names:
        vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY[feature_name]
        idx = inputs[feature_name]
        embedding_dims = int(math.sqrt(len(vocabulary)))
        embedding_encoder = layers.Embedding(input_dim=len(vocabulary),
                                             output_dim=embedding_dims,
                                             name=f"{feature_name}_embedding")
        encoded_other_features.append(embedding_encoder(idx))

    if len(encoded_other_features) > 1:
        encoded_other_features = layers.concatenate(encoded_other_features)
    elif len(encoded_other_features) == 1:
        encoded_other_features = encoded_other_features[0]
    else:
        encoded_other_features = None

    movie_vocabulary = CATEGORICAL_FEATURES_WITH_VOCABULARY["movie_id"]
    movie_embedding_dims = int(math.sqrt(len(movie_vocabulary)))
    movie_embedding_encoder = layers.Embedding(input_dim=len(movie_vocabulary),
                                               output_dim=movie_embedding_dims,
                                               name="movie_embedding")
    movie_genres_lookup = layers.Embedding(
        input_dim=genre_vectors.shape[0],
        output_dim=genre_vectors.shape[1],
        embeddings_initializer=keras.initializers.Constant(genre_vectors),
        trainable=False,
        name="genres_vector",
    )
    movie_embedding_processor = layers.Dense(units=movie_embedding_dims, activation="relu",
                                             name="process_movie_embedding_with_genres")

    def encode_movie(movie_idx):
        movie_embedding = movie_embedding_encoder(movie_idx)
        encoded_movie = movie_embedding
        if include_movie_features:
            movie_genres_vector = movie_genres_lookup(movie_idx)
            encoded_movie = movie_embedding_processor(
                layers.concatenate([movie_embedding, movie_genres_vector]))
        return encoded_movie

    encoded_target_movie = encode_movie(inputs["target_movie_id"])
    encoded_sequence_movies = encode_movie(inputs["sequence_movie_ids"])

    # The example calls this Embedding on a constant range (tf.range) while building the graph.
    position_embedding_encoder = layers.Embedding(input_dim=sequence_length,
                                                  output_dim=movie_embedding_dims,
                                                  name="position_embedding")
    positions = keras.ops.arange(start=0, stop=sequence_length - 1, step=1)
    encodded_positions = position_embedding_encoder(positions)

    sequence_ratings = keras.ops.expand_dims(inputs["sequence_ratings"], -1)
    encoded_sequence_movies_with_poistion_and_rating = layers.Multiply()(
        [(encoded_sequence_movies + encodded_positions), sequence_ratings])

    for i in range(sequence_length - 1):
        feature = encoded_sequence_movies_with_poistion_and_rating[:, i, ...]
        feature = keras.ops.expand_dims(feature, 1)
        encoded_transformer_features.append(feature)
    encoded_transformer_features.append(encoded_target_movie)
    encoded_transformer_features = layers.concatenate(encoded_transformer_features, axis=1)
    return encoded_transformer_features, encoded_other_features


include_user_id = False
include_user_features = False
include_movie_features = False
hidden_units = [64, 32]
dropout_rate = 0.1
num_heads = 3


def create_model():
    inputs = create_model_inputs()
    transformer_features, other_features = encode_input_features(
        inputs, include_user_id, include_user_features, include_movie_features)
    attention_output = layers.MultiHeadAttention(
        num_heads=num_heads, key_dim=transformer_features.shape[2], dropout=dropout_rate
    )(transformer_features, transformer_features)
    attention_output = layers.Dropout(dropout_rate)(attention_output)
    x1 = layers.Add()([transformer_features, attention_output])
    x1 = layers.LayerNormalization()(x1)
    x2 = layers.LeakyReLU()(x1)
    x2 = layers.Dense(units=x2.shape[-1])(x2)
    x2 = layers.Dropout(dropout_rate)(x2)
    transformer_features = layers.Add()([x1, x2])
    transformer_features = layers.LayerNormalization()(transformer_features)
    features = layers.Flatten()(transformer_features)
    if other_features is not None:
        features = layers.concatenate(
            [features, layers.Reshape([other_features.shape[-1]])(other_features)])
    for num_units in hidden_units:
        features = layers.Dense(num_units)(features)
        features = layers.BatchNormalization()(features)
        features = layers.LeakyReLU()(features)
        features = layers.Dropout(dropout_rate)(features)
    outputs = layers.Dense(units=1)(features)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model


model = create_model()
model.summary()
model.compile(optimizer=keras.optimizers.Adagrad(learning_rate=0.01),
              loss=keras.losses.MeanSquaredError(),
              metrics=[keras.metrics.MeanAbsoluteError()])
history = model.fit(train_x, train_y, batch_size=128, shuffle=True, epochs=3)
_, mae = model.evaluate(test_x, test_y, batch_size=128, verbose=0)
print(f"Test MAE: {round(mae, 3)}")

# The model learned the ratings (a constant guess of the mean has this MAE).
baseline = float(np.mean(np.abs(test_y - train_y.mean())))
print("baseline MAE", round(baseline, 3))
assert history.history["loss"][-1] < history.history["loss"][0], history.history
names = [w.path if hasattr(w, "path") else w.name for w in model.weights]
assert not any("position_embedding" in n for n in names), names
