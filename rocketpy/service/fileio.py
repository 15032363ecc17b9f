"""Service layer: crash-safe file writes (Java ``MixAll.string2File``), for the writer thread.

Java writes ``kvConfig.json`` and the config file in place after copying the old content to
``<file>.bak``, so a crash mid-write can leave a truncated file. rocketpy keeps both files but
replaces each atomically (sibling temporary file, ``fsync``, ``os.replace``, ``fsync`` of the
directory): ``<file>`` is always the complete old or new content. The ``.bak`` is the previous
file itself, hard-linked and renamed into place (a copy without hard links), so no second copy
is written and synced.

These calls block (``fsync``): they run on the writer thread
(:class:`rocketpy.transport.offload.WritePool`), at start-up or in tests, never on a running
server's reactor; the state layer is handed :func:`write_file_java` as a callable."""
import os
import re

from ..namesrv.javaprops import parse_properties

__all__ = ["write_atomic", "write_file_java", "read_text", "read_bytes", "load_properties",
           "AppendLog"]


def _temp_name(path):
    # One fixed name per file (no pid): a write killed half-way leaves at most one stale temp
    # file, which the next write replaces, instead of one more per crash.
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _fsync_directory(directory):
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def write_atomic(path, data, sync_directory=True):
    """Replace ``path`` with ``data`` (bytes) so that no reader ever sees a partial file."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise
    if sync_directory:
        _fsync_directory(directory)


def _keep_previous(path):
    """Make ``path + ".bak"`` the current ``path`` (the previous version, once ``path`` is
    replaced): a hard link renamed into place, or a copy; False when there is no ``path``."""
    bak = path + ".bak"
    tmp = _temp_name(bak)
    _unlink(tmp)
    try:
        os.link(path, tmp)
    except FileNotFoundError:
        return False
    except OSError:   # no hard links here: copy (still atomic)
        previous = read_bytes(path)
        if previous is None:
            return False
        write_atomic(bak, previous, sync_directory=False)
        return True
    try:
        os.replace(tmp, bak)
    except BaseException:
        _unlink(tmp)
        raise
    return True


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_text(path):
    """The file's text (UTF-8), or None when it does not exist (``MixAll.file2String``)."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", errors="replace")


def write_file_java(path, text):
    """``string2File``: keep the previous content as ``path + ".bak"``, then write ``text``.
    One directory ``fsync`` covers both renames."""
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    _keep_previous(path)
    write_atomic(path, text.encode("utf-8", "replace"))  # lone surrogate -> '?', as Java


#: What no text file holds: C0 controls other than tab, line feed, form feed, carriage return.
_BINARY_BYTE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f]")


def load_properties(path):
    """Read a Java ``.properties`` file (ISO-8859-1, as ``Properties.load(InputStream)``).
    ValueError for a binary file: Java would load one, as hundreds of keys of mojibake."""
    with open(path, "rb") as f:
        data = f.read()
    binary = _BINARY_BYTE.search(data)
    if binary is not None:
        raise ValueError(f"not a properties file (byte 0x{binary.group()[0]:02x} at offset "
                         f"{binary.start()}: a binary file?)")
    return parse_properties(data.decode("latin-1"))


class AppendLog:
    """The KV store's change log beside ``path``: segments ``<path>.log.<n>`` (n = 1, 2, ...),
    each an append-only file of records. A put appends its record and syncs it (its cost
    is its own size, not the table's); a compaction rewrites ``path`` and removes the segments
    it covers. An append that fails (full disk, file size limit) is cut back to where it began,
    and a segment it began is removed, so a refused record leaves nothing behind (not even an
    empty file: every put refused by a full disk moves to a new segment). Blocking: the writer threads and start-up only."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self._directory = os.path.dirname(self.path)
        self._prefix = os.path.basename(self.path) + ".log."

    def segment_path(self, number):
        return f"{self.path}.log.{number}"

    def segments(self):
        """The numbers of the segments on disk, oldest first."""
        try:
            names = os.listdir(self._directory)
        except FileNotFoundError:
            return []
        prefix = self._prefix
        return sorted(int(name[len(prefix):]) for name in names
                      if name.startswith(prefix) and name[len(prefix):].isdigit())

    def read(self, number):
        return read_bytes(self.segment_path(number)) or b""

    def append(self, number, data):
        """Append ``data`` to segment ``number`` durably, or raise and leave it as it was."""
        os.makedirs(self._directory, exist_ok=True)
        target = self.segment_path(number)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd, created = os.open(target, flags | os.O_EXCL, 0o644), True
        except FileExistsError:
            fd, created = os.open(target, flags, 0o644), False
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, start)   # frees space: works on a full disk
                except OSError:
                    pass
                if created:      # a segment this append began: no empty file is left behind
                    _unlink(target)
                raise
        finally:
            os.close(fd)
        if start == 0:   # a new file: its directory entry must be durable too
            _fsync_directory(self._directory)

    def remove_through(self, number):
        """Remove the segments up to ``number`` (their changes are in ``path`` now)."""
        for old in self.segments():
            if old <= number:
                _unlink(self.segment_path(old))
        _fsync_directory(self._directory)
