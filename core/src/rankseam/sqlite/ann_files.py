"""The files of the ANN index (:mod:`rankseam.sqlite.ann`) on disk: a new base written to a
temporary file, flushed and renamed; the manifest replaced atomically; the leftovers swept.

A save that fails leaves nothing behind (its temporary file is removed at once: a failing
save repeated must not fill the disk) and raises a :class:`~rankseam.errors.StoreError` that
says the cause in the user's words (the disk is full, permission denied, a read-only file
system, a file size limit, an I/O error) and names the folder. Before writing, a save checks
that the disk has room for the whole file: an index is only a cache of the database, and it
never takes the disk's last free bytes to find out that it does not fit.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from rankseam.errors import StoreError

__all__ = [
    "FORMAT",
    "AnnManifest",
    "discard",
    "fsync_dir",
    "save_error",
    "sweep",
    "write_base",
    "write_manifest",
]

#: The format of the files a manifest names (a base, a vector file).
FORMAT = 1


@attrs.frozen
class AnnManifest:
    """What a file of the index holds (the JSON manifest next to it): a base (the graph), or
    its vector file (:mod:`.ann_vectors`; ``normalized`` is then the space's, as the base's)."""

    namespace: str
    space: str
    dims: int
    normalized: bool
    epoch: int
    version: int
    max_rid: int
    count: int
    file: str
    bytes: int
    format: int = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


#: Files of an index no manifest names are removed once this old (a killed maintenance's).
STRAY_AGE_S = 600.0

_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_DENIED = {errno.EACCES, errno.EPERM}


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _free(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def save_error(exc: BaseException, folder: Path, namespace: str, needed: int) -> StoreError:
    """The :class:`StoreError` a failed save of ``namespace``'s index of ``needed`` bytes into
    ``folder`` stands for. An :class:`OSError` carries its cause; usearch's own error does not
    (``Failed to serialize into stream``), so the disk is asked: too little free space is a
    full disk, a folder this process may not write is a permission problem."""
    code = exc.errno if isinstance(exc, OSError) else None
    free = _free(folder) if folder.exists() else _free(folder.parent)
    what = f"the ANN index of namespace {namespace!r} cannot be saved in {str(folder)!r}"
    kept = (
        "; nothing was published and no temporary file was left; searches stay exact (or use "
        "the previous index) and maintenance tries again later, waiting longer after each "
        "failure"
    )
    if code in _FULL or (code is None and free is not None and free < needed):
        room = "" if free is None else f" (it needs {_mib(needed)}, {_mib(free)} are free)"
        return StoreError(
            f"{what}: the disk is full{room}{kept}: free some disk space, or turn the index "
            "off with RANKSEAM_ANN=off",
            reason="full",
        )
    writable = folder if folder.exists() else folder.parent
    if code in _DENIED or (code is None and not os.access(writable, os.W_OK | os.X_OK)):
        return StoreError(
            f"{what}: permission denied{kept}: let this user write to {str(writable)!r}, or "
            "turn the index off with RANKSEAM_ANN=off",
            reason="readonly",
        )
    if code == errno.EROFS:
        return StoreError(
            f"{what}: the file system is read-only{kept}: open the store on a writable disk, "
            "or turn the index off with RANKSEAM_ANN=off",
            reason="readonly",
        )
    limit = _file_size_limit()
    if code == errno.EFBIG or (code is None and limit is not None and limit < needed):
        shown = "" if limit is None else f" ({_mib(limit)}; the index needs {_mib(needed)})"
        return StoreError(
            f"{what}: the file is larger than this process may write{shown}{kept}: raise the "
            "limit (ulimit -f), or turn the index off with RANKSEAM_ANN=off",
            reason="io",
        )
    cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StoreError(f"{what}: {cause}{kept}: check the disk", reason="io")


def _file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``), if it is limited."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a Unix
        return None
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:  # pragma: no cover - removed by the next maintenance's sweep
        pass


def write_base(index: Any, folder: Path, name: str, namespace: str) -> int:
    """Save ``index`` as ``folder/name`` (through ``name.tmp``, flushed, renamed); its size.
    Raises :func:`save_error`'s error, with the temporary file removed."""
    needed = int(index.serialized_length)
    tmp = folder / (name + ".tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        free = _free(folder)
        if free is not None and free < needed:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder))
        index.save(str(tmp))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, folder / name)
        return (folder / name).stat().st_size
    except (OSError, RuntimeError) as exc:
        _unlink(tmp)
        raise save_error(exc, folder, namespace, needed) from None


def write_manifest(
    manifest: Mapping[str, Any], folder: Path, tmp_name: str, target: Path, namespace: str
) -> None:
    """Replace ``target`` with ``manifest`` atomically (through ``folder/tmp_name``, which is
    removed if the write fails; raises :func:`save_error`'s error then)."""
    tmp = folder / tmp_name
    try:
        with open(tmp, "w") as fh:
            json.dump(dict(manifest), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        _unlink(tmp)
        raise save_error(exc, folder, namespace, 4096) from None
    fsync_dir(folder)


def discard(path: Path) -> None:
    """Remove ``path`` (a base no manifest will name), if it is there."""
    _unlink(path)


def sweep(
    folder: Path,
    slug: str,
    keep: str,
    replaced: str | None,
    patterns: tuple[str, ...] = (),
) -> None:
    """Remove the base a maintenance replaced, and files of the index ``slug`` that no
    manifest names and that are old enough not to be another process's work in progress (the
    leftovers of a killed maintenance). ``patterns``: the files to sweep (default: the bases
    and the manifests' temporary files; a vector file, :mod:`.ann_vectors`, names its own)."""
    now = time.time()
    patterns = patterns or (f"{slug}.*.usearch*", f"{slug}.*.json.tmp")
    leftovers = [path for pattern in patterns for path in folder.glob(pattern)]
    for path in leftovers:
        if path.name == keep:
            continue
        try:
            if path.name == replaced or now - path.stat().st_mtime > STRAY_AGE_S:
                path.unlink()
        except OSError:  # pragma: no cover - already gone, or mapped on Windows
            pass
