//! `Fs`: one mounted client of the file system (`weft::Fs`) and the calls by path.

use crate::file::PyRawFile;
use crate::layout::{components_of, edit_of, ComponentIn, ComponentOut};
use crate::{closed, os_error};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use weft::hsm::HsmRequest;
use weft_proto::msg::{SetTime, Timestamp};

/// The mounted client, shared by the `Fs` and the files opened from it; None once
/// unmounted. A call holds it for reading while it waits for the servers; `umount` and
/// `set_jobid` (which the Rust API gives a `&mut`) take it for writing.
pub(crate) struct Mounted {
    fs: RwLock<Option<weft::Fs>>,
    /// The process that mounted it: a forked child (multiprocessing) has its memory but not
    /// its runtime's threads, so it must mount its own.
    pid: u32,
}

pub(crate) type Shared = Arc<Mounted>;

impl Mounted {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Option<weft::Fs>> {
        self.fs.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Option<weft::Fs>> {
        self.fs.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this process mounted it.
    pub(crate) fn here(&self) -> bool {
        self.pid == std::process::id()
    }

    pub(crate) fn check_here(&self) -> PyResult<()> {
        match self.here() {
            true => Ok(()),
            false => Err(PyRuntimeError::new_err(format!(
                "this file system was mounted by process {}: a forked child mounts its own (weft.mount)",
                self.pid
            ))),
        }
    }
}

impl Drop for Mounted {
    /// In a forked child the client's runtime has no threads: it is left as it is (the
    /// parent still uses it), never waited for.
    fn drop(&mut self) {
        if !self.here() {
            std::mem::forget(self.fs.get_mut().unwrap_or_else(|p| p.into_inner()).take());
        }
    }
}

/// Runs `call` on the mounted client with the GIL released; its error as OSError naming
/// `path`.
pub(crate) fn run<T: Send>(
    py: Python<'_>,
    shared: &Shared,
    path: Option<&[u8]>,
    call: impl FnOnce(&weft::Fs) -> weft::Result<T> + Send,
) -> PyResult<T> {
    shared.check_here()?;
    let done = py.detach(|| shared.read().as_ref().map(call));
    match done {
        None => Err(closed("an unmounted file system")),
        Some(r) => r.map_err(|e| os_error(e, path)),
    }
}

#[pyclass(frozen, name = "Fs", module = "weft._weft")]
pub struct PyFs {
    shared: Shared,
}

impl PyFs {
    pub(crate) fn new(fs: weft::Fs) -> PyFs {
        PyFs { shared: Arc::new(Mounted { fs: RwLock::new(Some(fs)), pid: std::process::id() }) }
    }

    fn run<T: Send>(
        &self,
        py: Python<'_>,
        path: &[u8],
        call: impl FnOnce(&weft::Fs) -> weft::Result<T> + Send,
    ) -> PyResult<T> {
        run(py, &self.shared, Some(path), call)
    }
}

/// stat(2)'s fields, filled as libweft fills a `struct stat` (the FUSE mount's inode
/// numbers and device).
fn stat_dict<'py>(py: Python<'py>, fs: &Shared, s: &weft::stat::Stat) -> PyResult<Bound<'py, PyDict>> {
    // SAFETY: libc::stat is plain old data; fill_stat sets every field.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if let Some(fs) = fs.read().as_ref() {
        fs.fill_stat(s, &mut st);
    }
    let d = PyDict::new(py);
    d.set_item("st_mode", st.st_mode)?;
    d.set_item("st_ino", st.st_ino)?;
    d.set_item("st_dev", st.st_dev)?;
    d.set_item("st_nlink", st.st_nlink)?;
    d.set_item("st_uid", st.st_uid)?;
    d.set_item("st_gid", st.st_gid)?;
    d.set_item("st_size", st.st_size)?;
    d.set_item("st_atime_ns", i128::from(st.st_atime) * 1_000_000_000 + i128::from(st.st_atime_nsec))?;
    d.set_item("st_mtime_ns", i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec))?;
    d.set_item("st_ctime_ns", i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec))?;
    d.set_item("st_blksize", st.st_blksize)?;
    d.set_item("st_blocks", st.st_blocks)?;
    d.set_item("st_rdev", st.st_rdev)?;
    Ok(d)
}

pub(crate) fn stat_of<'py>(py: Python<'py>, fs: &Shared, s: weft::stat::Stat) -> PyResult<Bound<'py, PyDict>> {
    stat_dict(py, fs, &s)
}

/// A time as utimensat(2) takes it: (seconds, nanoseconds), or now.
fn set_time(t: Option<(i64, u32)>) -> PyResult<SetTime> {
    match t {
        None => Ok(SetTime::Now),
        Some((sec, nsec)) if nsec < 1_000_000_000 => Ok(SetTime::At(Timestamp { sec, nsec })),
        Some((_, nsec)) => Err(PyValueError::new_err(format!("{nsec} nanoseconds is not under a second"))),
    }
}

fn hsm_action(action: &str) -> PyResult<HsmRequest> {
    Ok(match action {
        "archive" => HsmRequest::Archive,
        "release" => HsmRequest::Release,
        "restore" => HsmRequest::Restore,
        "remove" => HsmRequest::Remove,
        "cancel" => HsmRequest::Cancel,
        other => {
            return Err(PyValueError::new_err(format!(
                "HSM action '{other}': one of 'archive', 'release', 'restore', 'remove', 'cancel'"
            )))
        }
    })
}

/// Parameter answers as {server: {name: value}}.
fn by_server<'py>(
    py: Python<'py>,
    answers: weft::params::ParamAnswers<Vec<(String, String)>>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (server, values) in answers {
        let d = PyDict::new(py);
        for (name, value) in values {
            d.set_item(name, value)?;
        }
        out.set_item(server, d)?;
    }
    Ok(out)
}

#[pymethods]
impl PyFs {
    /// Gives every lock back and disconnects; files still open can no longer be used.
    fn umount(&self, py: Python<'_>) {
        let gone = py.detach(|| self.shared.write().take());
        match self.shared.here() {
            true => py.detach(move || drop(gone)),
            false => std::mem::forget(gone),
        }
    }

    #[getter]
    fn mounted(&self) -> bool {
        self.shared.read().is_some()
    }

    #[getter]
    fn fsname(&self, py: Python<'_>) -> PyResult<String> {
        run(py, &self.shared, None, |fs| Ok(fs.fsname.clone()))
    }

    /// The management service's address this client was mounted with.
    #[getter]
    fn mgs(&self, py: Python<'_>) -> PyResult<String> {
        run(py, &self.shared, None, |fs| Ok(fs.client().mgs_address().to_string()))
    }

    /// open(2) with `flags`; a new file gets `layout` (components) or its directory's default.
    #[pyo3(signature = (path, flags, mode = 0o666, layout = None))]
    fn open(
        &self,
        py: Python<'_>,
        path: Vec<u8>,
        flags: i32,
        mode: u32,
        layout: Option<Vec<ComponentIn>>,
    ) -> PyResult<PyRawFile> {
        let spec = match layout {
            Some(comps) => Some(edit_of(comps)?.spec().map_err(|e| os_error(e, Some(&path)))?),
            None => None,
        };
        let file = self.run(py, &path, |fs| fs.open_with(&path, flags, mode, spec))?;
        Ok(PyRawFile::new(self.shared.clone(), file, path, flags))
    }

    #[pyo3(signature = (path, follow = true))]
    fn stat<'py>(&self, py: Python<'py>, path: Vec<u8>, follow: bool) -> PyResult<Bound<'py, PyDict>> {
        let s = self.run(py, &path, |fs| fs.stat(&path, follow))?;
        stat_dict(py, &self.shared, &s)
    }

    /// The entries of a directory but `.` and `..`: (name, d_type, inode number).
    fn listdir<'py>(&self, py: Python<'py>, path: Vec<u8>) -> PyResult<Vec<(Bound<'py, PyBytes>, u8, u64)>> {
        let entries = self.run(py, &path, |fs| {
            let mut dir = fs.opendir(&path)?;
            let mut out = Vec::new();
            while let Some(e) = fs.readdir(&mut dir)? {
                if e.name != b"." && e.name != b".." {
                    out.push((e.name, weft::namespace::dirent_type(e.kind), fs.ino(e.fid)));
                }
            }
            Ok(out)
        })?;
        Ok(entries.into_iter().map(|(n, t, i)| (PyBytes::new(py, &n), t, i)).collect())
    }

    #[pyo3(signature = (path, mode = 0o777))]
    fn mkdir(&self, py: Python<'_>, path: Vec<u8>, mode: u32) -> PyResult<()> {
        self.run(py, &path, |fs| fs.mkdir(&path, mode))
    }

    fn rmdir(&self, py: Python<'_>, path: Vec<u8>) -> PyResult<()> {
        self.run(py, &path, |fs| fs.rmdir(&path))
    }

    fn unlink(&self, py: Python<'_>, path: Vec<u8>) -> PyResult<()> {
        self.run(py, &path, |fs| fs.unlink(&path))
    }

    /// rename(2); `flags` as renameat2(2) (RENAME_NOREPLACE 1, RENAME_EXCHANGE 2).
    #[pyo3(signature = (src, dst, flags = 0))]
    fn rename(&self, py: Python<'_>, src: Vec<u8>, dst: Vec<u8>, flags: u32) -> PyResult<()> {
        self.run(py, &src, |fs| fs.rename(&src, &dst, flags))
    }

    fn link(&self, py: Python<'_>, src: Vec<u8>, dst: Vec<u8>) -> PyResult<()> {
        self.run(py, &src, |fs| fs.link(&src, &dst))
    }

    fn symlink(&self, py: Python<'_>, target: Vec<u8>, path: Vec<u8>) -> PyResult<()> {
        self.run(py, &path, |fs| fs.symlink(&target, &path))
    }

    fn readlink<'py>(&self, py: Python<'py>, path: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
        let target = self.run(py, &path, |fs| fs.readlink(&path))?;
        Ok(PyBytes::new(py, &target))
    }

    fn chmod(&self, py: Python<'_>, path: Vec<u8>, mode: u32) -> PyResult<()> {
        self.run(py, &path, |fs| fs.chmod(&path, mode))
    }

    /// chown(2); None leaves an id as it is.
    #[pyo3(signature = (path, uid, gid, follow = true))]
    fn chown(&self, py: Python<'_>, path: Vec<u8>, uid: Option<u32>, gid: Option<u32>, follow: bool) -> PyResult<()> {
        self.run(py, &path, |fs| fs.chown(&path, uid, gid, follow))
    }

    /// utimensat(2): each time (seconds, nanoseconds), None for now.
    #[pyo3(signature = (path, atime, mtime, follow = true))]
    fn utimens(
        &self,
        py: Python<'_>,
        path: Vec<u8>,
        atime: Option<(i64, u32)>,
        mtime: Option<(i64, u32)>,
        follow: bool,
    ) -> PyResult<()> {
        let (a, m) = (set_time(atime)?, set_time(mtime)?);
        self.run(py, &path, |fs| fs.utimens(&path, Some(a), Some(m), follow))
    }

    fn truncate(&self, py: Python<'_>, path: Vec<u8>, size: u64) -> PyResult<()> {
        self.run(py, &path, |fs| fs.truncate(&path, size))
    }

    /// access(2) with R_OK, W_OK, X_OK (F_OK 0): whether it is allowed. Other errors
    /// (ENOENT...) raise.
    fn access(&self, py: Python<'_>, path: Vec<u8>, mode: i32) -> PyResult<bool> {
        self.shared.check_here()?;
        let r = py.detach(|| self.shared.read().as_ref().map(|fs| fs.access(&path, mode)));
        match r {
            None => Err(closed("an unmounted file system")),
            Some(Ok(())) => Ok(true),
            Some(Err(e)) if e.errno == libc::EACCES => Ok(false),
            Some(Err(e)) => Err(os_error(e, Some(&path))),
        }
    }

    /// statfs(2): (bsize, blocks, bfree, bavail, files, ffree).
    fn statvfs(&self, py: Python<'_>) -> PyResult<(u32, u64, u64, u64, u64, u64)> {
        let s = run(py, &self.shared, None, |fs| fs.statfs())?;
        Ok((s.bsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree))
    }

    #[pyo3(signature = (path, name, follow = true))]
    fn getxattr<'py>(
        &self,
        py: Python<'py>,
        path: Vec<u8>,
        name: Vec<u8>,
        follow: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.run(py, &path, |fs| fs.getxattr(&path, &name, follow))?;
        Ok(PyBytes::new(py, &v))
    }

    /// setxattr(2); `flags` XATTR_CREATE 1 or XATTR_REPLACE 2.
    #[pyo3(signature = (path, name, value, flags = 0, follow = true))]
    fn setxattr(
        &self,
        py: Python<'_>,
        path: Vec<u8>,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: u32,
        follow: bool,
    ) -> PyResult<()> {
        self.run(py, &path, |fs| fs.setxattr(&path, &name, &value, flags, follow))
    }

    #[pyo3(signature = (path, follow = true))]
    fn listxattr<'py>(&self, py: Python<'py>, path: Vec<u8>, follow: bool) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let names = self.run(py, &path, |fs| fs.listxattr(&path, follow))?;
        Ok(names.iter().map(|n| PyBytes::new(py, n)).collect())
    }

    #[pyo3(signature = (path, name, follow = true))]
    fn removexattr(&self, py: Python<'_>, path: Vec<u8>, name: Vec<u8>, follow: bool) -> PyResult<()> {
        self.run(py, &path, |fs| fs.removexattr(&path, &name, follow))
    }

    /// The umask creates apply from now on; the one before.
    fn umask(&self, py: Python<'_>, mask: u32) -> PyResult<u32> {
        run(py, &self.shared, None, |fs| Ok(fs.swap_umask(mask)))
    }

    /// A file's layout, or a directory's default: its components.
    fn get_layout(&self, py: Python<'_>, path: Vec<u8>) -> PyResult<Vec<ComponentOut>> {
        let edit = self.run(py, &path, |fs| fs.layout_of(&path))?;
        Ok(components_of(&edit))
    }

    /// A directory's default layout, or an empty file's layout.
    fn set_layout(&self, py: Python<'_>, path: Vec<u8>, layout: Vec<ComponentIn>) -> PyResult<()> {
        let edit = edit_of(layout)?;
        self.run(py, &path, |fs| fs.set_layout(&path, &edit))
    }

    /// An HSM request ('archive', 'release', 'restore', 'remove', 'cancel') for files.
    #[pyo3(signature = (paths, action, archive_id = 0))]
    fn hsm_request(&self, py: Python<'_>, paths: Vec<Vec<u8>>, action: &str, archive_id: u32) -> PyResult<()> {
        let request = hsm_action(action)?;
        let first = paths.first().cloned().unwrap_or_default();
        self.run(py, &first, |fs| {
            let all: Vec<&[u8]> = paths.iter().map(Vec::as_slice).collect();
            fs.hsm_request(&all, request, archive_id)
        })
    }

    /// A file's HSM state: (flags HS_*, archive id).
    fn hsm_state(&self, py: Python<'_>, path: Vec<u8>) -> PyResult<(u32, u32)> {
        let s = self.run(py, &path, |fs| fs.hsm_state(&path))?;
        Ok((s.states, s.archive_id))
    }

    /// Reserves `throughput` ('100M' bytes/s, '500rps' requests/s, for the whole job) on the
    /// OSTs of `paths` for `duration` seconds, for job `job` (None: this client's job id);
    /// with `wait`, returns once it is active (ETIMEDOUT after `timeout` seconds). Returns its
    /// state: 'scheduled' or 'active'.
    #[pyo3(signature = (id, throughput, duration, paths, job = None, wait = false, timeout = 3600.0))]
    #[allow(clippy::too_many_arguments)] // Python's keywords, each with its default.
    fn qos_reserve(
        &self,
        py: Python<'_>,
        id: &str,
        throughput: &str,
        duration: f64,
        paths: Vec<Vec<u8>>,
        job: Option<String>,
        wait: bool,
        timeout: f64,
    ) -> PyResult<&'static str> {
        let secs = |v: f64, what: &str| {
            std::time::Duration::try_from_secs_f64(v)
                .map_err(|_| pyo3::exceptions::PyValueError::new_err(format!("{what}: seconds, 0 or more")))
        };
        let (duration, timeout) = (secs(duration, "duration")?, secs(timeout, "timeout")?);
        let first = paths.first().cloned().unwrap_or_default();
        let state = self.run(py, &first, |fs| {
            let all: Vec<&[u8]> = paths.iter().map(Vec::as_slice).collect();
            if wait {
                fs.qos_reserve_wait(id, job.as_deref(), &all, throughput, duration, timeout)
            } else {
                fs.qos_reserve(id, job.as_deref(), &all, throughput, duration)
            }
        })?;
        Ok(state.name())
    }

    /// A reservation's state now: 'undefined', 'scheduled', 'active' or 'done'.
    fn qos_test(&self, py: Python<'_>, id: &str) -> PyResult<&'static str> {
        run(py, &self.shared, None, |fs| fs.qos_state(id)).map(|s| s.name())
    }

    /// Ends a reservation now, giving its bandwidth back.
    fn qos_remove(&self, py: Python<'_>, id: &str) -> PyResult<()> {
        run(py, &self.shared, None, |fs| fs.qos_cancel(id))
    }

    /// The job this client's requests count under from now on (job statistics, TBF rules).
    fn set_jobid(&self, py: Python<'_>, jobid: &str) -> PyResult<()> {
        self.shared.check_here()?;
        py.detach(|| match self.shared.write().as_mut() {
            Some(fs) => {
                fs.set_jobid(jobid);
                true
            }
            None => false,
        })
        .then_some(())
        .ok_or_else(|| closed("an unmounted file system"))
    }

    fn jobid(&self, py: Python<'_>) -> PyResult<String> {
        run(py, &self.shared, None, |fs| Ok(fs.jobid().to_string()))
    }

    /// {server: {name: value}} of the parameters `pattern` matches.
    fn get_param<'py>(&self, py: Python<'py>, pattern: &str) -> PyResult<Bound<'py, PyDict>> {
        let found = run(py, &self.shared, Some(pattern.as_bytes()), |fs| fs.get_param(pattern))?;
        by_server(py, found)
    }

    /// Sets the parameters `pattern` matches; {server: {name: value now}}.
    #[pyo3(signature = (pattern, value, permanent = false))]
    fn set_param<'py>(
        &self,
        py: Python<'py>,
        pattern: &str,
        value: &str,
        permanent: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let set = run(py, &self.shared, Some(pattern.as_bytes()), |fs| fs.set_param(pattern, value, permanent))?;
        by_server(py, set)
    }

    #[pyo3(signature = (pattern = "*"))]
    fn list_param(&self, py: Python<'_>, pattern: &str) -> PyResult<Vec<String>> {
        run(py, &self.shared, Some(pattern.as_bytes()), |fs| fs.list_param(pattern))
    }
}
