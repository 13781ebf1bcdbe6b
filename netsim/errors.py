"""Exception types that netsim raises for bad input; the CLI turns them into one-line messages."""

from __future__ import annotations


class NetsimError(Exception):
    """Base class of every error netsim raises on purpose (bad input, impossible request)."""


class UnitError(NetsimError, ValueError):
    """A quantity string (``400Gbps``, ``256MiB``, ``2us``) could not be parsed."""


class ConfigError(NetsimError):
    """An experiment specification is invalid.

    Parameters
    ----------
    message:
        What is wrong and what is allowed.
    path:
        Dotted YAML path of the offending value (``workload.size``), or ``""`` for the whole file.
    file:
        The YAML file, when the spec came from one.
    line:
        1-based line in ``file``, when known.
    """

    def __init__(self, message: str, path: str = "", file: str | None = None, line: int | None = None):
        self.message = message
        self.path = path
        self.file = file
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        """One line: ``file:line: path: message`` with the parts that are known."""
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        at = f"{self.path}: " if self.path else ""
        return f"{where}{at}{self.message}"
