"""The keras-io census (issue 30): tests/keras_io/CENSUS.md agrees with the scripts and
the README's table, and tools/keras_io_census.py classifies sources as its rules say.
No keras-io copy is needed (CI has none): the classifier runs on small sources."""

import importlib.util
import os
import subprocess
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL = os.path.join(_REPO, "tools", "keras_io_census.py")
_spec = importlib.util.spec_from_file_location("keras_io_census", _TOOL)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)


@pytest.fixture(scope="module")
def census():
    with open(tool.CENSUS, encoding="utf-8") as f:
        return tool.parse_block(f.read())


def test_every_covering_script_exists(census):
    rows, _ = census
    covered = [(path, script) for path, category, script in rows if category == tool.COVERED]
    assert covered, "CENSUS.md lists no covered file"
    missing = [s for _, s in covered
               if not os.path.isfile(os.path.join(tool.SCRIPTS, tool.covering_script(s)))]
    assert not missing, f"CENSUS.md names scripts tests/keras_io/ does not have: {missing}"


def test_every_readme_row_is_covered_in_the_census(census):
    rows, _ = census
    by_path = {path: (category, detail) for path, category, detail in rows}
    readme = tool.readme_rows()
    assert len(readme) >= 80
    stale = [f"{path} ({script})" for script, path in readme
             if by_path.get(path, ("", ""))[0] != tool.COVERED
             or tool.covering_script(by_path[path][1]) != script]
    assert not stale, ("tests/keras_io/README.md's table has rows CENSUS.md does not give as "
                       f"covered by that script; run `{tool.REFRESH}`:\n" + "\n".join(stale))


def test_census_covers_no_file_without_a_readme_row(census):
    rows, _ = census
    readme = {path for _, path in tool.readme_rows()}
    extra = [p for p, category, _ in rows if category == tool.COVERED and p not in readme]
    assert not extra, f"CENSUS.md gives these as covered, the README does not: {extra}"


def test_totals_in_the_block_are_the_rows_counted(census):
    rows, _ = census
    with open(tool.CENSUS, encoding="utf-8") as f:
        text = f.read()
    block = text.split(tool.BEGIN, 1)[1].split(tool.END, 1)[0]
    t = tool.totals(rows)["total"]
    line = (f"| **total** | {t[tool.COVERED]} | {t[tool.TODO]} | {t[tool.OUT]} | "
            f"{t[tool.COVERED] + t[tool.TODO]} | {len(rows)} |")
    assert line in block.splitlines()
    assert len({p for p, _, _ in rows}) == len(rows), "a file appears twice"
    for path, _, _ in rows:
        assert tool.IN_SCOPE_PATH.match(path), path


def test_refresh_of_the_committed_census_changes_nothing(census):
    rows, scanned = census
    assert tool.refresh(rows, tool.readme_rows()) == rows
    with open(tool.CENSUS, encoding="utf-8") as f:
        block = f.read().split(tool.BEGIN, 1)[1].split(tool.END, 1)[0]
    assert block.strip().splitlines()[2:] == tool.render(rows, scanned)


def test_refresh_follows_scripts_added_and_removed():
    rows = [("examples/a/x.py", tool.TODO, "1 new: layers.Foo"),
            ("examples/a/y.py", tool.COVERED, "y.py"),
            ("guides/z.py", tool.OUT, "Keras 2 only (tf.keras)")]
    readme = [("x.py", "examples/a/x.py"), ("w.py", "guides/w.py")]
    assert tool.refresh(rows, readme) == [
        ("examples/a/x.py", tool.COVERED, "x.py"),
        ("examples/a/y.py", tool.TODO, "no script follows it any more (was y.py)"),
        ("guides/w.py", tool.COVERED, "w.py"),
        ("guides/z.py", tool.OUT, "Keras 2 only (tf.keras)")]


def test_a_keras3_form_covers_a_file_out_only_for_tfds_or_keras2():
    """A script following a file out only for tfds / Keras 2 (in its Keras 3 form) covers it,
    saying so; the note survives a refresh, and the file is out of scope again, with its
    reason, when no script follows it any more."""
    soft = "tensorflow_datasets (tfds) data; Keras 2 only (tf.keras); " + tool.OTHERWISE_IN_SCOPE
    rows = [("examples/generative/ddpm.py", tool.OUT, soft + "; 2 new: layers.GroupNormalization"),
            ("examples/rl/e.py", tool.OUT, "Keras 2 only (tf.keras); needs X")]
    readme = [("ddpm.py", "examples/generative/ddpm.py"), ("e.py", "examples/rl/e.py")]
    once = tool.refresh(rows, readme)
    form = "ddpm.py (a Keras 3 form: the keras-io file is tensorflow_datasets and Keras 2 only)"
    assert once == [("examples/generative/ddpm.py", tool.COVERED, form),
                    ("examples/rl/e.py", tool.COVERED, "e.py")]
    assert tool.refresh(once, readme) == once
    lines = tool.render(once, "a test")
    assert ("Covered by a Keras 3 form of a file out only for tensorflow_datasets and/or Keras 2 "
            "(counted as covered): 1.") in lines
    assert tool.parse_block(f"{tool.BEGIN}\nGenerated.\n\n" + "\n".join(lines)
                            + f"\n{tool.END}") == (once, "a test")
    gone = tool.refresh(once, [])
    assert gone[0] == ("examples/generative/ddpm.py", tool.OUT,
                       soft + "; no script follows it any more (was ddpm.py)")
    assert tool.first_reason(gone[0][2]).startswith("tensorflow_datasets and Keras 2 only")
    # a scan of keras-io says the same of a covered Keras 2 source
    assert tool.census({"examples/rl/e.py": KERAS2}, readme=[("e.py", "examples/rl/e.py")]) == [
        ("examples/rl/e.py", tool.COVERED, "e.py (a Keras 3 form: the keras-io file is Keras 2 "
                                           "only)")]


KERAS3_TF_DATA = '''"""
Title: a Keras 3 example that loads its data with tf.data
Prose that mentions tf.function and tf.distribute does not count.
"""
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
import keras
from keras import layers, ops

# A comment about tf.Variable and torch.optim does not count either.
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(tf.data.AUTOTUNE)
ds = ds.map(lambda a, b: (tf.image.resize(a, (32, 32)), b))
inputs = keras.Input((32, 32, 3))
h = layers.Conv2D(8, 3, activation="relu")(inputs)
h = layers.GlobalAveragePooling2D()(h)
model = keras.Model(inputs, layers.Dense(10)(h))
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=1)
'''

TFDS = '''
import keras
import tensorflow_datasets as tfds
train = tfds.load("cifar10", split="train")
model = keras.Sequential([keras.layers.Dense(10)])
'''

KERAS_HUB = '''
import keras
import keras_hub
classifier = keras_hub.models.BertClassifier.from_preset("bert_base_en", num_classes=2)
'''

JAX_LOOP = '''
import os
os.environ["KERAS_BACKEND"] = "jax"
import jax
import keras
model = keras.Sequential([keras.layers.Dense(1)])
def loss_fn(trainable, non_trainable, x, y):
    y_pred, non_trainable = model.stateless_call(trainable, non_trainable, x)
    return keras.losses.mean_squared_error(y, y_pred).mean(), non_trainable
grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
'''

KERAS2 = '''
import tensorflow as tf
from tensorflow import keras
model = keras.Sequential([keras.layers.Dense(1)])
'''

TF_INTERNALS = '''
import tensorflow as tf
import keras
model = keras.Sequential([keras.layers.Dense(1)])
@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    return loss
strategy = tf.distribute.MirroredStrategy()
'''


def test_keras3_with_tf_data_loading_is_in_scope():
    category, reason = tool.classify("examples/vision/a.py", KERAS3_TF_DATA)
    assert (category, reason) == (tool.TODO, "")


def test_tfds_is_out_of_scope_and_says_the_model_is_otherwise_in_scope():
    category, reason = tool.classify("examples/vision/b.py", TFDS)
    assert category == tool.OUT
    assert reason.startswith("tensorflow_datasets") and "otherwise in scope" in reason
    assert tool.first_reason(reason).startswith("tensorflow_datasets only")


def test_keras_hub_is_out_of_scope():
    category, reason = tool.classify("examples/nlp/c.py", KERAS_HUB)
    assert category == tool.OUT
    assert "keras_hub" in reason and "pretrained weights" in reason
    assert "otherwise in scope" not in reason


def test_jax_training_loop_is_out_of_scope():
    category, reason = tool.classify("guides/d.py", JAX_LOOP)
    assert category == tool.OUT
    assert reason.startswith("JAX internals") and "pinned to jax" in reason


def test_keras2_and_tensorflow_internals_are_out_of_scope():
    category, reason = tool.classify("examples/rl/e.py", KERAS2)
    assert (category, reason) == (
        tool.OUT, "Keras 2 only (tf.keras); the model and training otherwise in scope")
    assert tool.first_reason(reason) == "Keras 2 only (the model otherwise in scope)"
    category, reason = tool.classify("guides/f.py", TF_INTERNALS)
    assert category == tool.OUT
    assert "tf.function" in reason and "tf.distribute" in reason
    assert "otherwise in scope" not in reason
    keras2_internals = TF_INTERNALS.replace("import keras", "from tensorflow import keras")
    category, reason = tool.classify("guides/h.py", keras2_internals)
    assert reason.startswith("Keras 2 only (tf.keras); TensorFlow beyond what Keras 3 wraps: ")
    assert "otherwise in scope" not in reason and "tf.keras" not in reason.split(": ")[1]


def test_pretrained_applications_and_untrained_ones():
    made = "import keras\nbase = keras.applications.ResNet50V2(include_top=False{})\n"
    assert tool.classify("examples/vision/g.py", made.format(""))[0] == tool.OUT
    assert tool.classify("examples/vision/g.py", made.format(", weights=None")) == (
        tool.TODO, "")


def test_a_drafts_name_and_an_override_decide_first():
    assert tool.classify("guides/_draft.py", KERAS3_TF_DATA)[0] == tool.OUT
    path = next(iter(tool.OVERRIDES))
    assert tool.classify(path, TFDS) == tool.OVERRIDES[path]


def test_keras_names_and_the_ranking_of_files_to_do():
    code = tool.code_only(KERAS3_TF_DATA)
    names = tool.keras_names(code)
    assert {"layers.Conv2D", "layers.Dense", "keras.Model", "keras.Input",
            "losses.SparseCategoricalCrossentropy"} <= names
    assert not any(n.startswith(("tf.", "image.")) for n in names)
    sources = {"examples/vision/a.py": KERAS3_TF_DATA, "examples/nlp/c.py": KERAS_HUB,
               "guides/sequential.py": "import keras\nkeras.layers.Dense(1)\n"}
    rows = tool.census(sources, readme=[("seq.py", "guides/sequential.py")],
                       exercised={"layers.Dense", "keras.Model"})
    assert rows[0] == ("examples/nlp/c.py", tool.OUT, tool.classify("x", KERAS_HUB)[1])
    assert rows[1][:2] == ("examples/vision/a.py", tool.TODO)
    assert rows[1][2].startswith(f"{len(names) - 2} new: ") and "layers.Dense" not in rows[1][2]
    assert rows[2] == ("guides/sequential.py", tool.COVERED, "seq.py")
    # a file out only for Keras 2 gets the names too, and its own ranked list
    rows = tool.census({"examples/rl/e.py": KERAS2}, exercised=set())
    assert rows == [("examples/rl/e.py", tool.OUT,
                     tool.classify("x", KERAS2)[1] + "; 2 new: keras.Sequential, layers.Dense")]
    lines = tool.render(rows, "a test")
    at = lines.index("### Out only for tensorflow_datasets and/or Keras 2, ranked the same way")
    assert lines[at + 2].startswith("1. `examples/rl/e.py`: Keras 2 only")
    assert tool.parse_block(f"{tool.BEGIN}\nGenerated.\n\n" + "\n".join(lines)
                            + f"\n{tool.END}") == (rows, "a test")


def test_reads_a_checked_out_folder_without_following_links(tmp_path):
    (tmp_path / "examples" / "vision").mkdir(parents=True)
    (tmp_path / "examples" / "vision" / "a.py").write_text(KERAS3_TF_DATA)
    (tmp_path / "examples" / "vision" / "ipynb").mkdir()
    (tmp_path / "examples" / "vision" / "ipynb" / "a.py").write_text("not counted")
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "g.md").write_text("not counted")
    outside = tmp_path / "outside.py"
    outside.write_text(TFDS)
    os.symlink(outside, tmp_path / "guides" / "planted.py")
    sources, description = tool.read_sources(str(tmp_path))
    assert sorted(sources) == ["examples/vision/a.py"]
    assert "folder" in description


def test_reads_a_git_directory_at_head(tmp_path):
    work = tmp_path / "keras-io"
    (work / "guides").mkdir(parents=True)
    (work / "guides" / "g.py").write_text(KERAS2)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, env=env)
    (work / "guides" / "g.py").write_text("uncommitted")
    sources, description = tool.read_sources(str(work / ".git"))
    assert sources == {"guides/g.py": KERAS2}
    assert description.startswith("keras-io at commit ")


def test_command_line_refuses_a_missing_folder_and_prints_totals(tmp_path):
    bad = subprocess.run([sys.executable, _TOOL, str(tmp_path / "nowhere")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a folder" in bad.stderr
    ok = subprocess.run([sys.executable, _TOOL, "--refresh"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "keras-io files:" in ok.stdout and "covered" in ok.stdout
