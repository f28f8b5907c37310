//! The results file: written atomically, rewritten at most once a second while the run goes
//! on, and once more at the end or on interruption, so Ctrl-C never loses a completed request.

use super::analysis::{self, Analysis};
use super::config::BenchConfig;
use super::record::RequestRecord;
use super::summary::CellSummary;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use voxlat_core::fsio::{self, WriteError};
use voxlat_core::report::ResultsHeader;
use voxlat_net::config::Endpoint;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResults {
    pub header: ResultsHeader,
    pub config: BenchConfig,
    /// Base URL and where it came from; the API key shows only as `<redacted>`.
    pub endpoint: serde_json::Value,
    pub prompt: String,
    /// Definitions of every figure, so the file can be read without the source.
    pub definitions: Definitions,
    pub client: ClientCost,
    pub cells: Vec<CellSummary>,
    /// Sweeps, probes and the diagnosis, derived from `cells` and `requests`.
    #[serde(default)]
    pub analysis: Analysis,
    pub requests: Vec<RequestRecord>,
}

#[cfg(test)]
impl BenchResults {
    /// A results file holding only `requests`, for tests of what reads them.
    pub(crate) fn for_test(requests: Vec<crate::record::RequestRecord>) -> BenchResults {
        let mut r: BenchResults = serde_json::from_value(serde_json::json!({
            "header": voxlat_core::report::ResultsHeader::new("bench-llm", "0"),
            "config": {},
            "endpoint": null,
            "prompt": "",
            "definitions": Definitions::default(),
            "client": {"cpu_s": 0.0, "requests": 0, "cpu_ms_per_request": null},
            "cells": [],
            "requests": []
        }))
        .expect("a minimal results file");
        r.requests = requests;
        r
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Definitions {
    pub ttft: String,
    #[serde(default)]
    pub ttft_with_connect: String,
    pub ttfb: String,
    pub tpot: String,
    pub itl: String,
    pub e2e: String,
    pub percentiles: String,
}

impl Default for Definitions {
    fn default() -> Self {
        Definitions {
            ttft: "request written to a ready connection (llm_sent on a pooled connection; the moment a new connection became usable on one the request opened) -> first delta with non-empty content (reasoning or answer); role-only and empty chunks do not count; connection setup is not in it".into(),
            ttft_with_connect: "llm_sent (request handed to the HTTP stack) -> first non-empty content delta: DNS, TCP and TLS included for a request that opened a connection; equal to ttft on a pooled one. Shown as TTFT+connect".into(),
            ttfb: "request written to a ready connection -> response status and headers received".into(),
            tpot: "(llm_done - llm_first_token) / (output tokens - 1); tokens from usage when sent, else the delta count".into(),
            itl: "gaps between consecutive content deltas".into(),
            e2e: "request written to a ready connection -> end of stream ([DONE] or body end)".into(),
            percentiles: "nearest rank over every measured sample; warm-up requests excluded".into(),
        }
    }
}

/// The client's own cost, so a reader can tell whether the client was the bottleneck.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientCost {
    /// Process CPU time (user + system) over the run.
    pub cpu_s: f64,
    pub requests: usize,
    pub cpu_ms_per_request: Option<f64>,
}

/// The largest results file a run writes before it stops itself: the file is rewritten
/// whole every second, and a run that only produces errors must not fill the disk.
pub const RESULTS_BUDGET_BYTES: usize = 128 << 20;

pub struct ResultsWriter {
    path: PathBuf,
    budget: usize,
    last_size: usize,
    results: BenchResults,
    cells: Vec<(String, String, String)>,
    last_flush: Option<Instant>,
    min_interval: Duration,
    cpu_at_start: f64,
}

/// User + system CPU seconds of this process so far.
pub fn process_cpu_s() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `results/bench-llm-20261130T060102Z-model.json`, model names made file-safe.
pub fn default_path(dir: &Path, models: &[String]) -> PathBuf {
    let m: String = models
        .join("+")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    dir.join(format!(
        "bench-llm-{}-{}.json",
        voxlat_core::clock::wall_label_compact(),
        m
    ))
}

impl ResultsWriter {
    /// `cells` are (cell, model, load label) in run order.
    pub fn new(
        path: PathBuf,
        config: BenchConfig,
        endpoint: &Endpoint,
        prompt: String,
        cells: Vec<(String, String, String)>,
    ) -> Result<ResultsWriter, WriteError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fsio::ensure_writable_dir(dir)?;
        }
        let results = BenchResults {
            header: ResultsHeader::new("bench-llm", env!("CARGO_PKG_VERSION")),
            config,
            endpoint: serde_json::to_value(endpoint).unwrap_or_default(),
            prompt,
            definitions: Definitions::default(),
            client: ClientCost::default(),
            cells: Vec::new(),
            analysis: Analysis::default(),
            requests: Vec::new(),
        };
        let mut w = ResultsWriter {
            path,
            budget: RESULTS_BUDGET_BYTES,
            last_size: 0,
            results,
            cells,
            last_flush: None,
            min_interval: Duration::from_secs(1),
            cpu_at_start: process_cpu_s(),
        };
        w.flush()?;
        Ok(w)
    }

    /// Sets the size budget (tests use a small one).
    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes;
    }

    /// The last write reached the size budget: the run should stop (and the file is still
    /// complete and valid).
    pub fn over_budget(&self) -> bool {
        self.last_size >= self.budget
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn results(&self) -> &BenchResults {
        &self.results
    }

    /// Adds a record; writes the file if the last write is older than a second.
    pub fn push(&mut self, r: RequestRecord) -> Result<(), WriteError> {
        self.results.requests.push(r);
        if self
            .last_flush
            .is_none_or(|t| t.elapsed() >= self.min_interval)
        {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<(), WriteError> {
        self.results.cells = self
            .cells
            .iter()
            .map(|(c, m, l)| CellSummary::from_records(c, m, l, &self.results.requests))
            .collect();
        let cpu = (process_cpu_s() - self.cpu_at_start).max(0.0);
        let n = self.results.requests.len();
        self.results.client = ClientCost {
            cpu_s: cpu,
            requests: n,
            cpu_ms_per_request: (n > 0).then(|| cpu * 1e3 / n as f64),
        };
        self.results.analysis = analysis::analyze(
            &self.results.cells,
            &self.results.requests,
            &self.results.client,
        );
        let synthetic = self.results.config.synthetic_prompts();
        if let Some(f) = super::cache_check::cold_cache_finding(&self.results.requests, synthetic) {
            self.results.analysis.findings.push(f);
        }
        let bytes = serde_json::to_vec_pretty(&self.results).map_err(|e| WriteError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        fsio::write_atomic(&self.path, &bytes)?;
        self.last_size = bytes.len();
        self.last_flush = Some(Instant::now());
        Ok(())
    }

    /// The final write. `interrupted` marks a run stopped by a signal.
    pub fn finish(&mut self, interrupted: bool) -> Result<(), WriteError> {
        self.results.header.interrupted = interrupted;
        self.flush()
    }

    /// Marks the run as stopped early, and why, then writes the file.
    pub fn finish_stopped(&mut self, reason: &str) -> Result<(), WriteError> {
        self.results.header.stop_reason = Some(reason.to_string());
        self.finish(true)
    }
}
