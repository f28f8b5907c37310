//! The W3C `Server-Timing` header, e.g. `queue;dur=1.5, asr;dur=82.0`: how a speech server
//! tells the client where its time went, so the client can separate the network and upload
//! from the server's queue and compute.

/// What a server said it spent, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerTiming {
    pub queue_ms: Option<f64>,
    pub compute_ms: Option<f64>,
}

/// Metric names read as compute: voxlat's own (`asr`, `tts`) and common generic ones.
const COMPUTE: &[&str] = &["asr", "tts", "inference", "compute", "total"];
const QUEUE: &[&str] = &["queue", "wait"];

/// `name;dur=ms` entries joined with commas.
pub fn format(entries: &[(&str, f64)]) -> String {
    entries
        .iter()
        .map(|(name, ms)| format!("{name};dur={ms:.3}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads every `Server-Timing` value of a response; unknown metrics are ignored, and the first
/// compute metric in [`COMPUTE`]'s order wins (`total` only when nothing more specific came).
pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> ServerTiming {
    let mut found: Vec<(String, f64)> = Vec::new();
    for value in values {
        for entry in value.split(',') {
            let mut parts = entry.split(';').map(str::trim);
            let name = parts.next().unwrap_or("").to_ascii_lowercase();
            let dur = parts.find_map(|p| {
                p.strip_prefix("dur=")
                    .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v >= 0.0)
            });
            if let Some(d) = dur {
                found.push((name, d));
            }
        }
    }
    let pick = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| found.iter().find(|(m, _)| m == n).map(|(_, d)| *d))
    };
    ServerTiming {
        queue_ms: pick(QUEUE),
        compute_ms: pick(COMPUTE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_what_others_write() {
        let ours = format(&[("queue", 1.5), ("asr", 82.0)]);
        assert_eq!(ours, "queue;dur=1.500, asr;dur=82.000");
        assert_eq!(
            parse([ours.as_str()]),
            ServerTiming {
                queue_ms: Some(1.5),
                compute_ms: Some(82.0)
            }
        );
        // Split over two headers, with a description, a quoted value and unknown metrics.
        let t = parse(["db;dur=3, total;dur=\"40\"", "tts;desc=\"Piper\";dur=25.5"]);
        assert_eq!(t.compute_ms, Some(25.5));
        assert_eq!(t.queue_ms, None);
        assert_eq!(
            parse(["cache;desc=hit", "x;dur=nan"]),
            ServerTiming::default()
        );
    }
}
