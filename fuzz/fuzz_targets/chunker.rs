//! The sentence chunker on arbitrary text in arbitrary deltas. Its documented contract: the
//! chunks do not depend on how the text was split, each is trimmed, non-empty and within the
//! length cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use voxlat_tts::chunker::{Chunker, ChunkerConfig};

fuzz_target!(|input: (u8, u8, &str)| {
    let (step, cap, text) = input;
    let config = ChunkerConfig {
        first_chunk_min_chars: usize::from(cap % 32),
        max_chars: usize::from(cap).max(1),
        first_chunk_max_chars: usize::from(step).max(1),
    };
    let whole = Chunker::split(text, config);
    let mut c = Chunker::new(config);
    let mut pieces = Vec::new();
    let step = usize::from(step % 9) + 1;
    let chars: Vec<char> = text.chars().collect();
    for delta in chars.chunks(step) {
        pieces.extend(c.push(&delta.iter().collect::<String>()));
    }
    pieces.extend(c.finish());
    assert_eq!(whole, pieces, "chunks depend on delta boundaries (step {step})");
    for chunk in &whole {
        assert!(!chunk.is_empty());
        assert_eq!(chunk.trim(), chunk);
        assert!(chunk.chars().count() <= config.max_chars, "{chunk:?}");
    }
});
