"""Ctrl-C at chosen moments after `llumverify check` starts: is the answer always the one line and exit 130?

The first second or two is the risky window: the forkserver is still importing Z3 and numpy and the first workers
are being forked. Each DELAY (s) starts `check` in its own process group (as a terminal's Ctrl-C reaches it), sends
SIGINT to the group and prints the delay, the exit code, how long the exit took and `ok` or the stderr's tail;
the last line counts the runs that were not the one line.

    python benchmarks/ctrl_c_check.py [DELAY ...]   (default: 0.3 to 3.0 s)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

ONE_LINE = "llumverify: interrupted; nothing was written\n"


def main(delays: list[float]) -> int:
    bad = 0
    for delay in delays:
        proc = subprocess.Popen([sys.executable, "-c", "from llumverify.cli import main; main()", "check"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        ok = proc.returncode == 130 and err == ONE_LINE
        bad += not ok
        print(f"{delay:g} s: exit {proc.returncode} after {time.monotonic() - start:.2f} s: "
              + ("ok" if ok else repr(err[-400:])), flush=True)
        time.sleep(0.3)
    print(f"{bad} of {len(delays)} not the one line")
    return 1 if bad else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("delays", nargs="*", type=float, metavar="DELAY", help="seconds after the start to press Ctrl-C")
    delays = parser.parse_args().delays or [0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.6, 2.0, 2.5, 3.0]
    if any(not 0 <= d <= 600 for d in delays):
        parser.error("each DELAY must be between 0 and 600 s")
    sys.exit(main(delays))
