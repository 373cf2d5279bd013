"""Input files read exactly, output folders written whole, and Ctrl-C that keeps what finished."""
