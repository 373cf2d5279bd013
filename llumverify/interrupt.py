"""Ctrl-C: within a second, one line saying what was kept and how to go on, exit 130, no traceback.

`install` (the console entry point only, not in-process callers such as tests) replaces Python's
KeyboardInterrupt with `Interrupted`, which click does not catch, so `cli.main` prints the one line.
A watchdog thread covers what Python cannot interrupt: a signal handler runs only between bytecodes
of the main thread, so a long native call (a Z3 query) would hold Ctrl-C for seconds. Woken by the
signal itself (set_wakeup_fd), it waits GRACE_S for the main thread to clean up, then says the line
and exits. Writers say what a Ctrl-C would leave behind with `keep` (llumverify/outdir.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

EXIT = 130  # 128 + SIGINT, the shells' convention
GRACE_S = 0.7

_kept = "nothing was written"
_said = threading.Lock()
_installed = False


class Interrupted(BaseException):
    """Ctrl-C. A BaseException like KeyboardInterrupt, so cleanup code (`finally`, `except
    BaseException`) runs, but not one, so click does not print its own "Aborted!"."""


def keep(note: str) -> None:
    """What a Ctrl-C now would leave behind, and how to go on (one clause)."""
    global _kept
    _kept = note


def say() -> None:
    """Print the one line, once, whichever thread gets there first."""
    if _said.acquire(blocking=False):
        print(f"llumverify: interrupted; {_kept}", file=sys.stderr, flush=True)


def install() -> None:
    """Ctrl-C raises Interrupted in the main thread, and a watchdog ends the process GRACE_S later."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    signal.signal(signal.SIGINT, _raise)
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_watchdog, args=(read,), name="llumverify-ctrl-c", daemon=True).start()


def _raise(signum: int, frame: object) -> None:
    raise Interrupted


def _watchdog(read: int) -> None:
    while signal.SIGINT not in os.read(read, 64):
        pass
    time.sleep(GRACE_S)
    say()
    os._exit(EXIT)
