//! The full configuration of a run. It is written into every results file and can be loaded
//! from a TOML or JSON file, so a run can be repeated exactly. The API key is never part of it.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BenchConfig {
    pub base_url: Option<String>,
    /// Models to compare; empty means "ask the server's /models and use the first".
    pub models: Vec<String>,
    /// Requests per model before measuring, excluded from statistics.
    pub warmup: u32,
    /// Measured requests per cell (ignored when `duration_s` is set).
    pub requests: u32,
    /// Measure each cell for this long instead of a request count.
    pub duration_s: Option<f64>,
    /// Closed-loop concurrency levels, one cell each.
    pub concurrency: Vec<u32>,
    /// Open-loop Poisson arrival rates (requests/s), one cell each; replaces `concurrency`.
    pub rate: Vec<f64>,
    /// With several models, each cell is split into this many rounds, run with the models
    /// interleaved, so drift in the server does not read as a model difference.
    pub rounds: u32,
    pub prompt: PromptConfig,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub stop: Vec<String>,
    pub seed: Option<u64>,
    /// Seeds the synthetic prompts. Each run draws a new one (recorded here in the results),
    /// so a server's prompt cache never serves one run's prompts to the next; set it (or
    /// `seed`) to send the same prompts again on purpose.
    pub prompt_seed: Option<u64>,
    pub include_usage: bool,
    /// Further body parameters, sent verbatim.
    pub extra: serde_json::Map<String, serde_json::Value>,
    pub fresh_connections: bool,
    pub http2: bool,
    pub connect_timeout_s: f64,
    pub headers_timeout_s: f64,
    pub idle_timeout_s: f64,
    pub output_dir: PathBuf,
    /// One parameter varied across cells (prompt length or max_tokens).
    pub sweep: Option<Sweep>,
    /// Probes run after the cells: prefix cache, connection phases.
    pub probes: Vec<Probe>,
    /// The model's context in tokens, when known: larger sweep points and probe prompts are
    /// capped below it.
    pub context_tokens: Option<u32>,
}

/// What a sweep varies.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SweepParam {
    /// Synthetic prompts of N tokens, different per request, at a fixed max_tokens.
    PromptTokens,
    /// max_tokens at a fixed prompt; TTFT should not move.
    MaxTokens,
}

impl SweepParam {
    pub fn name(self) -> &'static str {
        match self {
            SweepParam::PromptTokens => "prompt-tokens",
            SweepParam::MaxTokens => "max-tokens",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    pub param: SweepParam,
    pub values: Vec<u32>,
}

const SWEEP_USAGE: &str = "use prompt-tokens=100,1000,4000 or max-tokens=16,256,4000";

/// A `--sweep` that is not one; each names the text given and how to write it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadSweep {
    #[error("sweep {0:?} has no '='; {usage}", usage = SWEEP_USAGE)]
    NoEquals(String),
    #[error("cannot sweep {0:?}; {usage}", usage = SWEEP_USAGE)]
    Param(String),
    #[error("sweep value {0:?} is not a positive whole number")]
    Value(String),
}

impl std::str::FromStr for Sweep {
    type Err = BadSweep;
    /// `prompt-tokens=100,1000,4000` or `max-tokens=16,256,4000`.
    fn from_str(s: &str) -> Result<Sweep, BadSweep> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| BadSweep::NoEquals(s.to_string()))?;
        let param = match k.trim().replace('_', "-").as_str() {
            "prompt-tokens" => SweepParam::PromptTokens,
            "max-tokens" => SweepParam::MaxTokens,
            other => return Err(BadSweep::Param(other.to_string())),
        };
        let values = v
            .split(',')
            .map(|x| {
                x.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| BadSweep::Value(x.to_string()))
            })
            .collect::<Result<Vec<u32>, BadSweep>>()?;
        Ok(Sweep { param, values })
    }
}

/// A probe: a fixed sequence of requests that answers one question.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// Does the server reuse a cached prompt prefix?
    PrefixCache,
    /// What do DNS, connect and a new connection cost, cold vs warm, HTTP/1.1 vs HTTP/2?
    Connections,
}

/// A `--probe` that names none.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown probe {0:?}; use prefix-cache or connections")]
pub struct UnknownProbe(pub String);

impl std::str::FromStr for Probe {
    type Err = UnknownProbe;
    fn from_str(s: &str) -> Result<Probe, UnknownProbe> {
        match s.trim() {
            "prefix-cache" | "cache" => Ok(Probe::PrefixCache),
            "connections" | "connection" => Ok(Probe::Connections),
            other => Err(UnknownProbe(other.to_string())),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptConfig {
    pub text: Option<String>,
    pub file: Option<PathBuf>,
    pub messages_file: Option<PathBuf>,
    /// Synthetic prompt of about this many tokens.
    pub tokens: Option<u32>,
    pub system: Option<String>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            base_url: None,
            models: Vec::new(),
            warmup: 3,
            requests: 30,
            duration_s: None,
            concurrency: vec![1],
            rate: Vec::new(),
            rounds: 5,
            prompt: PromptConfig::default(),
            max_tokens: Some(64),
            temperature: None,
            top_p: None,
            stop: Vec::new(),
            seed: None,
            prompt_seed: None,
            include_usage: true,
            extra: serde_json::Map::new(),
            fresh_connections: false,
            http2: false,
            connect_timeout_s: 10.0,
            headers_timeout_s: 300.0,
            idle_timeout_s: 60.0,
            output_dir: PathBuf::from("results"),
            sweep: None,
            probes: Vec::new(),
            context_tokens: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid {format}: {detail}")]
    Parse {
        path: String,
        format: &'static str,
        detail: String,
    },
    #[error(transparent)]
    Invalid(#[from] BadSetting),
}

/// A setting that fails validation: its key, its value as a config file writes it and as a
/// command line gives it, and what is wrong. The caller knows where the value came from (a
/// file, or a flag it maps the key to) and names that.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} = {file_value}: {problem}")]
pub struct BadSetting {
    pub key: &'static str,
    pub file_value: String,
    pub flag_value: String,
    pub problem: String,
}

/// The load of one cell.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// N requests in flight at all times (closed loop).
    Concurrency(u32),
    /// Poisson arrivals at R requests/s, regardless of completions (open loop).
    Rate(f64),
}

impl Load {
    pub fn label(&self) -> String {
        match self {
            Load::Concurrency(c) => format!("c={c}"),
            Load::Rate(r) => format!("rate={r}/s"),
        }
    }
}

impl BenchConfig {
    /// Loads a `.toml` or `.json` file (by extension; anything else is tried as TOML).
    pub fn from_file(path: &Path) -> Result<BenchConfig, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a config's text; `path` names it in errors and picks the format, as in
    /// [`Self::from_file`].
    pub fn parse(text: &str, path: &Path) -> Result<BenchConfig, ConfigFileError> {
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if is_json {
            serde_json::from_str(text).map_err(|e| ConfigFileError::Parse {
                path: path.display().to_string(),
                format: "JSON",
                detail: e.to_string(),
            })
        } else {
            toml::from_str(text).map_err(|e| ConfigFileError::Parse {
                path: path.display().to_string(),
                format: "TOML",
                detail: e.to_string(),
            })
        }
    }

    /// The prompts are synthetic (new words per request), so a server should have none of
    /// them cached.
    pub fn synthetic_prompts(&self) -> bool {
        let p = &self.prompt;
        let synthetic = p.text.is_none() && p.file.is_none() && p.messages_file.is_none();
        (synthetic && p.tokens.is_some())
            || self
                .sweep
                .as_ref()
                .is_some_and(|s| s.param == SweepParam::PromptTokens)
    }

    pub fn loads(&self) -> Vec<Load> {
        if self.rate.is_empty() {
            self.concurrency
                .iter()
                .map(|&c| Load::Concurrency(c))
                .collect()
        } else {
            self.rate.iter().map(|&r| Load::Rate(r)).collect()
        }
    }

    /// Checks every setting; the first bad one is returned.
    pub fn validate(&self) -> Result<(), BadSetting> {
        let bad = |key: &'static str, file_value: String, flag_value: String, problem: &str| {
            Err(BadSetting {
                key,
                file_value,
                flag_value,
                problem: problem.to_string(),
            })
        };
        let list = |v: &[String]| (format!("[{}]", v.join(", ")), v.join(","));
        let conc: Vec<String> = self.concurrency.iter().map(u32::to_string).collect();
        let rates: Vec<String> = self.rate.iter().map(|&r| num(r)).collect();
        if self.concurrency.is_empty() && self.rate.is_empty() {
            let (f, v) = list(&conc);
            return bad(
                "concurrency",
                f,
                v,
                "give at least one concurrency level or rate",
            );
        }
        if self.concurrency.contains(&0) {
            let (f, v) = list(&conc);
            return bad("concurrency", f, v, "levels must be at least 1");
        }
        if self.concurrency.iter().any(|&c| c > MAX_CONCURRENCY) {
            let (f, v) = list(&conc);
            let problem = format!("levels must be at most {MAX_CONCURRENCY} (one connection each)");
            return bad("concurrency", f, v, &problem);
        }
        if self.rate.iter().any(|r| !(MIN_RATE..=MAX_RATE).contains(r)) {
            let (f, v) = list(&rates);
            // Below the minimum the gaps between arrivals (−ln U / rate) stop being durations.
            let problem =
                format!("rates must be between {MIN_RATE} and {MAX_RATE:.0} requests per second");
            return bad("rate", f, v, &problem);
        }
        if let Some(t) = self.prompt.tokens.filter(|&t| t > MAX_PROMPT_TOKENS) {
            let problem = format!(
                "must be at most {MAX_PROMPT_TOKENS} tokens (each synthetic prompt is built in memory)"
            );
            return bad("prompt.tokens", t.to_string(), t.to_string(), &problem);
        }
        match self.duration_s {
            Some(d) if !(d.is_finite() && d > 0.0 && d <= MAX_SECONDS) => {
                let problem = format!("must be positive and at most {MAX_SECONDS:.0} s");
                return bad("duration_s", num(d), format!("{}s", num(d)), &problem);
            }
            None if self.requests == 0 => {
                return bad("requests", "0".into(), "0".into(), "must be at least 1")
            }
            _ => {}
        }
        let prompts = [
            self.prompt.text.is_some(),
            self.prompt.file.is_some(),
            self.prompt.messages_file.is_some(),
            self.prompt.tokens.is_some(),
        ];
        if prompts.iter().filter(|&&p| p).count() > 1 {
            return bad(
                "prompt",
                "{…}".into(),
                String::new(),
                "give only one prompt: its text, file, messages_file or tokens",
            );
        }
        if let Some(sw) = &self.sweep {
            let vals: Vec<String> = sw.values.iter().map(u32::to_string).collect();
            let form = format!("{}={}", sw.param.name(), vals.join(","));
            if sw.values.is_empty() || sw.values.contains(&0) {
                return bad(
                    "sweep",
                    format!("{form:?}"),
                    form,
                    "needs positive values, e.g. prompt-tokens=100,1000",
                );
            }
            if sw.param == SweepParam::PromptTokens
                && sw.values.iter().any(|&v| v > MAX_PROMPT_TOKENS)
            {
                let problem = format!("prompt-tokens values must be at most {MAX_PROMPT_TOKENS}");
                return bad("sweep", format!("{form:?}"), form, &problem);
            }
            if sw.param == SweepParam::PromptTokens && prompts[..3].iter().any(|&p| p) {
                return bad("sweep", format!("{form:?}"), form, "prompt-tokens makes its own prompts; give no prompt text, file or messages_file with it");
            }
        }
        for (key, v) in [
            ("connect_timeout_s", self.connect_timeout_s),
            ("headers_timeout_s", self.headers_timeout_s),
            ("idle_timeout_s", self.idle_timeout_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= MAX_SECONDS) {
                let problem = format!("must be positive and at most {MAX_SECONDS:.0} s");
                return bad(key, num(v), format!("{}s", num(v)), &problem);
            }
        }
        Ok(())
    }
}

/// A number as a user would write it: `1e300`, not 301 digits.
fn num(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

pub use voxlat_core::clock::MAX_INPUT_SECONDS as MAX_SECONDS;

/// Each level opens that many connections, and each needs a file descriptor and a task.
pub const MAX_CONCURRENCY: u32 = 10_000;
/// Open-loop arrival rates, requests per second. One request in about 17 minutes is the
/// slowest; the fastest is far past what one client machine can send.
pub const MIN_RATE: f64 = 1e-3;
pub const MAX_RATE: f64 = 1e5;
/// The largest synthetic prompt: above the longest contexts served today (1–2 M tokens), and
/// about 14 MB of text, which is built in memory per request.
pub const MAX_PROMPT_TOKENS: u32 = 2_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_json_files_load_and_unknown_keys_are_rejected() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("b.toml");
        std::fs::write(&t, "models = [\"a\", \"b\"]\nconcurrency = [1, 4]\nrequests = 50\n[prompt]\ntokens = 500\n").unwrap();
        let c = BenchConfig::from_file(&t).unwrap();
        assert_eq!(c.models, vec!["a", "b"]);
        assert_eq!(c.loads(), vec![Load::Concurrency(1), Load::Concurrency(4)]);
        assert_eq!(c.prompt.tokens, Some(500));
        assert_eq!(c.warmup, 3, "unset keys keep defaults");

        let j = d.path().join("b.json");
        std::fs::write(&j, r#"{"rate": [2.5], "requests": 10}"#).unwrap();
        assert_eq!(
            BenchConfig::from_file(&j).unwrap().loads(),
            vec![Load::Rate(2.5)]
        );

        std::fs::write(&t, "concurency = [1]\n").unwrap();
        let err = BenchConfig::from_file(&t).unwrap_err().to_string();
        assert!(
            err.contains("concurency") && err.contains("b.toml"),
            "{err}"
        );
    }

    #[test]
    fn validation_names_the_key_and_both_forms_of_its_value() {
        let c = BenchConfig {
            concurrency: vec![0],
            ..BenchConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "concurrency");
        let c = BenchConfig {
            rate: vec![-1.0],
            ..BenchConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "rate");
        let mut c = BenchConfig::default();
        c.prompt.text = Some("x".into());
        c.prompt.tokens = Some(5);
        assert!(c.validate().unwrap_err().problem.contains("only one"));
        assert!(BenchConfig::default().validate().is_ok());
        // Absurd durations are errors, not panics later.
        let c = BenchConfig {
            connect_timeout_s: 1e300,
            ..BenchConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(
            (e.key, e.flag_value.as_str()),
            ("connect_timeout_s", "1e300s")
        );
        assert!(e.to_string().contains("at most"), "{e}");
    }

    /// Numbers that would allocate or schedule absurdly are refused up front, by name: a
    /// prompt of u32::MAX words (30 GB built per request), 4 billion connections, and a rate
    /// so low that the gap to the next arrival overflows a Duration.
    #[test]
    fn sizes_that_would_explode_are_refused() {
        let cases: [(BenchConfig, &str); 5] = [
            (
                BenchConfig {
                    prompt: PromptConfig {
                        tokens: Some(u32::MAX),
                        ..PromptConfig::default()
                    },
                    ..BenchConfig::default()
                },
                "prompt.tokens = 4294967295: must be at most 2000000",
            ),
            (
                BenchConfig {
                    sweep: Some("prompt-tokens=100,3000000".parse().unwrap()),
                    ..BenchConfig::default()
                },
                "at most 2000000",
            ),
            (
                BenchConfig {
                    concurrency: vec![1, u32::MAX],
                    ..BenchConfig::default()
                },
                "concurrency = [1, 4294967295]: levels must be at most 10000",
            ),
            (
                BenchConfig {
                    rate: vec![1e-300],
                    ..BenchConfig::default()
                },
                "rate = [1e-300]: rates must be between 0.001 and",
            ),
            (
                BenchConfig {
                    rate: vec![f64::INFINITY],
                    ..BenchConfig::default()
                },
                "rates must be between",
            ),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        // The bounds themselves are accepted.
        let ok = BenchConfig {
            prompt: PromptConfig {
                tokens: Some(MAX_PROMPT_TOKENS),
                ..PromptConfig::default()
            },
            concurrency: vec![MAX_CONCURRENCY],
            ..BenchConfig::default()
        };
        ok.validate().unwrap();
        let ok = BenchConfig {
            rate: vec![MIN_RATE, MAX_RATE],
            ..BenchConfig::default()
        };
        ok.validate().unwrap();
    }
}
