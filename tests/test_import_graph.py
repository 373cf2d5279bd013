"""The package's import graph has no cycles and no upward imports between its layers.

Layers, from the ground up (a module may import its own layer or lower ones only); a module's
layer is its folder, so a reader knows it without opening the file:
0. core: errors, requests, settings/, files/, protocol/, scheduler/, and the property definitions
   (properties.safety / properties.liveness: pure predicates over protocol states that the
   simulator's audit, Hypothesis and Z3 all use);
1. the simulator (sim/, installed as llumverify.sim);
2. checking and engine models: llumverify.models, the Hypothesis machines (properties.machines),
   validation/;
3. the study layer: study/ (experiments, sweeps, checkpoints, results, reports, goodput);
4. the CLI: cli/.
Imports under `if TYPE_CHECKING:` count too: a type named from an upper layer is a dependency.

SimPy is used through its public API only (`import simpy`, names in `simpy.__all__`): no module
imports from its submodules or touches an attribute SimPy itself names with a leading
underscore, so a SimPy release that keeps its documented API keeps the simulator's outputs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import simpy

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"llumverify": ROOT / "llumverify", "llumverify.sim": ROOT / "sim",
            "llumverify.models": ROOT / "models", "llumverify.properties": ROOT / "properties"}
LAYERS = {"cli": 4, "study": 3, "validation": 2, "models": 2, "sim": 1}


def modules() -> dict[str, Path]:
    """Module name -> file, for the four installed packages."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def layer(module: str) -> int:
    """The layer of `llumverify.<folder>...`: its folder's (core, 0, for any other)."""
    if module == "llumverify.properties.machines":
        return 2
    parts = module.split(".")
    return LAYERS.get(parts[1], 0) if len(parts) > 1 else 0


def edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Every module -> the package modules it imports (anywhere in the file)."""
    out: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        out[name] = {d for d in deps if d in mods and d != name and d != "llumverify"}
    return out


def test_the_graph_covers_the_layers() -> None:
    mods = modules()
    assert {"llumverify.sim.cluster", "llumverify.models.check", "llumverify.properties.safety",
            "llumverify.cli.simulate", "llumverify.study.sweep"} <= set(mods)
    assert {layer(m) for m in mods} == {0, 1, 2, 3, 4}


def test_no_cycles() -> None:
    graph = nx.DiGraph([(a, b) for a, deps in edges(modules()).items() for b in deps])
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert cycles == [], f"import cycles: {cycles}"


def test_no_upward_imports() -> None:
    upward = sorted(f"{a} (layer {layer(a)}) imports {b} (layer {layer(b)})"
                    for a, deps in edges(modules()).items() for b in deps if layer(b) > layer(a))
    assert upward == [], "\n".join(upward)


def simpy_private_names() -> set[str]:
    """Every attribute and method SimPy's own source names with one leading underscore."""
    names: set[str] = set()
    for path in Path(simpy.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef):
                names.add(node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__") and n != "_"}


def simpy_misuses(path: Path, private: set[str]) -> list[str]:
    """Where a file reaches past SimPy's public API: a submodule import, a name not in
    `simpy.__all__`, or an attribute (or getattr string) named like one of SimPy's private ones."""
    public = set(simpy.__all__)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "simpy":
            bad = [a.name for a in node.names if node.module != "simpy" or a.name not in public]
            out += [f"{where} from {node.module} import {b}" for b in bad]
        elif isinstance(node, ast.Import):
            out += [f"{where} import {a.name}" for a in node.names if a.name.startswith("simpy.")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "simpy" \
                and node.attr not in public:
            out.append(f"{where} simpy.{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr in private:
            out.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in private:
            out.append(f"{where} {node.value!r}")
    return out


def test_simpy_public_api_only() -> None:
    private = simpy_private_names()
    assert {"_ok", "_value", "_defused", "_queue", "_resume"} <= private  # the scan sees SimPy's internals
    misuses = [m for path in modules().values() for m in simpy_misuses(path, private)]
    assert misuses == [], "SimPy used past its public API:\n" + "\n".join(misuses)
