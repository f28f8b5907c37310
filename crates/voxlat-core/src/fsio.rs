//! Durable file output: results are replaced atomically, never left half-written.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
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
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let probe = dir.join(format!(".voxlat-write-probe-{}", std::process::id()));
    let mut f = File::create(&probe).map_err(io_err(dir))?;
    // A write of real bytes, not just a create: a full disk fails here rather than later.
    let r = f.write_all(&[0u8; 4096]).and_then(|_| f.sync_all());
    let _ = fs::remove_file(&probe);
    r.map_err(io_err(dir))
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
