"""A census of keras-io's guides and examples against tests/keras_io (issue 30).

Usage:
    python tools/keras_io_census.py KERAS_IO [--write]
    python tools/keras_io_census.py --refresh [--write]

KERAS_IO is a keras-io git directory (a bare mirror or a clone's .git: the files are read
with `git ls-tree`/`git cat-file` at HEAD) or a checked-out keras-io folder. Nothing is
downloaded. The census covers examples/*/*.py and guides/*.py (the Python sources; the
ipynb/md copies and the guides' subfolders of other libraries are not counted) and puts each
file in one of three categories:

- covered: a script in tests/keras_io/ follows it (the second column of the table in
  tests/keras_io/README.md names the keras-io path); a file out only for tfds or Keras 2
  that a script follows in its Keras 3 form is covered, its detail saying so ("SCRIPT (a
  Keras 3 form: ...)") and keeping why the keras-io file itself is not Keras 3's;
- out of scope: what its model or training needs is beyond a Keras 3 program whose data
  loading is replaced by arrays (TensorFlow beyond what Keras 3 wraps, tfds, KerasHub/
  KerasNLP/KerasCV, JAX or PyTorch internals, pretrained weights, Hugging Face, Keras 2
  only), with the reason read from the source;
- to do: in scope, no script follows it yet; ranked by the Keras names it uses that no
  script in tests/keras_io/ uses (what covering it would exercise that nothing does now).

tf.data, tf.io, tf.strings, tf.image decoding and the like only LOAD data, which
tests/keras_io replaces by arrays: they do not put a file out of scope. Neither do
TensorFlow ops that Keras 3's `ops` wraps (tf.reduce_sum -> ops.sum, tf.GradientTape ->
the GradientTape tessera.nn has): a script written after the file uses the Keras names.
Prose (docstrings, the tutorial's text cells) and comments are not read. OVERRIDES holds
the files the rules misjudge, each with the reason found by reading it.

--write puts the census into tests/keras_io/CENSUS.md between the markers
`<!-- keras-io-census:begin -->` and `<!-- keras-io-census:end -->`. --refresh needs no
keras-io copy: it re-reads the rows of the CENSUS.md in place and applies the README's
table again (a script added or removed since), so the census follows the scripts after a
merge. The totals are printed either way.
"""
import argparse
import io
import os
import re
import subprocess
import sys
import tokenize

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPTS = os.path.join(REPO, "tests", "keras_io")
README = os.path.join(SCRIPTS, "README.md")
CENSUS = os.path.join(SCRIPTS, "CENSUS.md")
BEGIN, END = "<!-- keras-io-census:begin -->", "<!-- keras-io-census:end -->"
COMMAND = "python tools/keras_io_census.py KERAS_IO --write"
REFRESH = "python tools/keras_io_census.py --refresh --write"

COVERED, OUT, TODO = "covered", "out of scope", "to do"
CATEGORIES = (COVERED, TODO, OUT)

IN_SCOPE_PATH = re.compile(r"^(examples/[^/]+/[^/]+\.py|guides/[^/]+\.py)$")
# A keras-io source is a few tens of kB; a bigger "source" is not one to read whole.
MAX_SOURCE_BYTES = 4 << 20

# Files the rules below misjudge, read one by one: path -> (category, reason).
OVERRIDES = {
    # tf.sparse.to_dense is in its TFRecord parsing function (data loading); the model is
    # keras.applications.EfficientNetB0(weights=None) trained from scratch.
    "examples/keras_recipes/creating_tfrecords.py": (
        TODO, "read: tf.sparse only in its TFRecord parsing (data loading)"),
}

# TensorFlow beyond what Keras 3 wraps: graph functions and control flow of TensorFlow's
# own, distribution strategies, sparse/ragged tensors, lookup tables, saved
# models, TF Lite, summaries. A prefix matches the name and what follows it after a dot.
# (tf.Variable is not there: a layer's tf.Variable is Keras 3's keras.Variable.)
TF_INTERNALS = (
    "tf.function", "tf.distribute", "tf.dtensor", "tf.TensorArray",
    "tf.while_loop", "tf.cond", "tf.case", "tf.switch_case", "tf.raw_ops", "tf.sparse",
    "tf.SparseTensor", "tf.ragged", "tf.RaggedTensor", "tf.lookup", "tf.saved_model",
    "tf.lite", "tf.summary", "tf.experimental", "tf.map_fn", "tf.vectorized_map",
    "tf.custom_gradient", "tf.Module", "tf.tpu", "tf.compat", "tf.estimator",
    "tf.feature_column", "tf.autograph", "tf.device", "tf.IndexedSlices",
    "tf.make_tensor_proto", "tf.nest", "tf.xla", "tf.queue", "tf.sets", "tf.bitcast",
    "tf.keras",
)
# Libraries of the TensorFlow ecosystem or beside Keras that a model or its training needs.
OTHER_LIBRARIES = {
    "tensorflow_hub": "TensorFlow Hub models",
    "tensorflow_probability": "TensorFlow Probability",
    "tensorflow_addons": "TensorFlow Addons",
    "tensorflow_io": "TensorFlow I/O",
    "tensorflow_text": "TensorFlow Text",
    "tensorflow_similarity": "TensorFlow Similarity",
    "tensorflow_decision_forests": "TensorFlow Decision Forests",
    "tensorflow_recommenders": "TensorFlow Recommenders",
    "tensorflow_model_optimization": "TensorFlow Model Optimization",
    "tensorflow_ranking": "TensorFlow Ranking",
    "tensorflow_gnn": "TensorFlow GNN",
    "tf_keras": "tf_keras (Keras 2)",
    "keras_tuner": "KerasTuner",
    "keras_rs": "KerasRS",
    "autokeras": "AutoKeras",
}

_IMPORT = r"^\s*(?:import|from)\s+"
KERAS2_ONLY = "Keras 2 only (tf.keras)"
TFDS = "tensorflow_datasets (tfds) data"
# Said when those two are the only reasons: a Keras 3 form of the file (tf.keras names
# read as Keras 3's, tf.* ops as `ops`, tfds data as arrays) would be in scope.
OTHERWISE_IN_SCOPE = "the model and training otherwise in scope"
# Said after the script of a covered file that is out only for those two reasons: the script
# is the Keras 3 form of the file (tf.keras read as Keras 3, tf.* ops as `ops`, tfds data as
# arrays).
KERAS3_FORM = "a Keras 3 form"
_SOFT_KINDS = ((TFDS, "tensorflow_datasets"), (KERAS2_ONLY, "Keras 2"))


def _imports(code, module):
    return re.search(_IMPORT + re.escape(module) + r"\b", code, re.M) is not None


def code_only(source):
    """The source with its comments and its statement strings (docstrings, the tutorial's
    text cells) blanked: what the program runs, not what the prose says."""
    lines = source.splitlines(keepends=True)
    blank = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return re.sub(r"#[^\n]*", "", re.sub(r'"""[\s\S]*?"""', "", source))
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL, None)
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    for i, tok in enumerate(significant):
        if tok.type != tokenize.STRING:
            continue
        before = significant[i - 1].type if i else None
        after = significant[i + 1].type if i + 1 < len(significant) else None
        if before in starts and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
            blank.append((tok.start, tok.end))
    blank += [(t.start, t.end) for t in tokens if t.type == tokenize.COMMENT]
    chars = [list(line) for line in lines]
    for (r0, c0), (r1, c1) in blank:
        for r in range(r0, r1 + 1):
            row = chars[r - 1]
            lo = c0 if r == r0 else 0
            hi = c1 if r == r1 else len(row)
            for c in range(lo, min(hi, len(row))):
                if row[c] != "\n":
                    row[c] = " "
    return "".join("".join(row) for row in chars)


def _tf_internals(code):
    used = sorted(set(re.findall(r"(?<![\w.])tf\.[A-Za-z_][\w.]*", code)))
    found = []
    for name in used:
        for prefix in TF_INTERNALS:
            if name == prefix or name.startswith(prefix + "."):
                if prefix not in found:
                    found.append(prefix)
    return found


def _pretrained(code):
    """The first sign of downloaded weights: `weights="imagenet"`, a preset, a TensorFlow
    SavedModel layer, or a keras.applications model made without `weights=None` (its
    default is ImageNet's)."""
    m = re.search(r"""weights\s*=\s*["']imagenet["']|\.from_preset\(|\bTFSMLayer\(""", code)
    if m:
        return m.group(0)
    for call in re.finditer(r"(?<![\w])applications\.(?:\w+\.)?([A-Z]\w*)\(", code):
        depth, i = 1, call.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        if not re.search(r"weights\s*=\s*None", code[call.end():i]):
            return f"applications.{call.group(1)}"
    return None


def _reasons(code):
    """Every reason the rules find that a program is beyond Keras 3 with arrays for data."""
    reasons = []
    libs = [m for m in ("keras_hub", "keras_nlp", "keras_cv") if _imports(code, m)]
    if libs:
        reasons.append(f"needs {'/'.join(libs)} (presets, pretrained models, their layers)")
    if (_imports(code, "transformers") or _imports(code, "datasets")
            or _imports(code, "huggingface_hub") or "huggingface" in code.lower()):
        reasons.append("Hugging Face transformers/datasets/hub")
    reasons += [f"needs {name} ({module})" for module, name in OTHER_LIBRARIES.items()
                if _imports(code, module)]
    weights = _pretrained(code)
    if weights:
        reasons.append(f"pretrained weights (`{weights}`)")
    keras3 = _imports(code, "keras") or _imports(code, "keras_core")
    keras2 = re.search(r"(?<![\w.])tf\.keras\b|tensorflow\.keras\b|from\s+tensorflow\s+import"
                       r"\s+keras\b", code)
    if keras2 and not keras3:
        reasons.append(KERAS2_ONLY)
    if _imports(code, "jax") and re.search(
            r"(?<![\w.])(jax\.(grad|value_and_grad|jit|pmap|vmap|lax|numpy|random|tree_util"
            r"|sharding|devices|device_put|experimental|nn)|jnp\.)|stateless_call", code):
        reasons.append("JAX internals (jax.* in the model or a custom training step/loop)")
    if _imports(code, "torch") and re.search(r"(?<![\w.])torch\.(?!utils\.data\b)", code):
        reasons.append("PyTorch internals (torch.* in the model or training)")
    internals = [n for n in _tf_internals(code) if keras3 or n != "tf.keras"]
    if internals:
        reasons.append("TensorFlow beyond what Keras 3 wraps: " + ", ".join(internals[:4]))
    return reasons


def classify(path, source):
    """(category, reason) of one keras-io file from its source: OUT with the reasons the
    rules find, else TODO (coverage is applied by census()). tensorflow_datasets is put
    first; when it and Keras 2 are the only reasons, the reason says that the model is
    otherwise in scope (a Keras 3 form of the file would be)."""
    if path in OVERRIDES:
        return OVERRIDES[path]
    if os.path.basename(path).startswith("_"):
        return OUT, "an unpublished draft (underscore name, not on keras.io)"
    code = code_only(source)
    reasons = _reasons(code)
    if _imports(code, "tensorflow_datasets") or re.search(r"(?<![\w.])tfds\.", code):
        reasons.insert(0, TFDS)
    if reasons and set(reasons) <= {TFDS, KERAS2_ONLY}:
        reasons.append(OTHERWISE_IN_SCOPE)
    if not reasons:
        return TODO, ""
    backend = re.search(r"""KERAS_BACKEND["']\]\s*=\s*["'](\w+)["']""", code)
    pinned = f" (KERAS_BACKEND pinned to {backend.group(1)})" if backend else ""
    return OUT, "; ".join(reasons) + pinned


# Modules a program names bare (`layers.Dense` after `from keras import layers`); the
# others share their name with Python's or NumPy's (random, utils) and count with `keras.`.
KERAS_MODULES = ("layers", "ops", "losses", "metrics", "optimizers", "callbacks",
                 "initializers", "regularizers", "constraints", "applications", "quantizers")
KERAS_ONLY_MODULES = ("random", "utils", "saving", "activations", "models", "backend",
                      "config", "distribution", "mixed_precision", "export")
_SUBMODULES = ("image", "nn", "numpy", "linalg", "core", "math", "schedules", "legacy")
# Downloads and file helpers: what a script replaces, not what it exercises.
NOT_EXERCISED = {"utils.get_file", "utils.image_dataset_from_directory",
                 "utils.text_dataset_from_directory", "utils.audio_dataset_from_directory",
                 "utils.timeseries_dataset_from_array", "utils.split_dataset"}
_NAME = re.compile(r"(?<![\w.])(?:(?:keras\.)?(" + "|".join(KERAS_MODULES) + r")|keras\.("
                   + "|".join(KERAS_ONLY_MODULES) + r"))\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")
_TOP = re.compile(r"(?<![\w.])keras\.([A-Z]\w*)")


def keras_names(code):
    """The Keras API names a program uses: `layers.Dense`, `ops.image.resize`,
    `optimizers.schedules.ExponentialDecay`, `keras.Model`, with or without `keras.`."""
    names = set()
    for module, keras_module, name, sub in _NAME.findall(code):
        module = module or keras_module
        names.add(f"{module}.{name}.{sub}" if sub and name in _SUBMODULES else
                  f"{module}.{name}")
    names.update(f"keras.{n}" for n in _TOP.findall(code))
    return names - NOT_EXERCISED


def covering_script(detail):
    """The script named by a covered row's detail (its first word: "x.py" or "x.py (a
    Keras 3 form: ...)")."""
    return detail.split(" ", 1)[0]


def covered_detail(script, reason=""):
    """A covered row's detail: the script, and when the keras-io file is out only for tfds or
    Keras 2 (`reason`, its census reason), that the script is a Keras 3 form of it."""
    kinds = [kind for full, kind in _SOFT_KINDS if full in reason]
    if OTHERWISE_IN_SCOPE not in reason or not kinds:
        return script
    return f"{script} ({KERAS3_FORM}: the keras-io file is {' and '.join(kinds)} only)"


def _soft_reason(detail):
    """The out-of-scope reason again of a file a Keras 3 form covered (its covered detail)."""
    kinds = detail.split(f"({KERAS3_FORM}: the keras-io file is ", 1)[1]
    return "; ".join([full for full, kind in _SOFT_KINDS if kind in kinds]
                     + [OTHERWISE_IN_SCOPE])


def readme_rows(path=README):
    """[(script, keras-io path)] from the README's table: the path is the first word of
    the second column."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\|\s*([\w.-]+\.py)\s*\|\s*((?:examples|guides)/[\w./-]+\.py)", line)
            if m:
                rows.append((m.group(1), m.group(2)))
    return rows


def _is_git_dir(root):
    return os.path.isfile(os.path.join(root, "HEAD")) and os.path.isdir(
        os.path.join(root, "objects"))


def _git(git_dir, *args, data=None):
    return subprocess.run(["git", "--git-dir", git_dir, *args], input=data,
                          capture_output=True, check=True).stdout


def read_sources(root):
    """({path: text}, description) of the in-scope keras-io files under root, a git
    directory (read at HEAD) or a checked-out folder (links are not followed)."""
    if os.path.isdir(os.path.join(root, ".git")) and not _is_git_dir(root):
        root = os.path.join(root, ".git")
    if _is_git_dir(root):
        listing = _git(root, "ls-tree", "-r", "-l", "HEAD", "--", "examples", "guides")
        wanted = []
        for line in listing.decode("utf-8", "replace").splitlines():
            meta, path = line.split("\t", 1)
            mode, kind, sha, size = meta.split()
            if (kind == "blob" and mode != "120000" and IN_SCOPE_PATH.match(path)
                    and size.isdigit() and int(size) <= MAX_SOURCE_BYTES):
                wanted.append((path, sha))
        blobs = _git(root, "cat-file", "--batch",
                     data="".join(sha + "\n" for _, sha in wanted).encode())
        sources, pos = {}, 0
        for path, _ in wanted:
            header_end = blobs.index(b"\n", pos)
            size = int(blobs[pos:header_end].split()[2])
            body = blobs[header_end + 1:header_end + 1 + size]
            sources[path] = body.decode("utf-8", "replace")
            pos = header_end + 1 + size + 1
        head = _git(root, "log", "-1", "--format=%H %cs").decode().split()
        return sources, f"keras-io at commit {head[0][:12]} ({head[1]})"
    sources = {}
    for top in ("examples", "guides"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames
                           if not os.path.islink(os.path.join(dirpath, d))]
            for name in filenames:
                full = os.path.join(dirpath, name)
                path = os.path.relpath(full, root).replace(os.sep, "/")
                if (IN_SCOPE_PATH.match(path) and not os.path.islink(full)
                        and os.path.getsize(full) <= MAX_SOURCE_BYTES):
                    with open(full, encoding="utf-8", errors="replace") as f:
                        sources[path] = f.read()
    return sources, "a checked-out keras-io folder"


def scripts_names(folder=SCRIPTS):
    """The Keras names the scripts in tests/keras_io/ use between them."""
    names = set()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py") and not name.startswith("_") and name != "run_all.py":
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                names |= keras_names(code_only(f.read()))
    return names


def census(sources, readme=None, exercised=None):
    """[(path, category, detail)] sorted by path: detail is the covering script, the
    reason a file is out of scope, or the names a to-do file would add (`n new: ...`, also
    after the reason of a file out only for tfds or Keras 2)."""
    covering = {path: script for script, path in (readme or [])}
    exercised = exercised if exercised is not None else set()
    rows = []
    for path in sorted(set(sources) | set(covering)):
        if path in covering:
            reason = classify(path, sources[path])[1] if path in sources else ""
            rows.append((path, COVERED, covered_detail(covering[path], reason)))
            continue
        category, reason = classify(path, sources[path])
        if category == TODO or OTHERWISE_IN_SCOPE in reason:
            new = sorted(keras_names(code_only(sources[path])) - exercised)
            names = f"{len(new)} new: " + ", ".join(new) if new else "0 new"
            if category == TODO:
                reason = names + (f" ({reason})" if reason else "")
            else:
                reason = f"{reason}; {names}"
        rows.append((path, category, reason))
    return rows


def refresh(rows, readme):
    """The census rows again with the README's coverage applied: a file a script now
    follows becomes covered (a Keras 3 form when it was out only for tfds or Keras 2, and
    stays so); one no script follows any more is to do again (out of scope again, with its
    reason, when its script was a Keras 3 form)."""
    covering = {path: script for script, path in readme}
    known = {r[0] for r in rows}
    out = []
    for path, category, detail in rows:
        if path in covering:
            if category == COVERED and f"({KERAS3_FORM}: " in detail:
                note = detail.split(" ", 1)[1]
                out.append((path, COVERED, f"{covering[path]} {note}"))
            else:
                out.append((path, COVERED, covered_detail(
                    covering[path], detail if category == OUT else "")))
        elif category == COVERED and f"({KERAS3_FORM}: " in detail:
            out.append((path, OUT, f"{_soft_reason(detail)}; no script follows it any more "
                                   f"(was {covering_script(detail)})"))
        elif category == COVERED:
            out.append((path, TODO, f"no script follows it any more (was {detail})"))
        else:
            out.append((path, category, detail))
    out += [(p, COVERED, s) for p, s in sorted(covering.items()) if p not in known]
    return sorted(out)


def folder_of(path):
    parts = path.split("/")
    return "guides" if parts[0] == "guides" else "/".join(parts[:2])


def totals(rows):
    """{folder: {category: count}} with a "total" folder."""
    table = {}
    for path, category, _ in rows:
        for key in (folder_of(path), "total"):
            table.setdefault(key, dict.fromkeys(CATEGORIES, 0))[category] += 1
    return table


def _new_count(detail):
    m = re.search(r"(?:^|; )(\d+) new", detail)
    return int(m.group(1)) if m else 0


def _soft(rows):
    return sum(OTHERWISE_IN_SCOPE in detail for _, category, detail in rows if category == OUT)


def _keras3_forms(rows):
    return sum(f"({KERAS3_FORM}: " in detail for _, category, detail in rows
               if category == COVERED)


def first_reason(detail):
    """The kind of the first reason an out-of-scope row gives, without its particulars."""
    if OTHERWISE_IN_SCOPE in detail:
        kinds = [kind for reason, kind in _SOFT_KINDS if reason in detail]
        return " and ".join(kinds) + " only (the model otherwise in scope)"
    return re.split(r"[;:(]", detail, maxsplit=1)[0].strip()


def render(rows, scanned):
    """The Markdown of the census block (without the markers)."""
    table = totals(rows)
    lines = [f"Scanned: {scanned}. In scope = covered + to do.", "",
             "| folder | covered | to do | out of scope | in scope | files |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for folder in sorted(k for k in table if k != "total") + ["total"]:
        t = table[folder]
        label = "**total**" if folder == "total" else folder
        lines.append(f"| {label} | {t[COVERED]} | {t[TODO]} | {t[OUT]} | "
                     f"{t[COVERED] + t[TODO]} | {sum(t.values())} |")
    lines += ["", "Out of scope only for tensorflow_datasets and/or Keras 2 (tf.keras), the model "
              f"and training otherwise in scope: {_soft(rows)} (a Keras 3 form of each would be "
              "in scope)."]
    lines += ["", "Covered by a Keras 3 form of a file out only for tensorflow_datasets and/or "
              f"Keras 2 (counted as covered): {_keras3_forms(rows)}."]
    by_reason = {}
    for _, category, detail in rows:
        if category == OUT:
            key = first_reason(detail)
            by_reason[key] = by_reason.get(key, 0) + 1
    lines += ["", "Out of scope by first reason:", ""]
    lines += [f"- {key}: {n}" for key, n in sorted(by_reason.items(), key=lambda kv: -kv[1])]
    todo = sorted((r for r in rows if r[1] == TODO), key=lambda r: (-_new_count(r[2]), r[0]))
    lines += ["", "### To do, ranked by the Keras names no script in tests/keras_io uses", ""]
    lines += [f"{i}. `{path}`: {detail}" for i, (path, _, detail) in enumerate(todo, 1)]
    soft = sorted((r for r in rows if r[1] == OUT and OTHERWISE_IN_SCOPE in r[2]),
                  key=lambda r: (-_new_count(r[2]), r[0]))
    lines += ["", "### Out only for tensorflow_datasets and/or Keras 2, ranked the same way", ""]
    lines += [f"{i}. `{path}`: {detail}" for i, (path, _, detail) in enumerate(soft, 1)]
    lines += ["", "### Every file", "",
              "| keras-io file | category | script, reason or new names |", "| --- | --- | --- |"]
    lines += [f"| {path} | {category} | {detail.replace('|', '/')} |"
              for path, category, detail in rows]
    return lines


def parse_block(text):
    """(rows, scanned) from a CENSUS.md text's generated block."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"[keras_io_census] no {BEGIN} ... {END} block in CENSUS.md")
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    scanned = re.search(r"^Scanned: (.*?)\. In scope", block, re.M)
    rows = []
    for line in block.splitlines():
        m = re.match(r"^\| ((?:examples|guides)/\S+) \| (" + "|".join(CATEGORIES)
                     + r") \| (.*) \|$", line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3)))
    return rows, scanned.group(1) if scanned else "unknown"


def write_block(lines, path=CENSUS, command=COMMAND):
    """Replace the generated block of path; written to a temporary file in its folder,
    then renamed over it."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"[keras_io_census] {path} has no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    block = "\n".join([BEGIN, f"Generated by `{command}`.", ""] + lines + [END])
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + block + tail)
    os.replace(tmp, path)


def summary(rows):
    t = totals(rows)["total"]
    in_scope = t[COVERED] + t[TODO]
    soft = _soft(rows)
    return (f"{sum(t.values())} keras-io files: {in_scope} in scope ({t[COVERED]} covered, "
            f"{t[TODO]} to do; {_keras3_forms(rows)} covered by a Keras 3 form), {t[OUT]} "
            f"out of scope ({soft} of them only for tfds or Keras 2)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("keras_io", nargs="?", help="keras-io git directory or folder")
    parser.add_argument("--refresh", action="store_true",
                        help="re-apply the README's table to the CENSUS.md in place")
    parser.add_argument("--write", action="store_true", help="write tests/keras_io/CENSUS.md")
    args = parser.parse_args(argv)
    if bool(args.keras_io) == args.refresh:
        parser.error("give a keras-io folder or --refresh (one of them)")
    if args.refresh:
        with open(CENSUS, encoding="utf-8") as f:
            old, scanned = parse_block(f.read())
        rows = refresh(old, readme_rows())
        command = REFRESH
    else:
        if not os.path.isdir(args.keras_io):
            parser.error(f"[keras_io_census] not a folder: {args.keras_io!r}")
        sources, scanned = read_sources(args.keras_io)
        rows = census(sources, readme_rows(), scripts_names())
        command = COMMAND
    lines = render(rows, scanned)
    if args.write:
        write_block(lines, command=command)
    table = totals(rows)
    print(summary(rows))
    for folder in sorted(table):
        t = table[folder]
        print(f"  {folder:28s} covered {t[COVERED]:3d}  to do {t[TODO]:3d}  "
              f"out of scope {t[OUT]:3d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
