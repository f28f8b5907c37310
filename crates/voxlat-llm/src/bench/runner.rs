//! Runs the cells: warm-up per model, then each load level with the models interleaved in
//! rounds. Requests run as tasks in a `JoinSet`, so dropping the run (Ctrl-C) aborts every
//! request in flight; completed requests have already been sent to the caller.

use super::config::{BenchConfig, Load};
use super::prompt::PromptSource;
use super::record::RequestRecord;
use crate::client::{ChatRequest, LlmClient};
use crate::error::{ErrorClass, LlmError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use voxlat_core::{Nanos, RequestId, Timeline};

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
}

pub fn cell_name(model: &str, load: &Load) -> String {
    format!("{model} {}", load.label())
}

/// The cells of a run, in order: (cell, model, load label).
pub fn cells(cfg: &BenchConfig, models: &[String]) -> Vec<(String, String, String)> {
    cfg.loads()
        .iter()
        .flat_map(|l| {
            models
                .iter()
                .map(move |m| (cell_name(m, l), m.clone(), l.label()))
        })
        .collect()
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
            });
        }
    }
    let rounds = if models.len() > 1 {
        cfg.rounds.max(1)
    } else {
        1
    };
    for load in cfg.loads() {
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
                    cell: cell_name(model, &load),
                    warmup: false,
                    count,
                    duration,
                });
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

/// Runs one request and sends its record. Returns the error, if any.
async fn one_request(ctx: &Ctx, b: &Block, scheduled: Option<Nanos>) -> Option<LlmError> {
    let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
    let cfg = &ctx.cfg;
    let req = ChatRequest {
        model: b.model.clone(),
        messages: ctx.prompt.messages(seq, cfg.prompt.system.as_deref()),
        max_tokens: cfg.max_tokens,
        temperature: cfg.temperature,
        top_p: cfg.top_p,
        stop: cfg.stop.clone(),
        seed: cfg.seed,
        include_usage: cfg.include_usage,
        extra: cfg.extra.clone(),
    };
    let tl = Timeline::new(RequestId::new());
    let (outcome, err) = ctx.client.stream_chat(&req, &tl, |_| {}).await;
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
    };
    let _ = ctx.tx.send(RunEvent::Record(Box::new(record)));
    err
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(p.len(), 2 + 2 * 2 * 2);
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
