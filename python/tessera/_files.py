"""How tessera writes a file, everywhere: bytes go to a new temporary beside
the target, which is renamed into place (a reader never sees a partial file,
and a link planted at the target's name is replaced, never written through);
the file keeps the permission bits of the one it replaces."""

import os
import stat


def umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, which
    races with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def mode_for_replacing(path, dir_fd=None) -> int:
    """The permission bits a file written at `path` gets: those of the regular
    file it replaces (not of a link's target: the rename replaces the link;
    never set-id bits), else 0666 less the umask, as open() gives."""
    try:
        st = os.lstat(path, dir_fd=dir_fd)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode) & 0o777
    except OSError:
        pass
    return 0o666 & ~umask()


def write_chunks(fd, chunks, hook=None, durable=True):
    """Writes the byte chunks to the open file `fd` (a new temporary) and
    closes it, after an fsync unless not durable. `hook` is called after the
    first chunk (tests stop a writer half way there)."""
    with os.fdopen(fd, "wb") as f:
        for k, chunk in enumerate(chunks):
            f.write(chunk)
            if k == 0 and hook is not None:
                hook()
        f.flush()
        if durable:
            os.fsync(f.fileno())
