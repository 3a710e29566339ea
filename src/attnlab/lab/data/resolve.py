"""Where one dataset file comes from: a mirror, the cache, or a download; and its checksum.

A :class:`DataFile` has a path relative to a *mirror* directory (laid out like the shared
mirror: ``ud/...``, ``nltk/...``, ``sentences/...``, ``planetoid/...``), its canonical download
URL and its sha256. Which files make up which dataset is :mod:`attnlab.lab.data.registry`'s business.

Resolution order for one file (:func:`resolve_file`):

0. **Installed copy.** A file may name absolute paths where a distribution package installs it
   (:attr:`DataFile.installed`, e.g. Debian's ``dataset-fashion-mnist`` under
   ``/usr/share/datasets/``); the first that exists and matches the sha256 is used, whatever
   the mirror or cache say (a copy with another sha256 is skipped with a warning).
1. **Mirror.** If ``mirror=`` is given, or else ``$ATTNLAB_DATA`` is set (non-empty), the file is
   read from that directory and the network is *never* touched. A missing file raises
   :class:`DatasetUnavailable`; a wrong sha256 raises :class:`ChecksumError`.
2. **Cache.** Otherwise the cache directory (``$ATTNLAB_CACHE``, default ``~/.cache/attnlab``,
   same layout as a mirror) is used if it holds the file and the checksum matches.
3. **Download.** Otherwise the file is downloaded from its URL into the cache atomically (a
   temporary file in the same directory, then ``os.replace``) and verified; a mismatch deletes
   the download and raises :class:`ChecksumError`.

Files registered with ``sha256=None`` (the UD EWT train file, which the shared mirror does not
hold) are verified *trust on first use*: the sha256 of the first download is recorded next to
the file (``<file>.sha256``) and every later load from the cache is checked against it. In a
mirror (read-only, nothing can be recorded) such a file is used unverified.

Checksums are memoised in-process per ``(path, size, mtime)``, so loading the same file again
costs one ``stat``.

Note: the canonical URLs point at moving branches (``master``, ``gh-pages``), as given by the
mirror's README. If upstream changes a file, its download fails the pinned checksum with a
:class:`ChecksumError` rather than silently giving different data.
"""

import hashlib
import logging
import os
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

logger = logging.getLogger(__name__)

DATA_ENV = "ATTNLAB_DATA"
CACHE_ENV = "ATTNLAB_CACHE"
DEFAULT_CACHE_DIR = Path("~/.cache/attnlab")
TOFU_SUFFIX = ".sha256"

_CHUNK_BYTES = 1 << 20
_TIMEOUT_S = 60.0

# The opener used for downloads; tests replace it to serve bytes without a network.
_urlopen = urllib.request.urlopen


class DatasetUnavailable(FileNotFoundError):
    """A dataset file is not in the mirror, not in the cache, and cannot be downloaded."""


class ChecksumError(ValueError):
    """A file's sha256 differs from the registered one (or the one recorded at first use)."""


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    Args:
        path: Path relative to a mirror or cache directory, e.g. ``"nltk/brown.zip"``.
        url: Canonical download URL.
        sha256: Expected hex digest, or ``None`` for trust-on-first-use verification.
        installed: Absolute paths where a system package installs the same file, tried first.
    """

    path: str
    url: str
    sha256: str | None
    installed: tuple[str, ...] = ()


def cache_dir() -> Path:
    """The download cache: ``$ATTNLAB_CACHE`` if set, else ``~/.cache/attnlab``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else DEFAULT_CACHE_DIR.expanduser()


def mirror_dir(mirror: str | os.PathLike[str] | None = None) -> Path | None:
    """The mirror directory in use: ``mirror`` if given, else ``$ATTNLAB_DATA``, else ``None``.

    Args:
        mirror: Explicit mirror directory; takes precedence over the environment.
    """
    if mirror is not None:
        return Path(mirror).expanduser()
    env = os.environ.get(DATA_ENV, "").strip()
    return Path(env).expanduser() if env else None


def resolve_file(file: DataFile, *, mirror: str | os.PathLike[str] | None = None) -> Path:
    """Local path of ``file``, from the mirror, the cache, or a fresh download.

    Args:
        file: The file to resolve.
        mirror: Mirror directory; overrides ``$ATTNLAB_DATA``. With a mirror in use the network
            is never touched.

    Raises:
        DatasetUnavailable: The file is missing from the mirror, or cannot be downloaded.
        ChecksumError: The file's sha256 is wrong.
    """
    for candidate in map(Path, file.installed):
        if candidate.is_file() and file.sha256 is not None:
            if file_sha256(candidate) == file.sha256:
                return candidate
            logger.warning("installed %s has another sha256 than %s; not used", candidate, file.url)
    root = mirror_dir(mirror)
    if root is not None:
        origin = "the mirror= argument" if mirror is not None else f"${DATA_ENV}"
        return _from_mirror(file, root, origin)
    return _from_cache(file, cache_dir())


# -- checksums ------------------------------------------------------------------------------

_SHA256_MEMO: dict[tuple[str, int, int], str] = {}


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised in-process per ``(resolved path, size, mtime_ns)``.

    Args:
        path: File to hash.
    """
    key = _memo_key(path)
    digest = _SHA256_MEMO.get(key)
    if digest is None:
        digest = _SHA256_MEMO[key] = _sha256_of(path)
    return digest


def _memo_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _tofu_record(path: Path) -> Path:
    return path.with_name(path.name + TOFU_SUFFIX)


def _record_tofu(path: Path, digest: str) -> None:
    """Record ``digest`` as the trusted sha256 of ``path`` (``sha256sum`` format)."""
    _write_text_atomic(_tofu_record(path), f"{digest}  {path.name}\n")


def _write_text_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


# -- resolution -----------------------------------------------------------------------------


def _from_mirror(file: DataFile, root: Path, origin: str) -> Path:
    path = root / file.path
    if not path.is_file():
        missing_root = (
            "" if root.is_dir()
            else " (that is a file, not a directory)" if root.exists()
            else " (that directory does not exist)"
        )  # fmt: skip
        raise DatasetUnavailable(
            f"{file.path} is not in the mirror directory {root}{missing_root}, set by {origin}. "
            f"Its canonical URL is {file.url}. Put the file at {path}, or unset {DATA_ENV} "
            f"(and pass no mirror=) to download it into the cache ({CACHE_ENV}, "
            f"default {DEFAULT_CACHE_DIR})."
        )
    if file.sha256 is None:
        logger.debug("%s has no registered sha256; using the mirror's copy unverified", path)
        return path
    got = file_sha256(path)
    if got != file.sha256:
        raise ChecksumError(
            f"sha256 mismatch for mirror file {path}: expected {file.sha256}, got {got}. "
            f"Replace it with the file from {file.url}."
        )
    return path


def _from_cache(file: DataFile, root: Path) -> Path:
    path = root / file.path
    if path.is_file():
        if file.sha256 is None:
            return _check_tofu(file, path)
        got = file_sha256(path)
        if got == file.sha256:
            return path
        logger.warning(
            "cached %s has sha256 %s, expected %s; downloading it again", path, got, file.sha256
        )
        path.unlink()
    _download(file, path)
    return path


def _check_tofu(file: DataFile, path: Path) -> Path:
    record = _tofu_record(path)
    got = file_sha256(path)
    if not record.is_file():
        logger.info("no recorded sha256 for %s; trusting it and recording %s", path, got)
        _record_tofu(path, got)
        return path
    fields = record.read_text(encoding="utf-8").split()
    recorded = fields[0] if fields else "<empty record>"
    if got != recorded:
        raise ChecksumError(
            f"sha256 mismatch for {path}: expected {recorded} (recorded in {record} when it was "
            f"first downloaded; trust on first use), got {got}. Delete both files to download "
            f"{file.url} again and trust the new copy."
        )
    return path


def _download(file: DataFile, path: Path) -> None:
    """Download ``file.url`` to ``path`` atomically and verify it (or record it, for TOFU)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    except OSError as err:  # the cache is a file, read-only, ...: say which variable chose it
        env = os.environ.get(CACHE_ENV, "").strip()
        chosen = f"${CACHE_ENV}={env}" if env else f"the default (${CACHE_ENV} is unset)"
        raise DatasetUnavailable(
            f"cannot write {file.path} into the cache directory {cache_dir()}, chosen by "
            f"{chosen}: {err.strerror or err} ({err.filename or path.parent}). Set "
            f"{CACHE_ENV} to a writable directory, or {DATA_ENV} to a mirror holding the file."
        ) from err
    logger.info("downloading %s to %s", file.url, path)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            got = _copy_url(file, path, out)
        if file.sha256 is not None and got != file.sha256:
            raise ChecksumError(
                f"sha256 mismatch for {file.path} downloaded from {file.url}: expected "
                f"{file.sha256}, got {got}. The download was deleted. The upstream file may "
                f"have changed; a mirror directory ({DATA_ENV}) with the expected file works."
            )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _SHA256_MEMO[_memo_key(path)] = got
    if file.sha256 is None:
        logger.info("recorded sha256 %s of %s (trust on first use)", got, path)
        _record_tofu(path, got)


def _copy_url(file: DataFile, path: Path, out: BinaryIO) -> str:
    """Stream ``file.url`` into ``out`` with a progress bar; return the sha256 of the bytes."""
    digest = hashlib.sha256()
    try:
        with _urlopen(file.url, timeout=_TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            with tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=file.path,
                file=sys.stderr,
            ) as bar:
                while chunk := response.read(_CHUNK_BYTES):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as err:
        raise DatasetUnavailable(
            f"cannot download {file.path} from {file.url}: HTTP {err.code} {err.reason}. "
            + _where_to_put_it(file, path)
        ) from err
    except (urllib.error.URLError, ConnectionError, TimeoutError, HTTPException) as err:
        # Offline, DNS failure, refused or reset connection, timeout, truncated response; not
        # local OSErrors such as a full disk, which keep their own message.
        reason = getattr(err, "reason", err)
        raise DatasetUnavailable(
            f"cannot download {file.path} from {file.url} ({reason}); are you offline? "
            + _where_to_put_it(file, path)
        ) from err
    return digest.hexdigest()


def _where_to_put_it(file: DataFile, path: Path) -> str:
    return (
        f"Either set {DATA_ENV} to a mirror directory holding {file.path} (laid out like the "
        f"shared mirror), or put the file at {path} yourself ({CACHE_ENV} chooses the cache "
        f"directory, default {DEFAULT_CACHE_DIR})."
    )
