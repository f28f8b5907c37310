//! The versioned results model every command writes. A results file is self-describing:
//! what wrote it, when (a wall-clock label only), which clock its numbers use, with which
//! configuration, and whether the run was interrupted.

use crate::clock;
use crate::cpu::CpuInfo;
use serde::{Deserialize, Serialize};

/// Bumped whenever a field changes meaning or disappears. Adding optional fields does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultsHeader {
    pub schema_version: u32,
    /// What produced the file, e.g. `bench-llm` or `replay`.
    pub kind: String,
    pub tool: String,
    pub tool_version: String,
    /// Wall-clock start of the run, RFC 3339 UTC. A label: no duration uses it.
    pub started_utc: String,
    pub clock: ClockInfo,
    /// True when the run was stopped early (Ctrl-C, SIGTERM): the file holds every request or
    /// turn completed before that.
    pub interrupted: bool,
    /// Why an interrupted run stopped: `SIGINT`, `SIGTERM`, or a failure that ended it, such as
    /// the embedded LLM server exiting mid-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The CPU the run measured on: model-based decisions (Smart Turn's int8 scores) differ
    /// between CPU families, so two files are only comparable within one. Absent in files
    /// from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    pub source: String,
    pub unit: String,
    pub origin: String,
    /// Where the process clock sits on the wall clock (the same pair telemetry's spans use).
    /// Absent in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<clock::Anchor>,
}

impl ClockInfo {
    pub fn process_monotonic() -> ClockInfo {
        ClockInfo {
            source: "monotonic (std::time::Instant; CLOCK_MONOTONIC on Linux)".into(),
            unit: "ns".into(),
            origin: "process start".into(),
            anchor: Some(clock::anchor()),
        }
    }
}

impl ResultsHeader {
    pub fn new(kind: &str, tool_version: &str) -> ResultsHeader {
        ResultsHeader {
            schema_version: SCHEMA_VERSION,
            kind: kind.into(),
            tool: "voxlat".into(),
            tool_version: tool_version.into(),
            started_utc: clock::wall_label(),
            clock: ClockInfo::process_monotonic(),
            interrupted: false,
            stop_reason: None,
            cpu: Some(CpuInfo::detect()),
        }
    }
}

/// Reads the header of any results file, checking the schema version first so an old or
/// newer file gets a clear message instead of a field error.
pub fn read_header(json: &serde_json::Value) -> Result<ResultsHeader, SchemaError> {
    let v = json
        .get("header")
        .and_then(|h| h.get("schema_version"))
        .and_then(|v| v.as_u64())
        .ok_or(SchemaError::NotResults)?;
    if v != u64::from(SCHEMA_VERSION) {
        return Err(SchemaError::Version { found: v });
    }
    serde_json::from_value(json["header"].clone()).map_err(|e| SchemaError::Invalid(e.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("this is not a voxlat results file (no header.schema_version)")]
    NotResults,
    #[error("results schema version {found} is not supported by this voxlat (it reads version {SCHEMA_VERSION})")]
    Version { found: u64 },
    #[error("results header is invalid: {0}")]
    Invalid(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_versions_are_checked() {
        let h = ResultsHeader::new("bench-llm", "0.1.0");
        let doc = serde_json::json!({ "header": h });
        assert_eq!(read_header(&doc).unwrap(), h);
        let mut old = doc.clone();
        old["header"]["schema_version"] = 99.into();
        assert!(matches!(
            read_header(&old),
            Err(SchemaError::Version { found: 99 })
        ));
        assert!(matches!(
            read_header(&serde_json::json!({})),
            Err(SchemaError::NotResults)
        ));
    }

    #[test]
    fn the_header_names_the_cpu_and_an_older_one_still_reads() {
        let h = ResultsHeader::new("replay", "0.1.0");
        let json = serde_json::to_value(&h).unwrap();
        let cpu = &json["cpu"];
        assert_eq!(cpu["arch"], std::env::consts::ARCH);
        assert!(cpu["int8_family"].is_string(), "{json}");
        for f in ["avx512f", "avx512_vnni", "avx_vnni", "amx_int8"] {
            assert!(cpu[f].is_boolean(), "{f}: {json}");
        }
        let mut old = serde_json::json!({ "header": json });
        old["header"].as_object_mut().unwrap().remove("cpu");
        assert_eq!(read_header(&old).unwrap().cpu, None);
    }
}
