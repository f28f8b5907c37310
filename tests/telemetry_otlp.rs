//! `voxlat replay` exporting its turn as OpenTelemetry spans over OTLP/HTTP to a receiver in
//! this test, which decodes the protobuf the way a collector would. One bundled utterance
//! goes through the real Whisper and Piper; the LLM is the scripted test server, which also
//! records the `traceparent` header the client sent, so the test can check that the LLM call
//! and the exported trace are one trace.

mod common;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use common::voxlat;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use voxlat_testkit::{Builder, Script};

type Received = Arc<Mutex<Vec<ExportTraceServiceRequest>>>;

async fn traces(State(got): State<Received>, body: Bytes) -> impl IntoResponse {
    match ExportTraceServiceRequest::decode(body) {
        Ok(req) => {
            got.lock().unwrap().push(req);
            let resp = ExportTraceServiceResponse::default().encode_to_vec();
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/x-protobuf")],
                resp,
            )
                .into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

/// An OTLP/HTTP receiver on its own runtime: POST /v1/traces, protobuf.
fn receiver(rt: &tokio::runtime::Runtime) -> (String, Received) {
    let got: Received = Default::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(traces))
        .with_state(got.clone());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), got)
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn str_attr(attrs: &[KeyValue], key: &str) -> String {
    match attr(attrs, key) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

fn f64_attr(attrs: &[KeyValue], key: &str) -> f64 {
    match attr(attrs, key) {
        Some(AnyValue::DoubleValue(v)) => *v,
        other => panic!("{key}: {other:?}"),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn replay_exports_one_trace_per_turn_with_stage_spans_and_timeline_attributes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (endpoint, got) = receiver(&rt);
    let llm = Builder::fixed(Script {
        tokens: ["The moon", " is far", " away."].map(String::from).to_vec(),
        ..Script::default()
    })
    .start_on_own_runtime(1);

    let dir = tempfile::tempdir().unwrap();
    let audio = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio");
    let scenario = dir.path().join("one.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"one\"\n[[turn]]\nid = \"moon\"\nwav = \"{}/synthetic-moon.wav\"\n\
             transcript = \"How far is the moon from the earth?\"\nspeech_end_ms = 1670\n",
            audio.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("results");
    let o = voxlat()
        .args([
            "replay", "--fast", "--repeat", "1", "--warmup", "0", "--model", "m",
        ])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .arg("--llm-url")
        .arg(llm.base_url())
        .arg("--output-dir")
        .arg(&out)
        .arg(&scenario)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "voxlat-otlp-test")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_SDK_DISABLED")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert!(all.contains("metrics on http://127.0.0.1:"), "{all}");

    // The turn as the results file has it: request ID and segments in ns.
    let json = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("results file");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    let turn = &r["turns"][0];
    assert_eq!(turn["outcome"], "ok", "{turn}");
    let request_id = turn["request_id"].as_str().unwrap().to_string();
    // In chain order: endpointing, asr, llm_ttft, …, playout.
    let segments: Vec<(String, i64)> = turn["breakdown"]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(segments.len(), 9, "{segments:?}");

    // The process flushed its spans before exiting: everything has arrived.
    let got = got.lock().unwrap();
    let resource_spans: Vec<_> = got.iter().flat_map(|r| &r.resource_spans).collect();
    assert!(!resource_spans.is_empty(), "no spans exported:\n{all}");
    for rs in &resource_spans {
        let res = rs.resource.as_ref().unwrap();
        assert_eq!(
            str_attr(&res.attributes, "service.name"),
            "voxlat-otlp-test"
        );
    }
    let spans: Vec<&Span> = resource_spans
        .iter()
        .flat_map(|rs| &rs.scope_spans)
        .flat_map(|ss| &ss.spans)
        .collect();

    // One root: the turn, carrying the request ID, outcome and every segment in ms.
    let roots: Vec<&&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root.name, "voxlat.turn");
    assert_eq!(str_attr(&root.attributes, "voxlat.request_id"), request_id);
    assert_eq!(str_attr(&root.attributes, "voxlat.outcome"), "ok");
    for (name, ns) in &segments {
        assert_eq!(
            f64_attr(&root.attributes, &format!("voxlat.segment.{name}_ms")),
            *ns as f64 / 1e6,
            "{name}"
        );
    }
    let total: i64 = segments.iter().map(|(_, ns)| ns).sum();
    assert_eq!(
        f64_attr(&root.attributes, "voxlat.voice_to_voice_ms"),
        total as f64 / 1e6
    );

    // Every other span is a child of the turn, in the same trace: one per segment, whose
    // start and end are the timeline's own stamps (durations exact to the nanosecond), and
    // the LLM request.
    let children: BTreeMap<&str, &&Span> = spans
        .iter()
        .filter(|s| !s.parent_span_id.is_empty())
        .map(|s| (s.name.as_str(), s))
        .collect();
    assert_eq!(
        children.len(),
        spans.len() - 1,
        "duplicate span names: {spans:#?}"
    );
    for s in children.values() {
        assert_eq!(s.trace_id, root.trace_id, "{}", s.name);
        assert_eq!(s.parent_span_id, root.span_id, "{}", s.name);
        assert_eq!(str_attr(&s.attributes, "voxlat.request_id"), request_id);
        assert!(
            s.start_time_unix_nano >= root.start_time_unix_nano,
            "{}",
            s.name
        );
        assert!(
            s.end_time_unix_nano <= root.end_time_unix_nano,
            "{}",
            s.name
        );
    }
    for (name, ns) in &segments {
        let s = children
            .get(name.as_str())
            .unwrap_or_else(|| panic!("no {name} span in {:?}", children.keys()));
        assert_eq!(
            (s.end_time_unix_nano - s.start_time_unix_nano) as i64,
            *ns,
            "{name}"
        );
        assert_eq!(
            f64_attr(&s.attributes, "voxlat.duration_ms"),
            *ns as f64 / 1e6
        );
        assert_eq!(str_attr(&s.attributes, "voxlat.segment"), *name);
    }
    // The segments follow each other without gaps: each starts where the previous ended.
    let chain: Vec<&&Span> = segments.iter().map(|(n, _)| children[n.as_str()]).collect();
    for w in chain.windows(2) {
        assert_eq!(
            w[0].end_time_unix_nano, w[1].start_time_unix_nano,
            "{} → {}",
            w[0].name, w[1].name
        );
    }
    let llm_span = children.get("llm_request").expect("llm_request span");
    assert!(f64_attr(&llm_span.attributes, "voxlat.llm.first_token_ms") >= 0.0);
    assert_eq!(children.len(), segments.len() + 1, "{:?}", children.keys());

    // The LLM server was told this very trace, with the llm_request span as parent.
    let served = llm.requests();
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].request_id.as_deref(), Some(request_id.as_str()));
    assert_eq!(
        served[0].traceparent.as_deref(),
        Some(format!("00-{}-{}-01", hex(&root.trace_id), hex(&llm_span.span_id)).as_str())
    );
}
