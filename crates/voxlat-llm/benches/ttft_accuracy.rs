//! Measures the measurer: how far the client's TTFT stamp lies from the moment the scripted
//! server handed the first content event to its HTTP stack, and client TTFT against the
//! server's own TTFT (the request's arrival at the server's socket, or its handler's start →
//! first content written) for both client definitions (from the ready connection, and
//! connect-inclusive), on loopback: c=1, a first delta of `<`, single
//! waves at c=16 and c=64 on a warm pool and at c=64 cold, c=64 sustained; and the client's
//! CPU time per request with 256 streams in flight.
//!
//! Run: `cargo bench -p voxlat-llm --bench ttft_accuracy` (all cells), or
//! `… -- cpu` / `… -- wave cold` for some.
//!
//! The server runs on a runtime of its own (one worker thread). For the accuracy figures the
//! client runs on a multi-thread runtime, as `voxlat bench-llm` does, with one core fewer
//! than the machine has (see `client_workers`); for the CPU figure it
//! runs on a current-thread runtime on this thread, so this thread's CPU time is exactly the
//! client's cost.
//! Both stamp on the same process clock, so their difference is the client's error plus the
//! loopback and kernel delivery time, which it cannot tell apart (and which a user's TTFT
//! includes anyway). It is a benchmark, not a test: the figures are printed, not asserted.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "ttft_accuracy/floor.rs"]
mod floor;

use common::request;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use voxlat_core::stats::Summary;
use voxlat_core::{clock, EventKind, RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, LlmClient};
use voxlat_testkit::{Builder, Script, ScriptedServer};

/// This thread's CPU time so far, (user, kernel) seconds, and its voluntary context switches
/// (each time it slept waiting for the network). The kernel part includes the loopback
/// traffic's softirq work that happens to land on this thread.
fn thread_cpu_s() -> (f64, f64, i64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime), ru.ru_nvcsw)
}

/// The client's worker threads: one core fewer than the machine has, leaving one to the
/// server's thread. With every core busy in the client, the server waits for a CPU before
/// it reads a request, and its own "request read" stamp is late by that wait: the server's
/// queueing, which it cannot see and the client cannot remove, would be counted as client
/// error. `TTFT_CLIENT_WORKERS` overrides it.
fn client_workers() -> usize {
    std::env::var("TTFT_CLIENT_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get().saturating_sub(1))
                .max(1)
        })
}

/// What the client stamped for one request, on the process clock (ns).
struct Stamp {
    first_token: u64,
    sent: u64,
    /// When the request was written to a ready connection (see RequestRecord::ready_at).
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
) -> (HashMap<String, Stamp>, (f64, f64, i64)) {
    let rt = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(client_workers())
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
                        .written_at
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
    let cpu1 = thread_cpu_s();
    (stamps, (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1, cpu1.2 - cpu0.2))
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
/// server's own TTFT for both client definitions (from the ready connection, and
/// connect-inclusive from llm_sent). The server's TTFT is counted two ways: from its handler
/// (what a server's own log says) and from the request's arrival at its socket (the kernel's
/// stamp). The two differ by the scripted server's own queueing for its one thread, which a
/// client rightly counts (a user waits for it too) and cannot see; only the second difference
/// is the client's error.
fn report(label: &str, server: &ScriptedServer, stamps: &HashMap<String, Stamp>) {
    let mut stamp_err = Vec::new();
    let mut ttft_err = Vec::new();
    let mut ttft_connect_err = Vec::new();
    let mut arrival_err = Vec::new();
    let mut arrival_connect_err = Vec::new();
    for r in server.requests() {
        let (Some(id), Some(sent)) = (r.request_id.as_deref(), r.first_content_sent()) else {
            continue;
        };
        let Some(c) = stamps.get(id) else { continue };
        let ttft = c.first_token as f64 - c.ready as f64;
        let ttft_connect = c.first_token as f64 - c.sent as f64;
        let server_ttft = sent.0 as f64 - r.received.0 as f64;
        stamp_err.push((c.first_token as f64 - sent.0 as f64) / 1e3);
        ttft_err.push((ttft - server_ttft) / 1e3);
        ttft_connect_err.push((ttft_connect - server_ttft) / 1e3);
        if let Some(arrived) = r.arrived {
            let from_arrival = sent.0 as f64 - arrived.0 as f64;
            arrival_err.push((ttft - from_arrival) / 1e3);
            arrival_connect_err.push((ttft_connect - from_arrival) / 1e3);
        }
    }
    let opened = stamps.values().filter(|s| s.new_connection).count();
    println!(
        "{label}: {opened} of {} requests opened a connection\n  first-token stamp − server send, µs:        {}\n  server TTFT from the request's arrival at its socket:\n    TTFT − server TTFT, µs:                  {}\n    TTFT+connect − server TTFT, µs:          {}\n  server TTFT from its handler:\n    TTFT − server TTFT, µs:                  {}\n    TTFT+connect − server TTFT, µs:          {}",
        stamps.len(),
        summary_line(&stamp_err),
        summary_line(&arrival_err),
        summary_line(&arrival_connect_err),
        summary_line(&ttft_err),
        summary_line(&ttft_connect_err),
    );
}

/// The cells to run: `cargo bench -p voxlat-llm --bench ttft_accuracy -- cpu` runs only the
/// cells whose name holds one of the words given (`c=1`, `lt`, `wave`, `cold`, `sustained`,
/// `cpu`, `floor`); none runs them all.
fn selected(cell: &str) -> bool {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    words.is_empty() || words.iter().any(|w| cell.contains(w.as_str()))
}

fn main() {
    clock::init();
    let script = |tokens: usize, ttft_ms: u64, itl_ms: u64| Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        ..Script::with_tokens(tokens)
    };

    if selected("c=1") {
        let s1 = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
        let (stamps, _) = drive(&s1, 1, 300, true, false);
        report("c=1", &s1, &stamps);
    }

    // A first delta of '<' is held back by the think-splitter; its stamp must not move.
    if selected("lt") {
        let lt = Builder::fixed(Script {
            tokens: ["<", "b>", "ok", "</b>"].map(String::from).to_vec(),
            ..script(0, 10, 20)
        })
        .start_on_own_runtime(1);
        let (stamps, _) = drive(&lt, 1, 100, true, false);
        report("c=1, first delta '<' (lt)", &lt, &stamps);
    }

    // Single waves, as the reference measurement: N = c, on a pool opened to c first.
    for c in [16, 64] {
        if selected("wave") {
            let s = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
            let (stamps, _) = drive(&s, c, c, true, false);
            report(&format!("c={c}, N={c}, warm pool (wave)"), &s, &stamps);
        }
    }
    // Cold: the wave opens its own connections.
    if selected("cold") {
        let s = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
        let (stamps, _) = drive(&s, 64, 64, true, true);
        report(
            "c=64, N=64, cold: each request opens its connection",
            &s,
            &stamps,
        );
    }

    if selected("sustained") {
        let s64 = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
        let (stamps, _) = drive(&s64, 64, 1280, true, false);
        report("c=64, N=1280 (sustained)", &s64, &stamps);
    }

    let tokens = 32;
    let total = 1024;
    let cpu_line = |who: &str, (user, sys, sleeps): (f64, f64, i64)| {
        let cpu = user + sys;
        println!(
            "c=256: {who} CPU {:.3} ms per request (user {:.3} + kernel {:.3}; {:.1} µs per token; {:.1} sleeps per request), {} requests of {} tokens, {:.2} s CPU",
            cpu * 1e3 / total as f64,
            user * 1e3 / total as f64,
            sys * 1e3 / total as f64,
            cpu * 1e6 / (total * tokens) as f64,
            sleeps as f64 / total as f64,
            total,
            tokens,
            cpu
        );
    };
    if selected("cpu") {
        let s256 = Builder::fixed(script(tokens, 10, 5)).start_on_own_runtime(1);
        let (stamps, cpu) = drive(&s256, 256, total, false, false);
        report("c=256 (cpu)", &s256, &stamps);
        cpu_line("client", cpu);
    }
    // The same load read by the bare loop of `floor`: the kernel's share, which no client
    // that stamps every token escapes.
    if selected("floor") {
        let s256 = Builder::fixed(script(tokens, 10, 5)).start_on_own_runtime(1);
        let addr = s256.base_url();
        let addr = addr.trim_start_matches("http://").trim_end_matches("/v1");
        cpu_line("floor", floor::run(addr, 256, total, thread_cpu_s));
    }
}
