"""Writing a file so that an interrupted write never leaves it half-written."""
import os
import tempfile


def write_atomic(path, write):
    """Call write(f) on a temporary binary file beside `path`, then rename it to `path`.

    An interrupted write (an error, Ctrl-C, a full disk) leaves any earlier file intact.
    The file keeps the permissions of the one it replaces, or the umask's default for a
    new one (a temporary file is created private, 0600).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path):
        mode = os.stat(path).st_mode & 0o777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
