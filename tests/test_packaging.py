"""Every data file the package reads ships in a wheel: pyproject's package-data names it.

An editable install reads data files from the source folders, so a file the package-data globs
miss works in every test and breaks only a non-editable install (sim/fidelity.toml was missing from
the wheel until 2026-12-07, and every `llumverify simulate` there stopped on it).
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what a build or a run leaves beside the sources: not data
BUILT = ("*.py", "*.pyc", "*.so", "*.c", "*.h", "_compiled.json")


def test_every_data_file_in_the_packages_is_in_package_data() -> None:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {"llumverify": "llumverify", **tool["package-dir"]}
    packages, data = set(tool["packages"]), tool["package-data"]

    def folder(package: str) -> Path:
        """A package's folder: its own package-dir entry, or its parent's plus its last name."""
        if package in dirs:
            return ROOT / dirs[package]
        parent, _, leaf = package.rpartition(".")
        return folder(parent) / leaf

    shipped = {folder(p) / name for p, globs in data.items() for g in globs for name in
               (f.relative_to(folder(p)).as_posix() for f in folder(p).glob(g))}
    missing = []
    for top in {folder(p) for p in packages if "." not in p.removeprefix("llumverify.")}:
        for f in top.rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and not any(fnmatch.fnmatch(f.name, b) for b in BUILT):
                if f not in shipped:
                    missing.append(str(f.relative_to(ROOT)))
    assert not missing, f"data files no package-data glob ships: {missing}"
    # each glob names a listed package, so setuptools installs it
    assert set(data) <= packages, set(data) - packages
