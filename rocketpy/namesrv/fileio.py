"""NameServer state layer: crash-safe file writes (Java ``MixAll.string2File``).

Java writes ``kvConfig.json`` and the config file in place, after copying the previous content
to ``<file>.bak``; a crash mid-write can leave a truncated file. rocketpy keeps the same two
files but writes each one atomically: a sibling temporary file, ``fsync``, ``os.replace``, then
``fsync`` of the directory. At any instant ``<file>`` is the complete old or the complete new
content. Plain ``os`` calls: this layer runs on the reactor thread and the files are small.
"""
import os

__all__ = ["write_atomic", "write_file_java", "read_text"]


def write_atomic(path, data):
    """Replace ``path`` with ``data`` (bytes) so that no reader ever sees a partial file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    # One fixed name per file (no pid): a write killed half-way leaves at most one stale temp
    # file, which the next write replaces, instead of one more per crash.
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
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


def read_text(path):
    """The file's text (UTF-8), or None when it does not exist (``MixAll.file2String``)."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def write_file_java(path, text):
    """``string2File``: keep the previous content as ``path + ".bak"``, then write ``text``."""
    previous = read_text(path)
    if previous is not None:
        write_atomic(path + ".bak", previous.encode("utf-8", "replace"))
    write_atomic(path, text.encode("utf-8", "replace"))  # lone surrogate -> '?', as Java
