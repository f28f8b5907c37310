//! Which build of `voxlat-server` runs. The workspace builds it portable (AVX2, so that one
//! binary runs on any x86-64 of the last decade; on an older CPU the set-up leaves out what it
//! lacks, `scripts/lib.sh`). On a CPU with AVX-512, VNNI and BF16 the set-up also builds
//! `voxlat-server-avx512`, whose prefill is about 1.4× faster here
//! (`docs/models.md`). llama.cpp picks its kernels when it is compiled, and whisper.cpp's copy
//! of ggml may not share a process with it, so the choice is made per process: the build
//! this CPU can run, checked by a first request before it is trusted (a native llama.cpp build
//! died with SIGILL at its first request on a CPU that reports every flag it was built with).

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

pub const SERVER_BIN: &str = "voxlat-server";

/// A variant built for a CPU family: its file name's suffix and every x86 feature its C++
/// was compiled with (`scripts/lib.sh`, `build_server_variants`, passes the same to ggml).
struct Variant {
    name: &'static str,
    needs: &'static [&'static str],
}

const AVX512: Variant = Variant {
    name: "avx512",
    needs: &[
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512cd",
        "avx512vl",
        "avx512dq",
        "avx512bw",
        "avx512vbmi",
        "avx512vnni",
        "avx512bf16",
        "avxvnni",
    ],
};

/// One server binary to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerBuild {
    /// `portable` or a variant's name.
    pub name: &'static str,
    pub path: PathBuf,
}

/// What `VOXLAT_SERVER_BUILD` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The fastest build this CPU runs (unset, or `auto`).
    Auto,
    Portable,
    Avx512,
}

impl Choice {
    pub fn from_env() -> Result<Choice> {
        Choice::parse(std::env::var("VOXLAT_SERVER_BUILD").ok().as_deref())
    }

    fn parse(v: Option<&str>) -> Result<Choice> {
        Ok(match v.map(str::trim) {
            None | Some("" | "auto") => Choice::Auto,
            Some("portable") => Choice::Portable,
            Some("avx512") => Choice::Avx512,
            Some(other) => {
                bail!("VOXLAT_SERVER_BUILD={other:?} is not a build: use auto, portable or avx512")
            }
        })
    }
}

/// The builds to try in order, best first, and why a variant present beside the portable
/// build was passed over (for the user). `dir` holds the binaries; `has` says whether the CPU
/// has an x86 feature.
pub fn candidates(
    dir: &Path,
    choice: Choice,
    has: impl Fn(&str) -> bool,
) -> Result<(Vec<ServerBuild>, Option<String>)> {
    let portable = ServerBuild {
        name: "portable",
        path: dir.join(format!("{SERVER_BIN}{}", std::env::consts::EXE_SUFFIX)),
    };
    if !portable.path.is_file() {
        bail!(
            "{} not found: the embedded LLM server is a separate binary (llama.cpp cannot share \
             a process with whisper.cpp). Build it with `cargo build --release` (the workspace \
             builds both binaries) or `cargo build -p voxlat-server` in voxlat's profile; after \
             `cargo install --path .`, also run `cargo install --path crates/voxlat-server`",
            portable.path.display()
        );
    }
    let variant = ServerBuild {
        name: AVX512.name,
        path: dir.join(format!(
            "{SERVER_BIN}-{}{}",
            AVX512.name,
            std::env::consts::EXE_SUFFIX
        )),
    };
    let missing: Vec<&str> = AVX512.needs.iter().copied().filter(|f| !has(f)).collect();
    let unusable = if !variant.path.is_file() {
        Some(format!(
            "{} is not built (scripts/setup.sh builds it on a CPU with AVX-512)",
            variant.path.display()
        ))
    } else if !missing.is_empty() {
        Some(format!("this CPU lacks {}", missing.join(", ")))
    } else if older(&variant.path, &portable.path) {
        Some(format!(
            "{} is older than {} (rebuild it: bash scripts/build-server-variants.sh)",
            variant.path.display(),
            portable.path.display()
        ))
    } else {
        None
    };
    match (choice, unusable) {
        (Choice::Portable, _) => Ok((vec![portable], None)),
        (Choice::Avx512, Some(why)) => {
            bail!("VOXLAT_SERVER_BUILD=avx512, but {why}; unset it to let voxlat choose")
        }
        (Choice::Avx512, None) => Ok((vec![variant], None)),
        (Choice::Auto, None) => Ok((vec![variant, portable], None)),
        // Only worth saying when a variant exists: a machine without one is the normal case.
        (Choice::Auto, Some(why)) => {
            let note = variant
                .path
                .is_file()
                .then(|| format!("using the portable {SERVER_BIN}: {why}"));
            Ok((vec![portable], note))
        }
    }
}

/// `a` was modified before `b`: a variant left from before the last build of the server.
fn older(a: &Path, b: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((modified(a), modified(b)), (Some(a), Some(b)) if a < b)
}

/// Whether this CPU (and the OS, for the AVX-512 state) has the x86 feature `name`.
pub fn cpu_has(name: &str) -> bool {
    cpu_feature(name).unwrap_or(false)
}

/// `None` for a name this detector does not know.
#[cfg(target_arch = "x86_64")]
fn cpu_feature(name: &str) -> Option<bool> {
    Some(match name {
        "avx2" => std::is_x86_feature_detected!("avx2"),
        "fma" => std::is_x86_feature_detected!("fma"),
        "f16c" => std::is_x86_feature_detected!("f16c"),
        "bmi2" => std::is_x86_feature_detected!("bmi2"),
        "avx512f" => std::is_x86_feature_detected!("avx512f"),
        "avx512cd" => std::is_x86_feature_detected!("avx512cd"),
        "avx512vl" => std::is_x86_feature_detected!("avx512vl"),
        "avx512dq" => std::is_x86_feature_detected!("avx512dq"),
        "avx512bw" => std::is_x86_feature_detected!("avx512bw"),
        "avx512vbmi" => std::is_x86_feature_detected!("avx512vbmi"),
        "avx512vnni" => std::is_x86_feature_detected!("avx512vnni"),
        "avx512bf16" => std::is_x86_feature_detected!("avx512bf16"),
        "avxvnni" => std::is_x86_feature_detected!("avxvnni"),
        _ => return None,
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_feature(_name: &str) -> Option<bool> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(d.path().join(f), b"").unwrap();
        }
        d
    }

    fn names(v: &[ServerBuild]) -> Vec<&str> {
        v.iter().map(|b| b.name).collect()
    }

    #[test]
    fn the_variant_comes_first_only_on_a_cpu_with_every_feature_it_was_built_for() {
        let d = dir_with(&["voxlat-server", "voxlat-server-avx512"]);
        let (all, note) = candidates(d.path(), Choice::Auto, |_| true).unwrap();
        assert_eq!(names(&all), ["avx512", "portable"]);
        assert_eq!(note, None);
        let (all, note) = candidates(d.path(), Choice::Auto, |f| f != "avx512bf16").unwrap();
        assert_eq!(names(&all), ["portable"]);
        assert!(note.unwrap().contains("lacks avx512bf16"));
    }

    #[test]
    fn no_variant_is_the_normal_case_and_says_nothing() {
        let d = dir_with(&["voxlat-server"]);
        let (all, note) = candidates(d.path(), Choice::Auto, |_| true).unwrap();
        assert_eq!(names(&all), ["portable"]);
        assert_eq!(note, None);
    }

    #[test]
    fn a_variant_older_than_the_portable_build_is_stale() {
        let d = dir_with(&["voxlat-server-avx512"]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(d.path().join("voxlat-server"), b"").unwrap();
        let (all, note) = candidates(d.path(), Choice::Auto, |_| true).unwrap();
        assert_eq!(names(&all), ["portable"]);
        assert!(note.unwrap().contains("older than"));
    }

    #[test]
    fn a_pinned_build_is_that_build_or_an_error_that_says_why() {
        let d = dir_with(&["voxlat-server"]);
        let (all, _) = candidates(d.path(), Choice::Portable, |_| true).unwrap();
        assert_eq!(names(&all), ["portable"]);
        let err = candidates(d.path(), Choice::Avx512, |_| true).unwrap_err();
        assert!(err.to_string().contains("not built"), "{err}");
        assert!(Choice::parse(Some("avx2")).is_err());
        assert_eq!(Choice::parse(Some("auto")).unwrap(), Choice::Auto);
        assert_eq!(Choice::parse(None).unwrap(), Choice::Auto);
    }

    #[test]
    fn without_the_portable_build_there_is_nothing_to_run() {
        let d = dir_with(&["voxlat-server-avx512"]);
        let err = candidates(d.path(), Choice::Auto, |_| true).unwrap_err();
        assert!(err.to_string().contains("separate binary"), "{err}");
    }

    /// An unknown name reads as absent, so a misspelt feature would quietly keep the
    /// variant from ever running.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_detector_knows_every_feature_the_variant_needs() {
        for f in AVX512.needs {
            assert!(cpu_feature(f).is_some(), "{f}");
        }
        assert_eq!(cpu_feature("avx512"), None);
    }
}
