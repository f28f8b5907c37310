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
    /// Decode the whole turn every time. By default a transcription goes on from the words
    /// decoded up to the last pause the user spoke past, so a long turn's reply is ready
    /// sooner; decoding the whole keeps the context across those pauses (a few points less
    /// WER on fast, disfluent speech).
    #[arg(long)]
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
