//! Durable file output: results are replaced atomically, never left half-written.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A file operation that failed, and the path it failed on: "cannot read /x: …". The error
/// crates that touch files wrap it (`#[from]`), so `.map_err(IoAt::on("read", path))?` works
/// in each.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {path}: {source}")]
pub struct IoAt {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl IoAt {
    /// The `map_err` for `action` ("read", "create", …) on `path`.
    pub fn on(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> IoAt {
        let path = path.into();
        move |source| IoAt {
            action,
            path,
            source,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path} has only {free_mib} MiB free; a run needs at least {need_mib} MiB for its results. Free some space or choose another output directory")]
    Full {
        path: PathBuf,
        free_mib: u64,
        need_mib: u64,
    },
    #[error("cannot write {path}: {source}. Check that the directory exists, is writable and the disk is not full")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory, fsynced and then
/// renamed over the target: a reader (or a crash) sees the old file or the new one, never a
/// mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, path).map_err(io_err(path))?;
        // Make the rename itself durable.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Checks up front that results can be written into `dir` (creating it if needed), so a run
/// does not discover an unwritable directory only after measuring.
pub fn ensure_writable_dir(dir: &Path) -> Result<(), WriteError> {
    ensure_writable_dir_with(dir, MIN_FREE_BYTES)
}

/// Free space a run must find before it starts: results of a thousand-turn replay with its
/// HTML report take a few MiB, so this leaves a wide margin without being fussy.
pub const MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

fn ensure_writable_dir_with(dir: &Path, min_free: u64) -> Result<(), WriteError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    if let Some(free) = free_bytes(dir) {
        if free < min_free {
            return Err(WriteError::Full {
                path: dir.to_path_buf(),
                free_mib: free >> 20,
                need_mib: min_free.div_ceil(1 << 20),
            });
        }
    }
    let probe = dir.join(format!(".voxlat-write-probe-{}", std::process::id()));
    let mut f = File::create(&probe).map_err(io_err(dir))?;
    // A write of real bytes, not just a create: a full disk fails here rather than later.
    let r = f.write_all(&[0u8; 4096]).and_then(|_| f.sync_all());
    let _ = fs::remove_file(&probe);
    r.map_err(io_err(dir))
}

/// Bytes available to this user on the filesystem holding `dir`; `None` where unknown.
fn free_bytes(dir: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs writes only into the zeroed struct we own; `c` is NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return None;
        }
        // The field types differ between platforms (u32 on some 32-bit targets).
        #[allow(clippy::unnecessary_cast)]
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn too_little_free_space_is_reported_up_front() {
        let d = tempfile::tempdir().unwrap();
        let free = free_bytes(d.path()).expect("statvfs works on a temp dir");
        assert!(free > 0);
        ensure_writable_dir_with(d.path(), 1).unwrap();
        // Ask for more than the disk has: the "full disk" case, without filling a disk.
        let err =
            ensure_writable_dir_with(d.path(), free.saturating_mul(2).max(1 << 40)).unwrap_err();
        assert!(matches!(err, WriteError::Full { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("MiB free") && msg.contains(&d.path().display().to_string()),
            "{msg}"
        );
    }

    #[test]
    fn unwritable_directory_is_reported_with_its_path() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("plain-file");
        fs::write(&file, b"x").unwrap();
        // A directory below a regular file can never be created.
        let err = ensure_writable_dir(&file.join("sub")).unwrap_err();
        assert!(err.to_string().contains("plain-file"), "{err}");
        let err = write_atomic(&file.join("sub").join("r.json"), b"x").unwrap_err();
        assert!(err.to_string().contains("sub"), "{err}");
    }
}
