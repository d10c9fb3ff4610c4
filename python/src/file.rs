//! `RawFile`: an open file of the file system (`weft::File`), unbuffered, with its own
//! position; the pure-Python part makes it an `io.RawIOBase` and buffers it.

use crate::fs::{run, stat_of, Shared};
use crate::layout::{components_of, ComponentOut};
use crate::{closed, os_error};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::sync::RwLock;

#[pyclass(frozen, name = "RawFile", module = "weft._weft")]
pub struct PyRawFile {
    shared: Shared,
    /// None once closed. Calls take it for reading (several at once, as threads may);
    /// close for writing.
    file: RwLock<Option<weft::File>>,
    /// The path it was opened by, for errors and for opening it through a mount.
    path: Vec<u8>,
    flags: i32,
}

impl PyRawFile {
    pub(crate) fn new(shared: Shared, file: weft::File, path: Vec<u8>, flags: i32) -> PyRawFile {
        PyRawFile { shared, file: RwLock::new(Some(file)), path, flags }
    }

    /// Runs `call` on the mounted client and this open file, the GIL released.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(&weft::Fs, &weft::File) -> weft::Result<T> + Send,
    ) -> PyResult<T> {
        let file = &self.file;
        let done = run(py, &self.shared, Some(&self.path), |fs| {
            let f = file.read().unwrap_or_else(|p| p.into_inner());
            Ok(f.as_ref().map(|f| call(fs, f)))
        })?;
        done.ok_or_else(|| closed("a closed file"))?.map_err(|e| os_error(e, Some(&self.path)))
    }
}

/// A C-contiguous buffer's bytes (bytes, bytearray, memoryview, a numpy array...).
fn contiguous(buf: &PyUntypedBuffer, writable: bool) -> PyResult<(usize, usize)> {
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err("the buffer is not contiguous"));
    }
    if writable && buf.readonly() {
        return Err(PyValueError::new_err("the buffer is read-only"));
    }
    Ok((buf.buf_ptr() as usize, buf.len_bytes()))
}

#[pymethods]
impl PyRawFile {
    /// Reads into `buffer` (any writable contiguous buffer: bytearray, memoryview, a numpy
    /// array's memory) at the file position, without a copy; the bytes read (0 at the end).
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = PyUntypedBuffer::get(buffer)?;
        let (ptr, len) = contiguous(&buf, true)?;
        self.run(py, move |fs, f| {
            // SAFETY: the buffer is held (`buf`) until this returns, and is `len` writable bytes.
            let into = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
            fs.read(f, into)
        })
    }

    /// Writes `data` (any contiguous buffer) at the file position (the end with O_APPEND);
    /// the bytes written.
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buf = PyUntypedBuffer::get(data)?;
        let (ptr, len) = contiguous(&buf, false)?;
        self.run(py, move |fs, f| {
            // SAFETY: the buffer is held (`buf`) until this returns, and is `len` bytes.
            let from = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            fs.write(f, from)
        })
    }

    /// pread(2): up to `size` bytes at `offset`, the position unchanged.
    fn pread<'py>(&self, py: Python<'py>, size: usize, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.run(py, |fs, f| {
            let mut buf = vec![0u8; size];
            let n = fs.pread(f, &mut buf, offset)?;
            buf.truncate(n);
            Ok(buf)
        })?;
        Ok(PyBytes::new(py, &data))
    }

    /// pwrite(2): `data` at `offset`, the position unchanged.
    fn pwrite(&self, py: Python<'_>, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<usize> {
        let buf = PyUntypedBuffer::get(data)?;
        let (ptr, len) = contiguous(&buf, false)?;
        self.run(py, move |fs, f| {
            // SAFETY: as in `write`.
            let from = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            fs.pwrite(f, from, offset)
        })
    }

    /// lseek(2): the new position.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        self.run(py, |fs, f| fs.seek(f, offset, whence))
    }

    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, |_, f| Ok(f.position()))
    }

    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        self.run(py, |fs, f| fs.ftruncate(f, size))
    }

    fn fsync(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |fs, f| fs.fsync(f))
    }

    fn stat<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.run(py, |fs, f| fs.fstat(f))?;
        stat_of(py, &self.shared, s)
    }

    /// Its layout: components.
    fn layout(&self, py: Python<'_>) -> PyResult<Vec<ComponentOut>> {
        let edit = self.run(py, |fs, f| fs.layout_of_file(f))?;
        Ok(components_of(&edit))
    }

    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.path)
    }

    #[getter]
    fn flags(&self) -> i32 {
        self.flags
    }

    #[getter]
    fn closed(&self) -> bool {
        self.file.read().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// close(2); closing again does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = py.detach(|| self.file.write().unwrap_or_else(|p| p.into_inner()).take());
        let Some(file) = taken else { return Ok(()) };
        match run(py, &self.shared, Some(&self.path), |fs| fs.close(file)) {
            // Unmounted: the client gave everything back already.
            Err(_) if self.shared.read().is_none() => Ok(()),
            r => r,
        }
    }

    /// A descriptor of this same file opened through a FUSE mount of the same file system
    /// on this node, at this file's position; None when this node has no such mount.
    ///
    /// Why a second open rather than a descriptor of this client: a descriptor is the
    /// kernel's, and only a kernel file system (the FUSE mount) can back one; programs that
    /// want one (numpy's fromfile/tofile use stdio on a dup of it) then read and write
    /// through the mount, which the servers' locks keep coherent with this client as with
    /// any other. The caller closes it.
    fn mount_fd(&self, py: Python<'_>) -> PyResult<Option<i32>> {
        let (mgs, ino, pos) =
            self.run(py, |fs, f| Ok((fs.client().mgs_address().to_string(), fs.ino(f.fid), f.position())))?;
        let Some(mut through) = weft::mounts::fuse_mount_of(&mgs) else { return Ok(None) };
        if !self.path.starts_with(b"/") {
            through.push(b'/');
        }
        through.extend_from_slice(&self.path);
        let through = std::ffi::CString::new(through).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let flags = self.flags & (libc::O_ACCMODE | libc::O_APPEND) | libc::O_CLOEXEC;
        let opened = py.detach(|| {
            // SAFETY: a NUL-terminated path; the descriptor is handed to the caller.
            let fd = unsafe { libc::open(through.as_ptr(), flags) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: `fd` is open; `st` is written by fstat.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let same = unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_ino == ino;
            // SAFETY: `fd` is open.
            if !same || unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_SET) } < 0 {
                // SAFETY: `fd` is open and ours.
                unsafe { libc::close(fd) };
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the path through the mount is another file now (renamed since the open?)",
                ));
            }
            Ok(fd)
        });
        opened.map(Some).map_err(|e| {
            let errno = e.raw_os_error().unwrap_or(libc::ESTALE);
            os_error(weft::Error::new(errno, format!("opening through the mount: {e}")), Some(through.as_bytes()))
        })
    }
}

impl Drop for PyRawFile {
    /// A file dropped open is closed (as Python's own files are).
    fn drop(&mut self) {
        let file = self.file.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if !self.shared.here() {
            // A forked child's copy: the open is the parent's.
            std::mem::forget(file);
            return;
        }
        if let (Some(file), Some(fs)) = (file, self.shared.read().as_ref()) {
            if let Err(e) = fs.close(file) {
                eprintln!("weft: closing {} when dropped: {e}", String::from_utf8_lossy(&self.path));
            }
        }
    }
}
