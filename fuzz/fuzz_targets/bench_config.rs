//! bench-llm config files on arbitrary text, as TOML and as JSON: an error naming the file, or
//! a config that either fails validation naming the file and a key, or passes it and then
//! converts and sizes without a panic or an absurd allocation: its durations, its arrival
//! gaps and its synthetic prompt size are what the runner goes on to use.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::time::Duration;
use voxlat_bench::config::{
    BenchConfig, Load, MAX_CONCURRENCY, MAX_PROMPT_TOKENS, MAX_SECONDS,
};

fuzz_target!(|text: &str| {
    for name in ["fuzz.toml", "fuzz.json"] {
        let c = match BenchConfig::parse(text, Path::new(name)) {
            Ok(c) => c,
            Err(e) => {
                assert!(e.to_string().contains(name), "{e}");
                continue;
            }
        };
        if let Err(e) = c.validate_named(|_| Some(name.into())) {
            assert!(e.to_string().starts_with(name), "{e}");
            continue;
        }
        for s in [c.connect_timeout_s, c.headers_timeout_s, c.idle_timeout_s] {
            assert!(s <= MAX_SECONDS);
            let _ = Duration::from_secs_f64(s);
        }
        if let Some(d) = c.duration_s {
            let _ = Duration::from_secs_f64(d / f64::from(c.rounds.max(1)));
        }
        for load in c.loads() {
            match load {
                Load::Concurrency(n) => assert!((1..=MAX_CONCURRENCY).contains(&n)),
                // The longest gap the runner can draw: −ln(2⁻⁵³) / rate.
                Load::Rate(r) => {
                    let _ = Duration::from_secs_f64(-(f64::EPSILON / 2.0).ln() / r);
                }
            }
        }
        assert!(c.prompt.tokens.unwrap_or(0) <= MAX_PROMPT_TOKENS);
    }
});
