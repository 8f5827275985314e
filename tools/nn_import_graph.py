"""Import graph of python/tessera/nn: which nn module imports which, and the circles.

Parses every module with `ast` (no import runs), counting module-level AND function-local
imports of other tessera.nn modules, and prints the strongly connected components with more
than one module (import circles), the function-local imports, and the longest files.

    python tools/nn_import_graph.py [--edges] [--local] [PACKAGE_DIR]

Exit status 1 when a circle exists. tests/python/test_nn_structure.py uses `build_graph`,
`cycles` and `local_imports`.
"""

import argparse
import ast
import os
import sys

DEFAULT_ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "python", "tessera", "nn")


def module_files(root):
    """{dotted name relative to tessera.nn ('model', 'layers.core', 'ops'): path}."""
    files = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")) or d == "__init__")
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), root)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            files[".".join(rel) or "__init__"] = os.path.join(folder, name)
    return files


def _package_of(mod, path):
    """The package a relative import in `mod` starts from (as a dotted list)."""
    parts = [] if mod == "__init__" else mod.split(".")
    if os.path.basename(path) == "__init__.py":
        return parts
    return parts[:-1]


def _resolve(target, modules):
    """The nn module a dotted target names: itself, or its longest existing prefix."""
    parts = target.split(".") if target else []
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return "__init__"


def _imports(mod, path, modules):
    """[(target module, line, local: bool)] of the nn imports in one file."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    package = _package_of(mod, path)
    found = []

    def visit(node, local):
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda))
            targets = []
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    up = child.level - 1
                    if up > len(package):  # above tessera.nn (tessera._core, ...)
                        stem = None
                    else:
                        stem = package[:len(package) - up] + (child.module.split(".")
                                                              if child.module else [])
                elif child.module and (child.module == "tessera.nn"
                                       or child.module.startswith("tessera.nn.")):
                    stem = child.module.split(".")[2:]
                else:
                    stem = None
                if stem is not None:
                    for alias in child.names:
                        # `from . import saving` imports the module saving; `from .x import Y`
                        # imports module x (Y may be a submodule: resolve the longest prefix).
                        targets.append(_resolve(".".join(stem + [alias.name]), modules))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name == "tessera.nn" or alias.name.startswith("tessera.nn."):
                        targets.append(_resolve(".".join(alias.name.split(".")[2:]), modules))
            for target in targets:
                # importing a.b runs package a's __init__ first: an edge to it too,
                # unless `mod` is inside a (then a is already being imported)
                parts = target.split(".")
                for k in range(1, len(parts) + 1):
                    name = ".".join(parts[:k])
                    inside = mod == name or mod.startswith(name + ".")
                    if name in modules and name != mod and (k == len(parts) or not inside):
                        found.append((name, child.lineno, local))
            visit(child, inner)

    visit(tree, False)
    return found


def build_graph(root=DEFAULT_ROOT):
    """({module: {target: [(line, local)]}}, {module: path})."""
    modules = module_files(root)
    graph = {}
    for mod, path in modules.items():
        edges = graph.setdefault(mod, {})
        for target, line, local in _imports(mod, path, modules):
            edges.setdefault(target, []).append((line, local))
    return graph, modules


def local_imports(graph):
    """[(module, target, line)] of every function-local nn import."""
    return sorted((mod, target, line) for mod, edges in graph.items()
                  for target, sites in edges.items() for line, local in sites if local)


def strongly_connected(graph, ignore=()):
    """Tarjan's strongly connected components, edges in `ignore` ((module, target)) left out;
    a package's own __init__ importing its submodules is not a circle with them (those
    modules import their siblings, never the package), so edges into a package's
    __init__ from inside it count like any other."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if (v, w) in ignore or w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return comps


def _is_package_init_edge(mod, target, modules, root):
    """True for an edge from a package to one of its own submodules (re-export)."""
    path = modules[mod]
    if os.path.basename(path) != "__init__.py":
        return False
    prefix = "" if mod == "__init__" else mod + "."
    return target.startswith(prefix) or mod == "__init__"


def cycles(graph, modules, root=DEFAULT_ROOT, ignore=()):
    """Import circles (SCCs of more than one module). A package's __init__ re-exporting its
    submodules is left out: a submodule importing the package object would be the circle,
    and that edge stays counted."""
    ignore = set(ignore)
    for mod, edges in graph.items():
        for target in edges:
            if _is_package_init_edge(mod, target, modules, root):
                ignore.add((mod, target))
    return [c for c in strongly_connected(graph, ignore) if len(c) > 1]


def imports_of_own_package(graph, modules):
    """[(module, package, line)]: a module importing the __init__ of a package it
    belongs to (tessera.nn itself included). That __init__ imports the module, so the
    import is a circle that only works while the names happen to be defined first."""
    found = []
    for mod, edges in graph.items():
        for target, sites in edges.items():
            if os.path.basename(modules[target]) != "__init__.py":
                continue
            inside = target == "__init__" or mod.startswith(target + ".")
            if inside and mod != target:
                found.extend((mod, target, line) for line, _ in sites)
    return sorted(found)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=DEFAULT_ROOT)
    parser.add_argument("--edges", action="store_true", help="print every edge")
    parser.add_argument("--local", action="store_true", help="print function-local imports")
    args = parser.parse_args(argv)
    graph, modules = build_graph(args.root)
    if args.edges:
        for mod in sorted(graph):
            for target, sites in sorted(graph[mod].items()):
                kinds = ",".join(f"{line}{'L' if local else ''}" for line, local in sites)
                print(f"{mod} -> {target}  [{kinds}]")
    if args.local:
        for mod, target, line in local_imports(graph):
            print(f"local: {mod}:{line} -> {target}")
    comps = cycles(graph, modules, args.root)
    own = imports_of_own_package(graph, modules)
    for mod, target, line in own:
        print(f"imports its own package: {mod}:{line} -> {target}")
    for comp in comps:
        print(f"circle ({len(comp)} modules): {' '.join(comp)}")
    sizes = sorted(((sum(1 for _ in open(p, encoding="utf-8")), m) for m, p in modules.items()),
                   reverse=True)
    print(f"{len(modules)} modules, {len(comps)} circle(s), "
          f"{len(local_imports(graph))} function-local nn import(s); longest: "
          + ", ".join(f"{m} {n}" for n, m in sizes[:5]))
    return 1 if comps or own else 0


if __name__ == "__main__":
    sys.exit(main())
