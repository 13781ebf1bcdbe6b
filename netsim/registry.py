"""Name -> implementation registries for each axis of comparison (routing, placement, algorithms)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from netsim.errors import ConfigError, did_you_mean

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps the names used in YAML to factories.

    Parameters
    ----------
    axis:
        What is registered (``routing policy``), used in error messages.

    Examples
    --------
    >>> shapes = Registry("shape")
    >>> @shapes.register("square")
    ... class Square:
    ...     def __init__(self, side: float = 1.0): self.side = side
    >>> shapes.create("square", {"side": 2.0}).side
    2.0
    """

    def __init__(self, axis: str):
        self.axis = axis
        self._items: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator adding a factory under ``name``."""
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._items:
                raise ValueError(f"{self.axis} {name!r} registered twice")
            self._items[name] = factory
            return factory
        return deco

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def get(self, name: str, path: str = "") -> Callable[..., T]:
        """The factory registered as ``name``; a ConfigError listing valid names otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.axis} {name!r}; valid: {', '.join(self.names())}"
                              f"{did_you_mean(name, self.names())}", path) from None

    def option_names(self, name: str, skip: int = 0) -> list[str]:
        """Keyword options the factory accepts (after its first ``skip`` positional parameters)."""
        params = list(inspect.signature(self.get(name)).parameters.values())[skip:]
        return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def check_options(self, name: str, options: dict[str, Any], path: str, skip: int = 0) -> None:
        """Raise ConfigError when ``options`` holds a key the factory does not take."""
        allowed = self.option_names(name, skip)
        for key in options:
            if key not in allowed:
                raise ConfigError(f"unknown option {key!r} for {self.axis} {name!r}; allowed: "
                                  f"{', '.join(allowed) or '(none)'}{did_you_mean(key, allowed)}",
                                  f"{path}.{key}" if path else key)

    def create(self, name: str, options: dict[str, Any] | None = None, *args: Any, path: str = "") -> T:
        """Instantiate ``name`` with positional ``args`` and keyword ``options``."""
        options = options or {}
        self.check_options(name, options, path, skip=len(args))
        return self.get(name, path)(*args, **options)
