"""The one exception type users see: bad input, printed as a single line by the CLI."""


class UserError(Exception):
    """Bad input (trace, config, option). The message names the file, line or option at fault."""
