"""Safety properties (defined once) and Hypothesis state machines."""
