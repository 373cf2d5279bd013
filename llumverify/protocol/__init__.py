"""The live-migration handshake: one set of actions over an ops facade (Python values or Z3 terms)."""
