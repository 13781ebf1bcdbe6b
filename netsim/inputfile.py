"""Reading the files netsim is given: regular files only, a size cap, strict UTF-8, errors that name the place.

Every input file (the experiment YAML, job traces, Chakra traces, Parquet schedules, MoE routing
matrices, route tables) is opened through here, so that each refuses the same things the same way:
a missing file, a directory, a device or pipe (reading one could block or never end: a symlink to
``/dev/zero``), a symlink loop, a file larger than its format's cap, bytes that are not UTF-8 text,
a NUL character. Errors are :class:`~netsim.errors.ConfigError` naming the file, and the line (text)
or the row counted from 1 as a spreadsheet shows it (tables), the column, what was found and what
is allowed.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from pathlib import Path

from netsim.errors import ConfigError, shorten

#: Largest input file netsim reads unless its format says otherwise (bytes): a 1,000,000-job trace
#: is about 100 MB as CSV; anything larger is almost surely the wrong file.
MAX_INPUT_BYTES = 1 * 2**30


def regular_file(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES, what: str = "file") -> os.stat_result:
    """The ``os.stat`` of ``path`` (symlinks followed), refused unless it is a readable regular file of at
    most ``limit`` bytes. ``what`` names the file in the messages ("job trace", "routing matrix")."""
    where = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        # a dangling symlink is "not found" too, but say so: the name exists
        dangling = os.path.islink(path)
        raise ConfigError(f"{what} not found" + (" (a symlink to a missing file)" if dangling else ""), "",
                          where) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{what} is a symlink loop", "", where) from None
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", "", where) from None
    except ValueError as exc:  # a NUL in the name
        raise ConfigError(f"cannot read the {what}: {exc}", "", shorten(where)) from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"a directory, not a {what}", "", where)
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError("not a regular file (a device, pipe or socket)", "", where)
    if info.st_size > limit:
        raise ConfigError(f"{what} too large: {info.st_size:,} bytes (limit {limit:,} bytes)", "", where)
    if not os.access(path, os.R_OK):
        raise ConfigError(f"cannot read the {what}: permission denied", "", where)
    return info


def read_bytes(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES, what: str = "file") -> bytes:
    """The bytes of the regular file ``path`` (see :func:`regular_file`)."""
    regular_file(path, limit, what)
    where = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", "", where) from None
    if len(raw) > limit:  # it grew since stat
        raise ConfigError(f"{what} too large: more than {limit:,} bytes", "", where)
    return raw


def read_text(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES, what: str = "file") -> str:
    """The UTF-8 text of the regular file ``path``, a leading byte-order mark dropped; refused (with the
    line) when it is not UTF-8 or holds a NUL character (binary data)."""
    return decode(read_bytes(path, limit, what), str(path), what)


def decode(raw: bytes, where: str, what: str = "file") -> str:
    """``raw`` as strict UTF-8 (without a leading BOM), refused with the line of a bad byte or a NUL."""
    start = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        text = raw[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = start + exc.start
        line = raw.count(b"\n", 0, at) + 1
        raise ConfigError(f"not UTF-8 text: byte 0x{raw[at]:02x} at line {line} (byte {at + 1:,} of the "
                          f"{what}); save it as UTF-8", "", where, line) from None
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise ConfigError(f"a NUL character at line {line}: binary data, not text", "", where, line)
    return text


def read_parquet(path: str | os.PathLike, limit: int = MAX_INPUT_BYTES, what: str = "Parquet file",
                 columns: list[str] | None = None):
    """The ``pyarrow.Table`` of the regular Parquet file ``path``; refused when it is not Parquet, is
    damaged, or repeats a column name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    regular_file(path, limit, what)
    where = str(path)
    try:
        names = pq.read_schema(path).names
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(f"not a readable Parquet file ({_arrow_reason(exc)})", "", where) from None
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"column {shorten(repeated[0])} appears {names.count(repeated[0])} times; each column "
                          "once", "", where)
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ConfigError(f"not a readable Parquet file ({_arrow_reason(exc)})", "", where) from None


def _arrow_reason(exc: BaseException) -> str:
    """Arrow's message, first line, shortened."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return shorten(text, 160)[1:-1] if len(text) > 160 else text


def at_row(file: str | os.PathLike, row: int, column: str | None, message: str) -> ConfigError:
    """An error about data row ``row`` (0-based) of a table file, shown counted from 1 as a spreadsheet's
    data rows are (the header not counted): ``file: row 3: column 'gpus': message``."""
    place = f"row {row + 1:,}" + (f", column {column!r}" if column else "")
    return ConfigError(message, place, str(file))


def at_line(file: str | os.PathLike, line: int, column: str | None, message: str) -> ConfigError:
    """An error about physical line ``line`` (1-based) of a text file: ``file:12: column 'gpus': message``."""
    return ConfigError(message, f"column {column!r}" if column else "", str(file), line)


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file (the same inode, or the same resolved path when ``a`` does
    not exist yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        try:
            return Path(a).resolve() == Path(b).resolve()
        except (OSError, RuntimeError):
            return False


def refuse_overwrite(out: str | os.PathLike, inputs, option: str = "the output") -> None:
    """ConfigError when ``out`` is one of ``inputs`` (no command writes over a file it reads, with or
    without ``--force``)."""
    for given in inputs:
        if given is not None and same_file(out, given):
            raise ConfigError(f"{option} {str(out)!r} is the input file {str(given)!r}: writing it would destroy "
                              "the input; choose another path")
