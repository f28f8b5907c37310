//! A first delta that could begin `<think>` is held back by the think-splitter until the next
//! delta decides it. Its stamp must still be its own arrival, not the next delta's.

mod common;

use common::request;
use std::time::Duration;
use voxlat_core::{EventKind, RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, LlmClient};
use voxlat_testkit::{Builder, Script};

/// The scripted gap after the first delta: long enough that a stamp taken at the second
/// delta's arrival cannot pass for the first's on a busy machine.
const GAP: Duration = Duration::from_millis(150);

#[tokio::test]
async fn a_held_back_first_delta_is_stamped_at_its_own_arrival() {
    for first in ["<", "<th", "<b>", "<think"] {
        let script = Script {
            tokens: vec![first.to_string(), "b>ok".into(), " done".into()],
            ttft: Duration::from_millis(10),
            itl: GAP,
            ..Script::default()
        };
        let server = Builder::fixed(script).start().await;
        let client = LlmClient::new(
            Endpoint::new(&server.base_url(), None),
            ClientOptions::default(),
        )
        .unwrap();
        let tl = Timeline::new(RequestId::new());
        let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
        assert!(err.is_none(), "{first}: {err:?}");
        assert_eq!(out.text, format!("{first}b>ok done"));
        let served = &server.requests()[0];
        let (sent0, sent1) = (served.content_sent[0], served.content_sent[1]);
        let first_token = tl.get(EventKind::LlmFirstToken).unwrap();
        // Causal, and before the second delta was even sent: the held-back bytes kept the
        // arrival time of the read that delivered them.
        assert!(first_token >= sent0, "{first}: stamped before it was sent");
        assert!(
            first_token < sent1,
            "{first}: stamped {:.1} ms after it was sent, at or after the next delta",
            first_token.signed_since(sent0) as f64 / 1e6
        );
        assert_eq!(out.deltas[0].t, first_token);
        assert_eq!(tl.get(EventKind::LlmFirstAnswerToken), Some(first_token));
        // The held-back delta and its successor stay separate deltas, a gap apart.
        assert!(out.deltas.len() >= 2 && out.deltas[1].t >= sent1);
    }
}
