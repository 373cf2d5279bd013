"""Settings every layer reads: the run's configuration and the metrics a run may report."""
