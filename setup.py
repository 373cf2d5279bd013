"""The build: pyproject.toml holds the metadata; this adds the simulator's hot modules compiled
with mypyc (C extensions from the same typed Python), which run a simulation 1.3-2.1x faster
(docs/simulator.md, Compiled build).

mypyc names a module by its folder, and `sim/` installs as `llumverify.sim` (package-dir), so the
sources are staged under build/mypyc-src in the installed layout first. LLUMVERIFY_PURE=1 at
install time builds pure Python. The hashes of the compiled sources are written next to the
package (llumverify/_compiled.json): at import, a source edited since the build makes llumverify
run every listed module from source instead (llumverify/_native.py), never a stale extension.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import importlib.util

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# the package folders as installed (pyproject's package-dir)
PACKAGE_DIRS = {"llumverify": "llumverify", "llumverify/sim": "sim", "llumverify/models": "models",
                "llumverify/properties": "properties"}
# the modules a simulation spends its time in (profile: benchmarks/bench_scale.py --profile)
COMPILED = [
    "llumverify/sim/decode_run.py", "llumverify/sim/instance.py", "llumverify/sim/engine_v1.py",
    "llumverify/sim/cluster.py", "llumverify/sim/migration.py", "llumverify/sim/records.py",
    "llumverify/sim/stepcost.py", "llumverify/sim/audit.py",
    "llumverify/scheduler/index.py", "llumverify/scheduler/freeness.py", "llumverify/scheduler/snapshot.py",
    "llumverify/scheduler/dispatch.py", "llumverify/scheduler/pd.py",
]
# Not compiled: scheduler/pairing.py, whose module the checker's seeded scheduler bugs patch
# (models/scope.py); sim/waits.py, which compiled hides references from the garbage collector
# (a finished llumnix run with autoscaling stayed in memory; docs/simulator.md, Compiled build).
# llumverify/_native.py by path (importing the package here would run its import-time check)
_spec = importlib.util.spec_from_file_location("_llumverify_native", ROOT / "llumverify" / "_native.py")
assert _spec is not None and _spec.loader is not None
_native = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_native)
RECORD = _native.RECORD
# pip runs this file for metadata first: compile only when something is built
METADATA_ONLY = not {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"} & set(sys.argv[1:])


def source_path(installed: str) -> Path:
    """Where an installed path's source lives in this repository."""
    for prefix in sorted(PACKAGE_DIRS, key=len, reverse=True):
        if installed.startswith(prefix + "/"):
            return ROOT / PACKAGE_DIRS[prefix] / installed[len(prefix) + 1:]
    raise ValueError(installed)


def remove_build() -> None:
    """No record, no extension: a build that fails half-way must not leave old or partial ones in use."""
    RECORD.unlink(missing_ok=True)
    for folder in PACKAGE_DIRS.values():  # every extension in the package is one of ours
        for ext in (ROOT / folder).rglob("*.so"):
            ext.unlink()


def ext_modules() -> list:
    """The mypyc extensions to build, or none (pure Python) if mypyc rejects the modules."""
    if METADATA_ONLY:
        return []
    pure = _native.pure_requested()  # a bad value stops here, before anything is removed
    remove_build()
    if pure:
        return []
    from mypyc.build import mypycify

    stage = ROOT / "build" / "mypyc-src"
    shutil.rmtree(stage, ignore_errors=True)
    for installed, folder in PACKAGE_DIRS.items():
        shutil.copytree(ROOT / folder, stage / installed, ignore=shutil.ignore_patterns("__pycache__", "*.so"),
                        dirs_exist_ok=True)
    old = Path.cwd()
    os.chdir(stage)  # mypyc names modules by the path it is given
    try:
        # only the compiled modules must type-check; the modules they import are read for types
        # C at -O1, not mypyc's default -O3: the speed within noise (5 paired runs each of benchmarks/bench_sim.py
        # and two llumnix runs: median -O1/-O3 wall ratios 1.00, 1.00, 0.96), the same 45 output hashes, half the
        # C compile (the largest file, cluster's, 7.9 -> 4.0 s), which every install and CI run pays (pip install:
        # 42-46 s -> 32 s); no -g: no debug info
        exts = mypycify(["--follow-imports=silent", "--ignore-missing-imports", *COMPILED], opt_level="1",
                        debug_level="0",
                        separate=[(COMPILED, "llumverify.sim._compiled")], multi_file=True, target_dir=str(ROOT / "build" / "mypyc-c"))
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error
        print(f"llumverify: not compiled, the simulator runs as pure Python (mypyc: {exc})", file=sys.stderr)
        return []
    finally:
        os.chdir(old)
    for ext in exts:  # the C sources, relative to the staged tree
        ext.sources = [s if os.path.isabs(s) else str(stage / s) for s in ext.sources]
        # multi_file puts the group's headers beside its main file, not beside the module files
        ext.include_dirs.append(str(ROOT / "build" / "mypyc-c" / "llumverify" / "sim"))
    return exts


class BuildExt(build_ext):
    """Builds the extensions and then records what they were compiled from; without a working C
    compiler, pure Python instead (the same results, slower)."""

    def build_extension(self, ext: Extension) -> None:
        """The extension's C files compiled in parallel, one compiler process per core (mypyc
        writes one file per module: multi_file)."""
        compile_one = self.compiler.compile

        def compile_all(sources: list[str], *args: object, **kwargs: object) -> list[str]:
            with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                parts = list(pool.map(lambda src: compile_one([src], *args, **kwargs), sources))
            return [obj for objs in parts for obj in objs]

        self.compiler.compile = compile_all
        try:
            super().build_extension(ext)
        finally:
            del self.compiler.compile

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # distutils' compile and link errors
            remove_build()
            print(f"llumverify: not compiled, the simulator runs as pure Python ({exc})", file=sys.stderr)
            return
        if self.extensions:
            RECORD.write_text(json.dumps({p[:-3].replace("/", "."): hashlib.sha256(source_path(p).read_bytes()).hexdigest()
                                          for p in COMPILED}, indent=1, sort_keys=True) + "\n")


setup(ext_modules=ext_modules(), cmdclass={"build_ext": BuildExt})
