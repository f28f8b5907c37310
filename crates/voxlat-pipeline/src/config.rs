//! What a session is configured with: endpointing, the prompt and the reply's limits.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use voxlat_vad::EndpointerConfig;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineConfig {
    pub endpointer: EndpointerConfig,
    /// Start ASR on a provisional endpoint; keep the result if the endpoint is confirmed.
    pub speculative_asr: bool,
    /// Also start the reply (LLM, chunker, TTS) on a provisional end, holding its audio until
    /// the endpoint commits it; the user resuming cancels it. Needs `speculative_asr`. Off in
    /// `Default`, so that a session built in code commits the plain way unless asked; `run`
    /// and `replay` turn it on unless told not to (`--no-speculative-reply`).
    #[serde(default)]
    pub speculative_reply: bool,
    /// Decode each transcription of a turn from its first sample. By default one goes on
    /// from the words already decoded up to the last provisional end the user spoke past
    /// (`asr_prefix`): a long turn's last decode covers its last phrase, at the cost of the
    /// context across the pause (a few points of WER on fast, disfluent speech).
    #[serde(default)]
    pub whole_turn_asr: bool,
    /// End turns by the `cues` rule (`crate::cues`): each stop waits `endpointer.hangover_ms`
    /// scaled by the speculative transcript's tail, never less than the speaker's own pauses
    /// so far. Needs `speculative_asr` for the tail; without it every tail counts as bare.
    #[serde(default)]
    pub turn_cues: bool,
    /// The first chunk is cut at a word before this many characters when no clause or
    /// sentence boundary came sooner (the chunker's `first_chunk_max_chars`).
    #[serde(default = "default_first_chunk_max_chars")]
    pub first_chunk_max_chars: usize,
    /// Feed the speech as fast as possible, and only the silence after a provisional end in
    /// real time.
    pub fast: bool,
    /// Silence before each utterance, ms.
    pub lead_silence_ms: u32,
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop: Vec<String>,
    pub system_prompt: String,
    /// Example exchanges put right after the system prompt. A base model (Gemma 270M has no
    /// chat tuning) otherwise echoes the prompt instead of answering; they also make the
    /// stable prefix longer, which is what a prefix cache reuses. An instruction-tuned model
    /// must get none: it copies them into its answers. The caller, which knows the model
    /// (the manifest's `tuning`), clears them; this crate does not depend on the manifest.
    pub examples: Vec<(String, String)>,
    /// Conversation history kept per session (messages, system prompt excluded). Past it, the
    /// older half is dropped at once (`history::remember`), so the prefix cache survives.
    pub history_cap: usize,
    /// When a turn cuts the history (`history_cap`), evaluate the shortened prompt at once with
    /// a one-token request, while the user listens, so that the next turn finds it in the
    /// server's prefix cache instead of evaluating it after the commit. For a local server:
    /// against a paid API it is one more request per cut.
    #[serde(default)]
    pub warm_cut_history: bool,
    pub save_replies: Option<PathBuf>,
}

/// About three words, the chunker's own `first_chunk_min_chars`. Measured on the bundled
/// scenarios (`voxlat replay --first-chunk-max`, docs/benchmarks.md): 40 → 20 characters took
/// first audio from P50 1158 to 1011 ms with no playout underrun, and 20 → 16, with the chunks
/// after the first capped to grow from it (the chunker's `CAP_GROWTH`), readied the speculative
/// reply by the commit in 45–49 of 63 turns instead of 39–45. Without that growth, 16 left the
/// reply quiet before a long second chunk (up to 3 underruns a run); at 12, 5 of 21 replies
/// paused. The CLI's `--first-chunk-max` defaults to it too.
pub const DEFAULT_FIRST_CHUNK_MAX_CHARS: u16 = 16;

fn default_first_chunk_max_chars() -> usize {
    usize::from(DEFAULT_FIRST_CHUNK_MAX_CHARS)
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            endpointer: EndpointerConfig::default(),
            speculative_asr: true,
            speculative_reply: false,
            whole_turn_asr: false,
            turn_cues: false,
            first_chunk_max_chars: default_first_chunk_max_chars(),
            fast: false,
            lead_silence_ms: 300,
            model: "default".into(),
            max_tokens: 48,
            temperature: Some(0.0),
            stop: vec!["\n".into()],
            system_prompt: "You are a helpful voice assistant. Answer in one short sentence."
                .into(),
            examples: vec![
                (
                    "What is the capital of France?".into(),
                    "The capital of France is Paris.".into(),
                ),
                (
                    "How many legs does a spider have?".into(),
                    "A spider has eight legs.".into(),
                ),
            ],
            history_cap: 8,
            warm_cut_history: false,
            save_replies: None,
        }
    }
}
