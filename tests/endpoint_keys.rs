//! Which API key reaches which server, on the wire: endpoints resolved through `Settings` as
//! the CLI resolves them, a real transcription request sent with the speech client, and a
//! recording server reading the `Authorization` header it got. The LLM is on 127.0.0.1; a
//! server "on another host" is on 127.0.0.2 (a second loopback address on Linux).

mod common;

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use voxlat_net::config::{Endpoint, Service, Settings, Withheld};
use voxlat_speech_api::{AsrClient, AsrClientOptions};

const LLM_KEY: &str = "sk-llm-key-0001";
const ASR_KEY: &str = "sk-asr-key-0002";

/// Each request's path and `Authorization` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A transcription server on `ip` that records each request's path and `Authorization`,
/// answering every request with `status` (a transcript when 200).
struct Recorder {
    base: String,
    seen: Seen,
}

impl Recorder {
    fn start(ip: &str, status: StatusCode) -> Recorder {
        let seen: Seen = Arc::default();
        let log = seen.clone();
        let router = Router::new().fallback(
            move |uri: axum::http::Uri, headers: HeaderMap, _body: axum::body::Bytes| {
                let log = log.clone();
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    log.lock().unwrap().push((uri.path().to_string(), auth));
                    let body = match status {
                        StatusCode::OK => {
                            serde_json::json!({"text": "How far is the moon from the earth?"})
                        }
                        _ => serde_json::json!({"error": {"message": "invalid api key"}}),
                    };
                    (status, axum::Json(body)).into_response()
                }
            },
        );
        let listener = std::net::TcpListener::bind(format!("{ip}:0"))
            .unwrap_or_else(|e| panic!("cannot bind {ip}: {e} (Linux routes all of 127/8 to lo)"));
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(l, router).await.unwrap();
            });
        });
        Recorder {
            base: format!("http://{addr}/v1"),
            seen,
        }
    }

    /// The `Authorization` of every transcription request so far.
    fn authorizations(&self) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p.ends_with("/audio/transcriptions"))
            .map(|(_, a)| a.clone())
            .collect()
    }
}

fn settings(env: &[(&str, &str)]) -> Settings {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Settings::load(env, Path::new("/nonexistent/.env")).unwrap()
}

/// The ASR endpoint as `voxlat replay --llm-url <llm> --asr-url <asr>` resolves it.
fn asr_endpoint(s: &Settings, llm_url: &str, asr_url: &str) -> (Endpoint, Endpoint) {
    let llm = s
        .endpoint_from(s.pick(Some(("--llm-url", llm_url)), &[]).unwrap(), None)
        .unwrap();
    let asr = s
        .service_endpoint(
            Service::Asr,
            s.pick(Some(("--asr-url", asr_url)), &["VOXLAT_ASR_URL"])
                .unwrap(),
            None,
            Some(&llm),
        )
        .unwrap();
    (llm, asr)
}

fn transcribe(e: Endpoint) -> Result<String, voxlat_net::NetError> {
    let audio: Vec<f32> = (0..8_000).map(|i| (i as f32 * 0.03).sin() * 0.5).collect();
    AsrClient::new(e, AsrClientOptions::default())
        .unwrap()
        .transcribe(&audio, "req-1")
        .map(|t| t.text)
}

#[test]
fn the_llm_key_does_not_reach_an_asr_server_on_another_host() {
    let asr = Recorder::start("127.0.0.2", StatusCode::OK);
    let s = settings(&[("OPENAI_API_KEY", LLM_KEY)]);
    let (llm, e) = asr_endpoint(&s, "http://127.0.0.1:8080/v1", &asr.base);
    assert_eq!(llm.key().map(|k| k.expose()), Some(LLM_KEY));
    assert!(
        matches!(
            e.withheld_key.as_ref().map(|w| &w.reason),
            Some(Withheld::OtherOrigin { .. })
        ),
        "{e:?}"
    );
    assert_eq!(
        transcribe(e).unwrap(),
        "How far is the moon from the earth?"
    );
    assert_eq!(
        asr.authorizations(),
        vec![None],
        "the LLM's key went to the ASR host"
    );
}

#[test]
fn an_asr_server_on_the_llm_origin_shares_the_llm_key() {
    let asr = Recorder::start("127.0.0.1", StatusCode::OK);
    let s = settings(&[("OPENAI_API_KEY", LLM_KEY)]);
    let (_, e) = asr_endpoint(&s, &asr.base, &asr.base);
    transcribe(e).unwrap();
    assert_eq!(
        asr.authorizations(),
        vec![Some(format!("Bearer {LLM_KEY}"))]
    );
}

#[test]
fn the_asr_key_goes_to_the_asr_server_wherever_it_is() {
    let asr = Recorder::start("127.0.0.2", StatusCode::OK);
    let s = settings(&[("OPENAI_API_KEY", LLM_KEY), ("VOXLAT_ASR_API_KEY", ASR_KEY)]);
    let (llm, e) = asr_endpoint(&s, "http://127.0.0.1:8080/v1", &asr.base);
    transcribe(e).unwrap();
    assert_eq!(
        asr.authorizations(),
        vec![Some(format!("Bearer {ASR_KEY}"))]
    );
    assert_eq!(
        llm.key().map(|k| k.expose()),
        Some(LLM_KEY),
        "not the ASR's"
    );
}

#[test]
fn a_401_from_an_asr_server_without_its_key_names_the_variable() {
    let asr = Recorder::start("127.0.0.2", StatusCode::UNAUTHORIZED);
    let s = settings(&[("OPENAI_API_KEY", LLM_KEY)]);
    let (_, e) = asr_endpoint(&s, "http://127.0.0.1:8080/v1", &asr.base);
    let err = transcribe(e).unwrap_err().to_string();
    assert!(err.contains("401"), "{err}");
    assert!(
        err.contains("withheld") && err.contains("VOXLAT_ASR_API_KEY"),
        "{err}"
    );
    assert!(!err.contains(LLM_KEY), "{err}");
}

/// `voxlat replay --llm-url <127.0.0.1> --asr-url <127.0.0.2>`, the LLM a scripted server.
#[tokio::test(flavor = "multi_thread")]
async fn replay_sends_the_llm_key_to_the_llm_and_not_to_the_asr_host() {
    let llm = voxlat_testkit::Builder::fixed(voxlat_testkit::Script::with_tokens(4))
        .start()
        .await;
    let asr = Recorder::start("127.0.0.2", StatusCode::OK);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let audio = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio");
    let scenario = dir.path().join("one.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"one\"\n[[turn]]\nid = \"moon\"\nwav = \"{}/synthetic-moon.wav\"\ntranscript = \"How far is the moon from the earth?\"\n",
            audio.display()
        ),
    )
    .unwrap();
    let mut cmd = common::voxlat();
    cmd.args(["replay", "--fast", "--warmup", "0", "--llm-url"])
        .arg(llm.base_url())
        .args(["--asr-url", &asr.base, "--output-dir"])
        .arg(&out)
        .arg(&scenario)
        .env("OPENAI_API_KEY", LLM_KEY)
        .current_dir(dir.path());
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert_eq!(asr.authorizations(), vec![None], "{all}");
    let sent = llm.requests();
    assert!(!sent.is_empty(), "{all}");
    assert!(
        sent.iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {LLM_KEY}"))),
        "{all}"
    );
}

/// A `.env` in the working directory points bench-llm somewhere: the environment's key does
/// not follow it there, and the user is told; a key in the same `.env` does.
#[tokio::test(flavor = "multi_thread")]
async fn a_base_url_from_dotenv_gets_no_key_from_the_environment() {
    let server = voxlat_testkit::Builder::fixed(voxlat_testkit::Script::with_tokens(2))
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let run = |dotenv: String| {
        std::fs::write(dir.path().join(".env"), dotenv).unwrap();
        let mut cmd = common::voxlat();
        cmd.args(["bench-llm", "--quiet", "--requests", "1", "--warmup", "0"])
            .args(["--model", "m", "-o"])
            .arg(dir.path().join("r.json"))
            .env("OPENAI_API_KEY", LLM_KEY)
            .current_dir(dir.path());
        cmd
    };
    let cmd = run(format!("VOXLAT_BASE_URL={}\n", server.base_url()));
    let o = tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(
        server.requests().iter().all(|r| r.authorization.is_none()),
        "the environment's key went to the .env URL: {err}"
    );
    let warning = err
        .lines()
        .find(|l| l.starts_with("warning:") && l.contains("env OPENAI_API_KEY"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(
        warning.contains(&server.base_url()) && warning.contains(".env"),
        "{warning}"
    );
    assert!(!err.contains(LLM_KEY), "{err}");

    let before = server.requests().len();
    let cmd = run(format!(
        "VOXLAT_BASE_URL={}\nVOXLAT_API_KEY=sk-from-dotenv\n",
        server.base_url()
    ));
    let o = tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let later = &server.requests()[before..];
    assert!(!later.is_empty());
    assert!(later
        .iter()
        .all(|r| r.authorization.as_deref() == Some("Bearer sk-from-dotenv")));
}
