"""Output folders: one writer at a time, and results that appear whole or clearly marked partial.

Every command that writes a folder (simulate --out, sweep, goodput, validate --out, report,
validation-report, migrate-bench --out) goes through `OutputDir`:
  lock     the writer's pid, held with flock(2) for the whole run: a second writer is refused
           before any work, naming the first; the kernel drops the lock when its process dies, so
           a killed run's lock never blocks the next (no stale-pid guessing, no race between two
           processes both "taking over" a stale lock).
  staging  (staged=True) the files are written into `.staging-PID-RANDOM/`, unique to the writer,
           and moved into place only once all are written: an interrupted run leaves the previous
           complete result untouched. While they are moved in, PARTIAL says so.
  PARTIAL  a marker saying the folder's files may be a mix, present while files are moved in, or
           (staged=False: reports, sweeps whose checkpoint is the folder) for the whole run.
On success the marker and the lock are gone; on failure or Ctrl-C so is anything this writer made
that is not a finished result (a folder it created and left empty is removed).
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from pathlib import Path
from types import TracebackType

from llumverify.files import interrupt
from llumverify.errors import UserError
from llumverify.files.paths import writable_dir

LOCK = "lock"
PARTIAL = "PARTIAL"
_STAGING = ".staging-"


def name_problem(name: str) -> str | None:
    """What makes `name` unsafe as one path component (an output folder's name), or None.

    Why: names from files (an experiment's `name`) become folders: `../x` or `/abs` would write
    outside the folder meant to hold them.
    """
    if (not name or name in (".", "..") or name != name.strip() or any(c in name for c in "/\\\0")
            or any(ord(c) < 32 for c in name) or len(name.encode()) > 200):
        return (f"must be a plain folder name (no '/', '\\', '..', control characters or surrounding spaces; "
                f"at most 200 bytes), got {name!r}")
    return None


def safe_name(name: str, what: str) -> str:
    """`name` if name_problem finds nothing; else UserError naming `what`."""
    problem = name_problem(name)
    if problem:
        raise UserError(f"{what}: {problem}")
    return name


def holder(folder: Path) -> int | None:
    """The pid of the live process writing `folder` (holding its lock), or None."""
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        return None  # nobody holds it: the file of a writer that died
    finally:
        os.close(fd)


def refuse_if_locked(folder: Path, option: str) -> None:
    """UserError naming the live writer of `folder`, if there is one."""
    pid = holder(folder)
    if pid is not None:
        who = f"pid {pid}" if pid > 0 else "a process"
        raise UserError(f"{option} {folder}: another llumverify ({who}) is writing there; wait for it or stop it, "
                        "or give another folder")


def take_lock(folder: Path, option: str) -> int:
    """Hold `folder`'s lock (an open fd) for this process, or UserError if a live writer has it."""
    path = folder / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UserError(f"{option} {folder}: cannot lock it ({path}: {exc.strerror or exc})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            refuse_if_locked(folder, option)
            continue  # released in between: try again
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its last holder unlinked it after we opened it: lock the new file instead
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return fd


def release_lock(folder: Path, fd: int) -> None:
    """Remove the lock file, then let go of it (in that order: no one can lock a file being removed)."""
    (folder / LOCK).unlink(missing_ok=True)
    os.close(fd)


class OutputDir:
    """One writer's claim on an output folder (see the module doc). Construct before any work: it
    checks (writing nothing) that the folder is writable, free and, unless `force`, new or empty;
    `with` it to take the lock, write into `.path` (the staging folder, or the folder itself), and
    `commit()` once all is written."""

    def __init__(self, folder: Path, option: str, force: bool = False, *, staged: bool = True,
                 fresh: bool = True) -> None:
        self.folder, self.option, self.staged = Path(folder), option, staged
        writable_dir(self.folder, option)
        refuse_if_locked(self.folder, option)
        for name in (LOCK, PARTIAL):
            if (self.folder / name).is_dir() and not (self.folder / name).is_symlink():
                raise UserError(f"{option} {self.folder}: {name} is a folder; it is this folder's {name.lower()} "
                                "file's name: remove it or give another folder")
        if fresh and not force and self.folder.is_dir() and any(
                p.name != LOCK and not p.name.startswith(_STAGING) for p in self.folder.iterdir()):
            # what a killed writer leaves (its lock file, its staging folder) does not count
            raise UserError(f"{option} {self.folder}: folder is not empty (use --force to overwrite, or give a new folder)")
        self.path = self.folder
        self._fd: int | None = None
        self._created = self._committed = False

    def __enter__(self) -> OutputDir:
        self._created = not self.folder.exists()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"{self.option} {self.folder}: cannot create it ({exc.strerror or exc})") from None
        self._fd = take_lock(self.folder, self.option)
        self._drop_dead_staging()
        if self.staged:
            self.path = self.folder / f"{_STAGING}{os.getpid()}-{secrets.token_hex(4)}"
            self.path.mkdir()
            interrupt.keep(f"{self.folder} is as it was before this run" if not self._created else "nothing was written")
        else:
            self._mark_partial()
            interrupt.keep(f"{self.folder} is unfinished (marked {PARTIAL}): run the same command to redo it")
        return self

    def commit(self) -> None:
        """Everything is written: move the staged files into place (PARTIAL while they move), then
        drop the marker. Without a commit, leaving the `with` discards what was staged."""
        if self.staged:
            self._mark_partial()
            for src in sorted(p for p in self.path.rglob("*") if not p.is_dir()):
                dst = self.folder / src.relative_to(self.path)
                try:
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src, dst)
                except OSError as exc:  # e.g. a folder where the file goes: the folder stays marked PARTIAL
                    raise UserError(f"{self.option} {self.folder}: cannot put {dst.name} in place "
                                    f"({exc.strerror or exc}); the folder is marked {PARTIAL}") from None
            shutil.rmtree(self.path)
        (self.folder / PARTIAL).unlink(missing_ok=True)
        self._committed = True
        interrupt.keep(f"{self.folder} is complete")

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is None:
            return
        try:
            if self.staged and not self._committed:
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            release_lock(self.folder, self._fd)
            self._fd = None
            if not self._committed and self._created and not any(self.folder.iterdir()):
                self.folder.rmdir()

    def _mark_partial(self) -> None:
        (self.folder / PARTIAL).write_text(
            f"llumverify (pid {os.getpid()}) was writing this folder and did not finish: its files may be a mix "
            "of an earlier result and a new one. Run the command again (with --force) to redo it.\n",
            encoding="utf-8")

    def _drop_dead_staging(self) -> None:
        """Staging folders of writers that were killed (we hold the lock: none is in use)."""
        for stale in self.folder.glob(f"{_STAGING}*"):
            shutil.rmtree(stale, ignore_errors=True)
