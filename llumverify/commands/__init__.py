"""One module per CLI sub-command; cli.py wires them into the click group."""
