"""Compiled or source: which implementation of the mypyc-compiled modules a process runs.

setup.py compiles the simulator's hot modules with mypyc and records each source's hash in
`_compiled.json`. An editable install keeps the extensions next to the sources, and Python
prefers an extension to a .py, so a source edited since the build would silently run its old
compiled self. Before any of them is imported, this module compares the hashes: if any source
changed (or LLUMVERIFY_PURE is set), every listed module is loaded from source (all or none:
compiled modules call each other directly), with one line on stderr saying how to rebuild.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

RECORD = Path(__file__).with_name("_compiled.json")


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds the listed modules' .py files ahead of their extensions."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        return None if file is None else importlib.util.spec_from_file_location(fullname, file)


def source_files(modules: list[str]) -> dict[str, Path]:
    """Each module's .py, found through its package's search path (the package is not imported)."""
    files = {}
    for name in modules:
        package, _, leaf = name.rpartition(".")
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations is not None, package
        files[name] = Path(next(iter(spec.submodule_search_locations))) / f"{leaf}.py"
    return files


def stale(hashes: dict[str, str], files: dict[str, Path]) -> list[str]:
    """The modules whose source is missing or differs from the one compiled."""
    return [name for name, digest in hashes.items()
            if not files[name].is_file() or hashlib.sha256(files[name].read_bytes()).hexdigest() != digest]


def pure_requested() -> bool:
    """LLUMVERIFY_PURE: 1 runs (or installs) the sources, 0 or unset the compiled build; anything
    else is refused in one line, so a typo cannot silently pick either."""
    value = os.environ.get("LLUMVERIFY_PURE", "").strip()
    if value not in ("", "0", "1"):
        print(f"llumverify: error: LLUMVERIFY_PURE must be 0 or 1, not {value!r}", file=sys.stderr)
        raise SystemExit(2)
    return value == "1"


def compiled() -> bool:
    """Whether this process runs the compiled extensions (after `select`)."""
    return RECORD.is_file() and not any(isinstance(f, _FromSource) for f in sys.meta_path)


def select() -> None:
    """Install the source finder when the build is missing, out of date or not wanted."""
    pure = pure_requested()
    if not RECORD.is_file() or any(isinstance(f, _FromSource) for f in sys.meta_path):
        return
    hashes: dict[str, str] = json.loads(RECORD.read_text())
    files = source_files(sorted(hashes))
    changed = stale(hashes, files)
    if pure or changed:
        sys.meta_path.insert(0, _FromSource(files))
    if changed:
        print(f"llumverify: {changed[0]} changed since it was compiled; running the simulator from source "
              f"(slower). Rebuild: pip install -e .", file=sys.stderr)
