"""The Keras names tessera.nn lacks, generated from the two namespaces (issue 30, item 6).

Usage: python tools/keras_missing_names.py [--write-docs]

Walks Keras 3's public API (`keras` and its public submodules: keras.layers,
keras.ops and keras.ops.linalg/image/nn/numpy, keras.losses, keras.metrics,
keras.optimizers(.schedules), keras.callbacks, keras.activations, keras.initializers,
keras.regularizers, keras.constraints, keras.utils, keras.random, keras.models,
keras.saving, ...) and looks each public name up in the matching tessera.nn namespace
(`keras.X.Y` -> `tessera.nn.X.Y`). Prints, per namespace, the names tessera lacks;
a namespace tessera has not at all is one line with its size. Keras is imported with
KERAS_BACKEND=jax, as the reference only.

--write-docs puts the list into docs/nn.md, between the markers
`<!-- keras-missing-names:begin -->` and `<!-- keras-missing-names:end -->`.
"""
import importlib
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DOCS = os.path.join(REPO, "docs", "nn.md")
BEGIN, END = "<!-- keras-missing-names:begin -->", "<!-- keras-missing-names:end -->"
COMMAND = "python tools/keras_missing_names.py --write-docs"

# Keras's own internals and its TensorFlow-era compatibility layers: not Keras 3's API.
SKIP = {"keras.src", "keras._tf_keras", "keras.legacy", "keras.api"}


def _public(module):
    names = getattr(module, "__all__", None) or dir(module)
    return sorted(n for n in names if not n.startswith("_"))


def _lookup(obj, name):
    try:
        return getattr(obj, name)
    except Exception:  # noqa: BLE001 - a lazy attribute that raises is a missing name
        return None


def keras_namespaces(keras):
    """{"keras.X.Y": module} for every public namespace of Keras's API, walked from
    `keras` through attributes that are modules of the `keras.` API."""
    found, todo = {}, [("keras", keras)]
    while todo:
        path, mod = todo.pop()
        if path in found or path in SKIP:
            continue
        found[path] = mod
        for name in _public(mod):
            sub = _lookup(mod, name)
            if isinstance(sub, types.ModuleType) and sub.__name__.startswith("keras"):
                todo.append((f"{path}.{name}", sub))
    return found


def missing_names(keras=None, nn=None):
    """[(keras namespace, tessera namespace or None, [missing names], number of
    Keras names)] sorted by namespace. A tessera namespace of None: it does not
    exist and all its names are missing."""
    if keras is None:
        os.environ.setdefault("KERAS_BACKEND", "jax")
        import keras
    if nn is None:
        import tessera.nn as nn
    rows = []
    for path, mod in sorted(keras_namespaces(keras).items()):
        target = nn
        for part in path.split(".")[1:]:
            target = _lookup(target, part) if target is not None else None
        names = [n for n in _public(mod)
                 if not isinstance(getattr(mod, n, None), types.ModuleType)]
        if target is None:
            rows.append((path, None, names, len(names)))
            continue
        rows.append((path, "tessera.nn" + path[len("keras"):],
                     [n for n in names if _lookup(target, n) is None], len(names)))
    return rows


_CLAIM_EXEMPT = re.compile(r"not there|missing|not yet|lacks|unsupported|not supported", re.I)


def documented_but_missing(rows, text):
    """The missing names that `text` (docs/nn.md) names as tessera's: a code span
    outside code blocks, the generated block and sentences that say a name is
    missing, that writes the name with its namespace (`layers.JaxLayer`,
    `ops.linalg.lu_factor`, `nn.constraints.MaxNorm`; a bare name is too ambiguous
    to count). Returns ["keras.X.name: `span`", ...]."""
    if BEGIN in text and END in text:
        text = text.split(BEGIN, 1)[0] + text.split(END, 1)[1]
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    sentences = re.split(r"(?<=[.;])\s+|\n\s*\n", text)
    spans = re.findall(r"`([^`]+)`", "\n".join(s for s in sentences if not _CLAIM_EXEMPT.search(s)))
    found = []
    for path, target, missing, _ in rows:
        parts = path.split(".")[1:]
        if target is None and parts:
            pattern = r"(^|[^\w.])(keras\.|nn\.|tessera\.nn\.)?" + re.escape(".".join(parts)) + r"\.\w"
            found += [f"{path}: `{s}`" for s in spans if re.search(pattern, s)]
        elif parts:
            for name in missing:
                pattern = r"(^|\W)" + re.escape(parts[-1]) + r"\." + re.escape(name) + r"\b"
                found += [f"{path}.{name}: `{s}`" for s in spans if re.search(pattern, s)]
    return found


# Why a name is not there: a whole namespace's reason, or reasons for groups of
# names of one namespace (the rest of that namespace's missing names: not built
# yet). Read by render(); docs/nn.md says each entry's reason from these.
NAMESPACE_WHY = {
    "keras.applications": "pretrained models are downloads, out of reach here; the "
                          "architectures can be written with tessera.nn's layers",
    "keras.datasets": "downloads, out of reach here (tessera reads local files: "
                      "utils.image_dataset_from_directory and its kin, tessera.data)",
    "keras.distribution": "tessera's own meshes take its place (docs/parallelism.md)",
    "keras.export": "exports to TensorFlow's SavedModel and ONNX, other runtimes' formats",
    "keras.optimizers.legacy": "TensorFlow 2's optimizers, not Keras 3's",
    "keras.quantizers": "quantisation is not supported",
    "keras.utils.legacy": "Keras 2's serialization, not Keras 3's",
}
_QUANTIZED_POLICIES = ["AWQDTypePolicy", "GPTQDTypePolicy", "Int4DTypePolicy",
                       "QuantizedDTypePolicy", "QuantizedFloat8DTypePolicy"]
NAME_WHY = {
    "keras.dtype_policies": [("quantisation is not supported", _QUANTIZED_POLICIES),
                             ("per-layer policy maps belong to quantised and mixed models "
                              "(tessera computes in float32 or float64)", ["DTypePolicyMap"])],
    "keras.mixed_precision": [("mixed precision is not supported (no float16/bfloat16 kernels): "
                               "nothing to scale", ["LossScaleOptimizer"])],
    "keras": [("quantisation is not supported", ["Quantizer"]),
              ("Keras's tracing internals (tessera traces with its own graph)",
               ["Function", "Operation", "StatelessScope", "SymbolicScope"]),
              ("rematerialisation is tessera.remat / tessera.checkpoint (docs/nn.md "
               "\"Gradients\"), not a Keras scope", ["RematScope", "remat"])],
    "keras.layers": [("other frameworks' modules (JAX, Flax, TensorFlow, PyTorch)",
                      ["FlaxLayer", "JaxLayer", "TFSMLayer", "TorchModuleWrapper"])],
    "keras.optimizers": [("mixed precision is not supported", ["LossScaleOptimizer"])],
    "keras.ops": [("forward-mode differentiation: tessera's autodiff is reverse mode",
                   ["jvp"])],
    "keras.ops.linalg": [("forward-mode differentiation: tessera's autodiff is reverse mode",
                          ["jvp"])],
    "keras.callbacks": [("services and formats outside tessera (an HTTP endpoint, Orbax)",
                         ["OrbaxCheckpoint", "RemoteMonitor"])],
    "keras.backend": [("Keras's naming internals (tessera names layers "
                       "itself)", ["get_uid"])],
}


def _namespace_why(path):
    for p in sorted(NAMESPACE_WHY, key=len, reverse=True):
        if path == p or path.startswith(p + "."):
            return NAMESPACE_WHY[p]
    return "not built yet"


def _names(names):
    return ", ".join(f"`{m}`" for m in names)


def render(rows):
    """The list as Markdown lines (one bullet per namespace)."""
    lines = []
    total = sum(len(m) for _, _, m, _ in rows)
    have = sum(n - len(m) for _, _, m, n in rows)
    lines.append(f"{have} of {have + total} public Keras names are in tessera.nn; "
                 f"{total} are not (Keras {_keras_version()}):")
    lines.append("")
    absent = [path for path, target, _, _ in rows if target is None]
    for path, target, missing, n in rows:
        if any(path.startswith(a + ".") for a in absent):
            continue  # counted in the absent namespace that holds it
        if target is None:
            subs = [r for r in rows if r[0].startswith(path + ".")]
            n += sum(r[3] for r in subs)
            lines.append(f"- `{path}` ({n} name{'s' if n != 1 else ''}"
                         + (f", {len(subs)} sub-namespaces" if subs else "")
                         + f"): the whole namespace; {_namespace_why(path)}.")
        elif missing:
            groups, rest = [], list(missing)
            for why, names in NAME_WHY.get(path, []):
                here = [m for m in rest if m in names]
                if here:
                    groups.append(f"{why}: {_names(here)}")
                    rest = [m for m in rest if m not in names]
            if rest:
                groups.append(f"not built yet: {_names(rest)}")
            lines.append(f"- `{path}` ({len(missing)} of {n}): " + "; ".join(groups) + ".")
    return lines


def _keras_version():
    import keras

    return keras.__version__


def write_docs(lines, path=DOCS):
    """Replaces the generated block of docs/nn.md (between the markers) by `lines`,
    through a temporary file renamed over it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{path} has no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    block = "\n".join([BEGIN, f"Generated by `{COMMAND}`.", ""] + lines + [END])
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + block + tail)
    os.replace(tmp, path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--write-docs"]):
        sys.exit(__doc__.split("\n\n")[1])
    lines = render(missing_names())
    print("\n".join(lines))
    if argv:
        write_docs(lines)
        print(f"\nwritten into {os.path.relpath(DOCS, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
