//! CTranslate2 tensor names and layouts → whisper.cpp's. The table and its pitfalls are in
//! `docs/models.md`; the non-obvious parts are repeated where they happen below.

use super::ct2::{Ct2Model, Dtype, Variable};
use super::ggml::{Hparams, Tensor, TensorData};
use super::ConvertError;
use half::f16;
use std::borrow::Cow;

/// Counts `prefix/layer_N/` blocks. `layer_norm` also starts with `layer_`, so only names whose
/// suffix is digits followed by `/` count.
pub fn count_layers(model: &Ct2Model<'_>, prefix: &str) -> usize {
    let head = format!("{prefix}/layer_");
    model
        .variables
        .iter()
        .filter_map(|v| {
            let rest = v.name.strip_prefix(&head)?;
            let (num, _) = rest.split_once('/')?;
            if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            num.parse::<usize>().ok()
        })
        .max()
        .map_or(0, |n| n + 1)
}

fn scalar_int(v: &Variable<'_>) -> Result<i32, ConvertError> {
    let bad = || ConvertError::Format {
        offset: 0,
        detail: format!("{} should be an integer scalar", v.name),
    };
    if v.numel() != 1 {
        return Err(bad());
    }
    match v.dtype {
        Dtype::I8 => Ok(i32::from(v.data[0] as i8)),
        Dtype::I16 => Ok(i32::from(i16::from_le_bytes([v.data[0], v.data[1]]))),
        Dtype::I32 => Ok(i32::from_le_bytes([
            v.data[0], v.data[1], v.data[2], v.data[3],
        ])),
        _ => Err(bad()),
    }
}

fn dim(v: &Variable<'_>, rank: usize, i: usize) -> Result<usize, ConvertError> {
    if v.dims.len() != rank {
        return Err(ConvertError::Format {
            offset: 0,
            detail: format!("{} has shape {:?}, expected rank {rank}", v.name, v.dims),
        });
    }
    Ok(v.dims[i])
}

fn to_i32(n: usize, what: &str) -> Result<i32, ConvertError> {
    i32::try_from(n).map_err(|_| ConvertError::Unsupported(format!("{what} {n} is too large")))
}

pub fn hparams(model: &Ct2Model<'_>) -> Result<Hparams, ConvertError> {
    let emb = model.require("decoder/embeddings/weight")?;
    let enc_pos = model.require("encoder/position_encodings/encodings")?;
    let dec_pos = model.require("decoder/position_encodings/encodings")?;
    let conv1 = model.require("encoder/conv1/weight")?;
    Ok(Hparams {
        n_vocab: to_i32(dim(emb, 2, 0)?, "vocabulary")?,
        n_audio_ctx: to_i32(dim(enc_pos, 2, 0)?, "audio context")?,
        n_audio_state: to_i32(dim(enc_pos, 2, 1)?, "audio state")?,
        n_audio_head: scalar_int(model.require("encoder/num_heads")?)?,
        n_audio_layer: to_i32(count_layers(model, "encoder"), "encoder layers")?,
        n_text_ctx: to_i32(dim(dec_pos, 2, 0)?, "text context")?,
        n_text_state: to_i32(dim(dec_pos, 2, 1)?, "text state")?,
        n_text_head: scalar_int(model.require("decoder/num_heads")?)?,
        n_text_layer: to_i32(count_layers(model, "decoder"), "decoder layers")?,
        n_mels: to_i32(dim(conv1, 3, 1)?, "mel count")?,
        ftype: 1,
    })
}

/// Element range `[from, to)` of the flattened tensor, as raw bytes.
fn slice<'a>(v: &Variable<'a>, from: usize, to: usize) -> Result<&'a [u8], ConvertError> {
    let es = v.dtype.size();
    v.data
        .get(from * es..to * es)
        .ok_or_else(|| ConvertError::Format {
            offset: 0,
            detail: format!("{} is too small for elements {from}..{to}", v.name),
        })
}

fn f16_bytes<'a>(v: &Variable<'a>, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, ConvertError> {
    match v.dtype {
        Dtype::F16 => Ok(Cow::Borrowed(bytes)),
        Dtype::F32 => Ok(Cow::Owned(
            bytes
                .chunks_exact(4)
                .flat_map(|c| {
                    f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes()
                })
                .collect(),
        )),
        other => Err(ConvertError::Unsupported(format!(
            "{}: dtype {other:?} (only float16/float32 checkpoints can be converted)",
            v.name
        ))),
    }
}

fn f32_values(v: &Variable<'_>, bytes: &[u8]) -> Result<Vec<f32>, ConvertError> {
    match v.dtype {
        Dtype::F16 => Ok(bytes
            .chunks_exact(2)
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect()),
        Dtype::F32 => Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()),
        other => Err(ConvertError::Unsupported(format!(
            "{}: dtype {other:?} (only float16/float32 checkpoints can be converted)",
            v.name
        ))),
    }
}

struct Out<'m, 'a> {
    model: &'m Ct2Model<'a>,
    tensors: Vec<Tensor<'a>>,
}

impl<'a> Out<'_, 'a> {
    /// A whole tensor. whisper.cpp's loader size-checks every tensor against its own type
    /// choice: 1-D tensors, conv biases and positional tables are f32, everything else f16.
    fn whole(&mut self, src: &str, dst: &str) -> Result<(), ConvertError> {
        let v = self.model.require(src)?.clone();
        let n = v.numel();
        self.push(&v, dst, v.dims.clone(), 0, n)
    }

    /// Rows `[r0, r1)` of a 2-D weight, or elements `[r0, r1)` of a 1-D bias.
    fn rows(&mut self, src: &str, dst: &str, r0: usize, r1: usize) -> Result<(), ConvertError> {
        let v = self.model.require(src)?.clone();
        let row: usize = v.dims.iter().skip(1).product();
        let mut dims = v.dims.clone();
        if dims.is_empty() || r1 > dims[0] || r0 > r1 {
            return Err(ConvertError::Format {
                offset: 0,
                detail: format!("{src} has shape {:?}, cannot take rows {r0}..{r1}", v.dims),
            });
        }
        dims[0] = r1 - r0;
        self.push(&v, dst, dims, r0 * row, r1 * row)
    }

    fn push(
        &mut self,
        v: &Variable<'a>,
        dst: &str,
        mut dims: Vec<usize>,
        from: usize,
        to: usize,
    ) -> Result<(), ConvertError> {
        let bytes = slice(v, from, to)?;
        let is_conv_bias = dst.starts_with("encoder.conv") && dst.ends_with(".bias");
        if is_conv_bias {
            // whisper.cpp broadcasts the conv bias over time: it expects shape (channels, 1).
            dims.push(1);
        }
        let as_f32 = dims.len() == 1 || is_conv_bias || dst.ends_with("positional_embedding");
        let data = if as_f32 {
            TensorData::F32(f32_values(v, bytes)?)
        } else {
            TensorData::F16(f16_bytes(v, bytes)?)
        };
        self.tensors.push(Tensor {
            name: dst.to_string(),
            dims,
            data,
        });
        Ok(())
    }

    /// Whisper has no key bias; CTranslate2 stores zeros in its place. Anything else means a
    /// model whisper.cpp cannot represent, so refuse rather than silently drop weights.
    fn expect_zeros(&self, src: &str, from: usize, to: usize) -> Result<(), ConvertError> {
        let v = self.model.require(src)?;
        let values = f32_values(v, slice(v, from, to)?)?;
        if values.iter().any(|&x| x != 0.0) {
            return Err(ConvertError::Unsupported(format!(
                "{src}[{from}..{to}] (the key bias) is not zero; whisper.cpp has no key bias"
            )));
        }
        Ok(())
    }

    fn layer_norm(&mut self, src: &str, dst: &str) -> Result<(), ConvertError> {
        self.whole(&format!("{src}/gamma"), &format!("{dst}.weight"))?;
        self.whole(&format!("{src}/beta"), &format!("{dst}.bias"))
    }

    fn linear(&mut self, src: &str, dst: &str) -> Result<(), ConvertError> {
        self.whole(&format!("{src}/weight"), &format!("{dst}.weight"))?;
        self.whole(&format!("{src}/bias"), &format!("{dst}.bias"))
    }

    /// Fused self-attention: `linear_0` stacks query, key and value rows.
    fn self_attention(&mut self, src: &str, dst: &str, state: usize) -> Result<(), ConvertError> {
        let (w, b) = (
            format!("{src}/linear_0/weight"),
            format!("{src}/linear_0/bias"),
        );
        self.layer_norm(&format!("{src}/layer_norm"), &format!("{dst}_ln"))?;
        self.rows(&w, &format!("{dst}.query.weight"), 0, state)?;
        self.rows(&b, &format!("{dst}.query.bias"), 0, state)?;
        self.rows(&w, &format!("{dst}.key.weight"), state, 2 * state)?;
        self.expect_zeros(&b, state, 2 * state)?;
        self.rows(&w, &format!("{dst}.value.weight"), 2 * state, 3 * state)?;
        self.rows(&b, &format!("{dst}.value.bias"), 2 * state, 3 * state)?;
        // Self-attention's output projection is linear_1 (cross-attention's is linear_2).
        self.linear(&format!("{src}/linear_1"), &format!("{dst}.out"))
    }

    /// Cross-attention: `linear_0` is the query, `linear_1` stacks key and value rows.
    fn cross_attention(&mut self, src: &str, dst: &str, state: usize) -> Result<(), ConvertError> {
        let (w, b) = (
            format!("{src}/linear_1/weight"),
            format!("{src}/linear_1/bias"),
        );
        self.layer_norm(&format!("{src}/layer_norm"), &format!("{dst}_ln"))?;
        self.linear(&format!("{src}/linear_0"), &format!("{dst}.query"))?;
        self.rows(&w, &format!("{dst}.key.weight"), 0, state)?;
        self.expect_zeros(&b, 0, state)?;
        self.rows(&w, &format!("{dst}.value.weight"), state, 2 * state)?;
        self.rows(&b, &format!("{dst}.value.bias"), state, 2 * state)?;
        self.linear(&format!("{src}/linear_2"), &format!("{dst}.out"))
    }

    fn mlp(&mut self, src: &str, dst: &str) -> Result<(), ConvertError> {
        self.layer_norm(&format!("{src}/layer_norm"), &format!("{dst}.mlp_ln"))?;
        self.linear(&format!("{src}/linear_0"), &format!("{dst}.mlp.0"))?;
        self.linear(&format!("{src}/linear_1"), &format!("{dst}.mlp.2"))
    }
}

/// Every tensor whisper.cpp expects, in a fixed order (so output bytes are deterministic).
pub fn tensors<'a>(model: &Ct2Model<'a>, hp: &Hparams) -> Result<Vec<Tensor<'a>>, ConvertError> {
    let mut out = Out {
        model,
        tensors: Vec::new(),
    };
    let a_state = hp.n_audio_state as usize;
    let t_state = hp.n_text_state as usize;

    out.whole(
        "encoder/position_encodings/encodings",
        "encoder.positional_embedding",
    )?;
    for c in ["conv1", "conv2"] {
        out.linear(&format!("encoder/{c}"), &format!("encoder.{c}"))?;
    }
    for i in 0..hp.n_audio_layer as usize {
        let (src, dst) = (format!("encoder/layer_{i}"), format!("encoder.blocks.{i}"));
        out.self_attention(
            &format!("{src}/self_attention"),
            &format!("{dst}.attn"),
            a_state,
        )?;
        out.mlp(&format!("{src}/ffn"), &dst)?;
    }
    out.layer_norm("encoder/layer_norm", "encoder.ln_post")?;

    out.whole(
        "decoder/position_encodings/encodings",
        "decoder.positional_embedding",
    )?;
    out.whole(
        "decoder/embeddings/weight",
        "decoder.token_embedding.weight",
    )?;
    for i in 0..hp.n_text_layer as usize {
        let (src, dst) = (format!("decoder/layer_{i}"), format!("decoder.blocks.{i}"));
        out.self_attention(
            &format!("{src}/self_attention"),
            &format!("{dst}.attn"),
            t_state,
        )?;
        out.cross_attention(
            &format!("{src}/attention"),
            &format!("{dst}.cross_attn"),
            t_state,
        )?;
        out.mlp(&format!("{src}/ffn"), &dst)?;
    }
    out.layer_norm("decoder/layer_norm", "decoder.ln")?;
    Ok(out.tensors)
}

/// How many tensors whisper.cpp's loader requires for a given depth: it fails unless the file
/// has exactly this many.
pub fn expected_tensor_count(n_audio_layer: usize, n_text_layer: usize) -> usize {
    // encoder: positional, 2 convs × (w, b), ln_post (w, b); per block 15.
    // decoder: positional, token embedding, ln (w, b); per block 24.
    7 + 15 * n_audio_layer + 4 + 24 * n_text_layer
}
