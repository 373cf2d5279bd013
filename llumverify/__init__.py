"""llumverify: is live migration of LLM requests safe, and when does it pay?

One scheduler (`llumverify.scheduler`) and one migration protocol (`llumverify.protocol`) are
executed by the simulator (`llumverify.sim`), proven by the checker (`llumverify.models`) and
driven by property tests (`llumverify.properties`).
"""

__version__ = "0.1.0"

from llumverify import _native

_native.select()  # before any compiled module is imported: never run a stale extension
