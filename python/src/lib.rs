//! `weft._weft`, the native part of the `weft` Python module: a thin layer over libweft's
//! Rust API (`weft::Fs`, `weft::File`, `weft::LayoutEdit`, HSM, parameters). Paths come in
//! as bytes (the pure-Python part, `weft/__init__.py`, encodes str and path-likes with
//! `os.fsencode`) and errors go out as `OSError(errno, message, path)`, which Python turns
//! into the subclass of the errno (FileNotFoundError for ENOENT, ...). Every call that
//! waits for the servers releases the GIL (`Python::detach`), so other threads run.

mod file;
mod fs;
mod layout;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// `OSError(errno, message, path)`: Python makes it the errno's subclass.
pub(crate) fn os_error(e: weft::Error, path: Option<&[u8]>) -> PyErr {
    match path {
        Some(p) => PyOSError::new_err((e.errno, e.message, String::from_utf8_lossy(p).into_owned())),
        None => PyOSError::new_err((e.errno, e.message)),
    }
}

/// What a call of an unmounted file system or a closed file raises.
pub(crate) fn closed(what: &str) -> PyErr {
    PyValueError::new_err(format!("I/O operation on {what}"))
}

/// Connects to the file system whose management service is at `mgs` ("host:port", or a
/// replicated service's "a:p,b:p,c:p") as this process's user; `wbc` turns the metadata
/// write-back cache on or off (None: as `WEFT_WBC` says).
#[pyfunction]
#[pyo3(signature = (mgs, wbc = None))]
fn mount(py: Python<'_>, mgs: &str, wbc: Option<bool>) -> PyResult<fs::PyFs> {
    let mounted = py
        .detach(|| {
            let options = weft::MountOptions::from_env()?;
            weft::Fs::mount_with(mgs, weft::MountOptions { wbc: wbc.unwrap_or(options.wbc), ..options })
        })
        .map_err(|e| os_error(e, None))?;
    Ok(fs::PyFs::new(mounted))
}

#[pymodule]
#[pyo3(name = "_weft")]
fn weft_python(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mount, m)?)?;
    m.add_class::<fs::PyFs>()?;
    m.add_class::<file::PyRawFile>()?;
    m.add("VERSION", weft::VERSION)?;
    use weft_proto::msg::hsm as h;
    for (name, bit) in [
        ("HS_EXISTS", h::HS_EXISTS),
        ("HS_DIRTY", h::HS_DIRTY),
        ("HS_RELEASED", h::HS_RELEASED),
        ("HS_ARCHIVED", h::HS_ARCHIVED),
        ("HS_NORELEASE", h::HS_NORELEASE),
        ("HS_NOARCHIVE", h::HS_NOARCHIVE),
        ("HS_LOST", h::HS_LOST),
    ] {
        m.add(name, bit)?;
    }
    Ok(())
}
