"""Ctrl-C: within a second, one line saying what was kept and how to go on, exit 130, no traceback.

`install` (the console entry point only, not in-process callers such as tests) replaces Python's
KeyboardInterrupt with `Interrupted`, which click does not catch, so `cli.main` prints the one line.
A watchdog thread covers what Python cannot interrupt: a signal handler runs only between bytecodes
of the main thread, so a long native call (a Z3 query) would hold Ctrl-C for seconds. Woken by the
signal itself (set_wakeup_fd), it waits GRACE_S for the main thread to clean up, then says the line
and exits. Writers say what a Ctrl-C would leave behind with `keep` (llumverify/files/outdir.py).
"""

from __future__ import annotations

import _thread
import ctypes
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

EXIT = 130  # 128 + SIGINT, the shells' convention
GRACE_S = 0.7
AGAIN_S = 0.01  # a Ctrl-C a finalizer swallowed is raised again this much later (_interrupt_again)

_kept = "nothing was written"
_said = threading.Lock()
_installed = False
_signalled = False


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


def exit_interrupted() -> None:
    """The one line, then exit 130. On the console (installed) without Python's exit handlers: the
    `with` blocks and `finally`s have run, what is left (pools' and Z3's finalizers) only prints noise."""
    say()
    if not _installed:
        sys.exit(EXIT)
    sys.stdout.flush()
    sys.stderr.flush()
    if "multiprocessing.forkserver" in sys.modules:  # however Ctrl-C reached here: no worker is forked later
        _stop_forkserver()
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:  # unlink the pools' semaphores, else the resource tracker warns of leaks
        mp_util._run_finalizers()  # type: ignore[attr-defined]
    os._exit(EXIT)


def install() -> None:
    """Ctrl-C raises Interrupted in the main thread, and a watchdog ends the process GRACE_S later."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    # multiprocessing's resource tracker (a process the first pool starts, which takes its -W
    # options from sys.warnoptions) warns at its exit about the semaphores of a pool Ctrl-C
    # stopped: expected then, and not the one line an interrupted run prints
    sys.warnoptions.append("ignore::UserWarning:multiprocessing.resource_tracker")
    signal.signal(signal.SIGINT, _raise)
    threading.excepthook = _quiet_after_ctrl_c
    sys.unraisablehook = _interrupt_again
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_watchdog, args=(read,), name="llumverify-ctrl-c", daemon=True).start()


def signalled() -> bool:
    """Whether Ctrl-C came: Interrupted raised inside a native call's argument conversion reaches
    `cli.main` wrapped as another exception (ctypes.ArgumentError "argument 1: Interrupted", from Z3)."""
    return _signalled


def _raise(signum: int, frame: object) -> None:
    global _signalled
    _signalled = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt the cleanup
    raise Interrupted


def _stop_forkserver() -> None:
    """Kill the forkserver and every worker it has forked, those the pool does not know of yet included: frozen
    first, so that it forks none between the listing of its children (Linux /proc) and the kill."""
    from multiprocessing import forkserver

    server = getattr(forkserver._forkserver, "_forkserver_pid", None)  # type: ignore[attr-defined]
    if not server:
        return
    try:
        os.kill(server, signal.SIGSTOP)
    except ProcessLookupError:
        return
    children = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry.name}/stat") as f:  # pid (comm) state ppid ...: comm may hold spaces
                if int(f.read().rsplit(")", 1)[1].split()[1]) == server:
                    children.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    for pid in (*children, server):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _quiet_after_ctrl_c(args: threading.ExceptHookArgs) -> None:
    """threading's excepthook, silent once Ctrl-C came: a pool's management thread fails when its workers are
    killed, and its traceback would follow the one line."""
    if not _signalled:
        threading.__excepthook__(args)


def _interrupt_again(args: "sys.UnraisableHookArgs") -> None:
    """sys.unraisablehook: Ctrl-C that lands in a finalizer (a Z3 term's __del__ run by the garbage collector) cannot
    leave it (_swallowed_ctrl_c), and Python would print it as an ignored exception's traceback and go on; in the main thread it is
    raised again AGAIN_S later, outside the finalizer (or again, if another one swallows it), so the run still stops
    as any Ctrl-C stops it: cleanup done, then its one line."""
    if not _swallowed_ctrl_c(args):
        sys.__unraisablehook__(args)
    elif threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _raise)
        again = threading.Timer(AGAIN_S, _thread.interrupt_main)  # later, from another thread: raised in this hook,
        again.daemon = True  # it would be ignored as the first was
        again.start()


def _swallowed_ctrl_c(args: "sys.UnraisableHookArgs") -> bool:
    """Whether a finalizer swallowed Ctrl-C's Interrupted: bare, or wrapped by ctypes when it was raised while a native
    call converted its arguments (Z3's `Z3_dec_ref` in `AstRef.__del__`: ArgumentError "argument 1: Interrupted")."""
    return args.exc_type is Interrupted or (_signalled and isinstance(args.exc_value, ctypes.ArgumentError)
                                            and "Interrupted" in str(args.exc_value))


def _watchdog(read: int) -> None:
    while signal.SIGINT not in os.read(read, 64):
        pass
    time.sleep(GRACE_S)
    if "multiprocessing.forkserver" in sys.modules:
        _stop_forkserver()
    say()
    sys.stderr.flush()
    os._exit(EXIT)


def forkserver_context(preload: list[str]) -> multiprocessing.context.ForkServerContext:
    """The forkserver context, its server started with Ctrl-C ignored: an ignored signal stays ignored across
    exec, so the server (importing `preload` for seconds before it ignores Ctrl-C itself) and every worker it
    forks (before `worker_start` runs) leave Ctrl-C to the parent instead of printing a KeyboardInterrupt
    traceback. A Ctrl-C in the milliseconds the server takes to start is lost."""
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        forkserver.ensure_running()
        return ctx
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
    return ctx


def worker_start() -> None:
    """A pool worker's initializer: leave Ctrl-C to the parent, which stops the workers (no traceback
    from each of them), and exit once the parent is gone: a killed run's workers would otherwise
    work, or wait for work, forever (the parent: the main process, or a forkserver that ends with it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what has not started, terminate the workers running the rest, and a forkserver
    pool's server, which would otherwise go on to fork a worker asked for before Ctrl-C (while it still imported
    its preload modules) once the parent is gone: that worker's traceback would follow the parent's one line."""
    processes = list(getattr(pool, "_processes", None) or {})  # no public way before Python 3.14
    if isinstance(getattr(pool, "_mp_context", None), multiprocessing.context.ForkServerContext):
        _stop_forkserver()
    pool.shutdown(wait=False, cancel_futures=True)
    for pid in processes:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
