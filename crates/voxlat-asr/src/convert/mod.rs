//! CTranslate2 (faster-whisper) Whisper checkpoint → ggml file for whisper.cpp.
//!
//! The only Whisper weights obtainable from package registries are CTranslate2's, and
//! whisper.cpp reads only ggml, so the project converts. The output is a pure function of the
//! input bytes (fixed tensor order, no timestamps), so its sha256 can be pinned in the model
//! manifest.

pub mod ct2;
pub mod ggml;
pub mod mapping;
pub mod vocab;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use voxlat_core::fsio::IoAt;

/// Whisper's audio front end: 16 kHz, 25 ms windows.
const SAMPLE_RATE: u32 = 16_000;
const N_FFT: usize = 400;

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("model.bin is truncated: {what} at byte {offset} runs past the end. Re-fetch it")]
    Truncated { what: String, offset: usize },
    #[error("model.bin is not a CTranslate2 Whisper checkpoint this converter reads (at byte {offset}): {detail}")]
    Format { offset: usize, detail: String },
    #[error("model.bin has no tensor `{0}`: it is not a CTranslate2 Whisper checkpoint")]
    MissingTensor(String),
    #[error("vocabulary.txt: {0}")]
    Vocabulary(String),
    #[error("cannot convert: {0}")]
    Unsupported(String),
    #[error("converted {got} tensors, but whisper.cpp requires exactly {expected} for this depth")]
    TensorCount { got: usize, expected: usize },
    #[error("the package has no *{0} for the converter (the manifest's files list names it)")]
    MissingInput(&'static str),
}

/// What was written, for logs and checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub hparams: ggml::Hparams,
    pub tensors: usize,
    pub vocab_tokens: usize,
    pub bytes: u64,
}

/// Counts bytes on their way to the real writer.
struct Counting<W> {
    inner: W,
    n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Converts an in-memory `model.bin` and `vocabulary.txt` into ggml bytes on `out`.
pub fn convert(
    model_bin: &[u8],
    vocabulary: &str,
    out: &mut impl Write,
) -> Result<Summary, ConvertError> {
    let model = ct2::parse(model_bin)?;
    if model.spec != "WhisperSpec" {
        return Err(ConvertError::Unsupported(format!(
            "model.bin holds a `{}`, not a WhisperSpec",
            model.spec
        )));
    }
    let hp = mapping::hparams(&model)?;
    let tensors = mapping::tensors(&model, &hp)?;
    let expected =
        mapping::expected_tensor_count(hp.n_audio_layer as usize, hp.n_text_layer as usize);
    if tensors.len() != expected {
        return Err(ConvertError::TensorCount {
            got: tensors.len(),
            expected,
        });
    }
    let tokens = vocab::decode_vocabulary(vocabulary, vocab::text_tokens(hp.n_vocab))?;
    let n_mels = hp.n_mels as usize;
    let mel = voxlat_core::mel::slaney_mel_filters(SAMPLE_RATE, N_FFT, n_mels);

    let mut w = Counting { inner: out, n: 0 };
    let write_err = |source| ConvertError::Io(IoAt::on("write", "<output>")(source));
    ggml::write_header(&mut w, &hp, &mel, n_mels, N_FFT / 2 + 1, &tokens).map_err(write_err)?;
    for t in &tensors {
        ggml::write_tensor(&mut w, t).map_err(write_err)?;
    }
    w.flush().map_err(write_err)?;
    Ok(Summary {
        hparams: hp,
        tensors: tensors.len(),
        vocab_tokens: tokens.len(),
        bytes: w.n,
    })
}

/// File-to-file form of [`convert`]. `out` is written in place: callers that need atomicity
/// pass a temporary path and rename it afterwards.
/// The converter as the model manifest names it (`convert = "ct2-whisper-ggml"`): its inputs
/// are the unpacked files keyed by their path in the package; the model and vocabulary are
/// found by name.
pub fn convert_inputs(
    inputs: &std::collections::BTreeMap<String, std::path::PathBuf>,
    out: &Path,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let find = |suffix: &'static str| {
        inputs
            .iter()
            .find(|(m, _)| m.ends_with(suffix))
            .map(|(_, p)| p.clone())
            .ok_or(ConvertError::MissingInput(suffix))
    };
    convert_files(&find("model.bin")?, &find("vocabulary.txt")?, out)?;
    Ok(())
}

pub fn convert_files(
    model_bin: &Path,
    vocabulary: &Path,
    out: &Path,
) -> Result<Summary, ConvertError> {
    let bin = std::fs::read(model_bin).map_err(IoAt::on("read", model_bin))?;
    let vocab_text = std::fs::read_to_string(vocabulary).map_err(IoAt::on("read", vocabulary))?;
    let file = File::create(out).map_err(IoAt::on("create", out))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let summary = convert(&bin, &vocab_text, &mut w).map_err(|e| match e {
        ConvertError::Io(IoAt { action, source, .. }) => {
            ConvertError::Io(IoAt::on(action, out)(source))
        }
        other => other,
    })?;
    let file = w
        .into_inner()
        .map_err(|e| IoAt::on("write", out)(e.into_error()))?;
    file.sync_all().map_err(IoAt::on("sync", out))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::ct2::tests::Builder;
    use super::ct2::Dtype;
    use super::*;

    const S: u32 = 4; // state width of the synthetic model
    const N_MELS: u32 = 3;

    fn f16s(values: &[f32]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect()
    }

    fn layer_norm(b: Builder, p: &str) -> Builder {
        b.f16(&format!("{p}/layer_norm/gamma"), &[S], 1.0).f16(
            &format!("{p}/layer_norm/beta"),
            &[S],
            2.0,
        )
    }

    /// Fused QKV, biases 100, 101, ... with the key rows' bias set to `key_bias`.
    fn self_attention(b: Builder, p: &str, key_bias: f32) -> Builder {
        let mut bias: Vec<f32> = (0..3 * S).map(|i| 100.0 + i as f32).collect();
        bias[S as usize..2 * S as usize].fill(key_bias);
        layer_norm(b, p)
            .f16(&format!("{p}/linear_0/weight"), &[3 * S, S], 0.0)
            .var(
                &format!("{p}/linear_0/bias"),
                &[3 * S],
                Dtype::F16,
                f16s(&bias),
            )
            .f16(&format!("{p}/linear_1/weight"), &[S, S], 0.0)
            .f16(&format!("{p}/linear_1/bias"), &[S], 0.0)
    }

    /// Query in linear_0, fused key/value in linear_1 (value bias 9), output in linear_2.
    fn cross_attention(b: Builder, p: &str) -> Builder {
        let kv_bias = f16s(&[0.0, 0.0, 0.0, 0.0, 9.0, 9.0, 9.0, 9.0]);
        layer_norm(b, p)
            .f16(&format!("{p}/linear_0/weight"), &[S, S], 0.0)
            .f16(&format!("{p}/linear_0/bias"), &[S], 0.0)
            .f16(&format!("{p}/linear_1/weight"), &[2 * S, S], 0.0)
            .var(&format!("{p}/linear_1/bias"), &[2 * S], Dtype::F16, kv_bias)
            .f16(&format!("{p}/linear_2/weight"), &[S, S], 0.0)
            .f16(&format!("{p}/linear_2/bias"), &[S], 0.0)
    }

    fn ffn(b: Builder, p: &str) -> Builder {
        b.f16(&format!("{p}/layer_norm/gamma"), &[S], 1.0)
            .f16(&format!("{p}/layer_norm/beta"), &[S], 0.0)
            .f16(&format!("{p}/linear_0/weight"), &[2 * S, S], 0.0)
            .f16(&format!("{p}/linear_0/bias"), &[2 * S], 0.0)
            .f16(&format!("{p}/linear_1/weight"), &[S, 2 * S], 0.0)
            .f16(&format!("{p}/linear_1/bias"), &[S], 0.0)
    }

    /// A one-layer Whisper in CTranslate2 layout, small enough to check by hand.
    fn synthetic(key_bias: f32) -> Vec<u8> {
        let heads = |b: Builder, n: &str| b.var(n, &[], Dtype::I16, 2i16.to_le_bytes().to_vec());
        let mut b = Builder::default();
        b = heads(b, "encoder/num_heads");
        b = heads(b, "decoder/num_heads");
        b = b
            .var("decoder/activation", &[], Dtype::I8, vec![3])
            .f16("encoder/conv1/weight", &[S, N_MELS, 3], 0.0)
            .f16("encoder/conv1/bias", &[S], 7.0)
            .f16("encoder/conv2/weight", &[S, S, 3], 0.0)
            .f16("encoder/conv2/bias", &[S], 0.0)
            .f16("encoder/position_encodings/encodings", &[6, S], 0.5)
            .f16("encoder/layer_norm/gamma", &[S], 1.0)
            .f16("encoder/layer_norm/beta", &[S], 0.0)
            .f16("decoder/embeddings/weight", &[10, S], 0.0)
            .f16("decoder/position_encodings/encodings", &[5, S], 0.0)
            .f16("decoder/layer_norm/gamma", &[S], 1.0)
            .f16("decoder/layer_norm/beta", &[S], 0.0);
        b = self_attention(b, "encoder/layer_0/self_attention", key_bias);
        b = ffn(b, "encoder/layer_0/ffn");
        b = self_attention(b, "decoder/layer_0/self_attention", 0.0);
        b = cross_attention(b, "decoder/layer_0/attention");
        b = ffn(b, "decoder/layer_0/ffn");
        b.alias("decoder/projection/weight", "decoder/embeddings/weight")
            .build()
    }

    fn vocab() -> String {
        let mut v = vec!["ĠHello".to_string(), "Ċ".to_string()];
        v.resize(vocab::N_TEXT_TOKENS + 8, "x".to_string());
        v.push("<|endoftext|>".into());
        v.join("\n")
    }

    fn convert_synthetic(key_bias: f32) -> Result<(Summary, ggml::read::Parsed), ConvertError> {
        let mut out = Vec::new();
        let s = convert(&synthetic(key_bias), &vocab(), &mut out)?;
        Ok((s, ggml::read::parse(&out)))
    }

    #[test]
    fn converts_a_synthetic_one_layer_model() {
        let (s, p) = convert_synthetic(0.0).unwrap();
        assert_eq!(s.tensors, mapping::expected_tensor_count(1, 1));
        assert_eq!(p.tensors.len(), 7 + 15 + 4 + 24);
        assert_eq!(s.vocab_tokens, vocab::N_TEXT_TOKENS);
        assert_eq!(p.vocab[0], b" Hello");
        assert_eq!(p.vocab[1], b"\n");
        assert_eq!(
            (
                p.hparams.n_vocab,
                p.hparams.n_audio_ctx,
                p.hparams.n_audio_state
            ),
            (10, 6, 4)
        );
        assert_eq!((p.hparams.n_audio_head, p.hparams.n_text_head), (2, 2));
        assert_eq!((p.hparams.n_audio_layer, p.hparams.n_text_layer), (1, 1));
        assert_eq!((p.hparams.n_text_ctx, p.hparams.n_mels), (5, 3));
        assert_eq!((p.n_mel, p.n_bins), (3, 201));

        let t = |name: &str| {
            p.tensors
                .iter()
                .find(|t| t.0 == name)
                .unwrap_or_else(|| panic!("no tensor {name}"))
        };
        let f32_at =
            |raw: &[u8], i: usize| f32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap());
        let f16_at =
            |raw: &[u8], i: usize| half::f16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]).to_f32();

        // Conv bias: f32, reshaped (S, 1) -> ggml dims [1, S].
        let cb = t("encoder.conv1.bias");
        assert_eq!((cb.1.clone(), cb.2), (vec![1, 4], ggml::GGML_F32));
        assert_eq!(f32_at(&cb.3, 3), 10.0);
        // Positional tables are f32 even though 2-D.
        let pe = t("encoder.positional_embedding");
        assert_eq!((pe.1.clone(), pe.2), (vec![4, 6], ggml::GGML_F32));
        assert_eq!(f32_at(&pe.3, 0), 0.5);
        // Conv weight: f16, dims reversed.
        assert_eq!(t("encoder.conv1.weight").1, vec![3, 3, 4]);
        assert_eq!(t("encoder.conv1.weight").2, ggml::GGML_F16);

        // Fused QKV split by rows: key rows start at element S*S.
        let q = t("encoder.blocks.0.attn.query.weight");
        let k = t("encoder.blocks.0.attn.key.weight");
        let v = t("encoder.blocks.0.attn.value.weight");
        assert_eq!(q.1, vec![4, 4]);
        assert_eq!(f16_at(&q.3, 0), 0.0);
        assert_eq!(f16_at(&k.3, 0), 16.0);
        assert_eq!(f16_at(&v.3, 0), 32.0);
        assert_eq!(f32_at(&t("encoder.blocks.0.attn.query.bias").3, 0), 100.0);
        assert_eq!(f32_at(&t("encoder.blocks.0.attn.value.bias").3, 0), 108.0);
        assert!(p.tensors.iter().all(|t| !t.0.ends_with("key.bias")));
        // Layer norms are 1-D -> f32.
        assert_eq!(t("encoder.blocks.0.attn_ln.weight").2, ggml::GGML_F32);
        assert_eq!(f32_at(&t("encoder.blocks.0.attn_ln.bias").3, 1), 3.0);

        // Cross-attention: key/value from linear_1, output from linear_2.
        let cv = t("decoder.blocks.0.cross_attn.value.weight");
        assert_eq!(f16_at(&cv.3, 0), 16.0);
        assert_eq!(
            f32_at(&t("decoder.blocks.0.cross_attn.value.bias").3, 0),
            9.0
        );
        assert!(p
            .tensors
            .iter()
            .any(|t| t.0 == "decoder.blocks.0.cross_attn.out.weight"));
        assert!(p
            .tensors
            .iter()
            .any(|t| t.0 == "decoder.blocks.0.mlp.2.bias"));
        assert!(p.tensors.iter().any(|t| t.0 == "encoder.ln_post.weight"));
        assert!(p.tensors.iter().any(|t| t.0 == "decoder.ln.bias"));
        assert_eq!(t("decoder.token_embedding.weight").1, vec![4, 10]);
    }

    #[test]
    fn conversion_is_deterministic() {
        let img = synthetic(0.0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        convert(&img, &vocab(), &mut a).unwrap();
        convert(&img, &vocab(), &mut b).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn refuses_nonzero_key_bias_and_missing_tensors() {
        let err = convert_synthetic(0.25).unwrap_err().to_string();
        assert!(err.contains("key bias"), "{err}");

        let only_heads = Builder::default()
            .var("encoder/num_heads", &[], Dtype::I16, vec![6, 0])
            .build();
        let err = convert(&only_heads, &vocab(), &mut Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("decoder/embeddings/weight"), "{err}");
    }

    #[test]
    fn layer_norm_names_are_not_counted_as_layers() {
        let img = Builder::default()
            .f16("encoder/layer_norm/gamma", &[2], 0.0)
            .f16("encoder/layer_0/x", &[1], 0.0)
            .f16("encoder/layer_3/x", &[1], 0.0)
            .build();
        let m = ct2::parse(&img).unwrap();
        assert_eq!(mapping::count_layers(&m, "encoder"), 4);
        assert_eq!(mapping::count_layers(&m, "decoder"), 0);
    }

    /// The manifest's converter gets the unpacked files by their path in the package; a
    /// package without the vocabulary is named as such, as the converter's own error, so the
    /// models crate can keep it whole.
    #[test]
    fn inputs_without_a_vocabulary_name_what_is_missing() {
        let mut inputs = std::collections::BTreeMap::new();
        inputs.insert(
            "faster-whisper-tiny.en/model.bin".to_string(),
            std::path::PathBuf::from("/nonexistent/model.bin"),
        );
        let err = convert_inputs(&inputs, Path::new("/nonexistent/out.bin")).unwrap_err();
        let e = err
            .downcast_ref::<ConvertError>()
            .expect("the converter's own error");
        assert!(
            matches!(e, ConvertError::MissingInput("vocabulary.txt")),
            "{e}"
        );
    }
}
