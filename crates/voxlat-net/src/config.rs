//! Where to send requests: base URL, API key and model, resolved from flags, the environment
//! and a `.env` file, in that order. Each value remembers where it came from, so a results file
//! (and an error message) can say which variable was in force. Which key goes where is
//! [`keys`]'s job.

mod keys;
pub use keys::{is_loopback, Service, Withheld, WithheldKey, ASR_API_KEY_VARS, TTS_API_KEY_VARS};

use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

/// An API key. It never prints and never serializes: every `Debug`, `Display` and `Serialize`
/// shows a placeholder, so it cannot leak into logs or results files by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

pub const REDACTED: &str = "<redacted>";

impl ApiKey {
    /// Accepts the bare key or a pasted `Bearer <key>` (a common mistake): the client always
    /// sends `Authorization: Bearer <key>` itself.
    pub fn new(raw: &str) -> Option<ApiKey> {
        let k = raw.trim();
        let k = k
            .strip_prefix("Bearer ")
            .or_else(|| k.strip_prefix("bearer "))
            .unwrap_or(k)
            .trim();
        (!k.is_empty()).then(|| ApiKey(k.to_string()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the key in `text` (e.g. a 401 body that echoes it).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.0, REDACTED)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for ApiKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

/// A value the caller was given (`(name, value)`), such as a command-line flag: the name is
/// the caller's, and results and errors quote it as the value's source.
pub type Flag<'a> = (&'a str, &'a str);

/// A value and where it came from (`--base-url`, `env VOXLAT_BASE_URL`, `.env OPENAI_API_KEY`…).
#[derive(Clone, Debug, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
    /// The kind of place `source` names: the key rules depend on it.
    #[serde(skip)]
    pub layer: Layer,
}

/// Where a setting was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layer {
    Flag,
    Env,
    DotEnv,
    /// Given by the calling code ([`Endpoint::new`]).
    #[default]
    Code,
}

#[derive(Clone, Debug, Serialize)]
pub struct Endpoint {
    /// Base URL up to and including the version prefix, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: Sourced<String>,
    pub api_key: Option<Sourced<ApiKey>>,
    /// A key that was configured but not attached, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld_key: Option<WithheldKey>,
    #[serde(skip)]
    pub service: Service,
}

impl Endpoint {
    pub fn new(base_url: &str, api_key: Option<&str>) -> Endpoint {
        Endpoint {
            base_url: Sourced {
                value: normalize_base(base_url),
                source: "code".into(),
                layer: Layer::Code,
            },
            api_key: api_key.and_then(ApiKey::new).map(|k| Sourced {
                value: k,
                source: "code".into(),
                layer: Layer::Code,
            }),
            withheld_key: None,
            service: Service::Llm,
        }
    }

    /// voxlat's own `voxlat-server` child: it checks no key, so none is ever sent to it.
    pub fn embedded(base_url: &str) -> Endpoint {
        let mut e = Endpoint::new(base_url, None);
        e.base_url.source = "embedded server".into();
        e
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base_url.value, path.trim_start_matches('/'))
    }

    pub fn key(&self) -> Option<&ApiKey> {
        self.api_key.as_ref().map(|k| &k.value)
    }
}

fn normalize_base(s: &str) -> String {
    let s = s.trim().trim_end_matches('/');
    // Users paste the full endpoint URL as often as the base.
    s.strip_suffix("/chat/completions").unwrap_or(s).to_string()
}

/// Variables looked up, in order of preference, for each setting.
pub const BASE_URL_VARS: &[&str] = &["VOXLAT_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE"];
pub const API_KEY_VARS: &[&str] = &["VOXLAT_API_KEY", "OPENAI_API_KEY"];
pub const MODEL_VARS: &[&str] = &["VOXLAT_MODEL", "OPENAI_MODEL"];

/// Environment and `.env` values, looked up without modifying the process environment.
pub struct Settings {
    env: HashMap<String, String>,
    dotenv: HashMap<String, String>,
    dotenv_path: String,
    allow_insecure_key: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no base URL: none was given, and neither VOXLAT_BASE_URL nor OPENAI_BASE_URL is set (e.g. VOXLAT_BASE_URL=http://127.0.0.1:8080/v1)")]
    NoBaseUrl,
    #[error("base URL {url:?} ({source_name}) is not an http:// or https:// URL")]
    BadBaseUrl { url: String, source_name: String },
    #[error("base URL {url:?} ({source_name}) is not a valid URL: {detail}")]
    UnparsableBaseUrl {
        url: String,
        source_name: String,
        detail: String,
    },
    #[error("cannot read {path}: {detail}")]
    DotEnv { path: String, detail: String },
}

impl Settings {
    /// The process environment plus `.env` in the current directory if it exists.
    pub fn from_process() -> Result<Settings, ConfigError> {
        Settings::load(std::env::vars().collect(), Path::new(".env"))
    }

    pub fn load(env: HashMap<String, String>, dotenv: &Path) -> Result<Settings, ConfigError> {
        let mut map = HashMap::new();
        if dotenv.exists() {
            let iter = dotenvy::from_path_iter(dotenv).map_err(|e| ConfigError::DotEnv {
                path: dotenv.display().to_string(),
                detail: e.to_string(),
            })?;
            for item in iter {
                let (k, v) = item.map_err(|e| ConfigError::DotEnv {
                    path: dotenv.display().to_string(),
                    detail: e.to_string(),
                })?;
                map.insert(k, v);
            }
        }
        Ok(Settings {
            env,
            dotenv: map,
            dotenv_path: dotenv.display().to_string(),
            allow_insecure_key: false,
        })
    }

    /// The first of `flag`, then each variable in the environment, then in `.env`.
    pub fn pick(&self, flag: Option<Flag<'_>>, vars: &[&str]) -> Option<Sourced<String>> {
        if let Some((name, v)) = flag.filter(|(_, v)| !v.trim().is_empty()) {
            return Some(Sourced {
                value: v.to_string(),
                source: name.to_string(),
                layer: Layer::Flag,
            });
        }
        self.pick_in(&self.env, "env", Layer::Env, vars)
            .or_else(|| self.pick_in(&self.dotenv, &self.dotenv_path, Layer::DotEnv, vars))
    }

    /// The first of `vars` set in one of the two maps.
    fn pick_in(
        &self,
        map: &HashMap<String, String>,
        label: &str,
        layer: Layer,
        vars: &[&str],
    ) -> Option<Sourced<String>> {
        vars.iter().find_map(|var| {
            map.get(*var)
                .filter(|v| !v.trim().is_empty())
                .map(|v| Sourced {
                    value: v.clone(),
                    source: format!("{label} {var}"),
                    layer,
                })
        })
    }

    pub fn endpoint(
        &self,
        base_flag: Option<Flag<'_>>,
        key_flag: Option<Flag<'_>>,
    ) -> Result<Endpoint, ConfigError> {
        let base = self
            .pick(base_flag, BASE_URL_VARS)
            .ok_or(ConfigError::NoBaseUrl)?;
        self.endpoint_from(base, key_flag)
    }

    /// The LLM endpoint at a base URL already picked (e.g. by `--llm-url`): checked,
    /// normalised, with the API key from `key_flag` or the environment as the key rules allow
    /// ([`Settings::service_endpoint`]). Errors name `base`'s source.
    pub fn endpoint_from(
        &self,
        base: Sourced<String>,
        key_flag: Option<Flag<'_>>,
    ) -> Result<Endpoint, ConfigError> {
        self.service_endpoint(Service::Llm, base, key_flag, None)
    }

    pub fn model(&self, flag: Option<Flag<'_>>) -> Option<Sourced<String>> {
        self.pick(flag, MODEL_VARS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn flags_beat_env_beat_dotenv() {
        let d = tempfile::tempdir().unwrap();
        let dot = d.path().join(".env");
        std::fs::write(
            &dot,
            "VOXLAT_BASE_URL=https://dotenv/v1\nOPENAI_API_KEY=sk-dot\nVOXLAT_MODEL=m-dot\n",
        )
        .unwrap();
        let s = Settings::load(env(&[("OPENAI_BASE_URL", "https://env/v1/")]), &dot).unwrap();
        let e = s.endpoint(None, None).unwrap();
        assert_eq!(e.base_url.value, "https://env/v1");
        assert_eq!(e.base_url.source, "env OPENAI_BASE_URL");
        assert_eq!(e.key().unwrap().expose(), "sk-dot");
        assert!(e
            .api_key
            .as_ref()
            .unwrap()
            .source
            .ends_with("OPENAI_API_KEY"));
        let e = s
            .endpoint(
                Some(("--base-url", "https://flag/v1")),
                Some(("--api-key", "sk-flag")),
            )
            .unwrap();
        assert_eq!(
            (e.base_url.value.as_str(), e.key().unwrap().expose()),
            ("https://flag/v1", "sk-flag")
        );
        assert_eq!(s.model(None).unwrap().value, "m-dot");
        assert_eq!(
            s.model(Some(("--model", "m-flag"))).unwrap().source,
            "--model"
        );
    }

    #[test]
    fn voxlat_vars_beat_openai_vars() {
        let s = Settings::load(
            env(&[
                ("OPENAI_BASE_URL", "http://openai/v1"),
                ("VOXLAT_BASE_URL", "http://vox/v1"),
            ]),
            Path::new("/nonexistent/.env"),
        )
        .unwrap();
        assert_eq!(
            s.endpoint(None, None).unwrap().base_url.value,
            "http://vox/v1"
        );
    }

    #[test]
    fn missing_and_malformed_base_url_explain_the_fix() {
        let s = Settings::load(env(&[]), Path::new("/nonexistent/.env")).unwrap();
        assert!(s
            .endpoint(None, None)
            .unwrap_err()
            .to_string()
            .contains("VOXLAT_BASE_URL"));
        let err = s
            .endpoint(Some(("--base-url", "localhost:8080/v1")), None)
            .unwrap_err();
        assert!(err.to_string().contains("http://"), "{err}");
    }

    #[test]
    fn full_endpoint_url_is_reduced_to_the_base() {
        assert_eq!(
            Endpoint::new("http://h/v1/chat/completions", None).url("chat/completions"),
            "http://h/v1/chat/completions"
        );
    }

    #[test]
    fn api_key_never_prints_and_bearer_prefix_is_stripped() {
        let k = ApiKey::new("Bearer sk-secret-123").unwrap();
        assert_eq!(k.expose(), "sk-secret-123");
        assert!(!format!("{k:?} {k}").contains("secret"));
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            format!("\"{REDACTED}\"")
        );
        assert_eq!(
            k.scrub("bad key sk-secret-123!"),
            format!("bad key {REDACTED}!")
        );
        assert!(ApiKey::new("  ").is_none());
    }
}
