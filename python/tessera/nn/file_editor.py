"""keras.saving.KerasFileEditor for tessera's own files (model.save,
save_checkpoint, save_weights; weights_file.py's format): the weights by layer
path, edited (objects renamed, deleted, added; weights deleted, added),
compared with a model, and written again as a weights file keyed by path, which
model.load_weights reads by each weight's path.

The file is untrusted: it is read once through weights_file.read_file (magic,
checksum, header length, every tensor inside the data section before anything
is allocated), a symbolic link is refused, and the layer paths come from the
architecture rebuilt as load_model rebuilds it (tessera's classes, registered
or custom_objects classes; nothing in the file runs).
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict

import numpy as np

from .saving import model_from_config
from .symbolic import user_location
from .weights_file import DTYPES, read_file, save_file

__all__ = ["KerasFileEditor", "weight_paths"]

_WHERE = "KerasFileEditor"


def weight_paths(model) -> dict:
    """{tessera's variable name (l<layer>_<name>): Keras's path of the weight
    ("dense/kernel", "student/dense/kernel")} of a built model."""
    return {var: layer._variable(p.name).path for var, (layer, p) in model._owner.items()}


def _error(what: str) -> ValueError:
    return ValueError(f"[{_WHERE}] {what} (at {user_location()})")


def _nest(flat: dict) -> OrderedDict:
    """{"a/b/kernel": array} -> {"a": {"b": {"kernel": array}}}."""
    out: OrderedDict = OrderedDict()
    for path, value in flat.items():
        parts = path.split("/")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, OrderedDict())
            if not isinstance(d, dict):
                raise _error(f"the path {path!r} passes through a weight")
        d[parts[-1]] = value
    return out


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        path = f"{prefix}/{k}" if prefix else k
        if isinstance(v, dict):
            out.update(_flatten(v, path))
        else:
            out[path] = v
    return out


def _checked_weights(weights, what: str) -> OrderedDict:
    """A dict of weight name -> array, each name a leaf name, each dtype one
    tessera's files hold."""
    if not isinstance(weights, dict):
        raise _error(f"{what}: weights must be a dict of weight names to arrays, got "
                     f"{type(weights).__name__}")
    out = OrderedDict()
    for name, value in weights.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise _error(f"{what}: a weight's name must be a non-empty string without '/', got "
                         f"{name!r}")
        a = np.asarray(value)
        if str(a.dtype) not in DTYPES:
            raise TypeError(f"[{_WHERE}] {what}: the weight {name!r} has dtype {a.dtype}, "
                            f"which tessera's files do not hold ({sorted(DTYPES)}) "
                            f"(at {user_location()})")
        out[name] = np.array(a, copy=True)
    return out


class KerasFileEditor:
    """keras.saving.KerasFileEditor: opens a file written by model.save,
    save_checkpoint or save_weights (or by this editor), shows and edits its
    weights, nested by layer path in `weights_dict` ({"dense": {"kernel":
    array, "bias": array}}), and writes them with `save` (a weights file
    keyed by path: model.load_weights matches each weight by its path).
    The optimizer's state and the training state are not weights: they are
    left out. `custom_objects` as load_model's, for a file naming a user's
    classes (the architecture gives the layers' paths)."""

    def __init__(self, filepath, custom_objects=None):
        self.filepath = os.fspath(filepath)
        try:
            st = os.lstat(self.filepath)
        except FileNotFoundError:
            raise FileNotFoundError(f"[{_WHERE}] {self.filepath}: no such file") from None
        if stat.S_ISLNK(st.st_mode):
            raise _error(f"{self.filepath} is a symbolic link; open the file it names "
                         "itself (a planted link is never followed)")
        tensors, header = read_file(self.filepath, _WHERE)
        self.config = header.get("model")
        self.metadata = {k: header[k] for k in ("iteration", "keyed") if k in header}
        weights = {k: v for k, v in tensors.items() if not k.startswith(("optimizer/",
                                                                          "hooks/"))}
        if header.get("keyed") == "path":
            flat = weights
        else:
            flat = self._by_path(weights, header, custom_objects)
        self.weights_dict = _nest(flat)

    def _by_path(self, weights: dict, header: dict, custom_objects) -> dict:
        if not isinstance(header.get("model"), dict):
            raise _error(f"{self.filepath} holds no architecture (written by save_weights): "
                         "its weights have no layer paths; open a file written by model.save, "
                         "or load the weights into the model and save it")
        try:
            model = model_from_config(header["model"], custom_objects, _WHERE)
        except (TypeError, RuntimeError) as e:
            raise _error(f"{self.filepath}: its architecture cannot be rebuilt to find the "
                         f"layers' paths ({e})") from None
        paths = weight_paths(model)
        unknown = sorted(set(weights) - set(paths))
        if unknown:
            raise _error(f"{self.filepath}: the weights {unknown[:8]} belong to no layer of the "
                         "file's architecture")
        if len(set(paths.values())) != len(paths):
            raise _error(f"{self.filepath}: two weights of the model share a path")
        return OrderedDict((paths[k], weights[k]) for k in paths if k in weights)

    # ------------------------------------------------------------ looking
    def summary(self):
        """Prints the weights' structure: each object by path, each weight
        with its shape and dtype."""
        print(f"tessera model file '{self.filepath}'")
        print("Weights structure")
        for line in self._lines(self.weights_dict, "  "):
            print(line)

    def _lines(self, d, prefix):
        items = list(d.items())
        for k, (key, value) in enumerate(items):
            last = k == len(items) - 1
            connector = "└─ " if last else "├─ "
            if isinstance(value, dict):
                yield f"{prefix}{connector}{key}"
                yield from self._lines(value, prefix + ("    " if last else "│   "))
            else:
                yield f"{prefix}{connector}{key}: shape={tuple(value.shape)}, dtype={value.dtype}"

    def compare(self, reference_model):
        """Compares the file's weights with `reference_model`'s, by path
        (Keras's rule): an object or weight on one side only, or a weight of
        another shape, is an error; each one is printed. Returns {"status":
        "success" or "error", "error_count", "match_count"}."""
        if not hasattr(reference_model, "_owner"):
            raise TypeError(f"[{_WHERE}.compare] reference_model must be a tessera.nn model, got "
                            f"{type(reference_model).__name__} (at {user_location()})")
        reference_model._check_built(f"{_WHERE}.compare")
        held = reference_model.weights
        ref = _nest({path: held[var] for var, path in weight_paths(reference_model).items()})
        checked: set = set()
        errors, matches = self._compare(self.weights_dict, ref, "", "saved file",
                                        "reference model", checked)
        more, _ = self._compare(ref, self.weights_dict, "", "reference model", "saved file",
                                checked)
        errors += more
        if errors == 0:
            print(f"Comparison successful: saved file is compatible with the reference model; "
                  f"{matches} matching weight{'s' if matches != 1 else ''}")
        else:
            print(f"Found {errors} error{'s' if errors != 1 else ''}: saved file is not "
                  "compatible with the reference model")
        return {"status": "success" if errors == 0 else "error", "error_count": errors,
                "match_count": matches}

    def _compare(self, target, ref, base, target_name, ref_name, checked):
        errors = matches = 0
        for key, value in ref.items():
            path = f"{base}/{key}"
            if path in checked:
                continue
            if key not in target:
                errors += 1
                checked.add(path)
                kind = "Object" if isinstance(value, dict) else "Weight"
                print(f"...{kind} {path} present in {ref_name}, missing from {target_name}")
            elif isinstance(value, dict) != isinstance(target[key], dict):
                errors += 1
                checked.add(path)
                print(f"...{path} is an object in one and a weight in the other")
            elif isinstance(value, dict):
                e, m = self._compare(target[key], value, path, target_name, ref_name, checked)
                errors, matches = errors + e, matches + m
            elif tuple(target[key].shape) != tuple(value.shape):
                errors += 1
                checked.add(path)
                print(f"...Weight shape mismatch for {path}: in {ref_name} shape="
                      f"{tuple(value.shape)}, in {target_name} shape={tuple(target[key].shape)}")
            else:
                matches += 1
        return errors, matches

    # ------------------------------------------------------------ editing
    def _find(self, name: str, what: str):
        """(the dict holding the object, its key) of an object given by its
        name (once in the file) or its path."""
        if not isinstance(name, str) or not name:
            raise _error(f"{what}: an object's name or path must be a non-empty string, got "
                         f"{name!r}")
        if "/" in name:
            parts = name.split("/")
            d = self.weights_dict
            for p in parts[:-1]:
                if not isinstance(d.get(p), dict):
                    raise _error(f"{what}: the path {name!r} is not in the file")
                d = d[p]
            if parts[-1] not in d:
                raise _error(f"{what}: the path {name!r} is not in the file")
            return d, parts[-1]
        found = []

        def walk(d):
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(v)
            if name in d:
                found.append(d)

        walk(self.weights_dict)
        if len(found) > 1:
            raise _error(f"{what}: the name {name!r} occurs {len(found)} times in the file; "
                         "give its whole path")
        if not found:
            raise _error(f"{what}: the name {name!r} is not in the file (summary() lists the "
                         "objects)")
        return found[0], name

    def rename_object(self, object_name, new_name):
        """Renames an object (a layer, a nested model) given by name or path."""
        if not isinstance(new_name, str) or not new_name or "/" in new_name:
            raise _error(f"rename_object: new_name must be a leaf name (no '/'), got "
                         f"{new_name!r}")
        d, key = self._find(object_name, "rename_object")
        if new_name in d and new_name != key:
            raise _error(f"rename_object: {new_name!r} is taken beside {object_name!r}")
        items = [(new_name if k == key else k, v) for k, v in d.items()]
        d.clear()
        d.update(items)  # (the order kept: the file's order of weights)

    def delete_object(self, object_name):
        """Removes an object (a layer, a nested model) given by name or path."""
        d, key = self._find(object_name, "delete_object")
        d.pop(key)

    def add_object(self, object_path, weights):
        """Adds an object at `object_path` (its parents must exist) with
        `weights`, a dict of weight names to arrays."""
        weights = _checked_weights(weights, "add_object")
        if not isinstance(object_path, str) or not object_path:
            raise _error(f"add_object: object_path must be a non-empty string, got "
                         f"{object_path!r}")
        parts = object_path.split("/")
        d = self.weights_dict
        for p in parts[:-1]:
            if not isinstance(d.get(p), dict):
                raise _error(f"add_object: the path {'/'.join(parts[:-1])!r} is not in the file")
            d = d[p]
        if parts[-1] in d:
            raise _error(f"add_object: {object_path!r} is in the file already")
        d[parts[-1]] = weights

    def delete_weight(self, object_name, weight_name):
        """Removes the weight `weight_name` of an object."""
        d, key = self._find(object_name, "delete_weight")
        obj = d[key]
        if not isinstance(obj, dict) or weight_name not in obj or isinstance(obj[weight_name],
                                                                              dict):
            names = [k for k, v in obj.items() if not isinstance(v, dict)] \
                if isinstance(obj, dict) else []
            raise _error(f"delete_weight: no weight {weight_name!r} in {object_name!r}; its "
                         f"weights: {names}")
        obj.pop(weight_name)

    def add_weights(self, object_name, weights):
        """Adds (or replaces) weights of an existing object: a dict of weight
        names to arrays."""
        weights = _checked_weights(weights, "add_weights")
        d, key = self._find(object_name, "add_weights")
        if not isinstance(d[key], dict):
            raise _error(f"add_weights: {object_name!r} is a weight, not an object")
        d[key].update(weights)

    # ------------------------------------------------------------ writing
    def save(self, filepath):
        """Writes the weights, keyed by path (tessera's weights format: a
        temporary in the target folder, renamed into place);
        model.load_weights reads it by each weight's path."""
        flat = _flatten(self.weights_dict)
        if not flat:
            raise _error("save: the file has no weights left")
        save_file(os.fspath(filepath), flat, {"keyed": "path"}, f"{_WHERE}.save")

    def resave_weights(self, filepath):
        """Keras's name for save."""
        self.save(filepath)
