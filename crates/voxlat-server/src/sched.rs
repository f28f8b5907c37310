//! Slots and the bounded queue. Each slot is one OS thread owning one engine (a llama.cpp
//! context is not `Send`, and a slot keeps its KV cache between requests for prefix reuse).
//! Requests beyond `slots + queue` are refused at once instead of waiting without bound, and
//! a request whose client has gone is dropped: before it starts, or at its next token.

use crate::engine::{BoxError, Engine, Event, Failure, JobSpec, Outcome, Sink};
use crate::error::ApiError;
use crate::timings::Stamps;
use serde::Serialize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use voxlat_telemetry::{FinishedRequest, RequestOutcome, ServerMetrics};

/// Why the slots could not all start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start the thread for slot {slot}: {cause}")]
    Thread { slot: usize, cause: std::io::Error },
    #[error("slot {slot} could not build its engine: {cause}")]
    Engine { slot: usize, cause: BoxError },
    #[error("slot {slot} died while starting")]
    Died { slot: usize },
}

/// Counters for `/health` and the log.
#[derive(Debug, Default)]
pub struct Stats {
    pub busy: AtomicUsize,
    pub admitted: AtomicUsize,
    pub completed: AtomicU64,
    pub cancelled: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    /// Prometheus metrics, when the server exposes them (`--metrics-addr`).
    pub metrics: Option<ServerMetrics>,
}

impl Stats {
    /// Publishes the queue depth and busy slots after either changed.
    fn occupancy_changed(&self) {
        if let Some(m) = &self.metrics {
            let admitted = self.admitted.load(Ordering::Acquire);
            let busy = self.busy.load(Ordering::Acquire);
            m.set_occupancy(admitted.saturating_sub(busy), busy);
        }
    }

    fn ended(&self, outcome: RequestOutcome) {
        if let Some(m) = &self.metrics {
            m.ended(outcome);
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub slots: usize,
    pub queue_limit: usize,
    pub busy: usize,
    pub queued: usize,
    pub completed: u64,
    pub cancelled: u64,
    pub rejected: u64,
    pub failed: u64,
}

/// Frees its place in the admission count when the request is done with, however that happens.
struct Permit(Arc<Stats>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.admitted.fetch_sub(1, Ordering::AcqRel);
        self.0.occupancy_changed();
    }
}

struct Job {
    spec: JobSpec,
    stamps: Stamps,
    tx: UnboundedSender<Event>,
    id: String,
    _permit: Permit,
}

pub struct Scheduler {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    stats: Arc<Stats>,
    slots: usize,
    queue: usize,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Scheduler {
    /// Starts `slots` workers, one after another: each builds its engine on its own thread
    /// with `make_engine(slot)` (llama.cpp contexts must not be created concurrently).
    pub fn start<F>(slots: usize, queue: usize, make_engine: F) -> Result<Scheduler, StartError>
    where
        F: Fn(usize) -> Result<Box<dyn Engine>, BoxError> + Send + Sync + 'static,
    {
        Scheduler::start_with_metrics(slots, queue, None, make_engine)
    }

    /// [`Scheduler::start`], updating `metrics` as requests come and go.
    pub fn start_with_metrics<F>(
        slots: usize,
        queue: usize,
        metrics: Option<ServerMetrics>,
        make_engine: F,
    ) -> Result<Scheduler, StartError>
    where
        F: Fn(usize) -> Result<Box<dyn Engine>, BoxError> + Send + Sync + 'static,
    {
        let slots = slots.max(1);
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let make_engine = Arc::new(make_engine);
        let stats = Arc::new(Stats {
            metrics,
            ..Stats::default()
        });
        let mut workers = Vec::new();
        for slot in 0..slots {
            let (ready_tx, ready_rx) = mpsc::channel();
            let rx = rx.clone();
            let make = make_engine.clone();
            let stats = stats.clone();
            let handle = std::thread::Builder::new()
                .name(format!("slot-{slot}"))
                .spawn(move || match make(slot) {
                    Ok(engine) => {
                        let _ = ready_tx.send(Ok(()));
                        worker(slot, engine, &rx, &stats);
                    }
                    Err(cause) => {
                        let _ = ready_tx.send(Err(StartError::Engine { slot, cause }));
                    }
                })
                .map_err(|cause| StartError::Thread { slot, cause })?;
            ready_rx.recv().map_err(|_| StartError::Died { slot })??;
            workers.push(handle);
        }
        Ok(Scheduler {
            tx: Mutex::new(Some(tx)),
            stats,
            slots,
            queue,
            workers: Mutex::new(workers),
        })
    }

    /// Queues a request, or refuses it when every slot is busy and the queue is full.
    pub fn submit(
        &self,
        id: String,
        spec: JobSpec,
        stamps: Stamps,
    ) -> Result<UnboundedReceiver<Event>, ApiError> {
        let limit = self.slots + self.queue;
        let admitted = self
            .stats
            .admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            });
        if admitted.is_err() {
            self.stats.rejected.fetch_add(1, Ordering::Relaxed);
            self.stats.ended(RequestOutcome::Rejected);
            let busy = self.stats.busy.load(Ordering::Acquire);
            return Err(ApiError::Busy {
                slots: self.slots,
                queued: limit.saturating_sub(busy),
                queue: self.queue,
            });
        }
        let permit = Permit(self.stats.clone());
        self.stats.occupancy_changed();
        let (tx, rx) = unbounded_channel();
        let mut stamps = stamps;
        stamps.queued = Instant::now();
        let job = Job {
            spec,
            stamps,
            tx,
            id,
            _permit: permit,
        };
        let sent = self
            .tx
            .lock()
            .ok()
            .and_then(|g| g.as_ref().map(|tx| tx.send(job).is_ok()));
        if sent != Some(true) {
            return Err(ApiError::Internal("the server is shutting down".into()));
        }
        Ok(rx)
    }

    pub fn stats(&self) -> StatsSnapshot {
        let s = &self.stats;
        let admitted = s.admitted.load(Ordering::Acquire);
        let busy = s.busy.load(Ordering::Acquire);
        StatsSnapshot {
            slots: self.slots,
            queue_limit: self.queue,
            busy,
            queued: admitted.saturating_sub(busy),
            completed: s.completed.load(Ordering::Relaxed),
            cancelled: s.cancelled.load(Ordering::Relaxed),
            rejected: s.rejected.load(Ordering::Relaxed),
            failed: s.failed.load(Ordering::Relaxed),
        }
    }

    /// Stops taking requests and waits for the slots to finish what they are running.
    pub fn shutdown(&self) {
        if let Ok(mut g) = self.tx.lock() {
            g.take();
        }
        let handles = self
            .workers
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn worker(
    slot: usize,
    mut engine: Box<dyn Engine>,
    rx: &Mutex<mpsc::Receiver<Job>>,
    stats: &Stats,
) {
    loop {
        let job = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        if job.tx.is_closed() {
            stats.cancelled.fetch_add(1, Ordering::Relaxed);
            stats.ended(RequestOutcome::Cancelled);
            tracing::info!(request_id = %job.id, slot, "client left while queued; dropped");
            continue;
        }
        stats.busy.fetch_add(1, Ordering::AcqRel);
        stats.occupancy_changed();
        let mut sink = Sink::new(&job.spec, job.tx.clone(), job.stamps.clone());
        let result = catch_unwind(AssertUnwindSafe(|| engine.generate(&job.spec, &mut sink)));
        match result {
            Ok(Ok(Outcome::Finished(reason))) => {
                let t = sink.timings();
                tracing::info!(
                    request_id = %job.id, slot, cache_n = t.cache_n, prompt_n = t.prompt_n,
                    predicted_n = t.predicted_n, queue_ms = t.queue_ms, prompt_ms = t.prompt_ms,
                    first_token_ms = t.first_token_ms, total_ms = t.total_ms, ?reason, "done"
                );
                if let Some(m) = &stats.metrics {
                    m.finished(&FinishedRequest {
                        queue_s: t.queue_ms / 1e3,
                        prefill_s: t.prompt_ms / 1e3,
                        decode_s: t.predicted_ms / 1e3,
                        first_token_s: t.first_token_ms / 1e3,
                        cached_tokens: t.cache_n,
                        prompt_tokens: t.prompt_n,
                        generated_tokens: t.predicted_n,
                    });
                }
                // Counted before the client is told: a client that reads /health right after
                // its answer must find its request there.
                stats.completed.fetch_add(1, Ordering::Relaxed);
                sink.done(reason);
            }
            Ok(Ok(Outcome::Cancelled)) => {
                stats.cancelled.fetch_add(1, Ordering::Relaxed);
                stats.ended(RequestOutcome::Cancelled);
                tracing::info!(request_id = %job.id, slot, "client disconnected; generation cancelled");
            }
            Ok(Err(e)) => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                stats.ended(RequestOutcome::Failed);
                tracing::error!(request_id = %job.id, slot, error = %e, "generation failed");
                engine.reset();
                sink.fail(Failure::Engine(e));
            }
            Err(_) => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                stats.ended(RequestOutcome::Failed);
                tracing::error!(request_id = %job.id, slot, "generation panicked");
                engine.reset();
                sink.fail(Failure::Panicked);
            }
        }
        stats.busy.fetch_sub(1, Ordering::AcqRel);
        stats.occupancy_changed();
        // The permit (admission) is released when `job` drops here, after `busy` went down,
        // so `admitted - busy` never counts a finished job as queued.
        drop(job);
    }
}
