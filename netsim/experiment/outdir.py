"""Results directories are netsim's own: which directories it may write, and how it replaces them.

A results directory is one that holds a ``manifest.json`` written by netsim: the manifest names
the kind of results (``run`` or ``sweep``), their ``status`` and the ``files`` netsim wrote there.
netsim writes only into a directory that does not exist yet, an empty directory, or one of its own
results directories when asked to (``--force`` replaces it, ``--resume`` continues a sweep), and
even then it removes only the files the manifest lists: a file the user added stays.

``status`` says whether the directory can be trusted:

* ``complete``: everything was written, every run succeeded; the manifest is always written last.
* ``failed``: a sweep ran every run but some failed (``counts.failed`` says how many, ``runs`` which
  and why); the others' results are there, and ``netsim sweep --resume`` runs the failed ones again.
* ``running``: a sweep is writing it (or was killed while it did).
* ``interrupted``: a sweep stopped early (Ctrl-C, SIGTERM, an error); the manifest says which runs
  finished, and ``netsim sweep --resume`` continues it.
* ``replacing``: ``--force`` was replacing it when it stopped; ``--force`` again finishes the job.

A single run's results are built in a hidden temporary sibling (:class:`Staging`) and moved into
place, the manifest last, so an interrupted run leaves nothing that looks complete.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from netsim.errors import NetsimError

MANIFEST = "manifest.json"
#: Names of the tables a results directory may hold (``runs/`` holds a sweep's per-run parts).
KNOWN_FILES = ("runs.parquet", "collectives.parquet", "flows.parquet", "links.parquet", "jobs.parquet",
               "iterations.parquet", "link_series.parquet", "report.html")
_STAGING = ".netsim-staging"  #: marker file inside a staging directory: the pid that made it


class OutputError(NetsimError):
    """netsim refuses to write (or cannot write) a results directory."""


def os_error(exc: OSError, action: str, path: str | Path | None = None) -> OutputError:
    """A one-line message for an operating-system error: what failed, on which path, and why."""
    where = path or exc.filename
    why = {errno.ENOSPC: "no space left on the device", errno.EROFS: "the file system is read-only",
           errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
           errno.ENOTDIR: "a part of the path is a file, not a directory",
           errno.ENAMETOOLONG: "the name is too long", errno.EDQUOT: "disk quota exceeded",
           errno.ENOENT: "no such file or directory"}.get(exc.errno, exc.strerror or str(exc))
    return OutputError(f"cannot {action} {where}: {why}")


@dataclass(frozen=True)
class Existing:
    """What is at a results path now."""

    #: absent, empty, netsim, damaged (a netsim manifest that cannot be read), foreign, file
    state: str
    manifest: dict | None = None
    detail: str = ""      #: a few of the foreign entries, or why the manifest cannot be read

    @property
    def kind(self) -> str:
        """``run`` or ``sweep`` for a netsim results directory."""
        m = self.manifest or {}
        return m.get("kind", "run")

    @property
    def files(self) -> list[str]:
        """The entries netsim wrote (relative paths), per the manifest."""
        return owned_files(self.manifest or {})


def _recognised(path: Path) -> dict:
    """A stand-in manifest for a results directory whose manifest cannot be read: it owns netsim's own
    file names only (the documented tables, the report, the manifest, and ``runs/<id>`` parts that hold
    a ``run.json``)."""
    runs = path / "runs"
    parts = [f"runs/{d.name}" for d in runs.iterdir() if (d / "run.json").is_file()] if runs.is_dir() else []
    return {"netsim_version": "?", "kind": "sweep" if parts else "run", "status": "damaged",
            "files": [MANIFEST, *KNOWN_FILES, *parts]}


def owned_files(manifest: dict) -> list[str]:
    """The paths a manifest says netsim wrote; for manifests older than the ``files`` list, the
    documented tables, the report and a sweep's run parts (``runs/<run_id>``)."""
    if isinstance(manifest.get("files"), list):
        return [f for f in manifest["files"] if isinstance(f, str)]
    files = [MANIFEST, *KNOWN_FILES]
    if manifest.get("kind") == "sweep":
        files += [f"runs/{r['run_id']}" for r in manifest.get("runs", [])
                  if isinstance(r, dict) and "run_id" in r]
    return files


def read_manifest(directory: Path) -> dict:
    """The manifest of a results directory; OutputError when it is missing or unreadable."""
    path = directory / MANIFEST
    try:
        with open(path, "rb") as f:
            raw = f.read(64 * 2**20 + 1)
        if len(raw) > 64 * 2**20:
            raise ValueError("larger than 64 MiB")
        manifest = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise OutputError(f"{directory} is not a netsim results directory (no {MANIFEST})") from None
    except OSError as exc:
        raise os_error(exc, "read", path) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise OutputError(f"{path} is corrupt ({str(exc)[:120]}); it cannot be read as a netsim manifest") from None
    if not isinstance(manifest, dict) or "netsim_version" not in manifest:
        raise OutputError(f"{path} is not a netsim manifest")
    return manifest


def inspect(path: Path) -> Existing:
    """Classify what is at ``path`` (see :class:`Existing`); raises OutputError for what netsim
    could never write into (a path under a regular file, a device)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        for parent in path.parents:  # a path under a regular file
            if parent.exists() and not parent.is_dir():
                raise OutputError(f"cannot use {path}: {parent} is a file, not a directory") from None
        return Existing("absent")
    except NotADirectoryError:
        raise OutputError(f"cannot use {path}: a part of the path is a file, not a directory") from None
    except OSError as exc:
        raise os_error(exc, "use", path) from None
    if not path.is_dir():
        return Existing("file")
    try:
        entries = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        raise os_error(exc, "list", path) from None
    del st
    if not entries:
        return Existing("empty")
    if MANIFEST in entries:
        try:
            return Existing("netsim", read_manifest(path))
        except OutputError as exc:
            if "runs.parquet" in entries or "runs" in entries:  # netsim's layout around a damaged manifest
                return Existing("damaged", _recognised(path), str(exc))
            return Existing("foreign", None, str(exc))
    shown = ", ".join(entries[:4]) + (f" and {len(entries) - 4} more" if len(entries) > 4 else "")
    return Existing("foreign", None, f"it holds {shown}")


def _is_cwd_or_above(path: Path) -> bool:
    try:
        here, there = Path.cwd().resolve(), path.resolve()
    except OSError:
        return False
    return there == here or there in here.parents


def claim(path: Path, kind: str, *, force: bool = False, resume: bool = False,
          option: str | None = None) -> Existing:
    """Check that netsim may write a ``kind`` (``run`` or ``sweep``) results directory at ``path``.

    Returns what is there now; raises OutputError with what is wrong and what to do otherwise.
    ``option`` names where the path came from in messages (``--out``; default "results directory").
    """
    path = Path(path)
    option = option or "results directory"
    if _is_cwd_or_above(path):
        raise OutputError(f"{option} {path}: that is the current directory or one that contains it; netsim "
                          "writes results into a directory of their own (e.g. results/NAME)")
    existing = inspect(path)
    if existing.state == "file":
        raise OutputError(f"{option} {path}: it is a file, not a results directory; give a new directory")
    if existing.state == "foreign":
        raise OutputError(f"{option} {path}: the directory is not empty and is not a netsim results directory "
                          f"({existing.detail}); netsim writes only into a new or empty directory or one it wrote")
    if existing.state == "damaged":
        if force and not resume:
            return existing
        raise OutputError(f"{option} {path}: {existing.detail}, so netsim cannot tell what it wrote there; --force "
                          "starts over (it removes only netsim's own file names: the tables, report.html, "
                          "manifest.json, runs/<id>; other files stay)")
    if existing.state != "netsim":
        return existing  # absent or empty (--resume of a sweep that never started: it starts)
    m = existing.manifest or {}
    what = f"{existing.kind} results of {m.get('name', '?')!r} ({m.get('status', 'complete')}, {m.get('created', '?')})"
    if resume:
        if kind != "sweep" or existing.kind != "sweep":
            raise OutputError(f"{option} {path}: --resume continues a sweep, and this directory holds {what}")
        return existing
    if force:
        return existing
    hint = "--resume continues it, " if kind == "sweep" and existing.kind == "sweep" else ""
    raise OutputError(f"{option} {path} already holds {what}; {hint}--force replaces them (files you added "
                      "are kept), or --out another directory")


def _move(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)


def remove_owned(path: Path, manifest: dict, keep: tuple[str, ...] = ()) -> None:
    """Delete what ``manifest`` says netsim wrote in ``path`` (never anything else), the manifest first,
    so a directory half cleaned up never looks complete. ``keep`` entries stay."""
    files = [f for f in owned_files(manifest) if f not in keep]
    for rel in sorted(files, key=lambda f: f != MANIFEST):
        target = path / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            continue  # CORRECTNESS: a manifest can only name entries inside its own directory
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
    runs = path / "runs"
    if runs.is_dir() and not any(runs.iterdir()):
        runs.rmdir()


class Staging:
    """A run's results directory being written: files go into a hidden temporary sibling of the
    target; :meth:`commit` moves them into place with the manifest last; :meth:`abort` removes it.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> s = Staging(d / "res", claim(d / "res", "run"))
    >>> _ = (s.path / "runs.parquet").write_bytes(b"...")
    >>> s.commit({"netsim_version": "x", "kind": "run"}).name, sorted(p.name for p in (d / "res").iterdir())
    ('res', ['manifest.json', 'runs.parquet'])
    """

    def __init__(self, target: Path, existing: Existing):
        self.target = Path(target)
        self.existing = existing
        parent = self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            _clear_stale(parent, self.target.name)
            self.path = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.netsim-tmp-", dir=parent))
            (self.path / _STAGING).write_text(str(os.getpid()))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self.path, 0o777 & ~umask)  # mkdtemp makes 0700; a results directory is ordinary
        except OSError as exc:
            raise os_error(exc, "create a results directory in", parent) from None

    def commit(self, manifest: dict) -> Path:
        """Move the staged files into the target (manifest last, ``status: complete``); returns it."""
        (self.path / _STAGING).unlink()
        files = sorted(p.name for p in self.path.iterdir() if p.name != MANIFEST)
        manifest = {**manifest, "status": "complete", "files": [MANIFEST, *files]}
        try:
            _write_json(self.path / MANIFEST, manifest)
            state = self.existing.state if self.target.exists() else "absent"
            if state in ("absent", "empty"):
                os.replace(self.path, self.target)  # atomic; rename(2) also replaces an empty directory
                return self.target
            # an existing netsim directory (--force): say it is being replaced, clear what netsim wrote,
            # move the new files in, the manifest last
            old = self.existing.manifest if state == "damaged" else read_manifest(self.target)
            _write_json(self.target / MANIFEST, {**old, "status": "replacing",
                                                 "files": sorted(set(owned_files(old)) | set(files) | {MANIFEST})})
            remove_owned(self.target, {**old, "files": [f for f in owned_files(old) if f != MANIFEST]})
            for name in files:
                dst = self.target / name
                if dst.is_dir() and not dst.is_symlink():
                    raise OutputError(f"cannot replace {dst}: it is a directory netsim did not write")
                _move(self.path / name, dst)
            os.replace(self.path / MANIFEST, self.target / MANIFEST)
            self.path.rmdir()
        except OSError as exc:
            raise os_error(exc, "write results to", self.target) from None
        return self.target

    def abort(self) -> None:
        """Remove the staging directory (nothing of it reaches the target)."""
        shutil.rmtree(self.path, ignore_errors=True)


def _clear_stale(parent: Path, name: str) -> None:
    """Remove staging directories of ``name`` left by netsim processes that no longer run."""
    for d in parent.glob(f".{name}.netsim-tmp-*"):
        marker = d / _STAGING
        try:
            pid = int(marker.read_text())
        except (OSError, ValueError):
            continue  # not (or no longer) recognisably netsim's: leave it
        if pid != os.getpid() and not _alive(pid):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _finite(value):
    """``value`` with every NaN or infinity replaced by None (null): a manifest is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(data) -> str:
    """``data`` as strict JSON text (non-finite numbers become null, other objects their ``str``)."""
    return json.dumps(_finite(data), indent=2, default=str, allow_nan=False)


def _write_json(path: Path, data: dict) -> None:
    """``data`` as strict JSON at ``path`` (non-finite numbers become null), atomically (a temporary
    file renamed over it)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json_text(data))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_manifest(directory: Path, manifest: dict) -> None:
    """Write ``directory/manifest.json`` atomically."""
    try:
        _write_json(Path(directory) / MANIFEST, manifest)
    except OSError as exc:
        raise os_error(exc, "write", Path(directory) / MANIFEST) from None


def add_files(directory: Path, names: list[str]) -> None:
    """Record in ``directory``'s manifest that netsim wrote ``names`` there (a report written later)."""
    manifest = read_manifest(Path(directory))
    files = owned_files(manifest)
    if all(n in files for n in names):
        return
    write_manifest(Path(directory), {**manifest, "files": sorted(set(files) | set(names))})


def check_new_file(path: Path, *, force: bool = False, option: str = "--out", inputs=(),
                   suffixes: tuple[str, ...] = ()) -> None:
    """OutputError unless netsim may write the single file ``path``: its directory exists, it does not
    exist yet (or ``force``, or it is netsim's own report in a results directory), it is none of the
    command's ``inputs`` (not even with ``force``), and its name ends in one of ``suffixes`` (the
    formats it can be written in; any name when empty)."""
    from netsim.inputfile import same_file

    path = Path(path)
    if suffixes and path.suffix.lower() not in suffixes:
        raise OutputError(f"{option} {path}: the file is written as {suffixes[0][1:].upper()}, "
                          f"so its name must end in {' or '.join(suffixes)}")
    for given in inputs:
        if same_file(path, given):
            raise OutputError(f"{option} {path}: that is {'an input' if Path(given) == path else f'the input {given}'} "
                              "of this command; writing it would destroy it (even with --force): give another name")
    try:
        is_dir, exists = path.is_dir(), path.exists() or path.is_symlink()
    except OSError as exc:
        raise os_error(exc, "use", path) from None
    if is_dir:
        raise OutputError(f"{option} {path}: it is a directory; give a file name")
    if exists and not path.is_file():
        raise OutputError(f"{option} {path}: it is not a regular file")
    if exists and not force and not _netsim_report(path):
        raise OutputError(f"{option} {path} already exists; --force overwrites it, or give another name")
    if not path.parent.is_dir():
        inspect(path.parent)  # a path under a regular file: say so
        raise OutputError(f"{option} {path}: directory {path.parent} does not exist")


def write_file_atomically(path: Path, data: str | bytes, *, force: bool = False, option: str = "--out") -> Path:
    """Write a single output file (a report, a CSV, a drawing) next to where it goes, then rename it.

    An existing file is replaced only with ``force`` (or when it is netsim's own ``report.html``
    inside a netsim results directory); a directory or a device is never replaced.
    """
    path = Path(path)
    check_new_file(path, force=force, option=option)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise os_error(exc, "write", path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _netsim_report(path: Path) -> bool:
    """True for ``report.html`` inside a netsim results directory whose manifest lists it."""
    if path.name != "report.html":
        return False
    try:
        return "report.html" in owned_files(read_manifest(path.parent))
    except OutputError:
        return False
