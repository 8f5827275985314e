"""tessera.nn's layout: imports point one way (no circle, module-level or inside a
function), no module imports its own package, function-local imports only for the
optional dependencies listed here, no module much over 1,000 lines, every layer family
exported by tessera.nn.layers. The graph comes from tools/nn_import_graph.py (ast only)."""

import ast
import importlib.util
import os
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NN = os.path.join(ROOT, "python", "tessera", "nn")

_spec = importlib.util.spec_from_file_location(
    "nn_import_graph", os.path.join(ROOT, "tools", "nn_import_graph.py"))
graph_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(graph_tool)

# Function-local imports that stay, each for a reason: (module, imported name).
ALLOWED_LOCAL_IMPORTS = {
    # Pillow: optional, only image_dataset_from_directory decodes images with it
    ("_directory_datasets", "PIL"),
    # Pillow: optional, only the image utils (load_img, save_img, ...) read and write with it
    ("_image_utils", "PIL"),
    # pydot (with Graphviz): optional, only plot_model / model_to_dot draw with it
    ("utils", "pydot"),
}

# "~1,000 lines": a module past this is split by family (docs/nn.md, "Layout").
MAX_LINES = 1000
# Modules still over it, each capped at its size today so it can only shrink; split next.
TO_SPLIT = {
    "checkpoints": 1344,  # format and file system / reading and checks / CheckpointDir
    "pipeline": 1374,  # stage planning and schedules / the pipelined step
}


# The layers of tessera.nn, lowest first (docs/nn.md, "Layout"): a module imports only
# modules of its own layer or below. A new module takes its place here.
LAYERS = [
    ("foundations", {"_config", "_hashes", "_tfevents", "constraints", "data_format", "registry",
                     "dtype_policies",
                     "symbolic", "string_inputs", "initializers", "regularizers", "params",
                     "input_spec", "tree", "masked_arrays", "output_nesting", "bounding_boxes",
                     "nested_masks", "program_constants", "sublayer_order", "call_defaults",
                     "build_shapes", "sample_weights"}),
    ("variables", {"variables", "layer_state"}),
    ("ops", {"ops", "ops._base", "ops.core", "ops.extra", "ops.image", "ops.linalg", "ops.nn",
             "ops.nn_more", "ops.einops", "ops.transforms",
             "ops.numpy", "activations", "random"}),
    ("graph", {"functional", "graph_order"}),
    ("layers", {"layers", "layers.*"}),
    ("losses and metrics", {"losses", "loss_base", "loss_calls", "loss_reductions", "metric_base", "metric_classes", "metric_functions",
                            "metrics", "clipping", "optimizer_classes", "optimizer_variables", "parallel", "parallel_layers",
                            "parallel_losses"}),
    ("the compiled step", {"programs", "batch_norm_fusion", "regularizer_programs", "metric_programs", "step_overrides", "step_weights", "predict_step", "zero", "data_axis", "varlen", "pipeline"}),
    ("files and callbacks", {"weights_file", "training_state", "saving", "saving_hooks",
                             "file_editor", "json_config", "tensorboard_logs",
                             "_directory_datasets",
                             "_image_utils", "feature_space",
                             "utils", "given_batches", "keras_objects", "callbacks", "tape_steps", "checkpoint_blocks", "checkpoint_layout",
                             "checkpoints"}),
    ("model", {"model", "model.*"}),
    ("namespaces", {"__init__", "backend", "config", "models", "mixed_precision", "optimizers", "optimizers.schedules", "datasets",
                    "distillation",
                    "wrappers",
                    "preprocessing", "preprocessing.image", "preprocessing.sequence",
                    "datasets.fashion_mnist", "visualization"}),
]


def _layer_of(mod):
    for k, (_, names) in enumerate(LAYERS):
        if mod in names or any(n.endswith(".*") and mod.startswith(n[:-1]) for n in names):
            return k
    raise AssertionError(f"tessera.nn.{mod} has no place in LAYERS (test_nn_structure.py): "
                         "put it in the lowest layer whose modules it imports")


@pytest.fixture(scope="module")
def nn_graph():
    """(graph, modules) of tessera.nn, parsed once for the module: the checks below only
    read it."""
    return graph_tool.build_graph(NN)


def test_imports_point_down_the_layers(nn_graph):
    graph, _ = nn_graph
    upward = [(mod, target, sites[0][0]) for mod, edges in graph.items()
              for target, sites in edges.items() if _layer_of(target) > _layer_of(mod)]
    assert upward == [], [(f"{m} ({LAYERS[_layer_of(m)][0]}) line {line} imports {t} "
                           f"({LAYERS[_layer_of(t)][0]})") for m, t, line in upward]


def _local_imports(root):
    """[(module, imported top-level name, line)] of every import inside a function."""
    found = []
    for mod, path in graph_tool.module_files(root).items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    found += [(mod, a.name.split(".")[0], node.lineno) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    name = "." * node.level + (node.module or "")
                    found.append((mod, name.split(".")[0] if not node.level else name,
                                  node.lineno))
    return sorted(set(found))


def test_no_import_circle_in_nn(nn_graph):
    graph, modules = nn_graph
    assert len(modules) > 40  # the tool found the package
    assert graph_tool.cycles(graph, modules, NN) == []


def test_no_module_imports_its_own_package(nn_graph):
    graph, modules = nn_graph
    assert graph_tool.imports_of_own_package(graph, modules) == []


def test_function_local_imports_only_for_optional_dependencies(nn_graph):
    graph, _ = nn_graph
    assert graph_tool.local_imports(graph) == []  # of tessera.nn modules: none
    found = {(mod, name) for mod, name, _ in _local_imports(NN)}
    assert found - ALLOWED_LOCAL_IMPORTS == set(), _local_imports(NN)
    assert ALLOWED_LOCAL_IMPORTS - found == set(), "an allowed import is gone: drop it here"


def test_no_nn_module_over_a_thousand_lines():
    too_long = {}
    for mod, path in graph_tool.module_files(NN).items():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > TO_SPLIT.get(mod, MAX_LINES):
            too_long[mod] = n
    assert too_long == {}


def test_the_tool_finds_circles_and_local_imports(tmp_path):
    """The checks above can fail: a package with a circle held apart by a
    function-local import, and a module importing its own package."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import A\n")
    (pkg / "a.py").write_text("from .b import helper\nA = 1\n")
    (pkg / "b.py").write_text(textwrap.dedent("""\
        def helper():
            from .a import A
            return A
        """))
    (pkg / "sub" / "__init__.py").write_text("from .c import C\n")
    (pkg / "sub" / "c.py").write_text("from ..sub import C as D\nC = 2\n")
    (pkg / "d.py").write_text("import tessera.nn.a\n")  # (the tool reads pkg as tessera.nn)
    graph, modules = graph_tool.build_graph(str(pkg))
    assert graph_tool.cycles(graph, modules, str(pkg)) == [["a", "b"]]
    assert graph_tool.local_imports(graph) == [("b", "a", 2)]
    assert graph_tool.imports_of_own_package(graph, modules) == [("sub.c", "sub", 1)]
    assert "a" in graph["d"]  # an absolute import counts as the relative one


def test_every_layer_family_is_exported():
    from tessera import nn
    from tessera.nn import layers

    assert len(layers.FAMILIES) >= 15
    for family in layers.FAMILIES:
        for name in family.__all__:
            assert getattr(layers, name) is getattr(family, name), (family.__name__, name)
            if isinstance(getattr(family, name), type) and name not in ("Context", "Param"):
                assert getattr(nn, name) is getattr(family, name), (family.__name__, name)
    # keras.layers's other names, found under tessera.nn.layers as before
    for name in ("Input", "LSTM", "MultiHeadAttention", "Add", "concatenate", "Bidirectional",
                 "TextVectorization", "Resizing", "Lambda", "ReLU", "DeferredValues",
                 "peek_value", "initial_value"):
        assert hasattr(layers, name), name


def test_model_package_keeps_its_names():
    from tessera import nn
    from tessera.nn import callbacks, model, models, registry

    assert model.Model is nn.Model is models.Model
    assert model.Sequential is nn.Sequential is models.Sequential
    assert model.History is nn.History is callbacks.History
    assert registry.model_class("Sequential") is nn.Sequential
    assert registry.is_model(nn.Sequential([nn.Dense(2)]), "Sequential")
    assert not registry.is_model(nn.Dense(2))
    for mixin in ("CompileMixin", "TrainingMixin", "InferenceMixin"):
        assert any(c.__name__ == mixin for c in nn.Model.__mro__), mixin


@pytest.mark.parametrize("name,module", [
    ("Dense", "tessera.nn.layers"), ("Conv2D", "tessera.nn.layers"),
    ("LSTM", "tessera.nn.recurrent"), ("ReLU", "tessera.nn.activation_layers"),
    ("Attention", "tessera.nn.attention_layers"),
    ("MultiHeadAttention", "tessera.nn.attention"), ("Lambda", "tessera.nn.core_layers"),
    ("Dense", "tessera.nn.layers.core"),
])
def test_files_naming_the_former_modules_still_load(name, module):
    """A file saved before the layers became a package names their old module."""
    from tessera import nn
    from tessera.nn import saving

    ctx = saving._Load("<test>", {})
    assert saving._resolve(name, module, ("layer",), ctx, "a layer") is getattr(nn, name)


def test_a_file_naming_another_module_is_still_refused():
    from tessera.nn import saving

    ctx = saving._Load("<test>", {})
    with pytest.raises(ValueError, match="Dense"):
        saving._resolve("Dense", "tessera.nn.recurrent", ("layer",), ctx, "a layer")
    with pytest.raises(ValueError, match="Dense"):
        saving._resolve("Dense", "os", ("layer",), ctx, "a layer")
