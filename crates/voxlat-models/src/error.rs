use std::fmt;
use std::path::PathBuf;
use voxlat_core::fsio::IoAt;

#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    #[error("model manifest {origin} is invalid: {detail}")]
    Manifest { origin: String, detail: String },
    #[error("unknown model `{name}`; the manifest has: {}", known.join(", "))]
    UnknownModel { name: String, known: Vec<String> },
    #[error("no models cache directory: this platform has no cache directory. Set VOXLAT_MODELS_DIR to a writable directory")]
    NoCacheDir,
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("{0}")]
    Unavailable(Box<Unavailable>),
    #[error("model `{model}` is not ready: {} ({reason})", path.display())]
    NotFetched {
        model: String,
        path: PathBuf,
        reason: String,
    },
}

/// Every source of a model failed. The message is the whole story a user needs offline: what
/// was tried, why each failed, and where to put the files by hand.
#[derive(Debug)]
pub struct Unavailable {
    pub model: String,
    pub attempts: Vec<Attempt>,
    /// Files still missing: (path it belongs at, size, sha256).
    pub missing: Vec<(PathBuf, u64, String)>,
}

#[derive(Debug, Clone)]
pub struct Attempt {
    pub source: String,
    pub error: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "cannot fetch model `{}`: every source failed:",
            self.model
        )?;
        for (i, a) in self.attempts.iter().enumerate() {
            writeln!(f, "  {}. {}\n     -> {}", i + 1, a.source, a.error)?;
        }
        writeln!(
            f,
            "To install it by hand, copy these files into place, then run `voxlat models verify {}`:",
            self.model
        )?;
        for (path, size, sha) in &self.missing {
            writeln!(f, "  {}  ({size} bytes, sha256 {sha})", path.display())?;
        }
        write!(f, "(Set VOXLAT_MODELS_DIR to use another cache directory.)")
    }
}

/// Why one source failed. Rendered into [`Attempt::error`].
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Http(String),
    #[error("{file}: sha256 {actual} ({size} bytes) does not match the expected {expected}")]
    Checksum {
        file: String,
        expected: String,
        actual: String,
        size: u64,
    },
    #[error("`{tool}` is not available ({detail}); install it or use another source")]
    ToolMissing { tool: String, detail: String },
    #[error("`{command}` failed ({status}): {output}")]
    Tool {
        command: String,
        status: String,
        output: String,
    },
    #[error("{member} is not in {archive}")]
    MissingMember { member: String, archive: String },
    #[error("cannot read archive {archive}: {detail}")]
    Archive { archive: String, detail: String },
    #[error("this program has no `{0}` converter registered (the `voxlat` CLI has it)")]
    UnknownConverter(String),
    #[error("conversion failed: {0}")]
    Convert(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Io(#[from] IoAt),
}
