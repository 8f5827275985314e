"""keras.utils.FeatureSpace: one object that indexes, preprocesses and
encodes the columns of structured data (a dict of arrays, one per feature)
into one vector per sample, or a dict of encoded features.

Each feature is a preprocessing layer of tessera.nn (Normalization,
Rescaling, Discretization, IntegerLookup, StringLookup, Hashing; a user's
own for FeatureSpace.feature), crosses are HashedCrossing layers over the
preprocessed features, and categorical outputs are one-hot encoded by
CategoryEncoding (multi_hot over the (batch, 1) indices), as Keras 3's. The
features are sorted by name, then the crosses by name, and concatenated in
that order (output_mode="concat"), as Keras's.

It runs eagerly, with NumPy, as Keras's runs on tf.data outside the
compiled graph. In a model, `get_inputs()` are the raw Inputs and
`get_encoded_features()` the encoded tensor(s): a model from the encoded
features takes encoded arrays; a model from the raw Inputs to an output
computed from the encoded features (Keras's end-to-end inference model)
runs the FeatureSpace on the raw dict it is given, then its compiled
program on the encoded arrays (string_inputs.py, "group fronts")."""

from __future__ import annotations

import json
import os

import numpy as np

from .. import data as _data
from .keras_objects import deserialize_keras_object, serialize_keras_object
from .layers.base import Layer, _auto_name as auto_name
from .layers.core import Identity
from .layers.normalization import Normalization, Rescaling
from .layers.categorical import CategoryEncoding, Discretization
from .layers.preprocessing import (HashedCrossing, Hashing, IntegerLookup, StringLookup,
                                   TextVectorization)
from .functional import clone_graph
from .registry import ARCHITECTURE_HOOKS, model_class, register_file_format
from .saving import read_file, save_file
from .symbolic import Input, KerasTensor, user_location

__all__ = ["FeatureSpace", "Cross", "Feature", "load_feature_space"]

_FEATURE_MODES = ("int", "one_hot", "float")
_CROSS_MODES = ("int", "one_hot")
_TYPES = ("float", "float_normalized", "float_rescaled", "float_discretized",
          "integer_categorical", "string_categorical", "integer_hashed", "string_hashed")
_FORMAT = "tessera.FeatureSpace"


class Cross:
    """A feature cross: the named features' preprocessed values hashed
    together into crossing_dim bins (HashedCrossing)."""

    def __init__(self, feature_names, crossing_dim, output_mode="one_hot"):
        if output_mode not in _CROSS_MODES:
            raise ValueError(f"[FeatureSpace.cross] output_mode must be one of "
                             f"{list(_CROSS_MODES)}, got {output_mode!r} ({user_location()})")
        if isinstance(feature_names, str) or not all(isinstance(n, str) for n in feature_names):
            raise TypeError(f"[FeatureSpace.cross] feature_names must be a tuple of feature "
                            f"names, got {feature_names!r} ({user_location()})")
        if isinstance(crossing_dim, bool) or not isinstance(crossing_dim, int) or \
                crossing_dim < 1:
            raise ValueError(f"[FeatureSpace.cross] crossing_dim must be a positive int, got "
                             f"{crossing_dim!r} ({user_location()})")
        self.feature_names = tuple(feature_names)
        self.crossing_dim = crossing_dim
        self.output_mode = output_mode

    @property
    def name(self) -> str:
        return "_X_".join(self.feature_names)

    def get_config(self) -> dict:
        return {"feature_names": list(self.feature_names), "crossing_dim": self.crossing_dim,
                "output_mode": self.output_mode}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Feature:
    """One feature: the dtype of its Input, its preprocessing layer, and how
    its output is encoded ("int", "one_hot" or "float")."""

    def __init__(self, dtype, preprocessor, output_mode):
        if output_mode not in _FEATURE_MODES:
            raise ValueError(f"[FeatureSpace.feature] output_mode must be one of "
                             f"{list(_FEATURE_MODES)}, got {output_mode!r} ({user_location()})")
        if isinstance(preprocessor, dict):
            preprocessor = deserialize_keras_object(preprocessor)
        if not callable(preprocessor):
            raise TypeError(f"[FeatureSpace.feature] preprocessor must be a layer, got "
                            f"{type(preprocessor).__name__} ({user_location()})")
        self.dtype = dtype
        self.preprocessor = preprocessor
        self.output_mode = output_mode

    def get_config(self) -> dict:
        return {"dtype": self.dtype, "preprocessor": serialize_keras_object(self.preprocessor),
                "output_mode": self.output_mode}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _int_dtype(a) -> bool:
    return np.asarray(a).dtype.kind in "iu"


class FeatureSpace(Layer):
    """Keras's FeatureSpace: `features` maps each feature's name to a type
    name ("float", "float_normalized", "float_rescaled", "float_discretized",
    "integer_categorical", "string_categorical", "integer_hashed",
    "string_hashed") or to FeatureSpace.float(...), .integer_categorical(...)
    ...; `crosses` lists tuples of names (or FeatureSpace.cross(...));
    output_mode "concat" (one float32 vector per sample) or "dict".

        fs = FeatureSpace({"age": "float_discretized", "thal": "string_categorical"},
                          crosses=[("age", "thal")], output_mode="concat")
        fs.adapt(dataset_of_dicts)          # or a dict of arrays
        x = fs({"age": ages, "thal": thals})  # (batch, width) float32
    """

    kind = "FeatureSpace"

    # ---------------------------------------------------------------- types
    @classmethod
    def cross(cls, feature_names, crossing_dim, output_mode="one_hot"):
        return Cross(feature_names, crossing_dim, output_mode=output_mode)

    @classmethod
    def feature(cls, dtype, preprocessor, output_mode):
        return Feature(dtype, preprocessor, output_mode)

    @classmethod
    def float(cls, name=None):  # noqa: A003 (Keras's name)
        name = name or auto_name("float")
        return Feature("float32", Identity(name=f"{name}_preprocessor"), "float")

    @classmethod
    def float_rescaled(cls, scale=1.0, offset=0.0, name=None):
        name = name or auto_name("float_rescaled")
        return Feature("float32", Rescaling(scale=scale, offset=offset,
                                            name=f"{name}_preprocessor"), "float")

    @classmethod
    def float_normalized(cls, name=None):
        name = name or auto_name("float_normalized")
        return Feature("float32", Normalization(axis=-1, name=f"{name}_preprocessor"), "float")

    @classmethod
    def float_discretized(cls, num_bins, bin_boundaries=None, output_mode="one_hot", name=None):
        name = name or auto_name("float_discretized")
        return Feature("float32", Discretization(num_bins=num_bins, bin_boundaries=bin_boundaries,
                                                 name=f"{name}_preprocessor"), output_mode)

    @classmethod
    def integer_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot",
                            name=None):
        name = name or auto_name("integer_categorical")
        return Feature("int32", IntegerLookup(max_tokens=max_tokens,
                                              num_oov_indices=num_oov_indices,
                                              name=f"{name}_preprocessor"), output_mode)

    @classmethod
    def string_categorical(cls, max_tokens=None, num_oov_indices=1, output_mode="one_hot",
                           name=None):
        name = name or auto_name("string_categorical")
        return Feature("string", StringLookup(max_tokens=max_tokens,
                                              num_oov_indices=num_oov_indices,
                                              name=f"{name}_preprocessor"), output_mode)

    @classmethod
    def string_hashed(cls, num_bins, output_mode="one_hot", name=None):
        name = name or auto_name("string_hashed")
        return Feature("string", Hashing(num_bins=num_bins, name=f"{name}_preprocessor"),
                       output_mode)

    @classmethod
    def integer_hashed(cls, num_bins, output_mode="one_hot", name=None):
        name = name or auto_name("integer_hashed")
        return Feature("int32", Hashing(num_bins=num_bins, name=f"{name}_preprocessor"),
                       output_mode)

    # ------------------------------------------------------------ the space
    def __init__(self, features, output_mode="concat", crosses=None, crossing_dim=32,
                 hashing_dim=32, num_discretization_bins=32, name=None):
        super().__init__(name=name)
        where = user_location()
        if not features or not isinstance(features, dict):
            raise ValueError(f"[FeatureSpace] features must be a non-empty dict of feature names "
                             f"to types, got {features!r} ({where})")
        if output_mode not in ("concat", "dict"):
            raise ValueError(f"[FeatureSpace] output_mode must be 'concat' or 'dict', got "
                             f"{output_mode!r} ({where})")
        self.crossing_dim = crossing_dim
        self.hashing_dim = hashing_dim
        self.num_discretization_bins = num_discretization_bins
        self.output_mode = output_mode
        self.features = {n: self._standardize_feature(n, v, where) for n, v in features.items()}
        self.crosses = []
        for c in crosses or ():
            if isinstance(c, dict):
                c = Cross.from_config(c.get("config", c))
            if not isinstance(c, Cross):
                if not crossing_dim:
                    raise ValueError(f"[FeatureSpace] crosses given as names need crossing_dim "
                                     f"(the size of the crossing space), got {crossing_dim!r} "
                                     f"({where})")
                c = Cross(c, crossing_dim=crossing_dim)
            unknown = [n for n in c.feature_names if n not in self.features]
            if unknown:
                raise ValueError(f"[FeatureSpace] the cross {c.feature_names} names features "
                                 f"{unknown} that are not in features {sorted(self.features)} "
                                 f"({where})")
            self.crosses.append(c)
        self.crosses_by_name = {c.name: c for c in self.crosses}
        self.preprocessors = {n: f.preprocessor for n, f in self.features.items()}
        self.crossers = {c.name: HashedCrossing(c.crossing_dim, name=c.name)
                         for c in self.crosses}
        self.inputs = {n: Input(shape=(1,), dtype=f.dtype, name=n)
                       for n, f in self.features.items()}
        for t in self.inputs.values():
            t._group_source = True  # raw values the FeatureSpace encodes (string_inputs.py)
        self.one_hot_encoders = {}
        self.encoded_features = None
        self._is_adapted = False

    def _standardize_feature(self, name, feature, where):
        if isinstance(feature, Feature):
            return feature
        if isinstance(feature, dict):
            return Feature.from_config(feature.get("config", feature))
        if feature == "float":
            return self.float(name=name)
        if feature == "float_normalized":
            return self.float_normalized(name=name)
        if feature == "float_rescaled":
            return self.float_rescaled(name=name)
        if feature == "float_discretized":
            return self.float_discretized(name=name, num_bins=self.num_discretization_bins)
        if feature == "integer_categorical":
            return self.integer_categorical(name=name)
        if feature == "string_categorical":
            return self.string_categorical(name=name)
        if feature == "integer_hashed":
            return self.integer_hashed(self.hashing_dim, name=name)
        if feature == "string_hashed":
            return self.string_hashed(self.hashing_dim, name=name)
        raise ValueError(f"[FeatureSpace] feature {name!r} has the invalid type {feature!r}; "
                         f"expected one of {list(_TYPES)} or a FeatureSpace.<type>(...) "
                         f"({where})")

    # --------------------------------------------------------------- adapt
    def _adaptable(self) -> list:
        out = []
        for name in self.features:
            p = self.preprocessors[name]
            if isinstance(p, Normalization) and p.input_mean is not None:
                continue  # given mean and variance
            if isinstance(p, Discretization) and p.num_bins is None:
                continue  # given bin_boundaries (tessera's Discretization cannot adapt then)
            if isinstance(p, TextVectorization) and p.vocabulary_size() > 2:
                continue  # given a vocabulary
            if hasattr(p, "adapt"):
                out.append(name)
        return out

    def adapt(self, dataset):
        """Adapts each feature's layer (vocabularies, mean and variance, bin
        boundaries) on `dataset`: a tessera Dataset of dicts (batched or
        not: unbatched samples are batched by 32, as Keras's) or a dict of
        arrays (its rows are the samples)."""
        where = user_location()
        if isinstance(dataset, dict):
            dataset = _data.Dataset.from_tensor_slices(
                {k: np.asarray(v) for k, v in dataset.items()})
        if not isinstance(dataset, _data.Dataset):
            raise ValueError(f"[FeatureSpace.adapt] can only be called on a tessera.data.Dataset "
                             f"or a dict of arrays/lists, got {type(dataset).__name__} ({where})")
        names = self._adaptable()
        if names:
            batches = {n: [] for n in names}
            unbatched = dataset.batch_size is None
            pending = {n: [] for n in names}
            for element in dataset:
                if not isinstance(element, dict):
                    raise ValueError(
                        f"[FeatureSpace.adapt] the dataset must yield dicts of feature values "
                        f"(no labels: map `lambda x, y: x` first), got an element of type "
                        f"{type(element).__name__} ({where})")
                missing = [n for n in names if n not in element]
                if missing:
                    raise ValueError(f"[FeatureSpace.adapt] the dataset's dicts lack features "
                                     f"{missing} (they hold {sorted(element)}) ({where})")
                for n in names:
                    x = np.asarray(element[n])
                    if unbatched or x.ndim == 0:
                        pending[n].append(x)
                        if len(pending[n]) == 32:
                            batches[n].append(np.stack(pending[n]))
                            pending[n] = []
                    else:
                        batches[n].append(x)
            for n in names:
                if pending[n]:
                    batches[n].append(np.stack(pending[n]))
                # rank 1 (a batch of scalars): a feature axis of 1, as Keras's expand_dims
                parts = [b[..., None] if b.ndim <= 1 else b for b in batches[n]]
                if not parts:
                    raise ValueError(f"[FeatureSpace.adapt] the dataset is empty ({where})")
                self.preprocessors[n].adapt(_Batches(parts))
        self._is_adapted = True
        self.get_encoded_features()
        self.built = True

    # ------------------------------------------------------------- the graph
    def _check_adapted(self, where):
        if not self._is_adapted:
            if self._adaptable():
                raise ValueError(f"[FeatureSpace] call .adapt(dataset) on the FeatureSpace "
                                 f"before using it ({where})")
            self._is_adapted = True

    def get_inputs(self) -> dict:
        """The raw Inputs, one per feature: shape (1,), dtype float32, int32 or
        string, named by the feature."""
        self._check_adapted(user_location())
        self.get_encoded_features()
        return self.inputs

    def get_encoded_features(self):
        """The encoded features as symbolic tensors: one (None, width) float32
        tensor (concat) or a dict of them (dict). A model whose outputs are
        computed from them takes encoded arrays; one whose inputs are
        get_inputs() takes raw dicts and runs this FeatureSpace on them."""
        where = user_location()
        self._check_adapted(where)
        if self.encoded_features is None:
            probe = self._probe()
            out = self._encode(probe, where)
            front = _Front(self)
            if self.output_mode == "concat":
                self.encoded_features = front.tensor(None, out, where)
            else:
                self.encoded_features = {k: front.tensor(k, v, where) for k, v in out.items()}
        return self.encoded_features

    def _probe(self) -> dict:
        """Two rows per feature the layers accept (a known vocabulary entry
        where there is one), to learn the encoded shapes and dtypes."""
        out = {}
        for name, f in self.features.items():
            p = f.preprocessor
            if isinstance(p, (IntegerLookup, StringLookup)):
                vocab = p.get_vocabulary(include_special_tokens=False)
                v = vocab[0] if vocab else (0 if isinstance(p, IntegerLookup) else "")
            elif f.dtype == "string":
                v = ""
            else:
                v = 0
            dtype = object if f.dtype == "string" else f.dtype
            out[name] = np.array([[v], [v]], dtype=dtype)
            if f.dtype == "string":
                out[name] = out[name].astype(str)
        return out

    # ----------------------------------------------------------------- call
    def _preprocess(self, data, where):
        out = {}
        for name, f in self.features.items():
            x = data[name]
            p = f.preprocessor
            try:
                if isinstance(p, Identity):
                    y = np.asarray(x, dtype=np.float32)
                elif isinstance(p, (Normalization, Rescaling)):
                    y = np.asarray(p(np.asarray(x, dtype=np.float32)), dtype=np.float32)
                elif f.dtype == "string":
                    y = np.asarray(p(np.asarray(x).astype(str)))
                else:
                    y = np.asarray(p(x))
            except (TypeError, ValueError, IndexError) as e:
                raise type(e)(f"[FeatureSpace] feature {name!r} (layer {p.name!r}): {e} "
                              f"({where})") from None
            out[name] = y
        return out

    def _cross(self, pre, where):
        out = {}
        for c in self.crosses:
            try:
                out[c.name] = np.asarray(self.crossers[c.name]([pre[n] for n in c.feature_names]))
            except (TypeError, ValueError) as e:
                raise type(e)(f"[FeatureSpace] cross {c.name!r}: {e} ({where})") from None
        return out

    def _cardinality(self, name, layer):
        if isinstance(layer, (IntegerLookup, StringLookup)):
            return layer.vocabulary_size()
        if isinstance(layer, CategoryEncoding):
            return layer.num_tokens
        if isinstance(layer, Discretization):
            return layer.num_bins if layer.num_bins is not None else \
                len(layer.bin_boundaries) + 1
        if isinstance(layer, (HashedCrossing, Hashing)):
            return layer.num_bins
        raise ValueError(f"[FeatureSpace] feature {name!r} has output_mode='one_hot', but its "
                         f"layer {type(layer).__name__} has no known number of values to "
                         "one-hot encode; use output_mode='int'")

    def _merge(self, pre, crossed, where):
        names = sorted(pre) + sorted(crossed)
        specs = {**self.features, **self.crosses_by_name}
        out = {}
        for name in names:
            x = pre[name] if name in pre else crossed[name]
            spec = specs[name]
            if spec.output_mode == "one_hot":
                if not _int_dtype(x):
                    raise ValueError(f"[FeatureSpace] feature {name!r} has output_mode="
                                     f"'one_hot', so its layer must return integers; it "
                                     f"returns {x.dtype} ({where})")
                enc = self.one_hot_encoders.get(name)
                if enc is None:
                    layer = self.preprocessors.get(name) or self.crossers.get(name)
                    enc = CategoryEncoding(num_tokens=self._cardinality(name, layer),
                                           output_mode="multi_hot")
                    self.one_hot_encoders[name] = enc
                try:
                    x = np.asarray(enc(x))
                except ValueError as e:
                    raise ValueError(f"[FeatureSpace] feature {name!r}: {e} ({where})") from None
            out[name] = x
        if self.output_mode == "dict":
            return out
        for name, x in out.items():
            if x.dtype.kind not in "f":
                raise ValueError(f"[FeatureSpace] cannot concatenate the features: feature "
                                 f"{name!r} is not encoded (it has dtype {x.dtype}); use "
                                 f"output_mode='dict' or a one_hot / float encoding ({where})")
        return np.concatenate([out[n].astype(np.float32) for n in names], axis=-1)

    def _encode(self, data, where):
        pre = self._preprocess(data, where)
        return self._merge(pre, self._cross(pre, where), where)

    def __call__(self, data):
        """Encodes a dict of arrays: a batch (each value of shape (batch,) or
        (batch, 1)) or one sample (scalars: the result has no batch axis)."""
        where = user_location()
        self._check_adapted(where)
        if not isinstance(data, dict):
            raise ValueError(f"[FeatureSpace] can only be called on a dict of feature values, "
                             f"got {type(data).__name__} ({where})")
        missing = [n for n in self.features if n not in data]
        extra = [n for n in data if n not in self.features]
        if missing or extra:
            raise ValueError(f"[FeatureSpace] the dict must hold exactly the features "
                             f"{sorted(self.features)}; missing {missing}, unknown {extra} "
                             f"({where})")
        if any(isinstance(v, KerasTensor) for v in data.values()):
            raise TypeError(f"[FeatureSpace] called on symbolic tensors ({where}): use "
                            "get_inputs() and get_encoded_features() to build a model")
        rows, rebatched = {}, False
        for name in self.features:
            x = np.asarray(data[name])
            if x.ndim == 0:
                x, rebatched = x.reshape(1, 1), True
            elif x.ndim == 1:
                x = x[:, None]
            rows[name] = x
        out = self._encode(rows, where)
        if rebatched:
            if self.output_mode == "concat":
                if out.shape[0] != 1:
                    raise ValueError(f"[FeatureSpace] a single sample (scalars) mixed with "
                                     f"batches: the result has {out.shape[0]} rows ({where})")
                return out[0]
            return {k: (v[0] if v.ndim == 2 and v.shape[0] == 1 else v) for k, v in out.items()}
        return out

    # -------------------------------------------------------------- config
    def get_config(self) -> dict:
        """Keras's config; an adapted Normalization's mean and variance are in its
        layer's config (Keras keeps them as the file's weights), so
        from_config(get_config()) is a ready FeatureSpace."""
        features = {}
        for n, f in self.features.items():
            cfg = f.get_config()
            p = f.preprocessor
            if isinstance(p, Normalization) and p.input_mean is None:
                stats = _normalization_stats(p)
                if stats is not None:
                    cfg["preprocessor"]["config"]["mean"], \
                        cfg["preprocessor"]["config"]["variance"] = stats
            features[n] = {"class_name": "Feature", "config": cfg}
        return {"features": features,
                "output_mode": self.output_mode,
                "crosses": [{"class_name": "Cross", "config": c.get_config()}
                            for c in self.crosses],
                "crossing_dim": self.crossing_dim, "hashing_dim": self.hashing_dim,
                "num_discretization_bins": self.num_discretization_bins, "name": self.name}

    @classmethod
    def from_config(cls, config):
        """A FeatureSpace from get_config's dict; as Keras's load, it counts as
        adapted (the layers' configs hold the learned vocabularies and bin
        boundaries; save puts Normalization's mean and variance in its)."""
        space = cls(**config)
        space._is_adapted = True
        return space

    def save(self, filepath):
        """Writes the FeatureSpace (its config and what adapt learned) to a
        file; tessera.nn.models.load_model (or load_feature_space) reads it."""
        where = user_location()
        self._check_adapted(where)
        config = self.get_config()
        meta = {"holds": _FORMAT, "feature_space": json.loads(json.dumps(config, default=_json))}
        save_file(os.fspath(filepath), {}, meta, "FeatureSpace.save")


def _json(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, tuple):
        return list(v)
    raise TypeError(f"[FeatureSpace.save] cannot write a {type(v).__name__} into the file")


def _normalization_stats(layer):
    """(mean, variance) lists of an adapted Normalization, or None."""
    adapted = layer.__dict__.get("_adapted")
    if layer.built and layer.params:
        w = layer.get_weights()
        return np.asarray(w[0]).tolist(), np.asarray(w[1]).tolist()
    if adapted is not None:
        return np.asarray(adapted[0]).tolist(), np.asarray(adapted[1]).tolist()
    return None


def load_feature_space(filepath) -> FeatureSpace:
    """Reads a FeatureSpace written by FeatureSpace.save (load_model does
    too). The file is data: it may name only tessera's layers."""
    _, header = read_file(os.fspath(filepath), "load_model")
    return _from_header(header, os.fspath(filepath))


def _from_header(header, path):
    if header.get("holds") != _FORMAT or not isinstance(header.get("feature_space"), dict):
        raise ValueError(f"[load_model] {path} does not hold a FeatureSpace")
    try:
        return _checked(FeatureSpace.from_config(header["feature_space"]), path)
    except (TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"[load_model] {path}: the FeatureSpace config is malformed "
                         f"({type(e).__name__}: {str(e)[:200]})") from None


# The widest encoded feature a file may declare: its one-hot vectors are allocated per
# sample, so a crafted size (crossing_dim=10**12) is refused before anything is made.
MAX_LOADED_WIDTH = 1 << 22


def _checked(space, path):
    for name, spec in list(space.features.items()) + list(space.crosses_by_name.items()):
        layer = space.preprocessors.get(name) or space.crossers.get(name)
        sizes = [getattr(layer, a, None) for a in ("num_bins", "num_tokens", "max_tokens")]
        if isinstance(layer, Discretization) and layer.bin_boundaries is not None:
            sizes.append(len(layer.bin_boundaries) + 1)
        if isinstance(layer, (IntegerLookup, StringLookup)):
            sizes.append(layer.vocabulary_size())
        big = [v for v in sizes if isinstance(v, int) and v > MAX_LOADED_WIDTH]
        if big:
            raise ValueError(f"[load_model] {path}: feature {name!r} declares {big[0]} values, "
                             f"past the {MAX_LOADED_WIDTH} a loaded FeatureSpace may encode "
                             "(nothing of that size was made)")
    return space


register_file_format(_FORMAT, _from_header)


# ------------------------------------------- an end-to-end model in a file
def _save_fronts(model) -> dict:
    """The architecture's "feature_spaces": each FeatureSpace between the
    model's raw Inputs and its program (config and what adapt learned), and
    where each raw Input and each encoded feature comes from."""
    plan = model.__dict__.get("_group_fronts")
    if not plan:
        return {}
    spaces = []
    for front, _ in plan["fronts"]:
        if all(front.space is not s for s in spaces):
            spaces.append(front.space)
    raw = []
    for k, t in enumerate(plan["raw"]):
        entry = None
        for i, space in enumerate(spaces):
            for feature, u in space.inputs.items():
                if u is t:
                    entry = {"space": i, "feature": feature}
        raw.append(entry or {"kept": plan["keep"].index(k)})
    fronts = [{"space": next(i for i, s in enumerate(spaces) if s is front.space), "key": key}
              for front, key in plan["fronts"]]
    doc = {"spaces": [s.get_config() for s in spaces], "raw": raw, "keep": plan["keep"],
           "fronts": fronts, "keys": plan.get("keys")}
    return {"feature_spaces": json.loads(json.dumps(doc, default=_json))}


def _load_fronts(model, arch, ctx):
    """The loaded program (inputs: the encoded features) behind its
    FeatureSpaces again: a model taking the raw inputs, as it was saved."""
    doc = arch.get("feature_spaces")
    if doc is None:
        return model
    try:
        spaces = [_checked(FeatureSpace.from_config(c), ctx.path) for c in doc["spaces"]]
        prog = list(model._inputs)
        raw = [prog[r["kept"]] if "kept" in r else spaces[r["space"]].inputs[r["feature"]]
               for r in doc["raw"]]
        new = [raw[k] for k in doc["keep"]]
        for f in doc["fronts"]:
            enc = spaces[f["space"]].get_encoded_features()
            new.append(enc if f["key"] is None else enc[f["key"]])
        if len(new) != len(prog):
            raise ValueError(f"{len(new)} program inputs for {len(prog)}")
        outs = clone_graph(model._outputs, prog, new)
        keys = doc.get("keys")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise ctx.error(f"its FeatureSpaces are malformed ({type(e).__name__}: "
                        f"{str(e)[:200]})") from None
    ins = dict(zip(keys, raw)) if keys else raw if len(raw) > 1 else raw[0]
    out_keys = getattr(model, "_output_keys", None)
    outs = dict(zip(out_keys, outs)) if out_keys else outs if model._multi_out else outs[0]
    return model_class("Model")(ins, outs, name=model.name, seed=model.seed, dtype=model.dtype)


ARCHITECTURE_HOOKS["save"], ARCHITECTURE_HOOKS["load"] = _save_fronts, _load_fronts


class _Batches:
    """An iterable of batches (what the layers' adapt reads batch by batch)."""

    def __init__(self, parts):
        self.parts = parts

    def __iter__(self):
        return iter(self.parts)


class _Front:
    """The encoded features of a FeatureSpace as model inputs computed from
    its raw Inputs (string_inputs.py reads `_group_front`)."""

    def __init__(self, space):
        self.space = space
        self.sources = list(space.inputs.values())

    def tensor(self, key, value, where):
        t = KerasTensor((None,) + tuple(np.shape(value)[1:]), str(np.asarray(value).dtype),
                        "input", where=where, name=key or f"{self.space.name}_encoded")
        t._group_front = (self, key)
        return t

    def __call__(self, raw: list, where: str):
        """The encoded arrays (concat: one; dict: by key) of the raw arrays,
        given in the order of the space's Inputs."""
        data = {}
        for name, x in zip(self.space.inputs, raw):
            x = np.asarray(x)
            data[name] = x.reshape(-1, 1) if x.ndim <= 1 else x
        return self.space._encode(data, where)
