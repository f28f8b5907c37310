//! Measures the measurer: how far the client's TTFT stamp lies from the moment the scripted
//! server handed the first content event to its HTTP stack, on loopback, at concurrency 1
//! and 64; and the client's CPU time per request with 256 streams in flight.
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

/// Runs `total` requests with `concurrency` in flight; returns (request id → client TTFT
/// stamp in ns, CPU seconds of this thread).
fn drive(
    server: &ScriptedServer,
    concurrency: usize,
    total: usize,
    multi_thread: bool,
) -> (HashMap<String, u64>, f64) {
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
    rt.block_on(async {
        // Warm-up: open the pooled connections first.
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
                    let (_o, err) = c.stream_chat(&request(), &tl, |_| {}).await;
                    if err.is_none() {
                        if let Some(t) = tl.get(EventKind::LlmFirstToken) {
                            out.push((tl.id().to_string(), t.0));
                        }
                    }
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

fn report(label: &str, server: &ScriptedServer, stamps: &HashMap<String, u64>) {
    let errors_us: Vec<f64> = server
        .requests()
        .iter()
        .filter_map(|r| {
            let client = *stamps.get(r.request_id.as_deref()?)?;
            let sent = r.first_content_sent()?.0;
            Some((client as f64 - sent as f64) / 1e3)
        })
        .collect();
    let s = Summary::from_samples(&errors_us, 0).expect("samples");
    println!(
        "{label}: client TTFT stamp − server first-content send, µs: n={} mean={:.0} p50={:.0} p95={:.0} p99={:.0} max={:.0} min={:.0}",
        s.n, s.mean, s.p50, s.p95, s.p99, s.max, s.min
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
    let (stamps, _) = drive(&s1, 1, 300, true);
    report("c=1  ", &s1, &stamps);
    drop(s1);

    let s64 = Builder::fixed(script(8, 10, 2)).start_on_own_runtime(1);
    let (stamps, _) = drive(&s64, 64, 1280, true);
    report("c=64 ", &s64, &stamps);
    drop(s64);

    let tokens = 32;
    let s256 = Builder::fixed(script(tokens, 10, 5)).start_on_own_runtime(1);
    let total = 1024;
    let (stamps, cpu) = drive(&s256, 256, total, false);
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
