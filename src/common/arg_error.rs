//! Why a flag's value was refused. clap prints the flag and the value before the message, so
//! each message says what is wrong and what to write instead.

#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    #[error("{input} is longer than the {max:.0} s allowed; use e.g. 30s, 1.5 or 2m")]
    TooLong { input: String, max: f64 },
    #[error("{cause}; use e.g. 30s, 1.5 or 2m")]
    Duration { cause: humantime::DurationError },
    #[error("{0:?} is not one of full-window, wider-window, temperature, off")]
    Fallback(String),
    #[error("{0:?} is not one of pcm, wav")]
    AudioFormat(String),
    #[error("expected KEY=JSON, e.g. top_k=40")]
    Param,
}
