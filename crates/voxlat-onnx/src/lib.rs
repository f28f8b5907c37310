//! ONNX Runtime, loaded once per process from a shared library (`ort`'s `load-dynamic`).
//!
//! Debian has no ONNX Runtime and ort's build script would download one, so the library is a
//! file fetched into the models cache. Both Piper (TTS) and Silero (VAD) run on it, and a
//! process can hold only one ONNX Runtime, so the loading lives here rather than in either
//! stage.

use ort::environment::Environment;
use ort::session::Session;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("ONNX Runtime library {path} does not exist (version 1.24 or newer is needed)")]
    Missing { path: PathBuf },
    #[error("cannot load ONNX Runtime from {path} (version 1.24 or newer is needed): {detail}")]
    Load { path: PathBuf, detail: String },
    #[error("ONNX Runtime was already loaded from {loaded} in this process; it cannot also be loaded from {requested}. Use one library per process")]
    Conflict { loaded: PathBuf, requested: PathBuf },
}

struct Loaded {
    path: PathBuf,
    env: Environment,
}

static RUNTIME: Mutex<Option<Loaded>> = Mutex::new(None);

/// The process's ONNX Runtime environment, loading `path` on first use. Returns it and how
/// long this call spent loading the library (zero when it was already loaded). A second,
/// different path is an error.
pub fn environment(path: &Path) -> Result<(Environment, Duration), OnnxError> {
    let mut guard = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(loaded) = guard.as_ref() {
        if !same_file(path, &loaded.path) {
            return Err(OnnxError::Conflict {
                loaded: loaded.path.clone(),
                requested: path.to_path_buf(),
            });
        }
        return Ok((loaded.env.clone(), Duration::ZERO));
    }
    if !path.is_file() {
        return Err(OnnxError::Missing {
            path: path.to_path_buf(),
        });
    }
    let start = Instant::now();
    let load_err = |detail: String| OnnxError::Load {
        path: path.to_path_buf(),
        detail,
    };
    let env = ort::init_from(path)
        .map_err(|e| load_err(e.to_string()))?
        .with_name("voxlat")
        .build()
        .map_err(|e| load_err(e.to_string()))?;
    let took = start.elapsed();
    *guard = Some(Loaded {
        path: path.to_path_buf(),
        env: env.clone(),
    });
    Ok((env, took))
}

/// Why a model's session could not be made: the model, or the runtime under it. The two
/// need different fixes, so they stay apart.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("model file {} does not exist", .0.display())]
    ModelMissing(PathBuf),
    #[error(transparent)]
    Runtime(#[from] OnnxError),
    #[error("ONNX Runtime cannot open {}: {cause}", path.display())]
    Open { path: PathBuf, cause: ort::Error },
}

/// A session for a small model run beside the stages that own the cores (Silero, Smart
/// Turn): one intra- and one inter-op thread, and no spinning, since a spinning pool starves
/// the others on 2 cores.
pub fn single_thread_session(runtime: &Path, model: &Path) -> Result<Session, SessionError> {
    if !model.is_file() {
        return Err(SessionError::ModelMissing(model.to_path_buf()));
    }
    let (env, _) = environment(runtime)?;
    let open = |cause: ort::Error| SessionError::Open {
        path: model.to_path_buf(),
        cause,
    };
    Session::builder(&env)
        .map_err(open)?
        .with_intra_threads(1)
        .map_err(|e| open(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| open(e.into()))?
        .with_intra_op_spinning(false)
        .map_err(|e| open(e.into()))?
        .with_inter_op_spinning(false)
        .map_err(|e| open(e.into()))?
        .commit_from_file(model)
        .map_err(open)
}

/// The library loaded so far, if any.
pub fn loaded_path() -> Option<PathBuf> {
    RUNTIME
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|l| l.path.clone())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
