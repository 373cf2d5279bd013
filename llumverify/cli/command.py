"""The click command class every sub-command uses: a single-valued option given twice, or an empty path, is refused.

click keeps the last of `--variant safe --variant pd` without a word, so `check` proved only `pd` and
exited 0, and `--trace a --trace b` replayed only b. Repeatable options say so (`multiple=True`). An
empty path (`--out "$OUT"` with OUT unset) is the current folder to click.
"""

from __future__ import annotations

import click


class Command(click.Command):
    """click.Command, refusing a single-valued option (or a flag pair's two sides) given more than once, and an
    empty string where a path goes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        opts, _, order = self.make_parser(ctx).parse_args(args=list(args))
        for param in self.params:
            raw = opts.get(param.name) if param.name else None
            given = raw if isinstance(raw, (list, tuple)) else [raw]
            if isinstance(param.type, click.Path) and any(isinstance(v, str) and not v.strip() for v in given):
                name = "/".join(param.opts) if isinstance(param, click.Option) else param.human_readable_name
                raise click.UsageError(f"{name}: empty path (an unset shell variable?)", ctx)
        seen: set[str] = set()
        for param in order:
            if not isinstance(param, click.Option) or param.multiple or param.count or param.name is None:
                continue
            if param.name in seen:
                given = "/".join(param.opts + param.secondary_opts)
                raise click.UsageError(f"{given} given more than once: give it once (it takes one value)", ctx)
            seen.add(param.name)
        return super().parse_args(ctx, args)
