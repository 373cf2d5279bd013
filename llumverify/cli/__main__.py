"""`python -m llumverify.cli`: the console command (tests run it in a child process this way)."""

from llumverify.cli import main

main()
