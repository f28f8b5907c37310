//! Which API key, if any, goes to an endpoint. A key is a credential for one server, so it is
//! scoped: the LLM's key (`--api-key`, `VOXLAT_API_KEY`, `OPENAI_API_KEY`) goes to the LLM,
//! and to a speech server only on the LLM's own origin; `VOXLAT_ASR_API_KEY` and
//! `VOXLAT_TTS_API_KEY` are the speech servers' own. Two rules guard every key: none crosses
//! the network in clear text (plain `http://` to a host that is not loopback) unless the user
//! allows it, and a URL read from `.env` (which a cloned repository can carry) gets no key from
//! the process environment. A key held back is recorded on the endpoint, with the reason, so
//! the caller can warn and a 401 can say why no key was sent.

use super::{ApiKey, ConfigError, Endpoint, Flag, Layer, Settings, Sourced, API_KEY_VARS};
use serde::Serialize;
use url::{Host, Url};

pub const ASR_API_KEY_VARS: &[&str] = &["VOXLAT_ASR_API_KEY"];
pub const TTS_API_KEY_VARS: &[&str] = &["VOXLAT_TTS_API_KEY"];

/// The server an endpoint is: each has its own key variables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Service {
    #[default]
    Llm,
    Asr,
    Tts,
}

impl Service {
    /// This server's own key variables, in order of preference.
    pub fn key_vars(self) -> &'static [&'static str] {
        match self {
            Service::Llm => API_KEY_VARS,
            Service::Asr => ASR_API_KEY_VARS,
            Service::Tts => TTS_API_KEY_VARS,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Service::Llm => "LLM",
            Service::Asr => "ASR",
            Service::Tts => "TTS",
        }
    }
}

/// A key that was configured but not attached to an endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WithheldKey {
    /// Where the key was found, e.g. `env VOXLAT_API_KEY`.
    pub source: String,
    pub reason: Withheld,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Withheld {
    /// Plain `http://` to a host that is not loopback, and insecure keys were not allowed.
    PlainHttp,
    /// The LLM's key, and this server is on another origin (scheme, host or port).
    OtherOrigin { llm_origin: String },
    /// The URL came from `.env` and the key from the process environment or the command line.
    DotEnvUrl { url_source: String },
}

impl Withheld {
    /// Why, and the fix, in words.
    pub fn explain(&self, service: Service) -> String {
        match self {
            Withheld::PlainHttp => "the URL is plain http:// to a host that is not loopback, so the key would cross the network in clear text; use https://, or allow keys over plain http".into(),
            Withheld::OtherOrigin { llm_origin } => format!(
                "it is the LLM's key, sent only to servers on the LLM's origin ({llm_origin}); set {} for this server",
                service.key_vars()[0]
            ),
            Withheld::DotEnvUrl { url_source } => format!(
                "the URL comes from {url_source}, and a URL from a .env file gets only a key from the same file, never one from the environment or the command line (a .env in a checked-out project could point your key at any server); give the URL on the command line too, or put the key in that file"
            ),
        }
    }
}

impl WithheldKey {
    /// One line: which key, that it was not sent, why and the fix.
    pub fn describe(&self, service: Service, url: &str) -> String {
        format!(
            "{} is not sent to {url} (the {} server): {}",
            self.source,
            service.name(),
            self.reason.explain(service)
        )
    }
}

/// The key chosen for an endpoint: one to send, one held back, or none configured.
type Choice = Result<Option<Sourced<ApiKey>>, WithheldKey>;

impl Settings {
    /// Lets keys go over plain `http://` to hosts that are not loopback (`--allow-insecure-key`).
    pub fn allow_insecure_key(mut self, allow: bool) -> Settings {
        self.allow_insecure_key = allow;
        self
    }

    /// The endpoint of `service` at a base URL already picked: checked, normalised, with the
    /// key the rules allow (see the module's comment). `key_flag` is this server's own key
    /// flag; `llm` the LLM endpoint whose key a speech server on the same origin shares
    /// (`None` for the embedded LLM, which has none). Errors name `base`'s source.
    pub fn service_endpoint(
        &self,
        service: Service,
        base: Sourced<String>,
        key_flag: Option<Flag<'_>>,
        llm: Option<&Endpoint>,
    ) -> Result<Endpoint, ConfigError> {
        let url = super::normalize_base(&base.value);
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::BadBaseUrl {
                url,
                source_name: base.source,
            });
        }
        let parsed = Url::parse(&url).map_err(|e| ConfigError::UnparsableBaseUrl {
            url: url.clone(),
            source_name: base.source.clone(),
            detail: e.to_string(),
        })?;
        let (api_key, withheld_key) = match self.choose_key(service, &base, &parsed, key_flag, llm)
        {
            Ok(k) => (k, None),
            Err(w) => (None, Some(w)),
        };
        Ok(Endpoint {
            base_url: Sourced {
                value: url,
                source: base.source,
                layer: base.layer,
            },
            api_key,
            withheld_key,
            service,
        })
    }

    fn choose_key(
        &self,
        service: Service,
        base: &Sourced<String>,
        url: &Url,
        key_flag: Option<Flag<'_>>,
        llm: Option<&Endpoint>,
    ) -> Choice {
        let key = match self.own_key(key_flag, service.key_vars(), base)? {
            Some(k) => k,
            None if service == Service::Llm => return Ok(None),
            None => match llm {
                Some(llm) => match shared_llm_key(llm, url, base)? {
                    Some(k) => k,
                    None => return Ok(None),
                },
                None => return Ok(None),
            },
        };
        if !self.allow_insecure_key && url.scheme() == "http" && !is_loopback(url) {
            return Err(WithheldKey {
                source: key.source,
                reason: Withheld::PlainHttp,
            });
        }
        Ok(Some(key))
    }

    /// The flag, else the first of `vars` set: in the environment then `.env`, or, for a URL
    /// from `.env`, in `.env` alone (a flag's key, or one set only in the environment, is held
    /// back: the file chose the server, and only its own key goes there).
    fn own_key(&self, flag: Option<Flag<'_>>, vars: &[&str], base: &Sourced<String>) -> Choice {
        let picked = if base.layer == Layer::DotEnv {
            if let Some(given) = self.pick(flag, &[]) {
                return Err(WithheldKey {
                    source: given.source,
                    reason: Withheld::DotEnvUrl {
                        url_source: base.source.clone(),
                    },
                });
            }
            let in_file = self.pick_in(&self.dotenv, &self.dotenv_path, Layer::DotEnv, vars);
            match in_file {
                Some(k) => Some(k),
                None => {
                    if let Some(env) = self.pick_in(&self.env, "env", Layer::Env, vars) {
                        return Err(WithheldKey {
                            source: env.source,
                            reason: Withheld::DotEnvUrl {
                                url_source: base.source.clone(),
                            },
                        });
                    }
                    None
                }
            }
        } else {
            self.pick(flag, vars)
        };
        Ok(picked.and_then(|s| {
            ApiKey::new(&s.value).map(|value| Sourced {
                value,
                source: s.source,
                layer: s.layer,
            })
        }))
    }
}

/// The LLM's key for a speech server at `url`, which has no key of its own: only on the LLM's
/// origin, and for a URL from `.env` only a key that did not come from the environment.
fn shared_llm_key(llm: &Endpoint, url: &Url, base: &Sourced<String>) -> Choice {
    let source = match (&llm.api_key, &llm.withheld_key) {
        (Some(k), _) => k.source.clone(),
        (None, Some(w)) => w.source.clone(),
        (None, None) => return Ok(None),
    };
    let llm_url = Url::parse(&llm.base_url.value).ok();
    let same = llm_url.as_ref().is_some_and(|l| l.origin() == url.origin());
    if !same {
        return Err(WithheldKey {
            source,
            reason: Withheld::OtherOrigin {
                llm_origin: llm_url.map_or_else(
                    || llm.base_url.value.clone(),
                    |l| l.origin().ascii_serialization(),
                ),
            },
        });
    }
    match (&llm.api_key, &llm.withheld_key) {
        // On the same origin the LLM's own reason holds here too.
        (None, Some(w)) => Err(w.clone()),
        (Some(k), _) if base.layer == Layer::DotEnv && k.layer == Layer::Env => Err(WithheldKey {
            source,
            reason: Withheld::DotEnvUrl {
                url_source: base.source.clone(),
            },
        }),
        (k, _) => Ok(k.clone()),
    }
}

/// Whether the URL's host is this machine: `localhost` or a loopback address. Nothing is
/// resolved: a name that happens to resolve to loopback is not trusted to keep doing so.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::load(env(pairs), Path::new("/nonexistent/.env")).unwrap()
    }

    fn url(s: &str) -> Sourced<String> {
        Sourced {
            value: s.into(),
            source: "--test-url".into(),
            layer: Layer::Flag,
        }
    }

    fn sent(e: &Endpoint) -> Option<&str> {
        e.key().map(ApiKey::expose)
    }

    #[test]
    fn speech_servers_have_keys_of_their_own() {
        let s = settings(&[
            ("VOXLAT_API_KEY", "sk-llm"),
            ("VOXLAT_ASR_API_KEY", "sk-asr"),
            ("VOXLAT_TTS_API_KEY", "sk-tts"),
        ]);
        let llm = s
            .endpoint_from(url("http://127.0.0.1:8080/v1"), None)
            .unwrap();
        assert_eq!(sent(&llm), Some("sk-llm"));
        let asr = s
            .service_endpoint(Service::Asr, url("http://127.0.0.2:9/v1"), None, Some(&llm))
            .unwrap();
        assert_eq!(sent(&asr), Some("sk-asr"));
        assert_eq!(
            asr.api_key.as_ref().unwrap().source,
            "env VOXLAT_ASR_API_KEY"
        );
        let tts = s
            .service_endpoint(
                Service::Tts,
                url("http://127.0.0.1:8080/v1"),
                None,
                Some(&llm),
            )
            .unwrap();
        assert_eq!(sent(&tts), Some("sk-tts"), "its own key beats the LLM's");
        // The ASR key is the ASR's alone: the LLM never gets it.
        let bare = settings(&[("VOXLAT_ASR_API_KEY", "sk-asr")]);
        let llm = bare
            .endpoint_from(url("http://127.0.0.1:8080/v1"), None)
            .unwrap();
        assert_eq!(sent(&llm), None);
    }

    #[test]
    fn the_llm_key_is_shared_only_with_the_llm_origin() {
        let s = settings(&[("OPENAI_API_KEY", "sk-llm")]);
        let llm = s
            .endpoint_from(url("https://api.example.com/v1"), None)
            .unwrap();
        let at = |u: &str| {
            s.service_endpoint(Service::Asr, url(u), None, Some(&llm))
                .unwrap()
        };
        let same = at("https://api.example.com:443/v1/");
        assert_eq!(sent(&same), Some("sk-llm"));
        for other in [
            "https://other.example.com/v1",
            "https://api.example.com:8443/v1",
            "http://api.example.com/v1",
        ] {
            let e = at(other);
            assert_eq!(sent(&e), None, "{other}");
            let w = e.withheld_key.unwrap();
            assert_eq!(w.source, "env OPENAI_API_KEY");
            assert_eq!(
                w.reason,
                Withheld::OtherOrigin {
                    llm_origin: "https://api.example.com".into()
                },
                "{other}"
            );
            assert!(w
                .reason
                .explain(Service::Asr)
                .contains("VOXLAT_ASR_API_KEY"));
        }
        // Conservative: localhost and 127.0.0.1 are different hosts.
        let llm = s
            .endpoint_from(url("http://localhost:8080/v1"), None)
            .unwrap();
        let e = s
            .service_endpoint(
                Service::Tts,
                url("http://127.0.0.1:8080/v1"),
                None,
                Some(&llm),
            )
            .unwrap();
        assert_eq!(sent(&e), None);
        // The embedded LLM (no endpoint to share) lends no key.
        let e = s
            .service_endpoint(Service::Asr, url("http://127.0.0.1:8080/v1"), None, None)
            .unwrap();
        assert_eq!((sent(&e), &e.withheld_key), (None, &None));
    }

    #[test]
    fn no_key_crosses_plain_http_to_another_machine_unless_allowed() {
        let s = settings(&[
            ("VOXLAT_API_KEY", "sk-llm"),
            ("VOXLAT_ASR_API_KEY", "sk-asr"),
        ]);
        let e = s
            .endpoint_from(url("http://10.0.0.5:8080/v1"), None)
            .unwrap();
        assert_eq!(sent(&e), None);
        let w = e.withheld_key.as_ref().unwrap();
        assert_eq!(
            (w.source.as_str(), &w.reason),
            ("env VOXLAT_API_KEY", &Withheld::PlainHttp)
        );
        assert!(w
            .describe(Service::Llm, "http://10.0.0.5:8080/v1")
            .contains("clear text"));
        // An explicit --api-key is held back too: the wire is what leaks it.
        let e = s
            .endpoint_from(url("http://gpu-box.lan/v1"), Some(("--api-key", "sk-flag")))
            .unwrap();
        assert_eq!(sent(&e), None);
        assert_eq!(e.withheld_key.unwrap().source, "--api-key");
        let asr = s
            .service_endpoint(Service::Asr, url("http://[fe80::1]:9/v1"), None, None)
            .unwrap();
        assert_eq!(asr.withheld_key.unwrap().reason, Withheld::PlainHttp);
        // https, or the explicit permission, sends it.
        let e = s.endpoint_from(url("https://10.0.0.5/v1"), None).unwrap();
        assert_eq!(sent(&e), Some("sk-llm"));
        let allowed = settings(&[("VOXLAT_API_KEY", "sk-llm")]).allow_insecure_key(true);
        let e = allowed
            .endpoint_from(url("http://10.0.0.5:8080/v1"), None)
            .unwrap();
        assert_eq!((sent(&e), &e.withheld_key), (Some("sk-llm"), &None));
    }

    #[test]
    fn plain_http_to_loopback_keeps_its_key() {
        let s = settings(&[("VOXLAT_API_KEY", "sk-llm")]);
        for u in [
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.2:1/v1",
            "http://localhost:8080/v1",
            "http://LOCALHOST/v1",
            "http://[::1]:8080/v1",
        ] {
            let e = s.endpoint_from(url(u), None).unwrap();
            assert_eq!(sent(&e), Some("sk-llm"), "{u}");
        }
        // A name is not resolved: one that merely starts like loopback is another machine.
        let e = s
            .endpoint_from(url("http://127.0.0.1.example.com/v1"), None)
            .unwrap();
        assert_eq!(sent(&e), None);
    }

    #[test]
    fn a_url_from_dotenv_gets_no_key_from_the_environment() {
        let d = tempfile::tempdir().unwrap();
        let dot = d.path().join(".env");
        std::fs::write(
            &dot,
            "VOXLAT_BASE_URL=http://127.0.0.1:9999/v1\nVOXLAT_ASR_URL=http://127.0.0.1:9998/v1\n",
        )
        .unwrap();
        let s = Settings::load(
            env(&[
                ("OPENAI_API_KEY", "sk-env"),
                ("VOXLAT_ASR_API_KEY", "sk-asr-env"),
            ]),
            &dot,
        )
        .unwrap();
        let e = s.endpoint(None, None).unwrap();
        assert_eq!(
            e.base_url.source,
            format!("{} VOXLAT_BASE_URL", dot.display())
        );
        assert_eq!(sent(&e), None, "the environment's key went to a .env URL");
        let w = e.withheld_key.as_ref().unwrap();
        assert_eq!(w.source, "env OPENAI_API_KEY");
        assert!(matches!(w.reason, Withheld::DotEnvUrl { .. }), "{w:?}");
        // Nor a key given on the command line: the .env chose the server, not the user.
        let e = s.endpoint(None, Some(("--api-key", "sk-flag"))).unwrap();
        assert_eq!(sent(&e), None, "the flag's key went to a .env URL");
        let w = e.withheld_key.as_ref().unwrap();
        assert!(matches!(w.reason, Withheld::DotEnvUrl { .. }), "{w:?}");
        assert!(w.source.contains("--api-key"), "{w:?}");
        assert!(w
            .reason
            .explain(Service::Llm)
            .contains("give the URL on the command line too"));
        // With the URL on the command line too, the flag's key goes with it.
        let e = s
            .endpoint_from(
                url("http://127.0.0.1:9999/v1"),
                Some(("--api-key", "sk-flag")),
            )
            .unwrap();
        assert_eq!(sent(&e), Some("sk-flag"));
        // A speech server's URL from .env: neither its own env key nor the LLM's env key.
        let asr_url = s.pick(None, &["VOXLAT_ASR_URL"]).unwrap();
        let llm = s
            .endpoint_from(url("http://127.0.0.1:9998/v1"), None)
            .unwrap();
        assert_eq!(sent(&llm), Some("sk-env"), "a flag URL takes the env key");
        let asr = s
            .service_endpoint(Service::Asr, asr_url.clone(), None, Some(&llm))
            .unwrap();
        assert_eq!(sent(&asr), None);
        assert_eq!(asr.withheld_key.unwrap().source, "env VOXLAT_ASR_API_KEY");
        let no_own = Settings::load(env(&[("OPENAI_API_KEY", "sk-env")]), &dot).unwrap();
        let asr = no_own
            .service_endpoint(Service::Asr, asr_url, None, Some(&llm))
            .unwrap();
        assert_eq!(sent(&asr), None);
        assert!(matches!(
            asr.withheld_key.unwrap().reason,
            Withheld::DotEnvUrl { .. }
        ));

        // Keys in the same .env go to its URLs, ahead of the environment's.
        std::fs::write(
            &dot,
            "VOXLAT_BASE_URL=http://127.0.0.1:9999/v1\nVOXLAT_API_KEY=sk-dot\nVOXLAT_ASR_URL=http://127.0.0.1:9999/v1\n",
        )
        .unwrap();
        let s = Settings::load(env(&[("VOXLAT_API_KEY", "sk-env")]), &dot).unwrap();
        let llm = s.endpoint(None, None).unwrap();
        assert_eq!(sent(&llm), Some("sk-dot"));
        let asr_url = s.pick(None, &["VOXLAT_ASR_URL"]).unwrap();
        let asr = s
            .service_endpoint(Service::Asr, asr_url, None, Some(&llm))
            .unwrap();
        assert_eq!(sent(&asr), Some("sk-dot"), "same .env, same origin");
        // A URL from the environment still reads keys from .env, as before.
        let s = Settings::load(env(&[("VOXLAT_BASE_URL", "http://127.0.0.1:1/v1")]), &dot).unwrap();
        assert_eq!(sent(&s.endpoint(None, None).unwrap()), Some("sk-dot"));
    }

    #[test]
    fn the_embedded_server_gets_no_key() {
        let e = Endpoint::embedded("http://127.0.0.1:8080/v1");
        assert_eq!((sent(&e), &e.withheld_key), (None, &None));
        assert_eq!(e.base_url.source, "embedded server");
    }
}
