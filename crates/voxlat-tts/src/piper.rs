//! A Piper voice (VITS, exported to ONNX) run on ONNX Runtime.
//!
//! The model contract: inputs `input` (i64 phoneme ids, [1, n]), `input_lengths` (i64, [1]),
//! `scales` (f32 noise, length, noise_w; [3]) and, for multi-speaker voices, `sid` (i64, [1]);
//! one output, the waveform (f32, [1, 1, 1, samples]) at the config's sample rate.
//!
//! VITS synthesizes a sentence in one call: the first sample exists only when the whole
//! sentence is done, which is why the chunker keeps the first chunk short.

use crate::config::VoiceConfig;
use crate::error::{SkipReason, TtsError};
use crate::phoneme_ids::{self, PhonemeIds};
use crate::{espeak, runtime, text};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct VoiceOptions {
    /// ONNX Runtime intra-op threads. One is the default: on 2 cores shared with ASR and the
    /// LLM, one thread beat two under contention (docs/models.md).
    pub intra_threads: usize,
    /// The ONNX Runtime library; `None` means `ORT_DYLIB_PATH`, then the models cache.
    pub runtime: Option<PathBuf>,
    /// Speaker id for multi-speaker voices (ignored by single-speaker ones).
    pub speaker: i64,
    /// Silence between the sentences of one [`Voice::synthesize`] call (Piper's default).
    pub sentence_silence: Duration,
    /// ONNX Runtime graph optimization. Measured here (`benches/tts.rs`), it changes session
    /// creation time (about 125 ms disabled, 240 ms basic, 470 ms all) but not synthesis speed,
    /// so the default is to skip it.
    pub optimization: Optimization,
}

/// ONNX Runtime's graph optimization levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optimization {
    Disable,
    Basic,
    Extended,
    All,
}

impl Optimization {
    fn level(self) -> GraphOptimizationLevel {
        match self {
            Optimization::Disable => GraphOptimizationLevel::Disable,
            Optimization::Basic => GraphOptimizationLevel::Level1,
            Optimization::Extended => GraphOptimizationLevel::Level2,
            Optimization::All => GraphOptimizationLevel::All,
        }
    }
}

impl Default for VoiceOptions {
    fn default() -> Self {
        Self {
            intra_threads: 1,
            runtime: None,
            speaker: 0,
            sentence_silence: Duration::from_millis(200),
            optimization: Optimization::Disable,
        }
    }
}

/// Where the load time went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadTimes {
    /// Loading the ONNX Runtime library (zero unless this load was the process's first).
    pub runtime: Duration,
    /// Creating the ONNX session (reading and optimizing the model).
    pub session: Duration,
}

/// Audio for one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Speech {
    /// Mono samples, nominally in [-1, 1].
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    /// Wall time of phonemization plus inference.
    pub compute: Duration,
    /// Model calls made (one per sentence).
    pub sentences: usize,
    /// Phonemes espeak-ng produced that the voice has no id for (skipped).
    pub unknown_phonemes: Vec<char>,
    /// When the first samples were available, if before the whole (a streamed response).
    pub first_audio: Option<voxlat_core::Nanos>,
    /// The call, when a remote server spoke.
    pub remote: Option<voxlat_core::remote::RemoteCall>,
}

impl Speech {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.samples.len() as f64 / f64::from(self.sample_rate.max(1)))
    }

    /// compute / audio duration: below 1 is faster than real time.
    pub fn real_time_factor(&self) -> f64 {
        let audio = self.duration().as_secs_f64();
        if audio > 0.0 {
            self.compute.as_secs_f64() / audio
        } else {
            f64::INFINITY
        }
    }
}

pub struct Voice {
    session: Session,
    config: VoiceConfig,
    ids: PhonemeIds,
    model: PathBuf,
    runtime: PathBuf,
    output: String,
    multi_speaker: bool,
    options: VoiceOptions,
    load_times: LoadTimes,
}

impl std::fmt::Debug for Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Voice")
            .field("model", &self.model)
            .field("runtime", &self.runtime)
            .field("sample_rate", &self.config.audio.sample_rate)
            .field("options", &self.options)
            .field("load_times", &self.load_times)
            .finish_non_exhaustive()
    }
}

impl Voice {
    /// Loads the voice `model` (`.onnx`; its config is `model` + `.json`).
    pub fn load(model: &Path, options: VoiceOptions) -> Result<Self, TtsError> {
        if !model.is_file() {
            return Err(TtsError::ModelMissing {
                path: model.to_path_buf(),
            });
        }
        let config_path = VoiceConfig::path_for(model);
        let config = VoiceConfig::load(&config_path)?;
        let ids = PhonemeIds::from_config(&config).map_err(|e| TtsError::ConfigInvalid {
            path: config_path.clone(),
            detail: e.to_string(),
        })?;
        if options.speaker < 0 || options.speaker >= i64::from(config.num_speakers) {
            return Err(TtsError::ConfigInvalid {
                path: config_path,
                detail: format!(
                    "speaker {} requested, but the voice has {} speaker(s)",
                    options.speaker, config.num_speakers
                ),
            });
        }
        // Fail on a missing espeak-ng voice now rather than on the first sentence.
        espeak::phonemize("", &config.espeak.voice)?;

        let (env, runtime, runtime_time) = runtime::environment(options.runtime.as_deref())?;
        let session_err = |detail: String| TtsError::Session {
            path: model.to_path_buf(),
            detail,
        };
        let start = Instant::now();
        let session = Session::builder(&env)
            .map_err(|e| session_err(e.to_string()))?
            .with_intra_threads(options.intra_threads.max(1))
            .map_err(|e| session_err(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| session_err(e.to_string()))?
            // Spinning threads steal the cores the other stages need (docs/models.md: 10–30x
            // collapses when two stages spin at once).
            .with_intra_op_spinning(false)
            .map_err(|e| session_err(e.to_string()))?
            .with_inter_op_spinning(false)
            .map_err(|e| session_err(e.to_string()))?
            .with_optimization_level(options.optimization.level())
            .map_err(|e| session_err(e.to_string()))?
            // Every sentence has its own length, so every run has new tensor shapes: the CPU
            // arena and the memory-pattern planner keep a block per shape size seen and never
            // give it back, and the process grew by steps over a long session (issue 19).
            .with_memory_pattern(false)
            .map_err(|e| session_err(e.to_string()))?
            .with_execution_providers([ort::ep::CPU::default().with_arena_allocator(false).build()])
            .map_err(|e| session_err(e.to_string()))?
            .commit_from_file(model)
            .map_err(|e| session_err(e.to_string()))?;
        let session_time = start.elapsed();

        let inputs: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
        let contract_err = |detail: String| TtsError::ModelContract {
            path: model.to_path_buf(),
            detail,
        };
        for required in ["input", "input_lengths", "scales"] {
            if !inputs.contains(&required) {
                return Err(contract_err(format!(
                    "it has no `{required}` input (inputs: {})",
                    inputs.join(", ")
                )));
            }
        }
        let multi_speaker = inputs.contains(&"sid");
        if config.num_speakers > 1 && !multi_speaker {
            return Err(contract_err(format!(
                "the config lists {} speakers but the model has no `sid` input",
                config.num_speakers
            )));
        }
        let output = session
            .outputs()
            .first()
            .map(|o| o.name().to_string())
            .ok_or_else(|| contract_err("it has no output".into()))?;

        Ok(Self {
            session,
            config,
            ids,
            model: model.to_path_buf(),
            runtime,
            output,
            multi_speaker,
            options,
            load_times: LoadTimes {
                runtime: runtime_time,
                session: session_time,
            },
        })
    }

    pub fn sample_rate(&self) -> u32 {
        self.config.audio.sample_rate
    }

    pub fn config(&self) -> &VoiceConfig {
        &self.config
    }

    pub fn options(&self) -> &VoiceOptions {
        &self.options
    }

    pub fn load_times(&self) -> LoadTimes {
        self.load_times
    }

    pub fn model_path(&self) -> &Path {
        &self.model
    }

    pub fn runtime_path(&self) -> &Path {
        &self.runtime
    }

    /// The phonemes of each sentence of `text`, as the model will receive them (before ids).
    pub fn phonemize(&self, text: &str) -> Result<Vec<String>, TtsError> {
        let clauses = espeak::phonemize(text, &self.config.espeak.voice)?;
        Ok(phoneme_ids::sentences(&clauses))
    }

    /// Synthesizes `text`. Text with nothing to say (empty, only punctuation or emoji) is
    /// [`TtsError::NothingToSay`] with its [`SkipReason`].
    pub fn synthesize(&mut self, text: &str) -> Result<Speech, TtsError> {
        let start = Instant::now();
        let nothing = |reason| TtsError::NothingToSay {
            text: text.to_string(),
            reason,
        };
        let clean = text::speakable(text).map_err(nothing)?;
        let mut encoded = Vec::new();
        let mut unknown = Vec::new();
        for sentence in self.phonemize(&clean)? {
            let e = self.ids.encode(&sentence);
            unknown.extend(e.unknown.iter().copied());
            // A sentence of only punctuation would make the model mumble.
            if sentence.chars().any(char::is_alphabetic) && e.mapped > 0 {
                encoded.push(e.ids);
            }
        }
        if encoded.is_empty() {
            return Err(nothing(SkipReason::NoPhonemes));
        }
        let silence =
            (self.options.sentence_silence.as_secs_f64() * f64::from(self.sample_rate())) as usize;
        let mut samples = Vec::new();
        for (i, ids) in encoded.iter().enumerate() {
            if i > 0 {
                samples.resize(samples.len() + silence, 0.0);
            }
            samples.extend(self.infer(ids, text)?);
        }
        unknown.sort_unstable();
        unknown.dedup();
        Ok(Speech {
            samples,
            sample_rate: self.sample_rate(),
            compute: start.elapsed(),
            sentences: encoded.len(),
            unknown_phonemes: unknown,
            first_audio: None,
            remote: None,
        })
    }

    fn infer(&mut self, ids: &[i64], text: &str) -> Result<Vec<f32>, TtsError> {
        let fail = |detail: String| TtsError::Inference {
            text: text.to_string(),
            detail,
        };
        let n = ids.len();
        let scales = &self.config.inference;
        let input =
            Tensor::from_array(([1usize, n], ids.to_vec())).map_err(|e| fail(e.to_string()))?;
        let lengths =
            Tensor::from_array(([1usize], vec![n as i64])).map_err(|e| fail(e.to_string()))?;
        let scales = Tensor::from_array((
            [3usize],
            vec![scales.noise_scale, scales.length_scale, scales.noise_w],
        ))
        .map_err(|e| fail(e.to_string()))?;
        let mut inputs = ort::inputs![
            "input" => input,
            "input_lengths" => lengths,
            "scales" => scales,
        ];
        if self.multi_speaker {
            let sid = Tensor::from_array(([1usize], vec![self.options.speaker]))
                .map_err(|e| fail(e.to_string()))?;
            inputs.push(("sid".into(), sid.into()));
        }
        let outputs = self.session.run(inputs).map_err(|e| fail(e.to_string()))?;
        let audio = outputs
            .get(&self.output)
            .ok_or_else(|| fail(format!("the model returned no `{}` output", self.output)))?;
        let (_, samples) = audio
            .try_extract_tensor::<f32>()
            .map_err(|e| fail(e.to_string()))?;
        if samples.iter().any(|s| !s.is_finite()) {
            return Err(fail("the model produced non-finite samples".into()));
        }
        Ok(samples.to_vec())
    }
}
