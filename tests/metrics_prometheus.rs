//! `voxlat serve --metrics-addr` scraped by a real Prometheus server (Debian's `prometheus`
//! package; scripts/lib.sh installs it), with the real model (`voxlat models fetch
//! gemma-3-270m`): a few chat requests, then the series are read back through Prometheus's
//! HTTP API, so names, types, labels and the exposition format are what Prometheus accepts.

mod common;

use common::voxlat;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed (SIGTERM, then SIGKILL) and reaped when the test ends, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn prometheus_binary() -> String {
    let bin = std::env::var("PROMETHEUS_BIN").unwrap_or_else(|_| "prometheus".into());
    let ok = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "`{bin}` not found: install Prometheus (`apt-get install prometheus`; scripts/test.sh \
         does) or point PROMETHEUS_BIN at it"
    );
    bin
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 exchange; returns (status line, body).
fn http(addr: &str, method: &str, path: &str, body: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    // Prometheus answers with chunked encoding; its JSON holds no CRLF, so the chunk-size
    // lines are the only lines besides the JSON.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body.split("\r\n")
            .filter(|l| l.starts_with('{'))
            .collect::<String>()
    } else {
        body.to_string()
    };
    (status, body)
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant vector Prometheus returns for `query`, as (labels, value) pairs.
fn query(prom: &str, q: &str) -> Vec<(serde_json::Value, f64)> {
    let (status, body) = http(
        prom,
        "GET",
        &format!("/api/v1/query?query={}", url_encode(q)),
        "",
    );
    assert!(status.contains("200"), "{q}: {status} {body}");
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metric"].clone(),
                r["value"][1].as_str().unwrap().parse::<f64>().unwrap(),
            )
        })
        .collect()
}

/// Polls `q` until `ok` holds of its result (Prometheus scrapes every second).
fn eventually(
    prom: &str,
    q: &str,
    ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
) -> Vec<(serde_json::Value, f64)> {
    let t0 = Instant::now();
    loop {
        let r = query(prom, q);
        if ok(&r) {
            return r;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{q}: still {r:?} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn start_prometheus(dir: &Path, target: &str) -> (Reaped, String) {
    let bin = prometheus_binary();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: voxlat\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let child = Reaped(child);
    let t0 = Instant::now();
    while !TcpStream::connect(&addr)
        .is_ok_and(|_| http(&addr, "GET", "/-/ready", "").0.contains("200"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "Prometheus did not become ready:\n{}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (child, addr)
}

#[test]
fn prometheus_scrapes_the_servers_queue_prefill_decode_and_cache_series() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = voxlat()
        .args([
            "serve",
            "--port",
            "0",
            "--threads",
            "1",
            "--ctx",
            "512",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let server = Reaped(child);
    let mut lines = String::new();
    let (mut api, mut metrics) = (None, None);
    while api.is_none() || metrics.is_none() {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            panic!("voxlat serve ended early:\n{lines}{err}\n(if the model is missing: `voxlat models fetch gemma-3-270m`)");
        }
        let addr = |l: &str| {
            l.split("http://")
                .nth(1)?
                .split('/')
                .next()
                .map(str::to_string)
        };
        if line.contains("listening on") {
            api = addr(&line);
        } else if line.contains("metrics on") {
            metrics = addr(&line);
        }
        lines.push_str(&line);
    }
    let (api, metrics) = (api.unwrap(), metrics.unwrap());
    let (_prometheus, prom) = start_prometheus(dir.path(), &metrics);

    // The same conversation prefix three times: the second and third reuse the slot's KV cache.
    let body = r#"{"messages":[{"role":"system","content":"You are a helpful voice assistant. Answer in one short sentence."},{"role":"user","content":"What is the capital of France?"}],"max_tokens":6,"temperature":0}"#;
    for _ in 0..3 {
        let (status, reply) = http(&api, "POST", "/v1/chat/completions", body);
        assert!(status.contains("200"), "{status} {reply}");
    }

    eventually(&prom, "up{job=\"voxlat\"}", |r| {
        r.len() == 1 && r[0].1 == 1.0
    });
    let completed = eventually(
        &prom,
        "voxlat_server_requests_total{outcome=\"completed\"}",
        |r| r.first().is_some_and(|(_, v)| *v == 3.0),
    );
    assert_eq!(completed[0].0["job"], "voxlat");
    for q in [
        "voxlat_server_prefill_seconds_count",
        "voxlat_server_decode_seconds_count",
        "voxlat_server_queue_wait_seconds_count",
        "voxlat_server_time_to_first_token_seconds_count",
    ] {
        let r = query(&prom, q);
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        assert_eq!(r[0].1, 3.0, "{q}: {r:?}");
    }
    // The histograms carry their bucket bounds as `le` labels, 5 ms to 30 s and +Inf.
    let buckets = query(&prom, "voxlat_server_prefill_seconds_bucket");
    let les: Vec<&str> = buckets
        .iter()
        .map(|(m, _)| m["le"].as_str().unwrap())
        .collect();
    for le in ["0.005", "1.0", "30.0", "+Inf"] {
        assert!(les.contains(&le), "no le={le} in {les:?}");
    }
    assert!(
        buckets.iter().any(|(m, v)| m["le"] == "+Inf" && *v == 3.0),
        "{buckets:?}"
    );
    // Prefix reuse is visible: at least the repeats hit the cache, and their tokens count.
    let hits = query(&prom, "voxlat_server_prefix_cache_hits_total");
    assert!(hits[0].1 >= 2.0, "{hits:?}");
    assert!(query(&prom, "voxlat_server_cached_prompt_tokens_total")[0].1 > 0.0);
    assert!(query(&prom, "voxlat_server_generated_tokens_total")[0].1 >= 3.0);
    // Idle again: nothing queued, no slot busy; one slot in all.
    assert_eq!(query(&prom, "voxlat_server_queue_depth")[0].1, 0.0);
    assert_eq!(query(&prom, "voxlat_server_busy_slots")[0].1, 0.0);
    assert_eq!(query(&prom, "voxlat_server_slots")[0].1, 1.0);
    // Outcomes that did not happen are series at 0, not missing.
    assert_eq!(
        query(&prom, "voxlat_server_requests_total{outcome=\"rejected\"}")[0].1,
        0.0
    );
    // PromQL over the histogram works as a dashboard would use it.
    let p50 = query(
        &prom,
        "histogram_quantile(0.5, sum by (le) (voxlat_server_decode_seconds_bucket))",
    );
    assert!(p50[0].1 > 0.0 && p50[0].1 <= 30.0, "{p50:?}");
    drop(server);
}
