"""The study layer: experiments, sweeps, goodput searches, their results and reports."""
