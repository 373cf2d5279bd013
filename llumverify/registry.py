"""Things chosen by name, each registered once: the simulator's engines (sim/engines.py) and the
dispatch policies (scheduler/policies.py)."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(dict[str, T], Generic[T]):
    """name -> item; `kind` names what it holds in its messages."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, name: str, item: T) -> T:
        """Make `item` available under `name`, which nothing else may hold."""
        if name in self:
            raise ValueError(f"{self.kind} {name!r} is registered already")
        self[name] = item
        return item

    def unknown(self, name: str) -> str:
        """What to say of a name nothing holds."""
        return f"unknown {self.kind} {name!r} (choose from {', '.join(self)})"
