"""Hypothesis state machines that drive the concrete protocol through every event.

Each step picks one enabled action (environment events included: decode, finish, preempt,
out-of-memory, crashes, spurious timeouts, lease expiry), applies it through the simulator API,
and checks that the concrete transition satisfies the Z3 relation of that action (conformance).
For variants that claim safety, every property holds after every step, every step property
on every step, and each decision of S or D has one enabled alternative at most (`decisive`).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from llumverify.models.conformance import conforms
from llumverify.protocol.api import Migration, start_migration
from llumverify.protocol.variants import Variant
from llumverify.properties.safety import PROPERTIES, decisive, violated


def machine_for(variant: Variant, check_properties: bool) -> type[RuleBasedStateMachine]:
    """A state machine class for one variant (properties checked only if it claims safety)."""

    class ProtocolMachine(RuleBasedStateMachine):
        m: Migration

        @initialize(blocks=st.integers(1, 40), block_size=st.integers(1, 4), data=st.data(),
                    src_free=st.integers(0, 6), dst_free=st.integers(0, 60),
                    watermark=st.integers(0, 3), last_stage_blocks=st.integers(0, 20),
                    dst_slot_taken=st.booleans())
        def start(self, blocks: int, block_size: int, data: st.DataObject, src_free: int,
                  dst_free: int, watermark: int, last_stage_blocks: int,
                  dst_slot_taken: bool) -> None:
            tok = data.draw(st.integers(0, block_size - 1), label="tokens_in_last_block")
            self.m = start_migration(
                blocks=blocks, src_free=src_free, dst_free=dst_free, variant=variant,
                tokens_in_last_block=tok, block_size=block_size, watermark=watermark,
                last_stage_blocks=last_stage_blocks, dst_slot_taken=dst_slot_taken)

        @rule(data=st.data())
        def step(self, data: st.DataObject) -> None:
            enabled = self.m.enabled()
            if not enabled:
                return
            name = data.draw(st.sampled_from(enabled), label="action")
            pre = self.m.state
            self.m = self.m.apply(name)
            assert conforms(variant, name, pre, self.m.state), f"{name} disagrees with Z3"
            if check_properties:
                broken = violated(self.m.state, pre)
                assert not broken, f"{name} violated: {broken}"

        @invariant()
        def safe(self) -> None:
            if check_properties and hasattr(self, "m"):
                broken = [n for n, p in PROPERTIES.items() if not p.predicate(self.m.state)]
                assert not broken, f"violated: {broken}"
                assert decisive(self.m.state, variant), f"not decisive: {self.m.enabled()}"

    ProtocolMachine.__name__ = f"ProtocolMachine_{variant.name}"
    return ProtocolMachine
