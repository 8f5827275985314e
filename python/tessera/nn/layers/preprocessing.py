"""Keras's preprocessing layers: text (TextVectorization, StringLookup,
IntegerLookup, Hashing, HashedCrossing); categorical.py has CategoryEncoding
and Discretization, image_preprocessing.py and image_color.py the image ones.

They run eagerly on NumPy arrays (strings included), as Keras's run outside
the compiled graph: call them on your data before fit, or in a data pipeline
(`tessera.data.Dataset.map(layer)`). The numeric ones also compile into a
model when called on Input(...) or a layer's output, as Keras's do:
IntegerLookup (its vocabulary becomes constants of the program),
CategoryEncoding, Discretization and the image layers (random in fit, the
identity in evaluate and predict). Strings cannot flow through a compiled
program, and Hashing / HashedCrossing hash text, so those raise a TypeError
saying to apply them to the data (a string Input fed straight to one is the
model's front: string_inputs.py).

    vectorize = nn.TextVectorization(max_tokens=20000, output_sequence_length=200)
    vectorize.adapt(texts)            # a list / array of str, or a Dataset of them
    x = vectorize(texts)              # int64 array (batch, 200)
    model.fit(x, y)

Random image layers follow Keras: called eagerly they transform (training
defaults to True); with training=False they are the identity."""

from __future__ import annotations

import os
import re

import numpy as np

from ... import data as _data
from .. import _hashes
from ..string_inputs import front_tensor, is_string
from ..symbolic import KerasTensor, user_location
from .base import Layer
from .encoding import encode_expr, encoded_shape, float_list, int_list
from .int_hash import cross_expr, fingerprint_expr, unsigned_mod_expr

__all__ = ["TextVectorization", "StringLookup", "IntegerLookup", "Hashing", "HashedCrossing"]
# CategoryEncoding, Discretization: categorical.py; the image layers: image_preprocessing.py


def _has_symbolic(obj) -> bool:
    if isinstance(obj, KerasTensor):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_has_symbolic(o) for o in obj)
    if isinstance(obj, dict):
        return any(_has_symbolic(o) for o in obj.values())
    return False


def _where() -> str:
    return user_location()


class _Preprocessing(Layer):
    """Eager layers: layer(array) computes at once with NumPy. Those with
    in_graph also compile into a model (compute_output_shape and forward
    write their tessera expression) when called on a symbolic tensor."""

    strings = False  # takes (or gives) strings
    in_graph = False
    eager_only_reason = None  # why a layer never compiles into a model, when not strings

    def __call__(self, inputs, *args, **kwargs):
        if self.strings and is_string(inputs) and not args and not kwargs:
            return front_tensor(self, inputs)  # the model's front (string_inputs.py)
        if self._graph_ok() and (_has_symbolic(inputs) or _has_symbolic(list(args))):
            return Layer.__call__(self, inputs, *args, **kwargs)
        if _has_symbolic(inputs) or _has_symbolic(list(args)) or \
                _has_symbolic(list(kwargs.values())):
            what = ("strings cannot flow through a compiled tessera program" if self.strings
                    else "preprocessing layers run eagerly on arrays, not inside the compiled "
                         "model")
            why = self.eager_only_reason or self._graph_refusal()
            raise TypeError(
                f"[{self.kind}] layer {self.name!r} called on a model's symbolic tensor at "
                f"{_where()}: {why or what}. Apply it to the data instead, before fit "
                f"(x = layer(data)) or in the pipeline (dataset.map(layer)); see docs/nn.md "
                "\"Preprocessing layers\"")
        return self.call(inputs, *args, **kwargs)

    def _graph_ok(self) -> bool:
        return self.in_graph and self._graph_refusal() is None

    def _graph_refusal(self):
        """Why this layer (with these arguments) cannot compile into a model,
        or None."""
        if not self.in_graph:
            return None
        return None

    def _is_custom(self) -> bool:
        return False

    def compute_output_shape(self, input_shape):
        raise TypeError(f"[{self.kind}] layer {self.name!r} runs eagerly on arrays and cannot "
                        "be part of a model; apply it to the data (see docs/nn.md)")

    def count_params(self) -> int:
        return 0


def _batches(data, steps, where, lists_are_batches=False):
    """What adapt reads: an array / list (one batch), a tessera Dataset or
    any iterable of batches; Dataset elements (x, y) contribute x. As in
    Keras, Discretization reads a list as a list of batches."""
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                              or steps <= 0):
        raise ValueError(f"[{where}.adapt] steps must be a positive int or None, got {steps!r}")
    one = (np.ndarray, str) if lists_are_batches else (np.ndarray, list, tuple, str)
    if isinstance(data, one) or np.isscalar(data):
        if steps is not None:
            raise ValueError(f"[{where}.adapt] steps is only for a Dataset or an iterable of "
                             f"batches, not for an array (got steps={steps})")
        yield data
        return
    if isinstance(data, KerasTensor):
        raise TypeError(f"[{where}.adapt] needs data (arrays, a Dataset), got a symbolic tensor")
    if not (isinstance(data, _data.Dataset) or hasattr(data, "__iter__")):
        raise TypeError(f"[{where}.adapt] data must be an array, a list, a tessera.data.Dataset "
                        f"or an iterable of batches, got {type(data).__name__}")
    for i, batch in enumerate(data):
        if steps is not None and i >= steps:
            break
        if isinstance(batch, tuple) and isinstance(data, _data.Dataset):
            batch = batch[0]
        yield batch


def _encode(indices, mode, depth, where, count_weights=None, dtype="float32"):
    """Keras's encode_categorical_inputs: int indices -> one_hot /
    multi_hot / count over the last axis."""
    idx = np.asarray(indices)
    if mode == "int":
        return idx.astype(dtype if dtype not in (None, "float32") else "int64")
    if idx.ndim == 0:
        idx = idx[None]
    if idx.size and (idx.min() < 0 or idx.max() >= depth):
        bad = idx[(idx < 0) | (idx >= depth)].flat[0]
        raise ValueError(f"[{where}] input value {bad} is out of range [0, {depth}) "
                         f"(num_tokens={depth})")
    if mode == "one_hot":
        if idx.ndim > 1 and idx.shape[-1] == 1:
            idx = idx[..., 0]
        out = np.zeros(idx.shape + (depth,), dtype=dtype)
        np.put_along_axis(out, idx[..., None], 1, axis=-1)
        return out
    out = np.zeros(idx.shape[:-1] + (depth,), dtype=dtype)
    flat = out.reshape(-1, depth)
    rows = idx.reshape(-1, idx.shape[-1])
    w = None if count_weights is None else np.asarray(count_weights).reshape(rows.shape)
    for r in range(rows.shape[0]):
        if mode == "multi_hot":
            flat[r, rows[r]] = 1
        else:
            np.add.at(flat[r], rows[r], 1 if w is None else w[r])
    return out


def _check_mode(mode, allowed, where):
    if mode == "tf-idf":
        mode = "tf_idf"
    if mode not in allowed:
        raise ValueError(f"[{where}] output_mode must be one of {list(allowed)}, got {mode!r}")
    return mode


def _no_sparse(sparse, where):
    if sparse:
        raise ValueError(f"[{where}] sparse=True is not supported (tessera has no sparse "
                         "tensors); leave sparse=False for dense outputs")


# ----------------------------------------------------------------- lookups

class _IndexLookup(_Preprocessing):
    """Shared by StringLookup and IntegerLookup (Keras's IndexLookup)."""

    def __init__(self, max_tokens, num_oov_indices, mask_token, oov_token, vocabulary,
                 idf_weights, invert, output_mode, sparse, pad_to_max_tokens, name, **kwargs):
        super().__init__(name=name, **kwargs)
        w = self.kind
        if max_tokens is not None and (isinstance(max_tokens, bool) or
                                       not isinstance(max_tokens, int) or max_tokens <= 1):
            raise ValueError(f"[{w}] max_tokens must be None or an int > 1, got {max_tokens!r}")
        if isinstance(num_oov_indices, bool) or not isinstance(num_oov_indices, int) or \
                num_oov_indices < 0:
            raise ValueError(f"[{w}] num_oov_indices must be an int >= 0, got "
                             f"{num_oov_indices!r}")
        self.output_mode = _check_mode(output_mode, ("int", "one_hot", "multi_hot", "count",
                                                     "tf_idf"), w)
        if invert and self.output_mode != "int":
            raise ValueError(f"[{w}] invert=True needs output_mode='int', got "
                             f"{self.output_mode!r}")
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError(f"[{w}] pad_to_max_tokens=True needs max_tokens")
        if idf_weights is not None and self.output_mode != "tf_idf":
            raise ValueError(f"[{w}] idf_weights is only for output_mode='tf_idf', got "
                             f"output_mode={self.output_mode!r}")
        _no_sparse(sparse, w)
        self.max_tokens = max_tokens
        self.num_oov_indices = num_oov_indices
        self.mask_token = mask_token
        self.oov_token = oov_token
        self.invert = bool(invert)
        self.pad_to_max_tokens = bool(pad_to_max_tokens)
        self.sparse = False
        self._tokens: list = []  # the learned / given terms, in index order
        self._index: dict = {}
        self.idf_weights = None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary, idf_weights)
        elif self.output_mode == "tf_idf" and idf_weights is not None:
            raise ValueError(f"[{w}] idf_weights needs a vocabulary")

    # Keras's index layout: [mask (int mode only)] [OOV x num_oov] [terms]
    def _oov_start(self) -> int:
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start(self) -> int:
        return self._oov_start() + self.num_oov_indices

    def _key(self, v):
        raise NotImplementedError

    def _keys(self, data) -> np.ndarray:
        raise NotImplementedError

    def vocabulary_size(self) -> int:
        """The vocabulary's size with the mask and OOV indices."""
        return len(self._tokens) + self._token_start()

    def get_vocabulary(self, include_special_tokens=True) -> list:
        """Index order; with special tokens a term's position is its index."""
        if not include_special_tokens:
            return list(self._tokens)
        vocab = [self.oov_token] * self._token_start() + list(self._tokens)
        if self._oov_start():
            vocab[0] = self.mask_token
        return vocab

    def _read_vocabulary(self, vocabulary):
        if isinstance(vocabulary, (str, os.PathLike)):
            path = os.fspath(vocabulary)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"[{self.kind}] vocabulary file {path!r} does not exist "
                                        "or is not a regular file")
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            while lines and lines[-1] == "":
                lines.pop()
            return [self._key(v) for v in lines]
        return [self._key(v) for v in np.asarray(vocabulary).reshape(-1).tolist()]

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Sets the terms (and, for tf_idf, their idf weights) directly;
        the mask and OOV tokens may lead the list as in get_vocabulary()."""
        w = self.kind
        terms = self._read_vocabulary(vocabulary)
        if self.output_mode == "tf_idf" and idf_weights is None:
            raise ValueError(f"[{w}] output_mode='tf_idf' needs idf_weights with the vocabulary")
        if self.output_mode != "tf_idf" and idf_weights is not None:
            raise ValueError(f"[{w}] idf_weights is only for output_mode='tf_idf'")
        oov_given = bool(terms) and self.num_oov_indices and terms[0] == self._key(
            self.oov_token) if self.oov_token is not None else False
        mask_lead = self.mask_token is not None and terms and terms[0] == self._key(
            self.mask_token)
        if mask_lead:
            terms = terms[1:]
        if terms and self.num_oov_indices and self.oov_token is not None and \
                terms[:self.num_oov_indices] == [self._key(self.oov_token)] * \
                self.num_oov_indices:
            terms = terms[self.num_oov_indices:]
        del oov_given
        if self.mask_token is not None and self._key(self.mask_token) in terms:
            raise ValueError(f"[{w}] the mask token {self.mask_token!r} may only lead the "
                             "vocabulary")
        if self.oov_token is not None and self.num_oov_indices and \
                self._key(self.oov_token) in terms:
            raise ValueError(f"[{w}] the OOV token {self.oov_token!r} may only come right "
                             "after the mask token at the start of the vocabulary")
        if len(set(terms)) != len(terms):
            seen, dup = set(), None
            for t in terms:
                if t in seen:
                    dup = t
                    break
                seen.add(t)
            raise ValueError(f"[{w}] the vocabulary repeats the term {dup!r}")
        if self.max_tokens is not None and len(terms) + self._token_start() > self.max_tokens:
            raise ValueError(f"[{w}] the vocabulary has {len(terms) + self._token_start()} "
                             f"entries with the special tokens, more than max_tokens="
                             f"{self.max_tokens}")
        if idf_weights is not None:
            idf = np.asarray(idf_weights, dtype=np.float32).reshape(-1)
            if idf.size == len(terms) + self._token_start():
                idf = idf[self._token_start():]
            if idf.size != len(terms):
                raise ValueError(f"[{w}] idf_weights has {idf.size} values for a vocabulary of "
                                 f"{len(terms)} terms")
            self.idf_weights = self._pad_idf(idf)
        self._set_terms(terms)

    def _set_terms(self, terms):
        compiled = self.__dict__.get("_compiled_at")
        if compiled is not None:
            raise RuntimeError(
                f"[{self.kind}] layer {self.name!r} is already compiled into a model's program "
                f"(called at {compiled}), which keeps the vocabulary it was compiled with; set "
                "the vocabulary (adapt, set_vocabulary) before the model's first fit, evaluate "
                f"or predict (at {_where()})")
        self._tokens = list(terms)
        start = self._token_start()
        self._index = {t: i + start for i, t in enumerate(self._tokens)}

    def _pad_idf(self, idf):
        front = np.full(self._token_start(), idf.mean() if idf.size else 0.0, np.float32)
        out = np.concatenate([front, idf.astype(np.float32)])
        if self.pad_to_max_tokens:
            out = np.concatenate([out, np.zeros(self.max_tokens - out.size, np.float32)])
        return out

    def adapt(self, data, batch_size=None, steps=None):
        """Learns the vocabulary: terms by decreasing frequency (ties by
        decreasing term, as Keras), at most max_tokens with the specials."""
        counts: dict = {}
        docs: dict = {}
        n_docs = 0
        for batch in _batches(data, steps, self.kind):
            keys = self._keys(batch)
            if keys.ndim == 0:
                keys = keys[None]
            if keys.ndim == 1:
                keys = keys[None]
            for row in keys.reshape(keys.shape[0], -1) if keys.ndim > 1 else keys:
                vals = row.tolist()
                for v in vals:
                    counts[v] = counts.get(v, 0) + 1
                if self.output_mode == "tf_idf":
                    for v in set(vals):
                        docs[v] = docs.get(v, 0) + 1
            n_docs += keys.shape[0]
        self._finish_adapt(counts, docs, n_docs)

    def _finish_adapt(self, counts, docs, n_docs):
        for special in (self.mask_token, self.oov_token):
            if special is not None:
                counts.pop(self._key(special), None)
        terms = sorted(counts, key=lambda t: (counts[t], self._sort_key(t)), reverse=True)
        if self.max_tokens is not None:
            terms = terms[:max(self.max_tokens - self._token_start(), 0)]
        self._set_terms(terms)
        if self.output_mode == "tf_idf":
            dc = np.array([docs.get(t, 0) for t in terms], dtype=np.float64)
            idf = np.log(1 + n_docs / (1 + dc)).astype(np.float32)
            self.idf_weights = self._pad_idf(idf)

    def _sort_key(self, t):
        return t

    def _oov_bucket(self, v) -> int:
        raise NotImplementedError

    def _lookup(self, keys: np.ndarray) -> np.ndarray:
        flat = keys.reshape(-1).tolist()
        out = np.empty(len(flat), dtype=np.int64)
        mask = self._key(self.mask_token) if self.mask_token is not None else None
        oov = self._oov_start()
        for i, v in enumerate(flat):
            j = self._index.get(v)
            if j is None:
                if mask is not None and v == mask:
                    j = 0 if self.output_mode == "int" else -1
                elif self.num_oov_indices == 0:
                    raise ValueError(f"[{self.kind}] with num_oov_indices=0 every input must be "
                                     f"in the vocabulary; found {v!r} (set num_oov_indices=1)")
                elif self.num_oov_indices == 1:
                    j = oov
                else:
                    j = oov + self._oov_bucket(v)
            out[i] = j
        return out.reshape(keys.shape)

    def _invert(self, idx: np.ndarray):
        vocab = self.get_vocabulary()
        flat = [vocab[i] if 0 <= i < len(vocab) else self.oov_token
                for i in idx.reshape(-1).tolist()]
        return np.array(flat, dtype=self._out_vocab_dtype()).reshape(idx.shape)

    def _out_vocab_dtype(self):
        return object

    def _depth(self) -> int:
        return self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size()

    def _output(self, idx: np.ndarray):
        if self.output_mode == "int":
            return idx
        if self.output_mode != "int" and not self._tokens and not self.pad_to_max_tokens:
            raise RuntimeError(f"[{self.kind}] output_mode={self.output_mode!r}: set the "
                               "vocabulary (vocabulary= or adapt) before calling the layer")
        depth = self._depth()
        if self.mask_token is not None:
            rows = idx if idx.ndim else idx[None]
            # a masked position counts nowhere
            rows = np.where(rows < 0, depth, rows)
            out = _encode(rows, "one_hot" if self.output_mode == "one_hot" else "count",
                          depth + 1, self.kind)[..., :depth]
            if self.output_mode == "multi_hot":
                out = np.minimum(out, 1)
        else:
            out = _encode(idx, "count" if self.output_mode == "tf_idf" else self.output_mode,
                          depth, self.kind)
        if self.output_mode == "tf_idf":
            out = out * self.idf_weights[:depth]
        return out.astype(np.float32)

    def call(self, inputs):
        keys = self._keys(inputs)
        if self.invert:
            idx = np.asarray(keys)
            return self._invert(idx)
        return self._output(self._lookup(keys))

    def get_config(self):
        config = super().get_config()
        config["vocabulary"] = self.get_vocabulary(include_special_tokens=False)
        if self.idf_weights is not None:
            config["idf_weights"] = self.idf_weights.tolist()
        return config


class StringLookup(_IndexLookup):
    """Maps strings to integer indices (or one_hot / multi_hot / count /
    tf_idf vectors), like keras.layers.StringLookup; invert=True maps
    indices back to strings."""

    kind = "StringLookup"
    strings = True

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]",
                 vocabulary=None, idf_weights=None, invert=False, output_mode="int",
                 pad_to_max_tokens=False, sparse=False, encoding="utf-8", name=None, **kwargs):
        if encoding not in ("utf-8", "utf8"):
            raise ValueError(f"[StringLookup] encoding must be 'utf-8', got {encoding!r}")
        self.encoding = encoding
        super().__init__(max_tokens, num_oov_indices, mask_token, oov_token, vocabulary,
                         idf_weights, invert, output_mode, sparse, pad_to_max_tokens, name,
                         **kwargs)

    def _key(self, v):
        if isinstance(v, bytes):
            return v.decode("utf-8")
        return str(v)

    def _keys(self, data):
        if self.invert:
            a = np.asarray(data)
            if a.dtype.kind not in "iu":
                raise TypeError(f"[{self.kind}] invert=True takes integer indices, got dtype "
                                f"{a.dtype}")
            return a
        a = np.asarray(data)
        if a.dtype.kind == "S":
            a = np.char.decode(a, "utf-8")
        if a.dtype.kind != "U" and not (a.dtype == object and all(
                isinstance(v, (str, bytes)) for v in a.reshape(-1).tolist())):
            raise TypeError(f"[{self.kind}] takes strings, got an array of dtype {a.dtype} "
                            f"(at {_where()}); use IntegerLookup for integers")
        if a.dtype == object:
            a = np.array([self._key(v) for v in a.reshape(-1).tolist()],
                         dtype=str).reshape(a.shape)
        return a

    def _sort_key(self, t):
        return t.encode("utf-8")

    def _oov_bucket(self, v):
        return _hashes.fingerprint64(v.encode("utf-8")) % self.num_oov_indices

    def _out_vocab_dtype(self):
        return str


class IntegerLookup(_IndexLookup):
    """Maps integers to contiguous indices (or one_hot / multi_hot / count /
    tf_idf vectors), like keras.layers.IntegerLookup (OOV token -1;
    several OOV indices are chosen by x mod num_oov_indices)."""

    kind = "IntegerLookup"

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1,
                 vocabulary=None, vocabulary_dtype="int64", idf_weights=None, invert=False,
                 output_mode="int", sparse=False, pad_to_max_tokens=False, name=None, **kwargs):
        if vocabulary_dtype not in ("int64", "int32"):
            raise ValueError(f"[IntegerLookup] vocabulary_dtype must be 'int64' or 'int32', "
                             f"got {vocabulary_dtype!r}")
        self.vocabulary_dtype = vocabulary_dtype
        super().__init__(max_tokens, num_oov_indices, mask_token, oov_token, vocabulary,
                         idf_weights, invert, output_mode, sparse, pad_to_max_tokens, name,
                         **kwargs)

    def _key(self, v):
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                raise ValueError(f"[IntegerLookup] vocabulary entry {v!r} is not an "
                                 "integer") from None
        return int(v)

    def _keys(self, data):
        a = np.asarray(data)
        if a.dtype.kind not in "iub":
            raise TypeError(f"[IntegerLookup] takes integers, got an array of dtype {a.dtype} "
                            f"(at {_where()}); use StringLookup for strings")
        return a.astype(np.int64)

    def _oov_bucket(self, v):
        return v % self.num_oov_indices

    def _out_vocab_dtype(self):
        return np.int64

    # In a model: the vocabulary (read when the model's program is compiled)
    # becomes sorted constants, and each input is found by searchsorted.
    in_graph = True

    @property
    def output_dtype(self):
        return "int64" if self.output_mode == "int" else "float32"

    def compute_output_shape(self, s):
        if self.output_mode != "int" and not self._tokens and not self.pad_to_max_tokens:
            raise RuntimeError(f"[{self.kind}] layer {self.name!r}: output_mode="
                               f"{self.output_mode!r} needs the vocabulary (vocabulary= or "
                               f"adapt) before the layer is called on a symbolic tensor (at "
                               f"{_where()})")
        if self.invert and None in self.get_vocabulary():
            raise ValueError(f"[{self.kind}] layer {self.name!r}: invert=True in a model needs "
                             "an integer oov_token (got None)")
        self._graph_call = (self._depth(), _where())
        return encoded_shape(self.kind, self.name, s, self.output_mode, self._depth())

    def forward(self, x, p, ctx):
        # the vocabulary as it is now (adapt may follow the model's construction)
        depth, called_at = self._graph_call
        if self.output_mode != "int" and self._depth() != depth:
            raise ValueError(f"[{self.kind}] layer {self.name!r}: the vocabulary changed size "
                             f"since the layer was called at {called_at} (output {depth} wide, "
                             f"now {self._depth()}); adapt before calling it on a symbolic "
                             "tensor")
        self._compiled_at = called_at
        tokens, idf = list(self._tokens), self.idf_weights
        x = f"astype({x}, \"int64\")"
        if self.invert:
            vocab = self.get_vocabulary()
            i = ctx.define("lookup_index", x)
            inside = f"logical_and({i} >= 0, {i} < {len(vocab)})"
            return (f"where({inside}, take({int_list(vocab)}, clip({i}, 0, {len(vocab) - 1})), "
                    f"{int(self.oov_token)})")
        key = ctx.define("lookup_key", x)
        oov = self._oov_start()
        if self.num_oov_indices > 1:
            miss = f"{oov} + mod({key}, {self.num_oov_indices})"
        else:
            miss = str(oov if self.num_oov_indices else -1)
        if tokens:
            order = np.argsort(np.asarray(tokens, np.int64), kind="stable")
            keys = int_list(np.asarray(tokens, np.int64)[order])
            at = ctx.define("lookup_at", f"minimum(searchsorted({keys}, {key}), "
                                         f"{len(tokens) - 1})")
            found = ctx.define("lookup_found", f"equal(take({keys}, {at}), {key})")
            idx = f"where({found}, take({int_list(order + self._token_start())}, {at}), {miss})"
        else:
            found, idx = "false", f"({key} * 0 + {miss})"
        if self.mask_token is not None:
            is_mask = f"equal({key}, {int(self.mask_token)})"
            idx = f"where({is_mask}, {0 if self.output_mode == 'int' else -1}, {idx})"
            found = f"logical_or({found}, {is_mask})"
        if not self.num_oov_indices:
            # Keras: with no OOV index, an input outside the vocabulary is an error
            text = f"[{self.kind}] layer {self.name!r}: with num_oov_indices=0 every input must " \
                   "be in the vocabulary; found one that is not (set num_oov_indices=1); the " \
                   f"layer was called at {called_at}"
            text = text.replace("\\", "/").replace('"', "'")
            idx = f"after({idx}, assert(all({found}), \"{text}\"))"
        if self.output_mode == "int":
            return idx
        out = encode_expr(idx, self._in_shape, "count" if self.output_mode == "tf_idf"
                          else self.output_mode, self._depth())
        if self.output_mode == "tf_idf":
            out = f"{out} * {float_list(idf[:self._depth()])}"
        return out


# ----------------------------------------------------------------- text

_PUNCTUATION = re.compile(r'[!"#$%&()\*\+,\-\./:;<=>?@\[\\\]^_`{|}~\']')


class TextVectorization(_Preprocessing):
    """Strings to token indices (or multi_hot / count / tf_idf vectors), like
    keras.layers.TextVectorization: standardize, split, n-grams, then a
    StringLookup with mask "" (index 0) and OOV "[UNK]" (index 1)."""

    kind = "TextVectorization"
    strings = True

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation",
                 split="whitespace", ngrams=None, output_mode="int",
                 output_sequence_length=None, pad_to_max_tokens=False, vocabulary=None,
                 idf_weights=None, sparse=False, ragged=False, encoding="utf-8", name=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        w = "TextVectorization"
        if standardize not in (None, "lower", "strip_punctuation",
                               "lower_and_strip_punctuation") and not callable(standardize):
            raise ValueError(f"[{w}] standardize must be None, 'lower', 'strip_punctuation', "
                             f"'lower_and_strip_punctuation' or a function, got {standardize!r}")
        if split not in (None, "whitespace", "character") and not callable(split):
            raise ValueError(f"[{w}] split must be None, 'whitespace', 'character' or a "
                             f"function, got {split!r}")
        if isinstance(ngrams, bool) or not (ngrams is None or isinstance(ngrams, int) and
                                            ngrams > 0 or isinstance(ngrams, tuple) and ngrams
                                            and all(isinstance(n, int) and n > 0
                                                    for n in ngrams)):
            raise ValueError(f"[{w}] ngrams must be None, a positive int or a tuple of positive "
                             f"ints, got {ngrams!r}")
        if ngrams is not None and split is None:
            raise ValueError(f"[{w}] ngrams needs split (got split=None)")
        mode = _check_mode(output_mode, ("int", "multi_hot", "count", "tf_idf"), w)
        if output_sequence_length is not None:
            if mode != "int":
                raise ValueError(f"[{w}] output_sequence_length is only for output_mode='int', "
                                 f"got output_mode={mode!r}")
            if isinstance(output_sequence_length, bool) or not isinstance(
                    output_sequence_length, int) or output_sequence_length <= 0:
                raise ValueError(f"[{w}] output_sequence_length must be a positive int, got "
                                 f"{output_sequence_length!r}")
        if ragged:
            raise ValueError(f"[{w}] ragged=True is not supported (no ragged tensors); the int "
                             "output is padded with 0 to the longest text or "
                             "output_sequence_length")
        if encoding not in ("utf-8", "utf8"):
            raise ValueError(f"[{w}] encoding must be 'utf-8', got {encoding!r}")
        _no_sparse(sparse, w)
        self.standardize = standardize
        self.split = split
        self.ngrams = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams
        self._ngrams_arg = ngrams
        self.output_mode = mode
        self.output_sequence_length = output_sequence_length
        self.max_tokens = max_tokens
        self.pad_to_max_tokens = pad_to_max_tokens
        self.ragged = False
        self.sparse = False
        self.encoding = encoding
        self._lookup_layer = StringLookup(
            max_tokens=max_tokens, num_oov_indices=1, mask_token="", oov_token="[UNK]",
            vocabulary=vocabulary, idf_weights=idf_weights, output_mode=mode,
            pad_to_max_tokens=pad_to_max_tokens, name=self.name + "_lookup")

    def _strings(self, data):
        a = np.asarray(data)
        if a.dtype.kind == "S":
            a = np.char.decode(a, "utf-8")
        if a.dtype == object and all(isinstance(v, (str, bytes)) for v in a.reshape(-1)):
            a = np.array([v.decode("utf-8") if isinstance(v, bytes) else v
                          for v in a.reshape(-1)], dtype=str).reshape(a.shape)
        if a.dtype.kind != "U":
            raise TypeError(f"[TextVectorization] takes strings, got an array of dtype "
                            f"{a.dtype} (at {_where()})")
        return a

    def _standardize(self, a):
        s = self.standardize
        if callable(s):
            return np.asarray(s(a))
        if s in ("lower", "lower_and_strip_punctuation"):
            a = np.char.lower(a)
        if s in ("strip_punctuation", "lower_and_strip_punctuation"):
            a = np.vectorize(lambda t: _PUNCTUATION.sub("", t), otypes=[str])(a) if a.size \
                else a
        return a

    def _tokens(self, data) -> list:
        """One list of tokens per text (rank 1 input, or (n, 1))."""
        a = self._standardize(self._strings(data))
        if self.split is None:
            return a
        if a.ndim == 0:
            a = a[None]
        if a.ndim > 1:
            if a.shape[-1] != 1:
                raise ValueError(f"[TextVectorization] to split strings the input must be rank 1 "
                                 f"or have a last axis of 1, got shape {a.shape}")
            a = a[..., 0]
        if a.ndim != 1:
            raise ValueError(f"[TextVectorization] expects a batch of texts (rank 1 or (n, 1)), "
                             f"got shape {a.shape}")
        rows = []
        for text in a.tolist():
            if self.split == "whitespace":
                toks = text.split()
            elif self.split == "character":
                toks = list(text)
            else:
                toks = [str(t) for t in self.split(text)]
            if self.ngrams is not None:
                grams = []
                for n in self.ngrams:
                    grams += [" ".join(toks[i:i + n]) for i in range(len(toks) - n + 1)]
                toks = grams
            rows.append(toks)
        return rows

    def adapt(self, data, batch_size=None, steps=None):
        """Learns the vocabulary (and idf weights) from texts: a list /
        array of str, a tessera.data.Dataset of them, or an iterable of
        batches."""
        lk = self._lookup_layer
        counts, docs, n_docs = {}, {}, 0
        for batch in _batches(data, steps, "TextVectorization"):
            rows = self._tokens(batch)
            if isinstance(rows, np.ndarray):
                rows = [[t] for t in rows.reshape(-1).tolist()]
            for toks in rows:
                for t in toks:
                    counts[t] = counts.get(t, 0) + 1
                for t in set(toks):
                    docs[t] = docs.get(t, 0) + 1
                n_docs += 1
        lk._finish_adapt(counts, docs, n_docs)

    def call(self, inputs):
        rows = self._tokens(inputs)
        lk = self._lookup_layer
        if isinstance(rows, np.ndarray):  # split=None: one token per string
            idx = lk._lookup(rows)
            if self.output_mode != "int":
                return lk._output(idx[..., None] if idx.ndim <= 1 else idx)
            return idx
        n = self.output_sequence_length
        width = n if n is not None else max((len(r) for r in rows), default=0)
        if self.output_mode == "int":
            out = np.zeros((len(rows), width), dtype=np.int64)
            for i, toks in enumerate(rows):
                ids = lk._lookup(np.array(toks[:width], dtype=str)) if toks else []
                out[i, :len(ids)] = ids
            return out
        depth = lk._depth()
        out = np.zeros((len(rows), depth), dtype=np.float32)
        for i, toks in enumerate(rows):
            if toks:
                out[i] = lk._output(lk._lookup(np.array(toks, dtype=str)))
        return out

    def get_vocabulary(self, include_special_tokens=True) -> list:
        return self._lookup_layer.get_vocabulary(include_special_tokens)

    def vocabulary_size(self) -> int:
        return self._lookup_layer.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None):
        self._lookup_layer.set_vocabulary(vocabulary, idf_weights)

    def get_config(self):
        config = super().get_config()
        config["vocabulary"] = self.get_vocabulary(include_special_tokens=False)
        if self._lookup_layer.idf_weights is not None:
            config["idf_weights"] = self._lookup_layer.idf_weights.tolist()
        return config


# ----------------------------------------------------------------- categorical

class Hashing(_Preprocessing):
    """Hashes values into num_bins bins, like keras.layers.Hashing: FarmHash
    Fingerprint64 (salt=None) or SipHash-2-4 keyed by salt, of each value's
    string form (integers as decimal text, floats cast to int64 first), so
    the bins equal Keras's (which computes them with TensorFlow)."""

    kind = "Hashing"
    strings = True
    in_graph = True  # on numbers, with salt=None: FarmHash of their text (int_hash.py)

    def __init__(self, num_bins, mask_value=None, salt=None, output_mode="int", sparse=False,
                 name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins <= 0:
            raise ValueError(f"[Hashing] num_bins must be a positive int, got {num_bins!r}")
        self.output_mode = _check_mode(output_mode, ("int", "one_hot", "multi_hot", "count"),
                                       "Hashing")
        _no_sparse(sparse, "Hashing")
        if salt is None:
            self.salt = None
        elif isinstance(salt, (tuple, list)) and len(salt) == 2 and all(
                isinstance(s, int) and not isinstance(s, bool) for s in salt):
            self.salt = [int(salt[0]), int(salt[1])]
        elif isinstance(salt, int) and not isinstance(salt, bool):
            self.salt = [salt, salt]
        else:
            raise ValueError(f"[Hashing] salt must be an int or a tuple of 2 ints, got {salt!r}")
        self.num_bins = num_bins
        self.mask_value = mask_value
        self.sparse = False

    def _graph_refusal(self):
        if self.salt is not None:
            return ("with a salt (SipHash) it runs on arrays only; in a model Hashing takes "
                    "numbers with salt=None (FarmHash of their decimal text, Keras's bins)")
        if self.mask_value is not None and (isinstance(self.mask_value, (str, bytes, bool)) or
                                            int(self.mask_value) != self.mask_value):
            return f"in a model mask_value must be an integer, got {self.mask_value!r}"
        return None

    @property
    def output_dtype(self):
        return "int64" if self.output_mode == "int" else "float32"

    def compute_output_shape(self, s):
        return encoded_shape(self.kind, self.name, s, self.output_mode, self.num_bins)

    def forward(self, x, p, ctx):
        # floats are cast to int64 first, as on arrays
        x = ctx.define("hash_in", f"astype(stop_gradient({x}), \"int64\")")
        bins = self.num_bins - 1 if self.mask_value is not None and self.num_bins > 1 \
            else self.num_bins
        out = unsigned_mod_expr(ctx.define("hash", fingerprint_expr(ctx, x)), bins)
        if bins != self.num_bins:
            out = f"where(equal({x}, {int(self.mask_value)}), 0, {out} + 1)"
        return encode_expr(out, self._in_shape, self.output_mode, self.num_bins)

    def _text(self, v) -> bytes:
        if isinstance(v, bytes):
            return v
        if isinstance(v, str):
            return v.encode("utf-8")
        return str(int(v)).encode("ascii")

    def call(self, inputs):
        a = np.asarray(inputs)
        if a.dtype.kind == "f":
            a = a.astype(np.int64)
        if a.dtype.kind not in "iubUSO":
            raise TypeError(f"[Hashing] takes strings or numbers, got dtype {a.dtype}")
        bins = self.num_bins
        masked = None
        if self.mask_value is not None and bins > 1:
            bins -= 1
            masked = a == np.asarray(self.mask_value, dtype=a.dtype) if a.dtype != object \
                else np.vectorize(lambda v: v == self.mask_value, otypes=[bool])(a)
        flat = a.reshape(-1).tolist()
        if self.salt is None:
            h = [_hashes.fingerprint64(self._text(v)) % bins for v in flat]
        else:
            k0, k1 = (s & 0xFFFFFFFFFFFFFFFF for s in self.salt)
            h = [_hashes.siphash24(k0, k1, self._text(v)) % bins for v in flat]
        out = np.array(h, dtype=np.int64).reshape(a.shape)
        if masked is not None:
            out = np.where(masked, 0, out + 1)
        if self.output_mode == "int":
            return out
        return _encode(out, self.output_mode, self.num_bins, "Hashing")


_CROSS_KEY = 0xDECAFCAFFE  # TensorFlow's default key of its hashed feature crosses
_U64 = (1 << 64) - 1


def _cross_mix(a: int, b: int) -> int:
    """TensorFlow's FingerprintCat64: fingerprint `a` extended by `b`."""
    mul = 0xC6A4A7935BD1E995
    out = a ^ mul
    v = (b * mul) & _U64
    out ^= ((v ^ (v >> 47)) * mul) & _U64
    out = (out * mul) & _U64
    out = (((out ^ (out >> 47)) * mul) & _U64)
    return out ^ (out >> 47)


class HashedCrossing(_Preprocessing):
    """Crosses two or more categorical features by hashing, like
    keras.layers.HashedCrossing: each feature an int (its value) or a string
    (its FarmHash Fingerprint64), chained with TensorFlow's FingerprintCat64
    from its default key, modulo num_bins, so the bins equal Keras's. Inputs:
    a list or tuple of equally shaped arrays of shape (), (batch,) or
    (batch, 1); output_mode "int" (int64, or dtype) or "one_hot" (float32,
    or dtype)."""

    kind = "HashedCrossing"
    in_graph = multi_input = True  # integer features (strings are hashed on arrays only)

    def split_call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2 or not all(
                isinstance(t, KerasTensor) for t in inputs):
            raise ValueError(f"[HashedCrossing] in a model takes a list or tuple of two or more "
                             f"symbolic tensors, got {inputs!r} (at {_where()})")
        kinds = [t.dtype for t in inputs]
        if any(not (d.startswith("int") or d.startswith("uint")) for d in kinds):
            raise ValueError(f"[HashedCrossing] in a model every input must have an integer "
                             f"dtype (strings are crossed on arrays only), got {kinds} (at "
                             f"{_where()})")
        return list(inputs), {}

    @property
    def output_dtype(self):
        return self.dtype

    def compute_output_shape(self, shapes):
        if any(tuple(s) != tuple(shapes[0]) for s in shapes) or tuple(shapes[0]) not in ((),
                                                                                      (1,)):
            raise ValueError(f"[HashedCrossing] every input must have shape (batch_size,) or "
                             f"(batch_size, 1), got {[(None,) + tuple(s) for s in shapes]}")
        return tuple(shapes[0]) if self.output_mode == "int" else (self.num_bins,)

    def forward(self, xs, p, ctx):
        out = unsigned_mod_expr(ctx.define("cross", cross_expr(ctx, xs, _CROSS_KEY)),
                                self.num_bins)
        if self.output_mode == "int":
            return f"astype({out}, \"{self.dtype}\")"
        return encode_expr(out, (1,), "one_hot", self.num_bins, dtype=self.dtype)

    def __init__(self, num_bins, output_mode="int", sparse=False, name=None, dtype=None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins <= 0:
            raise ValueError(f"[HashedCrossing] num_bins must be a positive int, got "
                             f"{num_bins!r}")
        self.output_mode = _check_mode(output_mode, ("int", "one_hot"), "HashedCrossing")
        _no_sparse(sparse, "HashedCrossing")
        self.num_bins, self.sparse = num_bins, False
        want = dtype if dtype is not None else ("int64" if output_mode == "int" else "float32")
        try:
            self.dtype = np.dtype(getattr(want, "name", want)).name
        except TypeError:
            raise ValueError(f"[HashedCrossing] dtype {dtype!r} is not a dtype") from None

    def _feature(self, v) -> int:
        if isinstance(v, (str, bytes)):
            return _hashes.fingerprint64(v.encode("utf-8") if isinstance(v, str) else v)
        return int(v) & _U64

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise ValueError(f"[HashedCrossing] must be called on a list or tuple of inputs, got "
                             f"{type(inputs).__name__}")
        if len(inputs) < 2:
            raise ValueError(f"[HashedCrossing] must be called on at least two inputs, got "
                             f"{len(inputs)}")
        arrays = [np.asarray(x) for x in inputs]
        shape = arrays[0].shape
        if len(shape) > 2 or (len(shape) == 2 and shape[-1] != 1):
            raise ValueError(f"[HashedCrossing] every input must have shape (), (batch_size,) "
                             f"or (batch_size, 1), got {shape}")
        if any(a.shape != shape for a in arrays[1:]):
            raise ValueError(f"[HashedCrossing] every input must have the same shape, got "
                             f"{[a.shape for a in arrays]}")
        if any(a.dtype.kind not in "iuUSO" for a in arrays):
            raise ValueError(f"[HashedCrossing] every input must have an integer or string "
                             f"dtype, got {[str(a.dtype) for a in arrays]}")
        columns = [a.reshape(-1).tolist() for a in arrays]
        bins = []
        for row in zip(*columns):
            out = _CROSS_KEY
            for v in row:
                out = _cross_mix(out, self._feature(v))
            bins.append(out % self.num_bins)
        out = np.array(bins, dtype=np.int64).reshape(shape)
        if self.output_mode == "int":
            return out.astype(self.dtype)
        hot = _encode(out.reshape(-1, 1) if out.ndim < 2 else out, "one_hot", self.num_bins,
                      "HashedCrossing", dtype=self.dtype)
        return hot[0] if out.ndim == 0 else hot
