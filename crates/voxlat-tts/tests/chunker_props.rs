//! Properties of the sentence chunker over generated LLM-like text, cut into deltas anywhere.
//!
//! The generator builds text from tokens whose spoken form it knows (a `**bold**` word speaks
//! as `bold`, a `- ` list marker as nothing), so the expected output comes from the generator,
//! not from the code under test.

use proptest::prelude::*;
use voxlat_tts::chunker::{Chunker, ChunkerConfig, CAP_GROWTH};

/// (raw, spoken) word tokens, including every case the chunker must not split inside.
const WORDS: &[(&str, &str)] = &[
    ("hello", "hello"),
    ("world", "world"),
    ("Dr.", "Dr."),
    ("e.g.", "e.g."),
    ("U.S.", "U.S."),
    ("Mr.", "Mr."),
    ("etc.", "etc."),
    ("3.14", "3.14"),
    ("7:30", "7:30"),
    ("3,000", "3,000"),
    ("5", "5"),
    ("https://example.com/a.b?c=d", "https://example.com/a.b?c=d"),
    ("end.", "end."),
    ("why?", "why?"),
    ("wow!", "wow!"),
    ("so,", "so,"),
    ("then;", "then;"),
    ("note:", "note:"),
    ("wait...", "wait..."),
    ("\"quoted.\"", "\"quoted.\""),
    ("**bold**", "bold"),
    ("`code`", "code"),
    ("*it*", "it"),
    ("naïve", "naïve"),
    ("🎉", "🎉"),
    ("你好。", "你好。"),
    ("好，", "好，"),
    ("很好", "很好"),
];

/// Markers valid only at a line start; none is spoken.
const MARKERS: &[&str] = &["", "", "- ", "* ", "+ ", "## ", "1. ", "12) ", "> ", "  - "];
const WORD_GAPS: &[&str] = &[" ", " ", " ", "  ", "\t"];
const LINE_GAPS: &[&str] = &["\n", "\n\n", "\r\n"];

fn line() -> impl Strategy<Value = (String, String)> {
    (
        prop::sample::select(MARKERS),
        prop::collection::vec(
            (prop::sample::select(WORDS), prop::sample::select(WORD_GAPS)),
            1..12,
        ),
    )
        .prop_map(|(marker, words)| {
            let mut raw = marker.to_string();
            let mut spoken = String::new();
            for (i, ((w, s), gap)) in words.iter().enumerate() {
                if i > 0 {
                    raw.push_str(gap);
                }
                raw.push_str(w);
                spoken.push_str(s);
            }
            (raw, spoken)
        })
}

fn document() -> impl Strategy<Value = (String, String)> {
    prop::collection::vec((line(), prop::sample::select(LINE_GAPS)), 1..6).prop_map(|lines| {
        let mut raw = String::new();
        let mut spoken = String::new();
        for (i, ((r, s), gap)) in lines.iter().enumerate() {
            if i > 0 {
                raw.push_str(gap);
            }
            raw.push_str(r);
            spoken.push_str(s);
        }
        (raw, spoken)
    })
}

fn without_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Cuts `text` at the given fractions of its length (moved back to char boundaries).
fn deltas<'a>(text: &'a str, cuts: &[f64]) -> Vec<&'a str> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|f| {
            let mut i = ((text.len() as f64) * f) as usize;
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        })
        .collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut prev = 0;
    for i in at.into_iter().chain([text.len()]) {
        out.push(&text[prev..i]);
        prev = i;
    }
    out
}

fn run(config: ChunkerConfig, parts: &[&str]) -> Vec<String> {
    let mut c = Chunker::new(config);
    let mut out = Vec::new();
    for p in parts {
        out.extend(c.push(p));
    }
    out.extend(c.finish());
    out
}

fn configs() -> impl Strategy<Value = ChunkerConfig> {
    prop_oneof![
        Just(ChunkerConfig::default()),
        (1usize..40, 8usize..60, 4usize..80).prop_map(|(min, max, first_max)| ChunkerConfig {
            first_chunk_min_chars: min,
            max_chars: max,
            first_chunk_max_chars: first_max,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn chunks_concatenate_to_the_spoken_text(
        (raw, spoken) in document(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..20),
        config in configs(),
    ) {
        let chunks = run(config, &deltas(&raw, &cuts));
        prop_assert_eq!(without_space(&chunks.concat()), without_space(&spoken));
    }

    #[test]
    fn chunks_do_not_depend_on_how_the_text_was_split(
        (raw, _) in document(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..20),
        config in configs(),
    ) {
        let whole = run(config, &[&raw]);
        let split = run(config, &deltas(&raw, &cuts));
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn chunks_are_trimmed_non_empty_and_capped(
        (raw, _) in document(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..20),
        config in configs(),
    ) {
        let chunks = run(config, &deltas(&raw, &cuts));
        // The first chunk's cap; after a chunk that ends inside a sentence, CAP_GROWTH times
        // its length, never below the first's cap; after a sentence end, max_chars.
        let first_cap = config.max_chars.min(config.first_chunk_max_chars);
        let mut cap = first_cap;
        for chunk in &chunks {
            let len = chunk.chars().count();
            prop_assert!(len <= cap, "{:?} over its cap {}", chunk, cap);
            let sentence_end = chunk
                .trim_end_matches(['"', '\'', ')', ']', '}', '”', '’', '»', '」', '』', '）'])
                .ends_with(['.', '!', '?', '。', '！', '？']);
            cap = if sentence_end {
                config.max_chars
            } else {
                config.max_chars.min(first_cap.max(len.saturating_mul(CAP_GROWTH)))
            };
        }
        for chunk in chunks {
            prop_assert!(!chunk.is_empty());
            prop_assert_eq!(chunk.trim(), chunk.as_str());
            prop_assert!(!chunk.contains("  "), "uncollapsed space in {:?}", chunk);
            prop_assert!(
                chunk.chars().count() <= config.max_chars,
                "{:?} is longer than {}", chunk, config.max_chars
            );
        }
    }

    #[test]
    fn one_character_deltas_match_the_whole_text((raw, _) in document()) {
        let singles: Vec<String> = raw.chars().map(String::from).collect();
        let refs: Vec<&str> = singles.iter().map(String::as_str).collect();
        prop_assert_eq!(
            run(ChunkerConfig::default(), &refs),
            run(ChunkerConfig::default(), &[&raw])
        );
    }
}
