"""The engine model against real runs: replay, static batches, calibration, the validation report."""
