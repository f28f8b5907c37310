//! The models cache: `<dir>/<model>/<file>`, each file with a small stamp recording the
//! sha256 it was verified with, its size and mtime.
//!
//! The stamp is what makes a second `fetch` instant: if size and mtime still match, the file
//! is trusted without re-hashing hundreds of megabytes. Anything that rewrites the file
//! changes its mtime, so a corrupted file is re-hashed and caught. `verify` always re-hashes.

use crate::error::ModelsError;
use crate::hash::sha256_file;
use crate::http::HttpOptions;
use crate::manifest::{FileSpec, Manifest, Model};
use crate::registry::Tools;
use crate::report::Reporter;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;
use voxlat_core::fsio::IoAt;

/// Environment variable that overrides the cache directory.
pub const DIR_ENV: &str = "VOXLAT_MODELS_DIR";

/// The platform's cache directory (`~/.cache/voxlat/models` on Linux), or `VOXLAT_MODELS_DIR`.
pub fn default_dir() -> Result<PathBuf, ModelsError> {
    if let Some(d) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    dirs::cache_dir()
        .map(|d| d.join("voxlat").join("models"))
        .ok_or(ModelsError::NoCacheDir)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Trust a matching stamp (size + mtime); hash only when it does not match.
    Fast,
    /// Always re-hash.
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    Ok { sha256: String, size: u64 },
    Missing,
    Corrupt { reason: String },
}

#[derive(Debug, Clone)]
pub struct FileStatus {
    pub name: String,
    pub path: PathBuf,
    pub state: FileState,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub sha256: String,
    pub size: u64,
    pub mtime_ns: u64,
    pub source: String,
    /// The hash was pinned on first download rather than taken from the manifest.
    #[serde(default)]
    pub trust_on_first_use: bool,
}

/// A converter named by the manifest (`convert = "…"`): the unpacked inputs by their path in
/// the archive, and the file to write. Its error is the converter's own, kept whole.
pub type ConvertFn = fn(
    &std::collections::BTreeMap<String, PathBuf>,
    &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;

pub struct Store {
    pub(crate) dir: PathBuf,
    pub(crate) manifest: Manifest,
    pub http: HttpOptions,
    pub tools: Tools,
    /// Converters by manifest name. Registered by the caller (the CLI registers the Whisper
    /// CT2 → ggml one from voxlat-asr), so that this crate, and everything that only needs
    /// model paths (the LLM server), does not link whisper.cpp.
    pub converters: std::collections::HashMap<String, ConvertFn>,
}

fn mtime_ns(meta: &fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Store {
    pub fn new(manifest: Manifest, dir: PathBuf) -> Self {
        Self {
            dir,
            manifest,
            http: HttpOptions::default(),
            tools: Tools::default(),
            converters: std::collections::HashMap::new(),
        }
    }

    /// The built-in manifest (or `manifest` if given) over the default cache directory.
    pub fn open_default(manifest: Option<Manifest>) -> Result<Self, ModelsError> {
        let manifest = match manifest {
            Some(m) => m,
            None => Manifest::builtin()?,
        };
        Ok(Self::new(manifest, default_dir()?))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn model_dir(&self, model: &str) -> PathBuf {
        self.dir.join(model)
    }

    /// Where `file` of `model` lives (whether or not it has been fetched).
    pub fn path(&self, model: &str, file: &str) -> PathBuf {
        self.model_dir(model).join(file)
    }

    pub(crate) fn stamp_path(&self, model: &str, file: &str) -> PathBuf {
        self.model_dir(model).join(format!(".{file}.verified"))
    }

    /// Creates the cache directory, marked so it is never committed or backed up by accident
    /// even when `VOXLAT_MODELS_DIR` points inside a git checkout.
    pub fn prepare(&self) -> Result<(), ModelsError> {
        fs::create_dir_all(&self.dir).map_err(IoAt::on("create", &self.dir))?;
        let ignore = self.dir.join(".gitignore");
        if !ignore.exists() {
            fs::write(&ignore, "# voxlat models cache: never commit weights\n*\n")
                .map_err(IoAt::on("write", &ignore))?;
        }
        let tag = self.dir.join("CACHEDIR.TAG");
        if !tag.exists() {
            fs::write(
                &tag,
                "Signature: 8a477f597d28d172789f06886806bc55\n# voxlat models cache\n",
            )
            .map_err(IoAt::on("write", &tag))?;
        }
        Ok(())
    }

    fn read_stamp(&self, model: &str, file: &str) -> Option<Stamp> {
        let text = fs::read_to_string(self.stamp_path(model, file)).ok()?;
        toml::from_str(&text).ok()
    }

    pub(crate) fn write_stamp(
        &self,
        model: &str,
        file: &str,
        sha256: &str,
        source: &str,
        trust_on_first_use: bool,
    ) -> Result<(), ModelsError> {
        let path = self.path(model, file);
        let meta = fs::metadata(&path).map_err(IoAt::on("stat", &path))?;
        let stamp = Stamp {
            sha256: sha256.to_string(),
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            source: source.to_string(),
            trust_on_first_use,
        };
        let text = toml::to_string(&stamp)
            .map_err(|e| IoAt::on("encode stamp for", &path)(std::io::Error::other(e)))?;
        let sp = self.stamp_path(model, file);
        Ok(fs::write(&sp, text).map_err(IoAt::on("write", &sp))?)
    }

    /// (sha256, size) pairs that count as a good copy of `file`: the manifest's own, any
    /// source-specific ones (e.g. upstream's differently produced file), and a hash pinned on
    /// first use when the source that produced it allows that.
    fn accepted(&self, model: &Model, file: &FileSpec) -> (Vec<String>, Vec<u64>, bool) {
        let mut hashes = vec![file.sha256.clone()];
        let mut sizes = vec![file.size];
        let mut tofu = false;
        for s in &model.sources {
            if !model.outputs(s).contains(&file.name.as_str()) {
                continue;
            }
            hashes.extend(s.sha256.clone());
            sizes.extend(s.size);
            tofu |= s.trust_on_first_use;
        }
        (hashes, sizes, tofu)
    }

    /// State of one file. Never fails: an unreadable file is reported as corrupt.
    pub fn check_file(
        &self,
        model: &Model,
        file: &FileSpec,
        mode: Check,
        reporter: &dyn Reporter,
    ) -> FileState {
        let path = self.path(&model.name, &file.name);
        let meta = match fs::metadata(&path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => {
                return FileState::Corrupt {
                    reason: "is not a regular file".into(),
                }
            }
            Err(_) => return FileState::Missing,
        };
        let (mut hashes, sizes, tofu) = self.accepted(model, file);
        let stamp = self.read_stamp(&model.name, &file.name);
        if let Some(s) = &stamp {
            if tofu && s.trust_on_first_use {
                hashes.push(s.sha256.clone());
            }
        }
        let pinned_tofu = tofu && stamp.as_ref().is_some_and(|s| s.trust_on_first_use);
        let len = meta.len();
        // A size check first: it catches a partial download without reading a byte.
        if !pinned_tofu && !sizes.contains(&len) {
            return FileState::Corrupt {
                reason: format!("size is {len} bytes, expected {}", join(&sizes)),
            };
        }
        if mode == Check::Fast {
            if let Some(s) = &stamp {
                if s.size == len && s.mtime_ns == mtime_ns(&meta) && hashes.contains(&s.sha256) {
                    return FileState::Ok {
                        sha256: s.sha256.clone(),
                        size: len,
                    };
                }
            }
        }
        match sha256_file(&path, &model.name, reporter) {
            Ok((sha, size)) if hashes.contains(&sha) => {
                // Refresh the stamp so the next fast check is instant (best effort: a
                // read-only cache still verifies, just slower).
                let source = stamp.map_or_else(|| "verified in place".to_string(), |s| s.source);
                let _ = self.write_stamp(&model.name, &file.name, &sha, &source, pinned_tofu);
                FileState::Ok { sha256: sha, size }
            }
            Ok((sha, _)) => FileState::Corrupt {
                reason: format!("sha256 is {sha}, expected {}", hashes.join(" or ")),
            },
            Err(e) => FileState::Corrupt {
                reason: format!("cannot read it: {e}"),
            },
        }
    }

    /// Status of every file of `model`.
    pub fn status(
        &self,
        name: &str,
        mode: Check,
        reporter: &dyn Reporter,
    ) -> Result<Vec<FileStatus>, ModelsError> {
        let model = self.manifest.require(name)?;
        Ok(model
            .files
            .iter()
            .map(|f| FileStatus {
                name: f.name.clone(),
                path: self.path(&model.name, &f.name),
                state: self.check_file(model, f, mode, reporter),
            })
            .collect())
    }

    /// Path of a file that is present and verified (fast check), for code that loads models.
    pub fn ready_path(&self, name: &str, file: &str) -> Result<PathBuf, ModelsError> {
        let model = self.manifest.require(name)?;
        let spec = model.file(file).ok_or_else(|| ModelsError::Manifest {
            origin: "manifest".into(),
            detail: format!("model `{name}` has no file {file}"),
        })?;
        match self.check_file(model, spec, Check::Fast, &crate::report::Quiet) {
            FileState::Ok { .. } => Ok(self.path(name, file)),
            FileState::Missing => Err(ModelsError::NotFetched {
                model: name.to_string(),
                path: self.path(name, file),
                reason: "it is missing".into(),
            }),
            FileState::Corrupt { reason } => Err(ModelsError::NotFetched {
                model: name.to_string(),
                path: self.path(name, file),
                reason,
            }),
        }
    }
}

fn join(v: &[u64]) -> String {
    v.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" or ")
}
