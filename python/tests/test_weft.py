"""The weft Python module against a running file system: every call of its API, checked as
a user would (bytes read back here and through the FUSE mount of the same file system,
errors and their errno, stat fields, layouts, HSM states, job statistics, parameters,
shutil and numpy).

Run by crates/weft-cli/tests/python.rs, which starts the cluster, a FUSE mount and a copytool
and says where in the environment:
  WEFT_MGS         the management service's address
  WEFT_MNT         the FUSE mount of the same file system
  WEFT_BIN         the weft command (getstripe on the mount)
  WEFT_ARCHIVE_ID  the archive a copytool serves
  WEFT_LOCAL       a local scratch directory
Prints "all checks held" at the end; any failed check raises (exit status 1).
"""

import errno
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time

import numpy as np

import weft

MGS = os.environ["WEFT_MGS"]
MNT = os.environ["WEFT_MNT"]
WEFT_BIN = os.environ["WEFT_BIN"]
ARCHIVE = int(os.environ["WEFT_ARCHIVE_ID"])
LOCAL = os.environ["WEFT_LOCAL"]
TOP = "/py"
MiB = 1 << 20


def on_mount(path):
    return MNT + path


def raises(exc_type, code, fn, *args, **kwargs):
    """Runs fn, which must raise exc_type with errno `code` (None: any); the exception."""
    try:
        fn(*args, **kwargs)
    except exc_type as e:
        if code is not None:
            assert e.errno == code, f"{fn.__name__}{args}: errno {e.errno} ({e}), not {errno.errorcode[code]}"
        return e
    raise AssertionError(f"{fn.__name__}{args} did not raise {exc_type.__name__}")


def wait_for(what, cond, secs=60):
    end = time.monotonic() + secs
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {secs} s")
        time.sleep(0.2)


def pattern(n, seed=7):
    """Byte i is (31 i + seed) mod 251: every offset told apart (tests/python.rs checks it)."""
    return ((np.arange(n, dtype=np.uint64) * 31 + seed) % 251).astype(np.uint8).tobytes()


def getstripe_cli(path):
    out = subprocess.run([WEFT_BIN, "getstripe", "--json", on_mount(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def check_mount_errors():
    start = time.monotonic()
    e = raises(OSError, None, weft.mount, "127.0.0.1:1")
    assert e.errno in (errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.EIO), e
    assert "127.0.0.1:1" in str(e), e
    assert time.monotonic() - start < 15, "a missing service fails within seconds"


def check_namespace(fs):
    fs.makedirs(TOP + "/a/b")
    fs.makedirs(TOP + "/a/b", exist_ok=True)
    e = raises(FileExistsError, errno.EEXIST, fs.mkdir, TOP + "/a")
    assert e.filename == TOP + "/a", e
    assert fs.isdir(TOP + "/a/b") and not fs.exists(TOP + "/nothing")
    e = raises(FileNotFoundError, errno.ENOENT, fs.stat, TOP + "/nothing")
    assert TOP + "/nothing" in str(e), str(e)
    raises(FileNotFoundError, errno.ENOENT, fs.unlink, TOP + "/nothing")
    raises(OSError, errno.ENOTEMPTY, fs.rmdir, TOP + "/a")

    with fs.open(TOP + "/a/note", "w") as f:
        f.write("hello, weft\n")
    assert open(on_mount(TOP + "/a/note")).read() == "hello, weft\n", "the mount reads what Python wrote"
    raises(NotADirectoryError, errno.ENOTDIR, fs.listdir, TOP + "/a/note")

    # stat agrees with the kernel's stat of the mount.
    st, kst = fs.stat(TOP + "/a/note"), os.stat(on_mount(TOP + "/a/note"))
    assert isinstance(st, os.stat_result)
    assert stat.S_ISREG(st.st_mode) and st.st_size == 12 and st.st_nlink == 1
    assert (st.st_ino, st.st_size, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == \
           (kst.st_ino, kst.st_size, kst.st_uid, kst.st_gid, stat.S_IMODE(kst.st_mode)), (st, kst)
    assert st.st_mtime_ns == kst.st_mtime_ns, (st.st_mtime_ns, kst.st_mtime_ns)

    fs.chmod(TOP + "/a/note", 0o640)
    fs.chown(TOP + "/a/note", 1234, 5678)
    fs.utime(TOP + "/a/note", ns=(1_600_000_000_123_456_789, 1_700_000_000_987_654_321))
    st, kst = fs.stat(TOP + "/a/note"), os.stat(on_mount(TOP + "/a/note"))
    assert stat.S_IMODE(st.st_mode) == 0o640 and (st.st_uid, st.st_gid) == (1234, 5678), st
    assert (st.st_atime_ns, st.st_mtime_ns) == (1_600_000_000_123_456_789, 1_700_000_000_987_654_321), st
    assert st.st_mtime == 1_700_000_000.9876543 or abs(st.st_mtime - 1_700_000_000.987654321) < 1e-6
    assert (stat.S_IMODE(kst.st_mode), kst.st_uid, kst.st_mtime_ns) == (0o640, 1234, 1_700_000_000_987_654_321), kst
    fs.chown(TOP + "/a/note", -1, 0)
    assert (fs.stat(TOP + "/a/note").st_uid, fs.stat(TOP + "/a/note").st_gid) == (1234, 0)
    fs.chown(TOP + "/a/note", 0, 0)
    fs.utime(TOP + "/a/note", (1_500_000_000, 1_500_000_001.5))
    assert fs.stat(TOP + "/a/note").st_mtime_ns == 1_500_000_001_500_000_000
    before = time.time()
    fs.utime(TOP + "/a/note")
    assert fs.stat(TOP + "/a/note").st_mtime >= before - 2

    # access as the servers judge it (root: reads and writes anything, runs what anyone may).
    assert fs.access(TOP + "/a/note", os.R_OK | os.W_OK) and fs.access(TOP + "/a/note", os.F_OK)
    assert not fs.access(TOP + "/a/note", os.X_OK)
    raises(FileNotFoundError, errno.ENOENT, fs.access, TOP + "/nothing", os.R_OK)

    # Links.
    fs.symlink("note", TOP + "/a/link")
    assert fs.readlink(TOP + "/a/link") == "note" and fs.readlink(os.fsencode(TOP + "/a/link")) == b"note"
    assert os.readlink(on_mount(TOP + "/a/link")) == "note"
    assert stat.S_ISLNK(fs.lstat(TOP + "/a/link").st_mode)
    assert stat.S_ISREG(fs.stat(TOP + "/a/link").st_mode)
    raises(OSError, errno.EINVAL, fs.readlink, TOP + "/a/note")
    fs.link(TOP + "/a/note", TOP + "/a/hard")
    assert fs.stat(TOP + "/a/note").st_nlink == 2 and fs.stat(TOP + "/a/hard").st_ino == fs.stat(TOP + "/a/note").st_ino

    # Listings.
    assert sorted(fs.listdir(TOP + "/a")) == ["b", "hard", "link", "note"], fs.listdir(TOP + "/a")
    assert sorted(fs.listdir(os.fsencode(TOP + "/a"))) == [b"b", b"hard", b"link", b"note"]
    assert sorted(fs.listdir(TOP + "/a")) == sorted(os.listdir(on_mount(TOP + "/a")))
    entries = {e.name: e for e in fs.scandir(TOP + "/a")}
    assert entries["b"].is_dir() and not entries["b"].is_file()
    assert entries["note"].is_file() and not entries["note"].is_symlink()
    assert entries["link"].is_symlink() and entries["link"].is_file() and not entries["link"].is_file(follow_symlinks=False)
    assert entries["note"].inode() == os.stat(on_mount(TOP + "/a/note")).st_ino
    assert entries["note"].path == TOP + "/a/note" and entries["note"].stat().st_size == 12
    walked = list(fs.walk(TOP + "/a"))
    assert walked[0][1] == ["b"] and sorted(walked[0][2]) == ["hard", "link", "note"], walked

    # Renames.
    fs.rename(TOP + "/a/hard", TOP + "/a/hard2")
    raises(FileExistsError, errno.EEXIST, fs.rename, TOP + "/a/hard2", TOP + "/a/note", weft.RENAME_NOREPLACE)
    with fs.open(TOP + "/a/new", "w") as f:
        f.write("new")
    fs.replace(TOP + "/a/new", TOP + "/a/hard2")
    assert fs.stat(TOP + "/a/note").st_nlink == 1 and not fs.exists(TOP + "/a/new")
    assert open(on_mount(TOP + "/a/hard2")).read() == "new"
    fs.remove(TOP + "/a/hard2")
    fs.unlink(TOP + "/a/link")
    fs.rmdir(TOP + "/a/b")
    assert sorted(fs.listdir(TOP + "/a")) == ["note"]

    # truncate by path.
    fs.truncate(TOP + "/a/note", 5)
    assert fs.stat(TOP + "/a/note").st_size == 5 and open(on_mount(TOP + "/a/note"), "rb").read() == b"hello"

    # Extended attributes, also through the mount.
    fs.setxattr(TOP + "/a/note", "user.color", b"blue")
    assert fs.getxattr(TOP + "/a/note", "user.color") == b"blue"
    assert os.getxattr(on_mount(TOP + "/a/note"), "user.color") == b"blue"
    assert "user.color" in fs.listxattr(TOP + "/a/note")
    raises(FileExistsError, errno.EEXIST, fs.setxattr, TOP + "/a/note", "user.color", b"red", weft.XATTR_CREATE)
    fs.setxattr(TOP + "/a/note", "user.color", b"red", weft.XATTR_REPLACE)
    assert os.getxattr(on_mount(TOP + "/a/note"), "user.color") == b"red"
    fs.removexattr(TOP + "/a/note", "user.color")
    raises(OSError, errno.ENODATA, fs.getxattr, TOP + "/a/note", "user.color")
    assert "user.color" not in fs.listxattr(TOP + "/a/note")

    # statvfs agrees with the mount's.
    sv, ksv = fs.statvfs(), os.statvfs(MNT)
    assert sv.f_blocks > 0 and sv.f_bsize > 0 and sv.f_files > 0, sv
    assert sv.f_blocks * sv.f_bsize == ksv.f_blocks * ksv.f_frsize, (sv, ksv)

    # umask applies to what is made from now on.
    old = fs.umask(0o077)
    fs.mkdir(TOP + "/private")
    assert stat.S_IMODE(fs.stat(TOP + "/private").st_mode) == 0o700
    assert fs.umask(old) == 0o077
    fs.rmdir(TOP + "/private")


def check_files(fs):
    p = TOP + "/f.txt"
    # Text: write, append, read line by line, r+ overwrite.
    with fs.open(p, "w") as f:
        assert f.writable() and not f.readable() and f.name == p
        f.write("one\ntwo\n")
    with fs.open(p, "a") as f:
        f.write("three\n")
        fs.fsync(f)
        assert open(on_mount(p)).read() == "one\ntwo\nthree\n", "fsync flushes the text buffer"
    raises(TypeError, None, fs.fsync, io.BytesIO())
    with fs.open(p) as f:
        assert list(f) == ["one\n", "two\n", "three\n"]
    with fs.open(p, "r+") as f:
        f.seek(4)
        f.write("TWO")
    with fs.open(p, "rt", encoding="ascii") as f:
        assert f.read() == "one\nTWO\nthree\n"
        assert f.readable() and not f.writable()
    assert open(on_mount(p)).read() == "one\nTWO\nthree\n"
    raises(FileExistsError, errno.EEXIST, fs.open, p, "x")
    raises(FileNotFoundError, errno.ENOENT, fs.open, TOP + "/missing", "r")
    raises(IsADirectoryError, errno.EISDIR, fs.open, TOP, "w")
    e = raises(IsADirectoryError, errno.EISDIR, fs.open, TOP, "rb")
    assert e.filename == TOP, e
    for bad in ("rw", "z", "rb+t", "bb"):
        e = raises(ValueError, None, fs.open, p, bad)
        assert "one of 'r', 'w', 'a', 'x'" in str(e), e

    # Binary: seek, tell, truncate, flush, fsync, the raw file's pread and pwrite.
    b = TOP + "/f.bin"
    with fs.open(b, "wb") as f:
        assert isinstance(f, io.BufferedWriter)
        assert f.write(b"0123456789") == 10
        f.flush()
        assert f.tell() == 10 and os.path.getsize(on_mount(b)) == 10, "flush reaches the servers"
        f.seek(2)
        f.write(b"ab")
        f.raw.fsync()
    with fs.open(b, "r+b") as f:
        assert isinstance(f, io.BufferedRandom)
        assert f.read(4) == b"01ab" and f.tell() == 4
        assert f.seek(0, io.SEEK_END) == 10
        f.truncate(6)
        f.seek(0)
        assert f.read() == b"01ab45"
        assert f.raw.pwrite(b"XY", 1) == 2 and f.raw.pread(3, 0) == b"0XY"
        assert f.raw.stat().st_size == 6
        assert f.raw.layout().components, "an open file's layout"
    with fs.open(b, "rb", buffering=0) as f:
        assert isinstance(f, weft.FileIO)
        buf = bytearray(4)
        assert f.readinto(buf) == 4 and buf == b"0XYb"
        assert f.readall() == b"45"
        raises(io.UnsupportedOperation, None, f.write, b"no")
    assert f.closed
    raises(ValueError, None, f.read)
    with fs.open(b, "ab") as f:
        f.write(b"!")
    assert open(on_mount(b), "rb").read() == b"0XYb45!"

    # What the mount writes, a file open here reads.
    with fs.open(b, "rb") as f:
        with open(on_mount(b), "r+b") as k:
            k.write(b"from the kernel")
        assert f.read() == b"from the kernel"

    # Several threads on one file at once.
    big = TOP + "/threads.bin"
    with fs.open(big, "wb", buffering=0) as f:
        def put(i):
            f.pwrite(bytes([i]) * MiB, i * MiB)
        ts = [threading.Thread(target=put, args=(i,)) for i in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
    data = open(on_mount(big), "rb").read()
    assert data == b"".join(bytes([i]) * MiB for i in range(4))


def check_layouts(fs):
    # A file made with a plain layout: stripe count, size and the OSTs asked for.
    p = TOP + "/striped"
    data = pattern(3 * MiB)
    with fs.open(p, "wb", stripe_count=2, stripe_size=MiB, osts=[1, 0]) as f:
        f.write(data)
    lay = fs.getstripe(p)
    assert len(lay.components) == 1, lay
    c = lay.components[0]
    assert (c.stripe_count, c.stripe_size, c.osts, c.start, c.end, c.instantiated) == (2, MiB, [1, 0], 0, None, True), c
    assert (lay.stripe_count, lay.stripe_size, lay.osts) == (2, MiB, [1, 0])
    cli = getstripe_cli(p)["layout"]["components"]
    assert [o["ost"] for o in cli[0]["objects"]] == [1, 0], cli
    assert cli[0]["stripe_size"] == MiB and len(cli[0]["objects"]) == 2, cli
    with open(on_mount(p), "rb") as k:
        assert k.read() == data, "the striped file reads the same through the mount"
    with fs.open(p, "rb") as f:
        assert f.raw.layout() == lay

    # A directory's default, composite: files made in it take it.
    d = TOP + "/pfl"
    fs.mkdir(d)
    want = weft.Layout([weft.Component(0, MiB, stripe_count=1, stripe_size=MiB),
                        weft.Component(MiB, None, stripe_count=-1, stripe_size=MiB)])
    fs.setstripe(d, want)
    got = fs.getstripe(d)
    assert [(c.start, c.end, c.stripe_count, c.stripe_size) for c in got.components] == \
           [(0, MiB, 1, MiB), (MiB, None, -1, MiB)], got
    with fs.open(d + "/f", "wb") as f:
        f.write(pattern(2 * MiB, 3))
    got = fs.getstripe(d + "/f")
    assert [(c.start, c.end, c.stripe_size) for c in got.components] == [(0, MiB, MiB), (MiB, None, MiB)], got
    assert got.components[0].stripe_count == 1 and got.components[1].stripe_count == 2, got
    assert all(c.instantiated for c in got.components), got
    cli = getstripe_cli(d + "/f")["layout"]["components"]
    assert len(cli) == 2 and len(cli[0]["objects"]) == 1 and len(cli[1]["objects"]) == 2, cli
    assert open(on_mount(d + "/f"), "rb").read() == pattern(2 * MiB, 3)

    # A pool (tests/python.rs made "fast" of OST 1): the MDS takes it once it follows the map.
    end = time.monotonic() + 15
    while True:
        try:
            fs.open(TOP + "/pooled", "wb", pool="fast", stripe_count=1).close()
            break
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)
    lay = fs.getstripe(TOP + "/pooled")
    assert (lay.pool, lay.osts) == ("fast", [1]), lay
    assert getstripe_cli(TOP + "/pooled")["layout"]["components"][0]["pool"] == "fast"

    # components= at create; a gap between components is refused before anything is made.
    fs.open(TOP + "/comp", "wb", components=[weft.Component(0, 2 * MiB, stripe_count=1),
                                             weft.Component(2 * MiB, None, stripe_count=2)]).close()
    assert [c.end for c in fs.getstripe(TOP + "/comp").components] == [2 * MiB, None]
    raises(OSError, errno.EINVAL, fs.open, TOP + "/gap", "wb",
           components=[weft.Component(0, MiB), weft.Component(2 * MiB, None)])
    assert not fs.exists(TOP + "/gap")
    raises(ValueError, None, fs.open, TOP + "/both", "wb", stripe_count=1, layout=want)
    raises(ValueError, None, fs.setstripe, d)
    # setstripe of an empty file that has no layout yet (mknod'd through the mount).
    os.mknod(on_mount(TOP + "/empty"), 0o644 | stat.S_IFREG)
    fs.setstripe(TOP + "/empty", stripe_count=1, osts=[1])
    assert fs.getstripe(TOP + "/empty").osts in ([1], []), fs.getstripe(TOP + "/empty")


def check_hsm(fs):
    p = TOP + "/hsm"
    data = pattern(MiB + 123, 9)
    with fs.open(p, "wb") as f:
        f.write(data)
    s = fs.hsm_state(p)
    assert not s.archived and not s.released, s
    fs.hsm_archive(p, archive_id=ARCHIVE)
    wait_for("the archive", lambda: fs.hsm_state(p).archived)
    s = fs.hsm_state(p)
    assert s.exists and s.archive_id == ARCHIVE and not s.dirty, s
    fs.hsm_release(p)
    s = fs.hsm_state(p)
    assert s.released, s
    assert fs.stat(p).st_size == len(data), "a released file keeps its size"
    fs.hsm_restore(p)
    wait_for("the restore", lambda: not fs.hsm_state(p).released)
    with fs.open(p, "rb") as f:
        assert f.read() == data, "restored bytes"
    fs.hsm_remove(p, archive_id=ARCHIVE)
    wait_for("the removal from the archive", lambda: not fs.hsm_state(p).archived)
    fs.hsm_cancel(p)
    fs.hsm_request([p], "archive", ARCHIVE)
    wait_for("the second archive", lambda: fs.hsm_state(p).archived)
    raises(ValueError, None, fs.hsm_request, [p], "shred")
    raises(FileNotFoundError, errno.ENOENT, fs.hsm_state, TOP + "/nothing")
    # A file never archived cannot be released.
    raises(OSError, None, fs.hsm_release, TOP + "/f.bin")


def check_jobs_and_params(fs):
    assert fs.jobid, "a job id by default"
    fs.jobid = "pyjob.42"
    assert fs.jobid == "pyjob.42"
    with fs.open(TOP + "/job", "wb") as f:
        f.write(pattern(MiB, 5))
    stats = fs.job_stats()
    assert any("obdfilter." in k for k in stats), stats.keys()
    assert any("pyjob.42" in v for k, v in stats.items() if k.startswith("obdfilter.")), stats
    assert any("pyjob.42" in v for k, v in stats.items() if k.startswith("mdt.")), stats
    fs.set_jobid("pyjob.43")
    assert fs.jobid == "pyjob.43"

    names = fs.list_param("obdfilter.*")
    assert any(n.endswith(".job_stats") for n in names), names
    assert fs.list_param("mdt.*.hsm.grace_delay"), "a parameter listed"
    found = fs.get_param("mdt.*.hsm.grace_delay")
    assert len(found) == 1, found
    set_now = fs.set_param("mdt.*.hsm.grace_delay", 1234)
    (server, values), = set_now.items()
    (name, value), = values.items()
    assert name.endswith(".hsm.grace_delay") and value == "1234", set_now
    assert fs.get_param(name) == {server: {name: "1234"}}
    assert fs.set_param(name, "1200", permanent=True) == {server: {name: "1200"}}
    cli = subprocess.run([WEFT_BIN, "get-param", "-n", name, "--mgs", MGS], capture_output=True, text=True, check=True)
    assert cli.stdout.strip() == "1200", cli.stdout
    e = raises(FileNotFoundError, errno.ENOENT, fs.get_param, "no.such.param")
    assert "no.such.param" in str(e), e
    raises(OSError, None, fs.set_param, "mdt.*.hsm.grace_delay", "not a number")


def sha256_of(f):
    h = hashlib.sha256()
    while chunk := f.read(MiB):
        h.update(chunk)
    return h.hexdigest()


def check_shutil(fs):
    local = os.path.join(LOCAL, "big.local")
    with open(local, "wb") as f:
        f.write(os.urandom(24 * MiB + 12345))
    with open(local, "rb") as src, fs.open(TOP + "/big", "wb", stripe_count=2) as dst:
        shutil.copyfileobj(src, dst)
    with open(local, "rb") as f:
        want = sha256_of(f)
    with fs.open(TOP + "/big", "rb") as f:
        assert sha256_of(f) == want, "the copy read back here"
    with open(on_mount(TOP + "/big"), "rb") as f:
        assert sha256_of(f) == want, "the copy read back through the mount"
    back = os.path.join(LOCAL, "big.back")
    with fs.open(TOP + "/big", "rb") as src, open(back, "wb") as dst:
        shutil.copyfileobj(src, dst, 3 * MiB + 1)
    with open(back, "rb") as f:
        assert sha256_of(f) == want, "copied out"
    # shutil.copyfileobj between two Weft files, and a text copy.
    with fs.open(TOP + "/big", "rb") as src, fs.open(TOP + "/big2", "wb") as dst:
        shutil.copyfileobj(src, dst)
    with fs.open(TOP + "/big2", "rb") as f:
        assert sha256_of(f) == want
    with fs.open(TOP + "/f.txt") as src, io.StringIO() as dst:
        shutil.copyfileobj(src, dst)
        assert dst.getvalue() == "one\nTWO\nthree\n"


def check_numpy(fs):
    arr = np.arange(1_000_000, dtype=np.float64) * 1.5
    p = TOP + "/arr.bin"
    # tofile after a header: numpy writes through the descriptor fileno() gives (the same
    # file through the mount) from the Python position, and the position follows.
    with fs.open(p, "wb") as f:
        f.write(b"HDR!")
        arr.tofile(f)
        assert f.tell() == 4 + arr.nbytes, f.tell()
        f.write(b"END!")
    assert fs.stat(p).st_size == 8 + arr.nbytes
    raw = open(on_mount(p), "rb").read()
    assert raw[:4] == b"HDR!" and raw[-4:] == b"END!" and raw[4:-4] == arr.tobytes()
    with fs.open(p, "rb") as f:
        assert f.read(4) == b"HDR!"
        back = np.fromfile(f, dtype=np.float64, count=arr.size)
        assert np.array_equal(back, arr)
        assert f.tell() == 4 + arr.nbytes and f.read() == b"END!", "the position after fromfile"
    assert np.array_equal(np.fromfile(on_mount(p), dtype=np.float64, offset=4, count=arr.size), arr)

    # Without a descriptor: readinto an array's memory, write an array, frombuffer.
    q = TOP + "/arr2.bin"
    with fs.open(q, "wb") as f:
        assert f.write(arr) == arr.nbytes
    into = np.empty_like(arr)
    with fs.open(q, "rb", buffering=0) as f:
        assert f.readinto(into) == arr.nbytes
    assert np.array_equal(into, arr)
    with fs.open(q, "rb") as f:
        assert np.array_equal(np.frombuffer(f.read(), dtype=np.float64), arr)

    # A client of the same file system under another address of its service has no FUSE
    # mount of its own on this node: fileno() says so.
    other = MGS.replace("127.0.0.1", "localhost")
    assert other != MGS
    with weft.mount(other) as fs2, fs2.open(q, "rb") as f:
        e = raises(io.UnsupportedOperation, None, f.fileno)
        assert "no FUSE mount" in str(e), e
        raises(io.UnsupportedOperation, None, np.fromfile, f, np.float64)


def check_fork(fs):
    """A forked child (multiprocessing's default) has the parent's memory but not its
    client's threads: its calls say to mount again, and its own mount works."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                fs.stat(TOP)
            except RuntimeError as e:
                if "forked child" in str(e):
                    with weft.mount(MGS) as mine:
                        code = 0 if stat.S_ISDIR(mine.stat(TOP).st_mode) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert stat.S_ISDIR(fs.stat(TOP).st_mode), "the parent's client is untouched"


def check_write_back_cache(fs):
    """A second client with the metadata write-back cache makes files in a directory of its
    own; the first client's listing calls its cache back and sees every one, with its data."""
    d = TOP + "/wbc"
    fs.mkdir(d)
    with weft.mount(MGS, wbc=True) as w:
        for i in range(300):
            with w.open(f"{d}/f{i}", "xb") as f:
                if i == 123:
                    f.write(b"written through the cache")
        w.unlink(f"{d}/f0")
        assert sorted(fs.listdir(d)) == sorted(f"f{i}" for i in range(1, 300))
        with fs.open(f"{d}/f123", "rb") as f:
            assert f.read() == b"written through the cache"
    raises(TypeError, None, weft.mount, MGS, wbc="yes")


def main():
    check_mount_errors()
    with weft.mount(MGS) as fs:
        assert fs.mounted and fs.fsname and fs.mgs == MGS
        fs.mkdir(TOP)
        check_namespace(fs)
        check_files(fs)
        check_layouts(fs)
        check_hsm(fs)
        check_jobs_and_params(fs)
        check_shutil(fs)
        check_numpy(fs)
        check_fork(fs)
        check_write_back_cache(fs)
    assert not fs.mounted
    raises(ValueError, None, fs.stat, TOP)
    print("all checks held")


if __name__ == "__main__":
    sys.exit(main())
