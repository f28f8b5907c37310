//! Every stream's record says which stack carried it and how its arrivals were stamped, so
//! two runs whose TTFTs were stamped differently are not compared as if they were alike.

mod common;

use common::request;
use voxlat_core::{RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, LlmClient, StreamOutcome};
use voxlat_net::arrival::ArrivalStream;
use voxlat_net::connection::{StampKind, TransportKind};
use voxlat_testkit::{Builder, Script};

async fn stream(client: &LlmClient) -> StreamOutcome {
    let tl = Timeline::new(RequestId::new());
    let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
    assert!(err.is_none(), "{err:?}");
    out
}

/// Whether this host's kernel gives receive stamps at all.
async fn kernel_gives_stamps() -> bool {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, _accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
    ArrivalStream::new(client.unwrap()).unwrap().kernel_stamps()
}

#[tokio::test]
async fn a_plain_http_stream_records_the_direct_transport_and_kernel_stamps() {
    let server = Builder::fixed(Script::default()).start().await;
    let client = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions::default(),
    )
    .unwrap();
    let kernel = kernel_gives_stamps().await;
    // The kernel switches packet stamping on a moment after the first socket asks, so the
    // first responses of a process may be read-time stamped, and must say so. Later ones, on
    // a kernel that stamps, carry the kernel's stamps throughout.
    let mut kinds = Vec::new();
    for _ in 0..20 {
        let out = stream(&client).await;
        assert_eq!(out.connection.transport, Some(TransportKind::Direct));
        let kind = out
            .connection
            .stamps
            .expect("a response's stamps are noted");
        kinds.push(kind);
        if kind == StampKind::Kernel {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    match kernel {
        true => assert_eq!(kinds.last(), Some(&StampKind::Kernel), "{kinds:?}"),
        false => assert!(kinds.iter().all(|&k| k == StampKind::FallbackReadTime)),
    }
    // The kind survives the record's round trip, in the names the docs give.
    let json = serde_json::to_value(stream(&client).await.connection).unwrap();
    assert_eq!(json["transport"], "direct");
    assert!(
        json["stamps"] == "kernel" || json["stamps"] == "fallback-read-time",
        "{json}"
    );
}

#[tokio::test]
async fn an_http2_stream_records_reqwest_and_task_stamps() {
    let server = Builder::fixed(Script::default()).start().await;
    let opts = ClientOptions {
        http2: true,
        ..ClientOptions::default()
    };
    let client = LlmClient::new(Endpoint::new(&server.base_url(), None), opts).unwrap();
    let out = stream(&client).await;
    assert_eq!(out.connection.transport, Some(TransportKind::Reqwest));
    assert_eq!(out.connection.stamps, Some(StampKind::Task));
}

/// A record written before the fields existed still reads, with both unknown.
#[test]
fn an_older_record_reads_with_the_kinds_unknown() {
    let c: voxlat_net::connection::ConnPhases =
        serde_json::from_str(r#"{"new_connection":true,"dns_ns":null,"connect_ns":5,"tls":false}"#)
            .unwrap();
    assert_eq!((c.transport, c.stamps), (None, None));
}
