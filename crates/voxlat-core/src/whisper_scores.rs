//! What Whisper itself says of a decode, wherever it ran: the local engine reads it from
//! whisper.cpp, a remote transcriber sends it in `verbose_json`, and the session's
//! continuation rule reads it either way.

/// What Whisper itself says of a decode: the first window's probability of its no-speech
/// token, and the mean log probability of the text tokens it kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    pub no_speech_prob: f32,
    pub avg_logprob: f32,
}

impl Scores {
    /// Whisper's own rule for a window with no speech in it, with OpenAI's defaults
    /// (`no_speech_threshold` 0.6, `logprob_threshold` −1.0, also whisper.cpp's): the model
    /// expected silence and is unsure of the words it wrote anyway. It is how Whisper tells a
    /// noise it wrote words for from a word.
    pub fn no_speech(&self) -> bool {
        self.no_speech_prob > 0.6 && self.avg_logprob < -1.0
    }
}
