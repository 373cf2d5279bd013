"""Z3 resource units Spacer spends on each proof models/chc.py makes for the named variants: each
in a fresh process (what `check` does: one process per task), then all in one process one after
another (what a test or a benchmark does), against the cap chc.RLIMIT. Run: python benchmarks/chc_units.py"""

from __future__ import annotations

import subprocess
import sys

PROOFS = (("head", "final_copy_from_held"), ("head", "lease_discipline"), ("v010", "copy_into_reserved"),
          ("pd-resume-on-timeout", "kv_intact"))


def units(variant: str, prop: str) -> int:
    """Units of one Spacer query (the step property too), in this process."""
    from llumverify.models import chc
    from llumverify.models.check import proof_of
    from llumverify.properties.safety import PROPERTIES
    from llumverify.protocol.variants import VARIANTS

    v, p = VARIANTS[variant], PROPERTIES[prop]
    invariant = proof_of(v).predicates
    start = _count()
    assert chc.strengthening(v, p.predicate, p.step, invariant) is not None, (variant, prop)
    return _count() - start


def _count() -> int:
    """The process's running total of Z3 resource units (a fixedpoint query's statistics report it)."""
    import z3

    fp = z3.Fixedpoint()
    fp.set(engine="spacer")
    b = z3.Bool("chc_units_probe")
    fp.register_relation(b.decl())
    fp.query(b)
    stats = fp.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


def main() -> None:
    from llumverify.models.chc import RLIMIT

    print(f"cap: {RLIMIT / 1e6:g} M units")
    for variant, prop in PROOFS:
        out = subprocess.run([sys.executable, __file__, variant, prop], capture_output=True, text=True, check=True)
        print(f"fresh process   {variant:<22} {prop:<22} {int(out.stdout) / 1e6:6.2f} M")
    for variant, prop in PROOFS:
        print(f"one process     {variant:<22} {prop:<22} {units(variant, prop) / 1e6:6.2f} M")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(units(sys.argv[1], sys.argv[2]))
    else:
        main()
