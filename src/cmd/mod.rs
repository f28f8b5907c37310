//! One module per subcommand. A command imports what it shares with others from
//! `crate::common` (plumbing) and `crate::report` (rendering), never from another command.

pub mod annotate;
pub mod bench_llm;
pub mod bench_stages;
pub mod check_loopback;
pub mod compare;
pub mod devices;
pub mod eval_turns;
pub mod models;
pub mod replay;
pub mod report;
pub mod run;
pub mod serve;
pub mod serve_audio;
pub mod speak;
pub mod transcribe;
pub mod vad;
