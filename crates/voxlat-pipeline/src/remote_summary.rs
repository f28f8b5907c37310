//! Where a remote stage's time went, over the measured turns: the client's wait for the
//! response headers, the server's own queue and compute (its `Server-Timing`), and the rest,
//! which is the network and the upload.

use serde::{Deserialize, Serialize};
use voxlat_core::remote::RemoteCall;
use voxlat_core::stats::Summary;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemoteSummary {
    /// Calls that succeeded (a failed call fails its turn, and is counted there).
    pub calls: usize,
    /// Request sent → response headers, ms.
    pub wait: Option<Summary>,
    /// Request sent → first body byte (TTS: the first audio), ms.
    pub first_byte: Option<Summary>,
    pub server_queue: Option<Summary>,
    pub server_compute: Option<Summary>,
    /// The wait the server does not claim: connection, upload, network, ms.
    pub network: Option<Summary>,
    pub upload_kb: Option<Summary>,
}

impl RemoteSummary {
    /// `None` when no call was made (the stage ran in process).
    pub fn from_calls<'a>(
        calls: impl IntoIterator<Item = &'a RemoteCall>,
    ) -> Option<RemoteSummary> {
        let calls: Vec<&RemoteCall> = calls.into_iter().collect();
        if calls.is_empty() {
            return None;
        }
        let of = |f: &dyn Fn(&RemoteCall) -> Option<f64>| {
            let v: Vec<f64> = calls.iter().filter_map(|c| f(c)).collect();
            Summary::from_samples(&v, 0)
        };
        Some(RemoteSummary {
            calls: calls.len(),
            wait: of(&|c| c.wait_ms()),
            first_byte: of(&|c| {
                c.first_byte
                    .map(|t| voxlat_core::clock::ns_to_ms(t.0.saturating_sub(c.sent.0) as i64))
            }),
            server_queue: of(&|c| c.server_queue_ms),
            server_compute: of(&|c| c.server_compute_ms),
            network: of(&|c| c.network_ms()),
            upload_kb: of(&|c| Some(c.upload_bytes as f64 / 1e3)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_core::Nanos;

    #[test]
    fn splits_the_wait_into_server_and_network() {
        let call = |sent: u64, headers: u64, compute: f64| RemoteCall {
            sent: Nanos(sent * 1_000_000),
            headers: Some(Nanos(headers * 1_000_000)),
            first_byte: Some(Nanos((headers + 1) * 1_000_000)),
            server_queue_ms: Some(0.0),
            server_compute_ms: Some(compute),
            upload_bytes: 2_000,
            ..RemoteCall::default()
        };
        let calls = [call(0, 100, 90.0), call(10, 60, 30.0)];
        let s = RemoteSummary::from_calls(&calls).unwrap();
        assert_eq!(s.calls, 2);
        assert_eq!(s.wait.as_ref().unwrap().max, 100.0);
        assert_eq!(s.network.as_ref().unwrap().max, 20.0);
        assert_eq!(s.network.as_ref().unwrap().min, 10.0);
        assert_eq!(s.first_byte.as_ref().unwrap().min, 51.0);
        assert_eq!(s.upload_kb.as_ref().unwrap().p50, 2.0);
        assert!(RemoteSummary::from_calls(&[]).is_none());
    }
}
