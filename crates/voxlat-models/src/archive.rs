//! Taking named members out of wheels (zip) and npm/tarball archives (tar.gz).

use crate::error::SourceError;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use voxlat_core::fsio::IoAt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Zip,
    TarGz,
}

/// Recognises an archive by name: `.whl`/`.zip` are zips, `.tgz`/`.tar.gz` gzipped tars.
pub fn kind_of(name: &str) -> Option<Kind> {
    let n = name.to_ascii_lowercase();
    if n.ends_with(".whl") || n.ends_with(".zip") {
        Some(Kind::Zip)
    } else if n.ends_with(".tgz") || n.ends_with(".tar.gz") {
        Some(Kind::TarGz)
    } else {
        None
    }
}

fn archive_err(archive: &Path, e: impl std::fmt::Display) -> SourceError {
    SourceError::Archive {
        archive: archive.display().to_string(),
        detail: e.to_string(),
    }
}

/// Extracts each wanted member (archive path → destination) found in `archive`; returns the
/// members it found. Absent members are not an error here: with several packages, each
/// member lives in only one of them.
pub fn extract(
    archive: &Path,
    kind: Kind,
    wanted: &BTreeMap<String, PathBuf>,
) -> Result<Vec<String>, SourceError> {
    let file = File::open(archive).map_err(IoAt::on("open", archive))?;
    let mut found = Vec::new();
    match kind {
        Kind::Zip => {
            let mut zip = zip::ZipArchive::new(file).map_err(|e| archive_err(archive, e))?;
            for (member, dest) in wanted {
                let mut entry = match zip.by_name(member) {
                    Ok(e) => e,
                    Err(zip::result::ZipError::FileNotFound) => continue,
                    Err(e) => return Err(archive_err(archive, e)),
                };
                let mut out = File::create(dest).map_err(IoAt::on("create", dest))?;
                io::copy(&mut entry, &mut out).map_err(|e| archive_err(archive, e))?;
                found.push(member.clone());
            }
        }
        Kind::TarGz => {
            let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
            for entry in tar.entries().map_err(|e| archive_err(archive, e))? {
                let mut entry = entry.map_err(|e| archive_err(archive, e))?;
                let path = entry.path().map_err(|e| archive_err(archive, e))?;
                let name = path.to_string_lossy().trim_start_matches("./").to_string();
                if let Some(dest) = wanted.get(&name) {
                    let mut out = File::create(dest).map_err(IoAt::on("create", dest))?;
                    io::copy(&mut entry, &mut out).map_err(|e| archive_err(archive, e))?;
                    found.push(name);
                }
            }
        }
    }
    Ok(found)
}
