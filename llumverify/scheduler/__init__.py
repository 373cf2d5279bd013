"""Pure scheduling policy: freeness, dispatch, migration pairing, autoscaling (no clock, no SimPy)."""
