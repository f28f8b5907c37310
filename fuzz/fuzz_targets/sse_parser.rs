//! The SSE parser on arbitrary bytes, delivered in arbitrary reads. Beyond "no panic", it
//! checks the property the client relies on: the events do not depend on how the network
//! split the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use voxlat_llm::sse::{SseEvent, SseParser};

fn parse_in_pieces(data: &[u8], cuts: &[usize]) -> (Vec<SseEvent>, bool, u64) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts {
        let c = c.clamp(at, data.len());
        p.feed(&data[at..c], &mut out);
        at = c;
    }
    p.feed(&data[at..], &mut out);
    let clean = p.finish(&mut out);
    (out, clean, p.comments())
}

fuzz_target!(|input: &[u8]| {
    // The first byte chooses where the reads are cut; the rest is the stream.
    let Some((&seed, data)) = input.split_first() else {
        return;
    };
    let whole = parse_in_pieces(data, &[]);
    let step = usize::from(seed % 7) + 1;
    let cuts: Vec<usize> = (step..data.len()).step_by(step).collect();
    let split = parse_in_pieces(data, &cuts);
    assert_eq!(whole, split, "events depend on read boundaries (step {step})");
});
