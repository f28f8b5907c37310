//! The real engine: llama.cpp through llama-cpp-2. One [`LlamaModel`] for the process, one
//! context (KV cache) per slot; prompts are templated and tokenized on the HTTP side so that
//! a prompt too long for the context is refused before it queues.

use crate::engine::{Engine, EngineError, FinishReason, JobSpec, Outcome, Sink, Step};
use crate::error::ApiError;
use crate::prefix::{self, Lost, Reuse};
use crate::request::ChatRequest;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

/// Prompt tokens evaluated per `llama_decode` call: llama.cpp's default batch size, and how
/// often a prefill checks whether its client is still there.
const PREFILL_BATCH: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("model file {} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("cannot initialise llama.cpp: {0}")]
    Backend(String),
    #[error("llama.cpp could not load {} (not a GGUF, or an architecture this llama.cpp does not know); its log above says why", .0.display())]
    Load(PathBuf),
    #[error("chat template {name:?} is not one llama.cpp knows (e.g. gemma, chatml, llama3, phi3, mistral-v7)")]
    UnknownTemplate { name: String },
    #[error("cannot create a llama.cpp context of {n_ctx} tokens: {detail}")]
    Context { n_ctx: u32, detail: String },
}

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub path: PathBuf,
    /// The id clients see in `/v1/models` and may send as `model`.
    pub id: String,
    pub n_ctx: u32,
    pub threads: u32,
    /// Threads for prefill (prompt batches); `threads` is for decode.
    pub batch_threads: u32,
    /// A llama.cpp template name (`gemma`, `chatml`, …) to use instead of the GGUF's own.
    pub chat_template: Option<String>,
    /// Give sliding-window layers a window-sized KV cache instead of a full one: less memory
    /// at large contexts, but a prefix can then only be reused when the prompt diverges within
    /// about one window of the end of what is cached.
    pub small_swa_cache: bool,
}

/// The loaded model, shared by the HTTP side (templating, tokenizing) and every slot.
pub struct LlamaModelHandle {
    backend: &'static LlamaBackend,
    model: &'static LlamaModel,
    template: LlamaChatTemplate,
    template_label: String,
    stops: Vec<String>,
    pub id: String,
    pub aliases: Vec<String>,
    pub n_ctx: u32,
    pub threads: u32,
    pub batch_threads: u32,
    pub n_swa: u32,
    small_swa_cache: bool,
}

impl LlamaModelHandle {
    pub fn load(opts: &LoadOptions) -> Result<LlamaModelHandle, LoadError> {
        if !opts.path.is_file() {
            return Err(LoadError::Missing(opts.path.clone()));
        }
        llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
        let backend = LlamaBackend::init().map_err(|e| LoadError::Backend(e.to_string()))?;
        // The model and backend live as long as the process; leaking them gives the per-slot
        // contexts the `'static` borrow their threads need.
        let backend: &'static LlamaBackend = Box::leak(Box::new(backend));
        let model = LlamaModel::load_from_file(backend, &opts.path, &LlamaModelParams::default())
            .map_err(|_| LoadError::Load(opts.path.clone()))?;
        let model: &'static LlamaModel = Box::leak(Box::new(model));

        let (template, template_label) = choose_template(model, opts.chat_template.as_deref())?;
        let stops = stops_for(&template_label);
        let n_swa = sliding_window(model);
        let file_stem = file_stem(&opts.path);
        let mut aliases = vec![file_stem.clone()];
        if let Some(name) = opts.path.file_name().and_then(|n| n.to_str()) {
            aliases.push(name.to_string());
        }
        aliases.retain(|a| a != &opts.id);
        Ok(LlamaModelHandle {
            backend,
            model,
            template,
            template_label,
            stops,
            id: opts.id.clone(),
            aliases,
            n_ctx: opts.n_ctx,
            threads: opts.threads.max(1),
            batch_threads: opts.batch_threads.max(1),
            n_swa,
            small_swa_cache: opts.small_swa_cache,
        })
    }

    pub fn template_label(&self) -> &str {
        &self.template_label
    }

    /// Templates and tokenizes a request, refusing prompts the context cannot hold.
    pub fn prepare(&self, req: &ChatRequest) -> Result<(Vec<i32>, Vec<String>), ApiError> {
        let chat = req
            .messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.as_str().to_string(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| ApiError::BadRequest("a message contains a NUL character".into()))?;
        let text = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| {
                ApiError::BadRequest(format!(
                    "cannot apply chat template {}: {e}",
                    self.template_label
                ))
            })?;
        // parse_special: the template's own markers (`<start_of_turn>`) must become their
        // control tokens, as llama.cpp's server does.
        let tokens = self.model.vocab().tokenize(text.as_bytes(), true, true);
        let n_ctx = self.n_ctx as usize;
        if tokens.is_empty() {
            return Err(ApiError::BadRequest(
                "the messages template to an empty prompt".into(),
            ));
        }
        if tokens.len() >= n_ctx {
            return Err(ApiError::PromptTooLong {
                prompt_tokens: tokens.len(),
                n_ctx,
            });
        }
        let mut stops = self.stops.clone();
        stops.extend(req.stop.iter().cloned());
        Ok((tokens.iter().map(|t| t.0).collect(), stops))
    }

    /// A context for one slot; call from the slot's own thread, one slot at a time.
    pub fn new_slot(&'static self) -> Result<LlamaSlot, LoadError> {
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(self.n_ctx))
            .with_n_batch(PREFILL_BATCH as u32)
            .with_n_ubatch(PREFILL_BATCH as u32)
            .with_n_seq_max(1)
            .with_n_threads(self.threads as i32)
            .with_n_threads_batch(self.batch_threads as i32)
            // A full-size cache for the sliding-window layers keeps every position, so any
            // common prefix can be reused (Gemma 3 at 4k context: 60 MB instead of ~10 MB).
            .with_swa_full(!self.small_swa_cache);
        let ctx = self
            .model
            .new_context(self.backend, params)
            .map_err(|e| LoadError::Context {
                n_ctx: self.n_ctx,
                detail: e.to_string(),
            })?;
        Ok(LlamaSlot {
            handle: self,
            ctx,
            cached: Vec::new(),
            batch: LlamaBatch::new(PREFILL_BATCH, 1),
        })
    }
}

fn file_stem(p: &Path) -> String {
    p.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("model")
        .to_string()
}

/// The GGUF's own template if it has one llama.cpp understands, else `gemma`, which fits the
/// bundled base Gemma 3 (it has no template); `requested` overrides both.
fn choose_template(
    model: &LlamaModel,
    requested: Option<&str>,
) -> Result<(LlamaChatTemplate, String), LoadError> {
    let probe = |t: &LlamaChatTemplate| {
        let msg = LlamaChatMessage::new("user".into(), "hi".into()).ok()?;
        model.apply_chat_template(t, &[msg], true).ok()
    };
    if let Some(name) = requested {
        let t = LlamaChatTemplate::new(name).map_err(|_| LoadError::UnknownTemplate {
            name: name.to_string(),
        })?;
        return match probe(&t) {
            Some(_) => Ok((t, name.to_string())),
            None => Err(LoadError::UnknownTemplate {
                name: name.to_string(),
            }),
        };
    }
    if let Ok(t) = model.chat_template(None) {
        if let Some(rendered) = probe(&t) {
            return Ok((t, format!("the GGUF's own ({})", marker_family(&rendered))));
        }
        tracing::warn!("the GGUF's chat template is not one llama.cpp can apply; using gemma");
    }
    let t = LlamaChatTemplate::new("gemma").map_err(|_| LoadError::UnknownTemplate {
        name: "gemma".into(),
    })?;
    Ok((t, "gemma (built in; the GGUF has none)".into()))
}

/// Names a template by its turn markers, which is all the stop strings depend on.
fn marker_family(rendered: &str) -> &'static str {
    if rendered.contains("<start_of_turn>") {
        "gemma"
    } else if rendered.contains("<|im_start|>") {
        "chatml"
    } else if rendered.contains("<|start_header_id|>") {
        "llama3"
    } else {
        "other"
    }
}

/// Stop strings for a template family: the end of the model's turn, and the start of another
/// turn (a base model happily writes the user's next line itself).
fn stops_for(label: &str) -> Vec<String> {
    let s: &[&str] = if label.contains("gemma") {
        &["<end_of_turn>", "<start_of_turn>"]
    } else if label.contains("chatml") {
        &["<|im_end|>", "<|im_start|>"]
    } else if label.contains("llama3") {
        &["<|eot_id|>", "<|start_header_id|>"]
    } else {
        &[]
    };
    s.iter().map(|s| s.to_string()).collect()
}

/// The attention window of sliding-window layers (Gemma 3: 512), 0 for models without.
fn sliding_window(model: &LlamaModel) -> u32 {
    let arch = model
        .meta_val_str("general.architecture")
        .unwrap_or_default();
    model
        .meta_val_str(&format!("{arch}.attention.sliding_window"))
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One slot: a llama.cpp context and the tokens its KV cache (sequence 0) holds.
pub struct LlamaSlot {
    handle: &'static LlamaModelHandle,
    ctx: LlamaContext<'static>,
    cached: Vec<LlamaToken>,
    batch: LlamaBatch<'static>,
}

impl LlamaSlot {
    fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// Keeps what it can of the cache for `prompt`; returns how many tokens are reused.
    fn reuse(&mut self, prompt: &[i32]) -> usize {
        let cached: Vec<i32> = self.cached.iter().map(|t| t.0).collect();
        let pos_min = self.ctx.kv_cache_seq_pos_min(0);
        match prefix::plan(&cached, prompt, pos_min, self.handle.n_swa) {
            Reuse::Keep { keep } => {
                if keep < self.cached.len()
                    && self
                        .ctx
                        .kv_cache_seq_rm(0, Some(keep as u32), None)
                        .is_err()
                {
                    tracing::warn!(
                        keep,
                        "llama.cpp refused a partial cache removal; full re-prefill"
                    );
                    self.clear();
                    return 0;
                }
                self.cached.truncate(keep);
                keep
            }
            Reuse::Full { lost } => {
                if lost == Lost::SlidingWindow {
                    tracing::info!(
                        cached = self.cached.len(),
                        n_swa = self.handle.n_swa,
                        "prefix diverges too far back for the sliding-window cache; full re-prefill"
                    );
                }
                self.clear();
                0
            }
        }
    }

    /// Evaluates `tokens` after what is cached, logits for the last one only.
    fn eval(&mut self, tokens: &[LlamaToken], sink: &Sink) -> Result<bool, EngineError> {
        for chunk in tokens.chunks(PREFILL_BATCH) {
            if sink.cancelled() {
                return Ok(false);
            }
            self.batch.clear();
            let last = chunk.len() - 1;
            for (i, t) in chunk.iter().enumerate() {
                let pos = (self.cached.len() + i) as i32;
                self.batch
                    .add(*t, pos, &[0], i == last)
                    .map_err(|e| EngineError::new("adding a token to the batch", e))?;
            }
            self.ctx
                .decode(&mut self.batch)
                .map_err(|e| EngineError::new("llama_decode", e))?;
            self.cached.extend_from_slice(chunk);
        }
        Ok(true)
    }
}

fn sampler(job: &JobSpec) -> LlamaSampler {
    let s = job.sampling;
    if s.temperature <= 0.0 {
        return LlamaSampler::greedy();
    }
    // `u32::MAX` is llama.cpp's "pick a random seed".
    LlamaSampler::chain_simple([
        LlamaSampler::top_p(s.top_p, 1),
        LlamaSampler::temp(s.temperature),
        LlamaSampler::dist(s.seed.unwrap_or(u32::MAX)),
    ])
}

impl Engine for LlamaSlot {
    fn generate(&mut self, job: &JobSpec, sink: &mut Sink) -> Result<Outcome, EngineError> {
        let n_ctx = self.handle.n_ctx as usize;
        let keep = self.reuse(&job.tokens);
        let todo: Vec<LlamaToken> = job.tokens[keep..].iter().map(|t| LlamaToken(*t)).collect();
        if !self.eval(&todo, sink)? {
            return Ok(Outcome::Cancelled);
        }
        sink.prefilled(keep, todo.len());

        let vocab = self.handle.model.vocab();
        let mut sampler = sampler(job);
        let mut piece = Vec::with_capacity(32);
        loop {
            let token = sampler.sample(&self.ctx, -1);
            if vocab.is_eog(token) {
                return Ok(Outcome::Finished(FinishReason::Stop));
            }
            piece.clear();
            // Special tokens are rendered so that a base model's `<end_of_turn>` reaches the
            // stop strings even when the GGUF does not mark it end-of-generation.
            vocab.token_to_piece_into(token, &mut piece, true, None);
            match sink.token(&piece) {
                Step::Continue => {}
                Step::Finish(reason) => return Ok(Outcome::Finished(reason)),
                Step::Cancelled => return Ok(Outcome::Cancelled),
            }
            if self.cached.len() + 1 >= n_ctx {
                return Ok(Outcome::Finished(FinishReason::Length));
            }
            if !self.eval(&[token], sink)? {
                return Ok(Outcome::Cancelled);
            }
        }
    }

    fn reset(&mut self) {
        self.clear();
    }
}
