//! The one place that decides how many threads each CPU-heavy stage gets.
//!
//! ggml (Whisper, llama.cpp) and ONNX Runtime spin-wait in their thread pools. Two stages that
//! each spin as many threads as there are cores collapse by 10–30× when they overlap (measured
//! on 2 cores: 8.1 s instead of 0.27 s for one Whisper pass). In a turn, ASR runs alone
//! (the LLM waits for its transcript; TTS has nothing to say yet), so it gets every core, and
//! so does the LLM's prefill, which comes next, alone too; the LLM's decode and TTS overlap (TTS speaks chunk 1 while the LLM writes chunk 2), so they
//! split the cores and ONNX Runtime must not spin (voxlat-tts and voxlat-vad build their ONNX
//! sessions with spinning off, always).

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadBudget {
    pub cores: usize,
    pub asr: usize,
    /// The LLM's decode (and its prefill unless `llm_prefill` says otherwise).
    pub llm: usize,
    /// The LLM's prefill. 0 in results written before it existed: `llm` then.
    #[serde(default)]
    pub llm_prefill: usize,
    pub tts: usize,
}

impl ThreadBudget {
    /// Each of `callers` pipelines' share: ASR and TTS threads divided among them (at least
    /// one each), since spin-waiting threads beyond the cores stall everyone. The LLM's
    /// threads belong to its server, which the callers share, and are unchanged, but with
    /// more than one caller a prefill overlaps the others' stages, so it gets only `llm`.
    pub fn shared_by(self, callers: usize) -> ThreadBudget {
        let callers = callers.max(1);
        ThreadBudget {
            asr: (self.asr / callers).max(1),
            tts: (self.tts / callers).max(1),
            llm_prefill: if callers > 1 {
                self.llm
            } else {
                self.llm_prefill
            },
            ..self
        }
    }

    pub fn for_cores(cores: usize) -> ThreadBudget {
        let cores = cores.max(1);
        let llm = (cores / 2).max(1);
        let tts = cores.saturating_sub(llm).max(1);
        ThreadBudget {
            cores,
            asr: cores.min(8),
            llm,
            llm_prefill: cores.min(8),
            tts,
        }
    }

    /// For this machine (`available_parallelism`, which honours cgroup CPU limits).
    pub fn detect() -> ThreadBudget {
        ThreadBudget::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Threads that may be busy at once in the overlapping phase (LLM decode + TTS).
    pub fn overlap(&self) -> usize {
        self.llm + self.tts
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn callers_split_the_stage_threads_but_not_the_servers() {
        let b = ThreadBudget::for_cores(8);
        let s = b.shared_by(3);
        assert_eq!((s.asr, s.tts, s.llm, s.cores), (8 / 3, 1, b.llm, 8));
        let two = ThreadBudget::for_cores(2).shared_by(4);
        assert_eq!((two.asr, two.tts), (1, 1));
        // Alone, a prefill takes every core; among callers, only the decode's share.
        assert_eq!(ThreadBudget::for_cores(2).llm_prefill, 2);
        assert_eq!(two.llm_prefill, two.llm);
        assert_eq!(
            ThreadBudget::for_cores(2).shared_by(1),
            ThreadBudget::for_cores(2)
        );
    }

    use super::*;

    #[test]
    fn overlapping_stages_never_oversubscribe() {
        for cores in 1..=64 {
            let b = ThreadBudget::for_cores(cores);
            assert!(b.asr <= cores.max(1));
            assert!(b.llm >= 1 && b.tts >= 1);
            assert!(b.overlap() <= cores.max(2), "{cores}: {b:?}");
        }
        let two = ThreadBudget::for_cores(2);
        assert_eq!((two.asr, two.llm, two.tts), (2, 1, 1));
    }
}
