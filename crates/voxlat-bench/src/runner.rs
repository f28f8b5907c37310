//! Runs the cells: warm-up per model, then each load level with the models interleaved in
//! rounds. Requests run as tasks in a `JoinSet`, so dropping the run (Ctrl-C) aborts every
//! request in flight; completed requests have already been sent to the caller.

use super::config::{BenchConfig, Load, Probe, SweepParam};
use super::prompt::{cache_probe_text, PromptSource};
use super::record::{CacheStep, RequestRecord, Variant};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use voxlat_core::{Nanos, RequestId, Timeline};
use voxlat_llm::client::{ChatRequest, LlmClient, Message};
use voxlat_llm::error::{ErrorClass, LlmError};
use voxlat_llm::ClientOptions;

pub enum RunEvent {
    /// A block of requests is starting.
    Block {
        cell: String,
        warmup: bool,
        requests: Option<u32>,
    },
    Record(Box<RequestRecord>),
}

/// One contiguous stretch of requests for one model under one load.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub model: String,
    pub load: Load,
    pub cell: String,
    pub warmup: bool,
    pub count: Option<u32>,
    pub duration: Option<Duration>,
    pub variant: Option<Variant>,
    /// A warm-up that only opens the pool's connections for the next load: short answers.
    pub preopen: bool,
}

pub fn cell_name(model: &str, load: &Load) -> String {
    format!("{model} {}", load.label())
}

fn variant_cell(model: &str, load: &Load, v: Option<Variant>) -> String {
    match v {
        Some(v) => format!("{} {}", cell_name(model, load), v.label()),
        None => cell_name(model, load),
    }
}

/// Tokens the chat template and the fixed instruction add around a synthetic prompt; kept
/// free when capping prompt sizes at the context.
pub const PROMPT_OVERHEAD_TOKENS: u32 = 64;

/// Prompt size of the prefix-cache probe when `--prompt-tokens` does not set one: long enough
/// that a full prefill stands clear of network noise on most servers.
pub const DEFAULT_CACHE_PROBE_TOKENS: u32 = 2000;

/// The largest synthetic prompt that fits the model's context with room for the reply.
pub fn prompt_cap(cfg: &BenchConfig) -> Option<u32> {
    cfg.context_tokens.map(|ctx| {
        ctx.saturating_sub(cfg.max_tokens.unwrap_or(0) + PROMPT_OVERHEAD_TOKENS)
            .max(1)
    })
}

/// The sweep's variants that will run, and the points dropped for exceeding the context.
pub fn sweep_variants(cfg: &BenchConfig) -> (Vec<Option<Variant>>, Vec<u32>) {
    let Some(sw) = &cfg.sweep else {
        return (vec![None], Vec::new());
    };
    let cap = match sw.param {
        SweepParam::PromptTokens => prompt_cap(cfg),
        SweepParam::MaxTokens => None,
    };
    let (kept, skipped): (Vec<u32>, Vec<u32>) =
        sw.values.iter().partition(|&&v| cap.is_none_or(|c| v <= c));
    let kept = kept
        .into_iter()
        .map(|value| {
            Some(match sw.param {
                SweepParam::PromptTokens => Variant::PromptTokens { value },
                SweepParam::MaxTokens => Variant::MaxTokens { value },
            })
        })
        .collect();
    (kept, skipped)
}

/// Prompt size of the prefix-cache probe.
pub fn cache_probe_tokens(cfg: &BenchConfig) -> u32 {
    let want = cfg.prompt.tokens.unwrap_or(DEFAULT_CACHE_PROBE_TOKENS);
    prompt_cap(cfg).map_or(want, |c| want.min(c))
}

fn probe_variants(cfg: &BenchConfig) -> Vec<Variant> {
    let mut v = Vec::new();
    for p in &cfg.probes {
        match p {
            Probe::PrefixCache => {
                v.extend(CacheStep::ROUND.map(|step| Variant::Cache { step }));
            }
            Probe::Connections => {
                for http2 in [false, true] {
                    for cold in [true, false] {
                        v.push(Variant::Connection { http2, cold });
                    }
                }
            }
        }
    }
    v
}

/// The cells of a run, in order: (cell, model, load label).
pub fn cells(cfg: &BenchConfig, models: &[String]) -> Vec<(String, String, String)> {
    let (variants, _) = sweep_variants(cfg);
    let mut out: Vec<(String, String, String)> = cfg
        .loads()
        .iter()
        .flat_map(|l| {
            let variants = &variants;
            variants.iter().flat_map(move |v| {
                models
                    .iter()
                    .map(move |m| (variant_cell(m, l, *v), m.clone(), l.label()))
            })
        })
        .collect();
    let seq = Load::Concurrency(1);
    for v in probe_variants(cfg) {
        for m in models {
            out.push((variant_cell(m, &seq, Some(v)), m.clone(), seq.label()));
        }
    }
    out
}

/// How long the arrivals of an open-loop cell's warm-up last, about.
const RATE_WARMUP: Duration = Duration::from_secs(2);

/// Requests in an open-loop cell's warm-up: about [`RATE_WARMUP`] of its arrivals, at least 4
/// (a slow rate still opens a connection or two) and at most 256.
fn rate_warmup_count(rate: f64) -> u32 {
    (rate * RATE_WARMUP.as_secs_f64()).ceil().clamp(4.0, 256.0) as u32
}

/// Every block, in the order they run.
pub fn plan(cfg: &BenchConfig, models: &[String]) -> Vec<Block> {
    let mut blocks = Vec::new();
    for m in models {
        if cfg.warmup > 0 {
            blocks.push(Block {
                model: m.clone(),
                load: Load::Concurrency(1),
                cell: format!("{m} warm-up"),
                warmup: true,
                count: Some(cfg.warmup),
                duration: None,
                variant: None,
                preopen: false,
            });
        }
    }
    let rounds = if models.len() > 1 {
        cfg.rounds.max(1)
    } else {
        1
    };
    let (variants, _) = sweep_variants(cfg);
    for load in cfg.loads() {
        // The pool holds one connection after a c=1 warm-up, so at c=64 63 measured requests
        // would connect inside their measurement, and 64 connects at once queue in the
        // client. Opening the pool to the cell's concurrency first means every measured
        // request rides a ready connection. Connections are per host, so one model's
        // requests open them for all. --fresh-connections asks for cold requests instead.
        if let (Load::Concurrency(c), Some(m)) = (load, models.first()) {
            if c > 1 && cfg.warmup > 0 && !cfg.fresh_connections {
                blocks.push(Block {
                    model: m.clone(),
                    load,
                    cell: format!("{m} {} warm-up", load.label()),
                    warmup: true,
                    count: Some(c),
                    duration: None,
                    variant: None,
                    preopen: true,
                });
            }
        }
        // An open-loop cell holds as many requests in flight as its rate and their length
        // make, which no count known beforehand says: the same arrivals at the same rate,
        // whole requests, for about RATE_WARMUP, open what the cell will need.
        if let (Load::Rate(rate), Some(m)) = (load, models.first()) {
            if cfg.warmup > 0 && !cfg.fresh_connections {
                blocks.push(Block {
                    model: m.clone(),
                    load,
                    cell: format!("{m} {} warm-up", load.label()),
                    warmup: true,
                    count: Some(rate_warmup_count(rate)),
                    duration: None,
                    variant: None,
                    preopen: false,
                });
            }
        }
        for &variant in &variants {
            for r in 0..rounds {
                for i in 0..models.len() {
                    let model = &models[(i + r as usize) % models.len()];
                    let (count, duration) = match cfg.duration_s {
                        Some(d) => (None, Some(Duration::from_secs_f64(d / f64::from(rounds)))),
                        None => {
                            let base = cfg.requests / rounds;
                            let extra = u32::from(r < cfg.requests % rounds);
                            (Some(base + extra), None)
                        }
                    };
                    if count == Some(0) {
                        continue;
                    }
                    blocks.push(Block {
                        model: model.clone(),
                        load,
                        cell: variant_cell(model, &load, variant),
                        warmup: false,
                        count,
                        duration,
                        variant,
                        preopen: false,
                    });
                }
            }
        }
    }
    blocks
}

struct Ctx {
    client: LlmClient,
    cfg: BenchConfig,
    prompt: PromptSource,
    tx: mpsc::UnboundedSender<RunEvent>,
    seq: AtomicU64,
}

/// Errors that make every further request pointless: stop at the first warm-up request
/// rather than repeating the same message hundreds of times.
fn is_configuration_error(class: ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::Unauthorized
            | ErrorClass::NotFound
            | ErrorClass::ConnectionRefused
            | ErrorClass::Dns
            | ErrorClass::Tls
            | ErrorClass::Proxy
            | ErrorClass::NotSse
    )
}

pub async fn run(
    client: LlmClient,
    cfg: BenchConfig,
    prompt: PromptSource,
    models: Vec<String>,
    tx: mpsc::UnboundedSender<RunEvent>,
) -> Result<(), LlmError> {
    let blocks = plan(&cfg, &models);
    let ctx = Arc::new(Ctx {
        client,
        cfg,
        prompt,
        tx,
        seq: AtomicU64::new(0),
    });
    for b in blocks {
        let _ = ctx.tx.send(RunEvent::Block {
            cell: b.cell.clone(),
            warmup: b.warmup,
            requests: b.count,
        });
        run_block(&ctx, &b).await?;
    }
    for probe in ctx.cfg.probes.clone() {
        for m in &models {
            match probe {
                Probe::PrefixCache => cache_probe(&ctx, m).await,
                Probe::Connections => connection_probe(&ctx, m).await?,
            }
        }
    }
    Ok(())
}

/// Requests the probes send per step: the cell's request count, as for any cell.
fn probe_rounds(cfg: &BenchConfig) -> u32 {
    cfg.requests.max(1)
}

/// The run's prompt seed; the command resolves it before the run (0 only in tests that
/// build a config by hand).
fn prompt_seed(cfg: &BenchConfig) -> u64 {
    cfg.prompt_seed.or(cfg.seed).unwrap_or(0)
}

fn next_seq(ctx: &Ctx) -> u64 {
    ctx.seq.fetch_add(1, Ordering::Relaxed)
}

fn probe_block(model: &str, variant: Variant, warmup: bool) -> Block {
    let load = Load::Concurrency(1);
    Block {
        model: model.into(),
        load,
        cell: variant_cell(model, &load, Some(variant)),
        warmup,
        count: Some(1),
        duration: None,
        variant: Some(variant),
        preopen: false,
    }
}

/// Sequential rounds of cold → repeat → change at the end → change at the start, each round
/// on a new prompt, so every step finds in the server's cache exactly the previous step.
async fn cache_probe(ctx: &Arc<Ctx>, model: &str) {
    let tokens = cache_probe_tokens(&ctx.cfg);
    let _ = ctx.tx.send(RunEvent::Block {
        cell: format!("{model} prefix-cache probe ({tokens} tokens)"),
        warmup: false,
        requests: Some(probe_rounds(&ctx.cfg) * 4),
    });
    for round in 0..u64::from(probe_rounds(&ctx.cfg)) {
        for step in CacheStep::ROUND {
            let mut messages = Vec::new();
            if let Some(s) = &ctx.cfg.prompt.system {
                messages.push(Message::new("system", s.clone()));
            }
            let text = cache_probe_text(tokens, prompt_seed(&ctx.cfg), round, step);
            messages.push(Message::new("user", text));
            let b = probe_block(model, Variant::Cache { step }, false);
            send_one(
                ctx,
                &ctx.client,
                &b,
                next_seq(ctx),
                messages,
                ctx.cfg.max_tokens,
                None,
            )
            .await;
        }
    }
}

/// For HTTP/1.1 then HTTP/2: a cold request on a client of its own (new connection: DNS,
/// connect, TLS), then a warm one on a pooled client that has already connected, alternating.
async fn connection_probe(ctx: &Arc<Ctx>, model: &str) -> Result<(), LlmError> {
    let base = ctx.client.options().clone();
    for http2 in [false, true] {
        let opts = |fresh: bool| ClientOptions {
            fresh_connections: fresh,
            http2,
            ..base.clone()
        };
        let pooled = LlmClient::new(ctx.client.endpoint().clone(), opts(false))?;
        let _ = ctx.tx.send(RunEvent::Block {
            cell: format!(
                "{model} connection probe ({})",
                if http2 { "HTTP/2" } else { "HTTP/1.1" }
            ),
            warmup: false,
            requests: Some(probe_rounds(&ctx.cfg) * 2),
        });
        // Opens the pooled connection; excluded like any warm-up.
        let warm = Variant::Connection { http2, cold: false };
        let cold = Variant::Connection { http2, cold: true };
        let messages = ctx.prompt.messages(0, ctx.cfg.prompt.system.as_deref());
        send_one(
            ctx,
            &pooled,
            &probe_block(model, warm, true),
            next_seq(ctx),
            messages.clone(),
            ctx.cfg.max_tokens,
            None,
        )
        .await;
        for _ in 0..probe_rounds(&ctx.cfg) {
            let fresh = LlmClient::new(ctx.client.endpoint().clone(), opts(true))?;
            let err = send_one(
                ctx,
                &fresh,
                &probe_block(model, cold, false),
                next_seq(ctx),
                messages.clone(),
                ctx.cfg.max_tokens,
                None,
            )
            .await;
            // A server that does not speak this protocol fails every request the same way:
            // one recorded error says so.
            if err.is_some_and(|e| is_configuration_error(e.class()) || http2) {
                break;
            }
            send_one(
                ctx,
                &pooled,
                &probe_block(model, warm, false),
                next_seq(ctx),
                messages.clone(),
                ctx.cfg.max_tokens,
                None,
            )
            .await;
        }
    }
    Ok(())
}

async fn run_block(ctx: &Arc<Ctx>, b: &Block) -> Result<(), LlmError> {
    let deadline = b.duration.map(|d| Instant::now() + d);
    let remaining = Arc::new(AtomicU64::new(b.count.map_or(u64::MAX, u64::from)));
    let take = |remaining: &AtomicU64| {
        remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    };
    let mut set: JoinSet<Option<LlmError>> = JoinSet::new();
    match b.load {
        Load::Concurrency(c) => {
            for _ in 0..c {
                let ctx = ctx.clone();
                let b = b.clone();
                let remaining = remaining.clone();
                set.spawn(async move {
                    while deadline.is_none_or(|d| Instant::now() < d) && take(&remaining) {
                        if let Some(e) = one_request(&ctx, &b, None).await {
                            if b.warmup && is_configuration_error(e.class()) {
                                return Some(e);
                            }
                        }
                    }
                    None
                });
            }
        }
        Load::Rate(rate) => {
            let mut due = Instant::now();
            loop {
                // Exponential gaps make a Poisson arrival process.
                let gap = -(1.0 - fastrand::f64()).ln() / rate;
                due += Duration::from_secs_f64(gap);
                if deadline.is_some_and(|d| due >= d) || !take(&remaining) {
                    break;
                }
                tokio::time::sleep_until(due).await;
                let scheduled = Nanos::from_instant(due.into_std());
                let ctx = ctx.clone();
                let b = b.clone();
                set.spawn(async move { one_request(&ctx, &b, Some(scheduled)).await });
                while set.try_join_next().is_some() {}
            }
        }
    }
    while let Some(res) = set.join_next().await {
        if let Ok(Some(e)) = res {
            if b.warmup && is_configuration_error(e.class()) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Runs one request of a block, with what its variant changes. Returns the error, if any.
async fn one_request(ctx: &Ctx, b: &Block, scheduled: Option<Nanos>) -> Option<LlmError> {
    let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
    let system = ctx.cfg.prompt.system.as_deref();
    let (messages, max_tokens) = match b.variant {
        Some(Variant::PromptTokens { value }) => (
            PromptSource::Synthetic {
                tokens: value,
                seed: prompt_seed(&ctx.cfg),
            }
            .messages(seq, system),
            ctx.cfg.max_tokens,
        ),
        Some(Variant::MaxTokens { value }) => (ctx.prompt.messages(seq, system), Some(value)),
        _ if b.preopen => (ctx.prompt.messages(seq, system), Some(1)),
        _ => (ctx.prompt.messages(seq, system), ctx.cfg.max_tokens),
    };
    send_one(ctx, &ctx.client, b, seq, messages, max_tokens, scheduled).await
}

/// Sends one request and its record. A max_tokens sweep closes each stream at the first
/// answer token: only TTFT is compared, and a server stops generating when its client
/// leaves, so max_tokens=4000 costs no decode time.
async fn send_one(
    ctx: &Ctx,
    client: &LlmClient,
    b: &Block,
    seq: u64,
    messages: Vec<Message>,
    max_tokens: Option<u32>,
    scheduled: Option<Nanos>,
) -> Option<LlmError> {
    let cfg = &ctx.cfg;
    let cut = matches!(b.variant, Some(Variant::MaxTokens { .. }));
    let req = ChatRequest {
        model: b.model.clone(),
        messages,
        max_tokens,
        temperature: cfg.temperature,
        top_p: cfg.top_p,
        stop: cfg.stop.clone(),
        seed: cfg.seed,
        include_usage: cfg.include_usage,
        extra: cfg.extra.clone(),
    };
    let tl = Timeline::new(RequestId::new());
    let (first_answer_tx, first_answer) = tokio::sync::oneshot::channel::<()>();
    let mut first_answer_tx = Some(first_answer_tx);
    let stream = client.stream_chat(&req, &tl, |d| {
        if cut && !d.reasoning {
            if let Some(tx) = first_answer_tx.take() {
                let _ = tx.send(());
            }
        }
    });
    let (outcome, err, was_cut) = if cut {
        tokio::select! {
            (o, e) = stream => (o, e, false),
            Ok(()) = first_answer => (voxlat_llm::record::StreamOutcome::default(), None, true),
        }
    } else {
        let (o, e) = stream.await;
        (o, e, false)
    };
    let snap = tl.snapshot();
    let record = RequestRecord {
        request_id: snap.request_id,
        cell: b.cell.clone(),
        model: b.model.clone(),
        warmup: b.warmup,
        seq,
        scheduled,
        error_class: err.as_ref().map(LlmError::class),
        error: err.as_ref().map(ToString::to_string),
        events: snap.events,
        outcome,
        variant: b.variant,
        cut_at_first_token: was_cut,
    };
    let _ = ctx.tx.send(RunEvent::Record(Box::new(record)));
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_cell_is_warmed_up_at_its_own_rate() {
        let cfg = BenchConfig {
            rate: vec![0.5, 20.0, 1000.0],
            requests: 10,
            ..BenchConfig::default()
        };
        let p = plan(&cfg, &["m".to_string()]);
        for (rate, count) in [(0.5, 4), (20.0, 40), (1000.0, 256)] {
            let cell = p
                .iter()
                .position(|b| !b.warmup && b.load == Load::Rate(rate))
                .expect("the cell");
            let w = &p[cell - 1];
            assert!(w.warmup && !w.preopen, "{rate}: {:?}", w.cell);
            assert_eq!((w.load, w.count), (Load::Rate(rate), Some(count)));
        }
        let fresh = BenchConfig {
            fresh_connections: true,
            ..cfg.clone()
        };
        assert_eq!(
            plan(&fresh, &["m".to_string()])
                .iter()
                .filter(|b| b.warmup && matches!(b.load, Load::Rate(_)))
                .count(),
            0
        );
    }

    #[test]
    fn several_models_are_interleaved_in_rotating_rounds() {
        let cfg = BenchConfig {
            requests: 10,
            rounds: 2,
            warmup: 1,
            concurrency: vec![1, 4],
            ..BenchConfig::default()
        };
        let models = vec!["a".to_string(), "b".to_string()];
        let p = plan(&cfg, &models);
        let order: Vec<(&str, bool, Option<u32>)> = p
            .iter()
            .map(|b| (b.model.as_str(), b.warmup, b.count))
            .collect();
        assert_eq!(
            order[..6],
            [
                ("a", true, Some(1)),
                ("b", true, Some(1)),
                ("a", false, Some(5)),
                ("b", false, Some(5)),
                ("b", false, Some(5)),
                ("a", false, Some(5))
            ]
        );
        // Two c=1 warm-ups, one c=4 pool pre-open, two loads × two rounds × two models.
        assert_eq!(p.len(), 2 + 1 + 2 * 2 * 2);
        let preopen: Vec<&Block> = p.iter().filter(|b| b.preopen).collect();
        assert_eq!(preopen.len(), 1);
        assert_eq!(
            (preopen[0].load, preopen[0].count, preopen[0].warmup),
            (Load::Concurrency(4), Some(4), true)
        );
        // It runs just before the c=4 cells.
        let i = p.iter().position(|b| b.preopen).unwrap();
        assert_eq!(p[i + 1].cell, "a c=4");
        let fresh = BenchConfig {
            fresh_connections: true,
            ..cfg.clone()
        };
        assert!(!plan(&fresh, &models).iter().any(|b| b.preopen));
        let per_cell: u32 = p
            .iter()
            .filter(|b| b.cell == "a c=4")
            .filter_map(|b| b.count)
            .sum();
        assert_eq!(per_cell, 10);
        assert_eq!(cells(&cfg, &models).len(), 4);
    }

    #[test]
    fn one_model_runs_each_cell_in_one_block_and_uneven_counts_add_up() {
        let cfg = BenchConfig {
            requests: 7,
            warmup: 0,
            ..BenchConfig::default()
        };
        let p = plan(&cfg, &["m".to_string()]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].count, Some(7));
        let cfg = BenchConfig {
            requests: 7,
            rounds: 3,
            warmup: 0,
            ..BenchConfig::default()
        };
        let p = plan(&cfg, &["a".to_string(), "b".to_string()]);
        let a: u32 = p
            .iter()
            .filter(|b| b.model == "a")
            .filter_map(|b| b.count)
            .sum();
        assert_eq!(a, 7);
    }
}
