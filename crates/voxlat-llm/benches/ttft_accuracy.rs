//! Measures the measurer: how far the client's TTFT stamp lies from the moment the scripted
//! server handed the first content event to its HTTP stack, and client TTFT against the
//! server's own TTFT (request read → first content written) for both definitions (from the
//! ready connection, and connect-inclusive), on loopback: c=1, a first delta of `<`, single
//! waves at c=16 and c=64 on a warm pool and at c=64 cold, c=64 sustained; and the client's
//! CPU time per request with 256 streams in flight.
//!
//! Run: `cargo bench -p voxlat-llm --bench ttft_accuracy`
//!
//! The server runs on a runtime of its own (one worker thread). For the accuracy figures the
//! client runs on a multi-thread runtime, as `voxlat bench-llm` does; for the CPU figure it
//! runs on a current-thread runtime on this thread, so this thread's CPU time is exactly the
//! client's cost.
//! Both stamp on the same process clock, so their difference is the client's error plus the
//! loopback and kernel delivery time, which it cannot tell apart (and which a user's TTFT
//! includes anyway). It is a benchmark, not a test: the figures are printed, not asserted.

#[path = "../tests/common/mod.rs"]
mod common;

use common::request;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use voxlat_core::stats::Summary;
use voxlat_core::{clock, EventKind, RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, LlmClient};
use voxlat_testkit::{Builder, Script, ScriptedServer};

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// What the client stamped for one request, on the process clock (ns).
struct Stamp {
    first_token: u64,
    sent: u64,
    /// When the request could be written to a ready connection (see RequestRecord::ready_at).
    ready: u64,
    new_connection: bool,
}

/// Runs `total` requests with `concurrency` in flight, after a warm-up wave that opens
/// `concurrency` pooled connections unless `cold`; returns (request id → stamps, CPU seconds
/// of this thread).
fn drive(
    server: &ScriptedServer,
    concurrency: usize,
    total: usize,
    multi_thread: bool,
    cold: bool,
) -> (HashMap<String, Stamp>, f64) {
    let rt = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    let client = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions::default(),
    )
    .unwrap();
    if !cold {
        rt.block_on(async {
            // Warm-up: open the pooled connections first, as bench-llm does per cell.
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..concurrency {
                let c = client.clone();
                set.spawn(async move {
                    c.stream_chat(&request(), &Timeline::new(RequestId::new()), |_| {})
                        .await
                });
            }
            while set.join_next().await.is_some() {}
        });
    }
    let cpu0 = thread_cpu_s();
    let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(total));
    let stamps = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let c = client.clone();
            let remaining = remaining.clone();
            set.spawn(async move {
                let mut out = Vec::new();
                while remaining
                    .fetch_update(
                        std::sync::atomic::Ordering::AcqRel,
                        std::sync::atomic::Ordering::Acquire,
                        |n| n.checked_sub(1),
                    )
                    .is_ok()
                {
                    let tl = Timeline::new(RequestId::new());
                    let (o, err) = c.stream_chat(&request(), &tl, |_| {}).await;
                    let (Some(first), Some(sent), None) = (
                        tl.get(EventKind::LlmFirstToken),
                        tl.get(EventKind::LlmSent),
                        err,
                    ) else {
                        continue;
                    };
                    let headers = tl.get(EventKind::LlmHeaders).map_or(u64::MAX, |h| h.0);
                    let ready = o
                        .connection
                        .ready_at
                        .map(|r| r.0)
                        .filter(|&r| r >= sent.0 && r <= headers)
                        .unwrap_or(sent.0);
                    out.push((
                        tl.id().to_string(),
                        Stamp {
                            first_token: first.0,
                            sent: sent.0,
                            ready,
                            new_connection: o.connection.new_connection,
                        },
                    ));
                }
                out
            });
        }
        let mut all = HashMap::new();
        while let Some(r) = set.join_next().await {
            all.extend(r.unwrap());
        }
        all
    });
    (stamps, thread_cpu_s() - cpu0)
}

fn summary_line(v: &[f64]) -> String {
    match Summary::from_samples(v, 0) {
        Some(s) => format!(
            "n={} p50={:.0} p95={:.0} p99={:.0} max={:.0}",
            s.n, s.p50, s.p95, s.p99, s.max
        ),
        None => "no samples".into(),
    }
}

/// Prints, in µs: the first-token stamp against the server's send, and client TTFT minus the
/// server's own TTFT (request read → first content written) for both definitions: from the
/// ready connection, and connect-inclusive from llm_sent.
fn report(label: &str, server: &ScriptedServer, stamps: &HashMap<String, Stamp>) {
    let mut stamp_err = Vec::new();
    let mut ttft_err = Vec::new();
    let mut ttft_connect_err = Vec::new();
    for r in server.requests() {
        let (Some(id), Some(sent)) = (r.request_id.as_deref(), r.first_content_sent()) else {
            continue;
        };
        let Some(c) = stamps.get(id) else { continue };
        let server_ttft = sent.0 as f64 - r.received.0 as f64;
        stamp_err.push((c.first_token as f64 - sent.0 as f64) / 1e3);
        ttft_err.push((c.first_token as f64 - c.ready as f64 - server_ttft) / 1e3);
        ttft_connect_err.push((c.first_token as f64 - c.sent as f64 - server_ttft) / 1e3);
    }
    let opened = stamps.values().filter(|s| s.new_connection).count();
    println!(
        "{label}: {opened} of {} requests opened a connection\n  first-token stamp − server send, µs: {}\n  TTFT − server TTFT, µs:           {}\n  TTFT+connect − server TTFT, µs:   {}",
        stamps.len(),
        summary_line(&stamp_err),
        summary_line(&ttft_err),
        summary_line(&ttft_connect_err),
    );
}

fn main() {
    clock::init();
    let script = |tokens: usize, ttft_ms: u64, itl_ms: u64| Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        ..Script::with_tokens(tokens)
    };

    let s1 = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
    let (stamps, _) = drive(&s1, 1, 300, true, false);
    report("c=1", &s1, &stamps);
    drop(s1);

    // A first delta of '<' is held back by the think-splitter; its stamp must not move.
    let lt = Builder::fixed(Script {
        tokens: ["<", "b>", "ok", "</b>"].map(String::from).to_vec(),
        ..script(0, 10, 20)
    })
    .start_on_own_runtime(1);
    let (stamps, _) = drive(&lt, 1, 100, true, false);
    report("c=1, first delta '<'", &lt, &stamps);
    drop(lt);

    // Single waves, as the reference measurement: N = c, on a pool opened to c first.
    for c in [16, 64] {
        let s = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
        let (stamps, _) = drive(&s, c, c, true, false);
        report(&format!("c={c}, N={c}, warm pool"), &s, &stamps);
    }
    // Cold: the wave opens its own connections.
    let s = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
    let (stamps, _) = drive(&s, 64, 64, true, true);
    report(
        "c=64, N=64, cold (each request opens its connection)",
        &s,
        &stamps,
    );
    drop(s);

    let s64 = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
    let (stamps, _) = drive(&s64, 64, 1280, true, false);
    report("c=64, N=1280", &s64, &stamps);
    drop(s64);

    let tokens = 32;
    let s256 = Builder::fixed(script(tokens, 10, 5)).start_on_own_runtime(1);
    let total = 1024;
    let (stamps, cpu) = drive(&s256, 256, total, false, false);
    report("c=256", &s256, &stamps);
    println!(
        "c=256: client CPU {:.3} ms per request ({:.1} µs per token), {} requests of {} tokens, {:.2} s CPU",
        cpu * 1e3 / total as f64,
        cpu * 1e6 / (total * tokens) as f64,
        total,
        tokens,
        cpu
    );
}
