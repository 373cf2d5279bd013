"""The click command class every sub-command uses: a single-valued option given twice is refused.

click keeps the last of `--variant safe --variant pd` without a word, so `check` proved only `pd` and
exited 0, and `--trace a --trace b` replayed only b. Repeatable options say so (`multiple=True`).
"""

from __future__ import annotations

import click


class Command(click.Command):
    """click.Command, refusing a single-valued option (or a flag pair's two sides) given more than once."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _, _, order = self.make_parser(ctx).parse_args(args=list(args))
        seen: set[str] = set()
        for param in order:
            if not isinstance(param, click.Option) or param.multiple or param.count or param.name is None:
                continue
            if param.name in seen:
                given = "/".join(param.opts + param.secondary_opts)
                raise click.UsageError(f"{given} given more than once: give it once (it takes one value)", ctx)
            seen.add(param.name)
        return super().parse_args(ctx, args)
