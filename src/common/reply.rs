//! `--speculative-reply`, `--first-chunk-max` and `--history`, shared by `replay` and `run`.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ReplyArgs {
    /// Start the reply only at the endpoint. By default it starts (LLM, chunker, TTS) at the
    /// provisional end and its audio is held until the endpoint; the user resuming cancels it
    /// (the request is dropped, nothing plays, and its compute is reported as wasted).
    #[arg(long)]
    pub no_speculative_reply: bool,
    /// The default (kept so that scripts that name it still run).
    #[arg(long, hide = true, conflicts_with = "no_speculative_reply")]
    pub speculative_reply: bool,
    /// Decode only the audio after the last pause the user spoke past, going on from the words
    /// decoded up to it, instead of the whole turn every time (the default). A long turn's
    /// reply can be ready sooner, but each part is decoded without the other's audio: on
    /// voices the project was not tuned on, mean WER 36.0 against 30.4 % whole, at the same
    /// latency (docs/benchmarks.md, 2026-12-07).
    #[arg(long)]
    pub part_asr: bool,
    /// The default (kept so that scripts that name it still run).
    #[arg(long, hide = true, conflicts_with = "part_asr")]
    pub whole_turn_asr: bool,
    /// Cut the first chunk at a word before this many characters when no clause or sentence
    /// boundary comes sooner (a shorter first chunk is spoken sooner, but may leave a gap).
    #[arg(long, value_name = "CHARS", default_value_t = voxlat_pipeline::config::DEFAULT_FIRST_CHUNK_MAX_CHARS, value_parser = clap::value_parser!(u16).range(8..=240))]
    pub first_chunk_max: u16,
    /// Messages of the conversation sent with each turn (user and assistant, two per turn);
    /// past it the older half is dropped at once, which keeps the server's prefix cache
    /// useful. 0: every turn stands alone.
    #[arg(long, value_name = "MESSAGES", default_value_t = 8, value_parser = clap::value_parser!(u16).range(0..=256))]
    pub history: u16,
}

impl ReplyArgs {
    pub fn speculative_reply(&self) -> bool {
        !self.no_speculative_reply
    }

    pub fn first_chunk_max_chars(&self) -> usize {
        usize::from(self.first_chunk_max)
    }
}
