"""Output folders (llumverify/files/outdir.py) with real processes: a second writer is refused before any
work, an interrupted writer leaves the previous complete result, Ctrl-C is one line and exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llumverify.errors import UserError
from llumverify.files.outdir import LOCK, PARTIAL, OutputDir, holder, safe_name

TINY = Path(__file__).resolve().parent / "bad_inputs" / "experiments" / "tiny.toml"


def _llumverify(*args: str) -> subprocess.Popen[str]:
    """The console command in its own process group (as a terminal's Ctrl-C reaches it)."""
    return subprocess.Popen([sys.executable, "-c", "from llumverify.cli import main; main()", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _simulate(out: Path, seed: int, requests: int) -> subprocess.Popen[str]:
    return _llumverify("simulate", "--requests", str(requests), "--instances", "2", "--rate", "50",
                       "--policy", "round-robin", "--seed", str(seed), "--out", str(out), "--force")


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def _requests_seed_consistent(out: Path, seed: int) -> None:
    """summary.json says `seed`, requests.csv is one whole run (ids 0..n-1 once each, no stray lines)."""
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["workload"]["seed"] == seed
    lines = (out / "requests.csv").read_text().splitlines()
    ids = [int(line.split(",", 1)[0]) for line in lines[1:]]
    assert lines[0].startswith("request_id,") and ids == list(range(summary["config"]["workload"]["requests"]))


@pytest.mark.slow
def test_a_second_writer_is_refused_before_any_work_and_the_first_result_is_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _simulate(out, seed=1, requests=60_000)
    _wait_for(out / LOCK, first)
    second = _simulate(out, seed=2, requests=20)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 2 and err.count("\n") == 1, err
    assert f"--out {out}: another llumverify (pid {first.pid}) is writing there" in err
    assert first.wait(timeout=300) == 0, first.communicate()
    assert sorted(p.name for p in out.iterdir()) == ["requests.csv", "summary.json"]
    _requests_seed_consistent(out, seed=1)


def _interrupt(run: subprocess.Popen[str], out: Path, settle_s: float) -> str:
    """Ctrl-C the writer of `out` once it holds the folder's lock and has worked `settle_s`;
    its stderr, after checking it ended within 1 s of the signal."""
    _wait_for(out / LOCK, run)
    time.sleep(settle_s)
    start = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=10)
    assert time.monotonic() - start < 1.0
    return err


@pytest.mark.slow
def test_ctrl_c_keeps_the_previous_result_and_says_so_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _simulate(out, seed=3, requests=20)
    assert done.wait(timeout=60) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    run = _simulate(out, seed=4, requests=200_000)
    err = _interrupt(run, out, settle_s=0.5)
    assert run.returncode == 130 and err == f"llumverify: interrupted; {out} is as it was before this run\n", err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no lock, no staging, no PARTIAL


FINALIZER_CTRL_C = """
import ctypes, os, signal, time
from llumverify.files import interrupt
interrupt.install()

def slow(value):  # Ctrl-C arrives while this runs
    os.kill(os.getpid(), signal.SIGINT)
    start = time.monotonic()
    while time.monotonic() - start < 0.2:
        pass
    return ctypes.c_int(value)

class SlowArg:  # a native call converting its argument, as Z3's Z3_dec_ref in AstRef.__del__ does
    from_param = staticmethod(slow)

native = ctypes.CDLL(None).abs
native.argtypes = [SlowArg]

class Finalized:
    def __del__(self):  # run by the garbage collector, which Python cannot raise out of
        WHERE

try:
    Finalized()
    time.sleep(0.5)
    print("not interrupted")
except interrupt.Interrupted:
    print("interrupted in the main code")
"""


@pytest.mark.parametrize("where", ["slow(1)", "native(1)"], ids=["python", "inside-a-native-call"])
def test_ctrl_c_inside_a_finalizer_still_stops_the_main_code_without_a_traceback(where: str) -> None:
    """Python cannot raise out of a finalizer: it prints the exception as ignored and goes on. The console's Ctrl-C
    handling raises it again just after, in the main code, so `with` blocks clean up and the one line follows; also
    when ctypes wraps it (ArgumentError "argument 1: Interrupted"), as a CI run showed from Z3's AstRef.__del__."""
    done = subprocess.run([sys.executable, "-c", FINALIZER_CTRL_C.replace("WHERE", where)], capture_output=True,
                          text=True, timeout=30)
    assert (done.stdout, done.stderr) == ("interrupted in the main code\n", ""), done.stderr


@pytest.mark.slow
def test_ctrl_c_during_a_parallel_sweep_is_one_line_saying_how_to_resume(tmp_path: Path) -> None:
    exp = tmp_path / "long.toml"
    exp.write_text(TINY.read_text().replace("requests = 20", "requests = 200000").replace("seeds = [0]", "seeds = [0, 1]"))
    out = tmp_path / "out"
    run = _llumverify("sweep", str(exp), "--out", str(out), "--jobs", "2", "--quiet")
    err = _interrupt(run, out, settle_s=1.0)
    assert run.returncode == 130 and "Traceback" not in err, err
    assert err == f"llumverify: interrupted; the finished runs are saved in {out}: run the same command to resume\n"
    assert (out / "manifest.json").is_file() and (out / PARTIAL).is_file() and holder(out) is None


def test_a_failed_writer_leaves_nothing_and_a_dead_writers_lock_does_not_block(tmp_path: Path) -> None:
    out = tmp_path / "new"
    with pytest.raises(RuntimeError), OutputDir(out, "--out") as claim:
        (claim.path / "half.csv").write_text("1,2\n")
        raise RuntimeError("the run failed")
    assert not out.exists()
    out.mkdir()
    (out / LOCK).write_text("999999999\n")  # left by a writer that was killed: nobody holds it
    assert holder(out) is None
    with OutputDir(out, "--out", force=True) as claim:
        (claim.path / "a.csv").write_text("a\n")
        assert holder(out) == os.getpid()
        with pytest.raises(UserError, match=rf"another llumverify \(pid {os.getpid()}\) is writing there"):
            OutputDir(out, "--out", force=True)
        claim.commit()
    assert sorted(p.name for p in out.iterdir()) == ["a.csv"]


@pytest.mark.parametrize("name", ["../x", "/abs", "", ".", "..", "a/b", "a\\b", " pad", "nul\0", "x" * 201])
def test_names_that_would_leave_their_folder_are_refused(name: str) -> None:
    with pytest.raises(UserError, match="must be a plain folder name"):
        safe_name(name, "name")


@pytest.mark.slow
def test_ctrl_c_during_checks_z3_queries_is_one_line_within_a_second() -> None:
    """Z3 runs in native code in forkserver workers: the workers ignore Ctrl-C and are stopped, the
    parent says one line (no Z3 or pool traceback, no leaked-semaphore warning), exit 130."""
    run = _llumverify("check")
    time.sleep(3.0)  # the workers are up (about 1 s idle, 2 s under load) and into their first Z3 queries
    assert run.poll() is None, run.communicate()
    start = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=10)
    assert time.monotonic() - start < 1.0
    assert run.returncode == 130 and err == "llumverify: interrupted; nothing was written\n", err


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from Linux /proc")
def test_a_pools_forkserver_ignores_ctrl_c_and_stopping_the_pool_ends_it_with_its_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C reaches every process of the group: the forkserver, importing its preload modules for seconds,
    must not print a traceback, nor fork a worker after the parent's one line; stop_pool ends it and its
    workers, the pool's own and any it has not heard of yet."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import forkserver

    from llumverify.files import interrupt

    (tmp_path / "slow_preload.py").write_text("import time\ntime.sleep(1.0)\n")  # as numpy and Z3 under load
    monkeypatch.syspath_prepend(str(tmp_path))
    ctx = interrupt.forkserver_context(["slow_preload"])
    server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    time.sleep(0.3)
    os.kill(server, signal.SIGINT)  # while it imports
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        worker = pool.submit(os.getpid).result()
        os.kill(worker, signal.SIGINT)
        time.sleep(0.3)
        assert _alive(server) and _alive(worker)
        interrupt.stop_pool(pool)
        deadline = time.monotonic() + 10
        while (_alive(server) or _alive(worker)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server) and not _alive(worker)


def test_what_a_killed_writer_leaves_does_not_make_a_folder_non_empty(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".staging-999999999-abcd1234").mkdir(parents=True)
    (out / ".staging-999999999-abcd1234" / "requests.csv").write_text("half")
    (out / LOCK).write_text("999999999\n")
    with OutputDir(out, "--out") as claim:
        (claim.path / "summary.json").write_text("{}\n")
        claim.commit()
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    with pytest.raises(UserError, match="folder is not empty"):
        OutputDir(out, "--out")


def test_a_pool_stopped_by_ctrl_c_leaves_no_tracker_warning() -> None:
    """A pool Ctrl-C stops leaks its semaphore; multiprocessing's resource tracker would print two
    lines about it at exit, after the one line an interrupted run prints (seen under load)."""
    code = ("from llumverify.files import interrupt; interrupt.install(); import multiprocessing as mp, os; "
            "s = mp.get_context('forkserver').Semaphore(1); os._exit(0)")
    # the tracker shares the child's stderr: run() reads it to the end, past the tracker's exit
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stderr == ""
    unfiltered = subprocess.run([sys.executable, "-c", code.replace("interrupt.install(); ", "")],
                                capture_output=True, text=True, timeout=60)
    assert "leaked semaphore" in unfiltered.stderr  # what it would print


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from Linux /proc")
def test_stopping_a_forkserver_pool_ends_what_the_server_forked_that_the_pool_does_not_know() -> None:
    """The server's children are found from /proc, not from the pool: a process it forked that no pool lists
    (as a worker asked for just before Ctrl-C) ends too."""
    from concurrent.futures import ProcessPoolExecutor

    from llumverify.files import interrupt

    ctx = interrupt.forkserver_context([])
    other = ctx.Process(target=time.sleep, args=(30,))
    other.start()
    try:
        interrupt.stop_pool(ProcessPoolExecutor(max_workers=1, mp_context=ctx))
        deadline = time.monotonic() + 5
        while _alive(other.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(other.pid)
    finally:
        if _alive(other.pid):
            os.kill(other.pid, signal.SIGKILL)


def test_a_thread_s_traceback_is_printed_until_ctrl_c_came(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from llumverify.files import interrupt

    def fail() -> None:
        raise RuntimeError("a thread's own failure")

    monkeypatch.setattr(threading, "excepthook", interrupt._quiet_after_ctrl_c)
    for signalled, shown in ((False, True), (True, False)):
        monkeypatch.setattr(interrupt, "_signalled", signalled)
        thread = threading.Thread(target=fail)
        thread.start()
        thread.join()
        assert ("a thread's own failure" in capsys.readouterr().err) is shown
