"""SimPy discrete-event simulator of a Llumnix-style serving cluster."""
