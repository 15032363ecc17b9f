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

from ..namesrv.javaprops import parse_properties

__all__ = ["write_atomic", "write_file_java", "read_text", "read_bytes", "load_properties",
           "append_synced"]


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


def append_synced(path, data):
    """Append ``data`` to ``path`` and ``fsync`` it (and the directory, when the file is new):
    the controller's event log. A crash mid-append leaves at most a torn last line."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    created = not os.path.exists(path)
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if created:
        _fsync_directory(directory)


def load_properties(path):
    """Read a Java ``.properties`` file (ISO-8859-1, as ``Properties.load(InputStream)``)."""
    with open(path, "rb") as f:
        return parse_properties(f.read().decode("latin-1"))
