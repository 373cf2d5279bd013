"""Which protocol actions the Hypothesis machines (properties/machines.py) take, and how often
the handshake gets through its commit: `python benchmarks/machine_coverage.py [--examples 300]`.
Runs each machine as the tests do (derandomized, 40 steps a run) and prints, per variant, the
actions never taken and the counts of `d_commit` and `s_commit_ok`. Not a test: a measurement of
how far random runs explore, to be read when the machines or their budgets change."""

from __future__ import annotations

import argparse
import collections

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from llumverify.properties.machines import machine_for
from llumverify.protocol.variants import MUST_PROVE, VARIANTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--variant", action="append", default=None, help="default: safe, head, pd")
    args = parser.parse_args()
    for name in args.variant or ["safe", "head", "pd"]:
        v = VARIANTS[name]
        machine = machine_for(v, check_properties=name in MUST_PROVE)
        seen: collections.Counter[str] = collections.Counter()
        take = machine.take

        def counted(self, action: str, take=take, seen=seen) -> None:  # type: ignore[no-untyped-def]
            seen[action] += 1
            take(self, action)

        machine.take = counted  # type: ignore[attr-defined]
        run_state_machine_as_test(machine, settings=settings(
            max_examples=args.examples, stateful_step_count=40, derandomize=True, deadline=None,
            suppress_health_check=list(HealthCheck)))
        never = [a.name for a in v.actions if not seen[a.name]]
        print(f"{name}: d_commit {seen['d_commit']}, s_commit_ok {seen['s_commit_ok']}; "
              f"never taken: {', '.join(never) or 'none'}")


if __name__ == "__main__":
    main()
