"""Weft from Python, without FUSE: a client of the file system in this process.

    import weft
    with weft.mount("127.0.0.1:9400") as fs:
        with fs.open("/data/x.bin", "wb", stripe_count=2) as f:
            f.write(b"...")
        print(fs.stat("/data/x.bin").st_size, fs.getstripe("/data/x.bin"))

The native part (``weft._weft``) is a thin layer over libweft's Rust API; this module
makes its raw files Python file objects (``io`` buffering and text), its stat results
``os.stat_result``, and its layouts and HSM states small classes. Paths are str, bytes or
path-like, relative to the file system's root. Errors are ``OSError`` subclasses with the
errno and the path (``FileNotFoundError``, ``PermissionError``...).
"""

import errno
import io
import os
import stat as _stat
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import _weft
from ._weft import (  # noqa: F401  (re-exported)
    HS_ARCHIVED,
    HS_DIRTY,
    HS_EXISTS,
    HS_LOST,
    HS_NOARCHIVE,
    HS_NORELEASE,
    HS_RELEASED,
    VERSION,
)

__all__ = ["mount", "Fs", "FileIO", "Layout", "Component", "HsmState", "DirEntry", "VERSION"]
__version__ = VERSION

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
XATTR_CREATE = 1
XATTR_REPLACE = 2


def _path(p) -> bytes:
    return os.fsencode(p)


def _stat_result(d: dict) -> os.stat_result:
    """os.stat_result of the native stat's fields (times in nanoseconds)."""
    a, m, c = d["st_atime_ns"], d["st_mtime_ns"], d["st_ctime_ns"]
    seq = (d["st_mode"], d["st_ino"], d["st_dev"], d["st_nlink"], d["st_uid"], d["st_gid"], d["st_size"],
           a // 10**9, m // 10**9, c // 10**9)
    extra = {"st_atime": a / 1e9, "st_mtime": m / 1e9, "st_ctime": c / 1e9,
             "st_atime_ns": a, "st_mtime_ns": m, "st_ctime_ns": c,
             "st_blksize": d["st_blksize"], "st_blocks": d["st_blocks"], "st_rdev": d["st_rdev"]}
    return os.stat_result(seq, extra)


@dataclass
class Component:
    """One component of a layout (``lfs setstripe -E``): the extent [start, end) (end None:
    to the end of the file), stripe count (0 the default, -1 every OST), stripe size (0 the
    default), pool, the OSTs of its stripes, data on the MDT. Read back, also whether it has
    objects and its mirror."""

    start: int = 0
    end: Optional[int] = None
    stripe_count: int = 0
    stripe_size: int = 0
    pool: Optional[str] = None
    osts: List[int] = field(default_factory=list)
    on_mdt: bool = False
    instantiated: bool = False
    mirror_id: int = 0

    def _raw(self):
        return (self.start, self.end, self.stripe_count, self.stripe_size, self.pool, list(self.osts), self.on_mdt)


@dataclass
class Layout:
    """A file's layout or a directory's default: its components (one for a plain layout)."""

    components: List[Component]

    @property
    def stripe_count(self) -> int:
        return self.components[0].stripe_count

    @property
    def stripe_size(self) -> int:
        return self.components[0].stripe_size

    @property
    def pool(self) -> Optional[str]:
        return self.components[0].pool

    @property
    def osts(self) -> List[int]:
        return [o for c in self.components for o in c.osts]

    def _raw(self):
        return [c._raw() for c in self.components]

    @classmethod
    def _of(cls, raw) -> "Layout":
        return cls([Component(*c) for c in raw])


def _layout_of(layout=None, stripe_count=None, stripe_size=None, pool=None, osts=None, components=None):
    """A layout from `lfs setstripe`'s options: one of a Layout, components, or the values of
    one plain component; None when none is given."""
    plain = (stripe_count, stripe_size, pool, osts)
    given = [x is not None for x in (layout, components)] + [any(v is not None for v in plain)]
    if sum(given) > 1:
        raise ValueError("give one of layout=, components= or stripe_count=/stripe_size=/pool=/osts=")
    if layout is not None:
        if not isinstance(layout, Layout):
            raise TypeError(f"layout= is a weft.Layout, not {type(layout).__name__}")
        return layout
    if components is not None:
        return Layout(list(components))
    if any(v is not None for v in plain):
        return Layout([Component(stripe_count=stripe_count or 0, stripe_size=stripe_size or 0, pool=pool,
                                 osts=list(osts or []))])
    return None


@dataclass
class HsmState:
    """A file's HSM flags (HS_*) and archive."""

    flags: int
    archive_id: int

    exists = property(lambda self: bool(self.flags & HS_EXISTS))
    archived = property(lambda self: bool(self.flags & HS_ARCHIVED))
    released = property(lambda self: bool(self.flags & HS_RELEASED))
    dirty = property(lambda self: bool(self.flags & HS_DIRTY))
    lost = property(lambda self: bool(self.flags & HS_LOST))


class DirEntry:
    """What ``Fs.scandir`` yields, as ``os.DirEntry``."""

    def __init__(self, fs, directory: bytes, name: bytes, d_type: int, ino: int, as_bytes: bool):
        self._fs, self._type, self._ino = fs, d_type, ino
        full = directory.rstrip(b"/") + b"/" + name
        self.name = name if as_bytes else os.fsdecode(name)
        self.path = full if as_bytes else os.fsdecode(full)
        self._stat = {}

    def inode(self) -> int:
        return self._ino

    def is_dir(self, *, follow_symlinks=True) -> bool:
        if follow_symlinks and self._type == 10:  # DT_LNK
            return _stat.S_ISDIR(self.stat().st_mode)
        return self._type == 4  # DT_DIR

    def is_file(self, *, follow_symlinks=True) -> bool:
        if follow_symlinks and self._type == 10:
            return _stat.S_ISREG(self.stat().st_mode)
        return self._type == 8  # DT_REG

    def is_symlink(self) -> bool:
        return self._type == 10

    def stat(self, *, follow_symlinks=True) -> os.stat_result:
        if follow_symlinks not in self._stat:
            self._stat[follow_symlinks] = self._fs.stat(self.path, follow_symlinks=follow_symlinks)
        return self._stat[follow_symlinks]

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"<weft.DirEntry {self.name!r}>"


_MODES = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def _flags_of(mode: str):
    """open()'s mode as open(2) flags, and whether it is binary, reads and writes."""
    kinds = [c for c in mode if c in "rwax"]
    if len(kinds) != 1 or any(c not in "rwaxbt+" for c in mode) or ("b" in mode and "t" in mode) \
            or len(set(mode)) != len(mode):
        raise ValueError(f"invalid mode {mode!r}: one of 'r', 'w', 'a', 'x', optionally with '+' and 'b' or 't'")
    flags = _MODES[kinds[0]]
    if "+" in mode:
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
    readable = kinds[0] == "r" or "+" in mode
    writable = kinds[0] != "r" or "+" in mode
    return flags, "b" in mode, readable, writable


class FileIO(io.RawIOBase):
    """An open file of the file system, unbuffered (as ``io.FileIO``): ``Fs.open`` wraps it
    in ``io.BufferedReader``/``BufferedWriter``/``BufferedRandom`` and, for text,
    ``io.TextIOWrapper``, as the builtin ``open`` does.

    ``fileno()`` gives a real descriptor only where the kernel has one for this file: a
    FUSE mount of the same file system on this node (numpy's ``fromfile``/``tofile`` need
    it). The descriptor is of the same file opened through the mount, at this file's
    position; the servers' locks keep the two coherent. Without such a mount it raises
    ``io.UnsupportedOperation``: use ``numpy.frombuffer(f.read())``, or ``f.readinto(array)``
    and ``f.write(array)``, which move an array's memory without a copy."""

    def __init__(self, raw: "_weft.RawFile", mode: str, readable: bool, writable: bool):
        super().__init__()
        self._raw, self.mode, self._readable, self._writable = raw, mode, readable, writable
        self._fd = None
        self.name = os.fsdecode(raw.path)

    def readable(self):
        self._checkClosed()
        return self._readable

    def writable(self):
        self._checkClosed()
        return self._writable

    def seekable(self):
        self._checkClosed()
        return True

    def readinto(self, b):
        self._checkClosed()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")
        return self._raw.readinto(b)

    def readall(self):
        chunks = []
        while True:
            chunk = self.read(8 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)

    def write(self, b):
        self._checkClosed()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")
        return self._raw.write(b)

    def pread(self, size: int, offset: int) -> bytes:
        return self._raw.pread(size, offset)

    def pwrite(self, data, offset: int) -> int:
        return self._raw.pwrite(data, offset)

    def seek(self, pos, whence=io.SEEK_SET):
        self._checkClosed()
        return self._raw.seek(pos, whence)

    def tell(self):
        self._checkClosed()
        return self._raw.tell()

    def truncate(self, size=None):
        self._checkClosed()
        if size is None:
            size = self.tell()
        self._raw.truncate(size)
        return size

    def fsync(self):
        self._raw.fsync()

    def stat(self) -> os.stat_result:
        return _stat_result(self._raw.stat())

    def layout(self) -> Layout:
        return Layout._of(self._raw.layout())

    def __repr__(self):
        return f"<weft.FileIO name={self.name!r} mode={self.mode!r} closed={self.closed}>"

    def fileno(self):
        self._checkClosed()
        if self._fd is None:
            fd = self._raw.mount_fd()
            if fd is None:
                raise io.UnsupportedOperation(
                    f"{self.name}: no FUSE mount of this file system on this node, so no file descriptor: "
                    "use f.read()/f.readinto(array) and f.write(array) instead (numpy.frombuffer)")
            self._fd = fd
        else:
            os.lseek(self._fd, self._raw.tell(), os.SEEK_SET)
        return self._fd

    def close(self):
        if self.closed:
            return
        try:
            super().close()
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._raw.close()


class Fs:
    """A mounted Weft file system (``weft.mount``): calls by path as ``os`` has them, files
    from ``open``, layouts, HSM, the job id and server parameters. A context manager: it is
    unmounted at the end (every lock given back)."""

    def __init__(self, native: "_weft.Fs"):
        self._fs = native

    # Mount and identity.
    def umount(self):
        self._fs.umount()

    close = umount

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.umount()

    @property
    def mounted(self) -> bool:
        return self._fs.mounted

    @property
    def fsname(self) -> str:
        return self._fs.fsname

    @property
    def mgs(self) -> str:
        return self._fs.mgs

    def umask(self, mask: int) -> int:
        return self._fs.umask(mask)

    # Files.
    def open(self, path, mode="r", buffering=-1, encoding=None, errors=None, newline=None, *, perms=0o666,
             layout=None, stripe_count=None, stripe_size=None, pool=None, osts=None, components=None):
        """As the builtin ``open`` (modes r, w, a, x with + and b or t); a file made here gets
        the layout given (a ``Layout``, ``components=``, or ``stripe_count=``, ``stripe_size=``,
        ``pool=``, ``osts=``), else its directory's default."""
        flags, binary, readable, writable = _flags_of(mode)
        if binary and (encoding is not None or errors is not None or newline is not None):
            raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
        want = _layout_of(layout, stripe_count, stripe_size, pool, osts, components)
        raw = self._fs.open(_path(path), flags, perms, want._raw() if want is not None else None)
        f = FileIO(raw, mode.replace("t", ""), readable, writable)
        st = f.stat()
        if _stat.S_ISDIR(st.st_mode):
            f.close()
            raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fsdecode(path))
        if buffering == 0:
            if not binary:
                f.close()
                raise ValueError("can't have unbuffered text I/O")
            return f
        size = buffering if buffering > 1 else max(st.st_blksize, io.DEFAULT_BUFFER_SIZE)
        if readable and writable:
            buffered = io.BufferedRandom(f, size)
        elif writable:
            buffered = io.BufferedWriter(f, size)
        else:
            buffered = io.BufferedReader(f, size)
        if binary:
            return buffered
        text = io.TextIOWrapper(buffered, encoding or "utf-8", errors, newline, line_buffering=buffering == 1)
        text.mode = mode
        return text

    @staticmethod
    def fsync(f):
        """``os.fsync`` of a file ``open`` gave (binary, text or raw): what it wrote is
        flushed, then on stable storage on the OSTs."""
        f.flush()
        raw = getattr(getattr(f, "buffer", f), "raw", getattr(f, "buffer", f))
        if not isinstance(raw, FileIO):
            raise TypeError(f"fsync of a weft file, not {type(f).__name__}")
        raw.fsync()

    # Names and attributes.
    def stat(self, path, *, follow_symlinks=True) -> os.stat_result:
        return _stat_result(self._fs.stat(_path(path), follow_symlinks))

    def lstat(self, path) -> os.stat_result:
        return self.stat(path, follow_symlinks=False)

    def exists(self, path) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path) -> bool:
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except FileNotFoundError:
            return False

    def listdir(self, path="/"):
        p = _path(path)
        names = [n for n, _, _ in self._fs.listdir(p)]
        return names if isinstance(path, bytes) else [os.fsdecode(n) for n in names]

    def scandir(self, path="/"):
        p = _path(path)
        as_bytes = isinstance(path, bytes)
        return iter([DirEntry(self, p, n, t, i, as_bytes) for n, t, i in self._fs.listdir(p)])

    def walk(self, top="/"):
        dirs, files = [], []
        for e in self.scandir(top):
            (dirs if e.is_dir(follow_symlinks=False) else files).append(e.name)
        yield top, dirs, files
        for d in dirs:
            yield from self.walk(os.path.join(top, d))

    def mkdir(self, path, mode=0o777):
        self._fs.mkdir(_path(path), mode)

    def makedirs(self, path, mode=0o777, exist_ok=False):
        p = os.fsdecode(path)
        parent = os.path.dirname(p.rstrip("/"))
        if parent and parent != p and not self.exists(parent):
            self.makedirs(parent, mode, exist_ok=True)
        try:
            self.mkdir(p, mode)
        except FileExistsError:
            if not exist_ok or not self.isdir(p):
                raise

    def rmdir(self, path):
        self._fs.rmdir(_path(path))

    def unlink(self, path):
        self._fs.unlink(_path(path))

    remove = unlink

    def rename(self, src, dst, flags=0):
        self._fs.rename(_path(src), _path(dst), flags)

    def replace(self, src, dst):
        self.rename(src, dst)

    def link(self, src, dst):
        self._fs.link(_path(src), _path(dst))

    def symlink(self, target, path):
        self._fs.symlink(_path(target), _path(path))

    def readlink(self, path):
        target = self._fs.readlink(_path(path))
        return target if isinstance(path, bytes) else os.fsdecode(target)

    def chmod(self, path, mode):
        self._fs.chmod(_path(path), mode)

    def chown(self, path, uid, gid, *, follow_symlinks=True):
        self._fs.chown(_path(path), None if uid == -1 else uid, None if gid == -1 else gid, follow_symlinks)

    def utime(self, path, times=None, *, ns=None, follow_symlinks=True):
        """As ``os.utime``: ``times`` (atime, mtime) in seconds, or ``ns`` in nanoseconds, or
        neither for now."""
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        if times is not None:
            ns = tuple(int(round(t * 1e9)) for t in times)
        if ns is None:
            at = mt = None
        else:
            at, mt = (divmod(int(t), 10**9) for t in ns)
        self._fs.utimens(_path(path), at, mt, follow_symlinks)

    def truncate(self, path, length):
        self._fs.truncate(_path(path), length)

    def access(self, path, mode) -> bool:
        return self._fs.access(_path(path), mode)

    def statvfs(self, path="/") -> os.statvfs_result:
        bsize, blocks, bfree, bavail, files, ffree = self._fs.statvfs()
        return os.statvfs_result((bsize, bsize, blocks, bfree, bavail, files, ffree, ffree, 0, 255))

    # Extended attributes.
    def getxattr(self, path, attribute, *, follow_symlinks=True) -> bytes:
        return self._fs.getxattr(_path(path), _path(attribute), follow_symlinks)

    def setxattr(self, path, attribute, value, flags=0, *, follow_symlinks=True):
        self._fs.setxattr(_path(path), _path(attribute), bytes(value), flags, follow_symlinks)

    def listxattr(self, path, *, follow_symlinks=True) -> List[str]:
        return [os.fsdecode(n) for n in self._fs.listxattr(_path(path), follow_symlinks)]

    def removexattr(self, path, attribute, *, follow_symlinks=True):
        self._fs.removexattr(_path(path), _path(attribute), follow_symlinks)

    # Layouts (lfs setstripe / getstripe).
    def getstripe(self, path) -> Layout:
        """A file's layout, or a directory's default."""
        return Layout._of(self._fs.get_layout(_path(path)))

    def setstripe(self, path, layout=None, *, stripe_count=None, stripe_size=None, pool=None, osts=None,
                  components=None):
        """A directory's default layout for the files made in it, or the layout of an empty
        file; a new file is made with a layout by ``open(..., stripe_count=...)``."""
        want = _layout_of(layout, stripe_count, stripe_size, pool, osts, components)
        if want is None:
            raise ValueError("setstripe: give a layout, components= or stripe_count=/stripe_size=/pool=/osts=")
        self._fs.set_layout(_path(path), want._raw())

    # HSM.
    def hsm_archive(self, *paths, archive_id=0):
        self._fs.hsm_request([_path(p) for p in paths], "archive", archive_id)

    def hsm_release(self, *paths):
        self._fs.hsm_request([_path(p) for p in paths], "release", 0)

    def hsm_restore(self, *paths):
        self._fs.hsm_request([_path(p) for p in paths], "restore", 0)

    def hsm_remove(self, *paths, archive_id=0):
        self._fs.hsm_request([_path(p) for p in paths], "remove", archive_id)

    def hsm_cancel(self, *paths):
        self._fs.hsm_request([_path(p) for p in paths], "cancel", 0)

    def hsm_request(self, paths, action, archive_id=0):
        """``action``: 'archive', 'release', 'restore', 'remove' or 'cancel'."""
        self._fs.hsm_request([_path(p) for p in paths], action, archive_id)

    def hsm_state(self, path) -> HsmState:
        return HsmState(*self._fs.hsm_state(_path(path)))

    # Jobs and parameters.
    @property
    def jobid(self) -> str:
        """The job this client's requests count under (job statistics, TBF rules)."""
        return self._fs.jobid()

    @jobid.setter
    def jobid(self, value: str):
        self._fs.set_jobid(value)

    def set_jobid(self, value: str):
        self._fs.set_jobid(value)

    # Bandwidth reservations (the QoS planner's run-time calls).
    def qos_reserve(self, id: str, throughput: str, duration: float, paths, job: str | None = None,
                    wait: bool = False, timeout: float = 3600.0) -> str:
        """Reserves ``throughput`` ('100M' bytes/s, '500rps' requests/s, for the whole job,
        divided evenly over the OSTs) on the OSTs of ``paths`` for ``duration`` seconds, for
        the requests of ``job`` (None: this client's job id). With ``wait``, returns once it
        is active (TimeoutError after ``timeout`` seconds). Returns its state: 'scheduled' or
        'active'. Refused with the planner's reason (over an OST's capacity: OSError EINVAL
        naming the free capacity; the id in use: FileExistsError)."""
        return self._fs.qos_reserve(id, throughput, duration, [_path(p) for p in paths], job, wait, timeout)

    def qos_test(self, id: str) -> str:
        """A reservation's state now: 'undefined', 'scheduled', 'active' or 'done'."""
        return self._fs.qos_test(id)

    def qos_remove(self, id: str):
        """Ends a reservation now, giving its bandwidth back (its maker or root)."""
        self._fs.qos_remove(id)

    def get_param(self, pattern: str) -> Dict[str, Dict[str, str]]:
        """``lctl get_param``: {server: {name: value}} of the parameters ``pattern`` matches
        (glob wildcards in any dot-separated part)."""
        return self._fs.get_param(pattern)

    def set_param(self, pattern: str, value, permanent: bool = False) -> Dict[str, Dict[str, str]]:
        """``lctl set_param`` (``-P`` with ``permanent``): {server: {name: value now}}."""
        return self._fs.set_param(pattern, str(value), permanent)

    def list_param(self, pattern: str = "*") -> List[str]:
        return self._fs.list_param(pattern)

    def job_stats(self, target: str = "*") -> Dict[str, str]:
        """The job statistics of the OSTs (``obdfilter.TARGET.job_stats``) and MDTs
        (``mdt.TARGET.job_stats``): {parameter: its YAML text}."""
        out = {}
        for kind in ("obdfilter", "mdt"):
            try:
                found = self.get_param(f"{kind}.{target}.job_stats")
            except FileNotFoundError:
                continue
            for values in found.values():
                out.update(values)
        return out


def mount(mgs: str, wbc: bool | None = None) -> Fs:
    """Connects to the file system whose management service is at ``mgs`` ("host:port",
    or a replicated service's "a:p,b:p,c:p") as this process's user; fails within seconds
    when it does not answer. ``wbc`` turns the metadata write-back cache on or off (None:
    as the ``WEFT_WBC`` environment variable says; off by default): creates, chmods and
    unlinks in a directory this process works in alone go to the servers in batches."""
    return Fs(_weft.mount(mgs, wbc))
