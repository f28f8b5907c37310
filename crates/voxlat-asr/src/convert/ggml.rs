//! Writer for the legacy ggml Whisper file that whisper.cpp loads: magic, hyperparameters,
//! mel filterbank, vocabulary, then tensors with their dimensions in reverse (ggml) order.

use std::borrow::Cow;
use std::io::{self, Write};

pub const MAGIC: u32 = 0x6767_6d6c;
/// ggml tensor type codes.
pub const GGML_F32: i32 = 0;
pub const GGML_F16: i32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hparams {
    pub n_vocab: i32,
    pub n_audio_ctx: i32,
    pub n_audio_state: i32,
    pub n_audio_head: i32,
    pub n_audio_layer: i32,
    pub n_text_ctx: i32,
    pub n_text_state: i32,
    pub n_text_head: i32,
    pub n_text_layer: i32,
    pub n_mels: i32,
    /// 1 = mostly f16; whisper.cpp uses it to type the 2-D weights.
    pub ftype: i32,
}

impl Hparams {
    fn fields(&self) -> [i32; 11] {
        [
            self.n_vocab,
            self.n_audio_ctx,
            self.n_audio_state,
            self.n_audio_head,
            self.n_audio_layer,
            self.n_text_ctx,
            self.n_text_state,
            self.n_text_head,
            self.n_text_layer,
            self.n_mels,
            self.ftype,
        ]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum TensorData<'a> {
    /// Little-endian IEEE half floats, usually borrowed straight from the source file.
    F16(Cow<'a, [u8]>),
    F32(Vec<f32>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tensor<'a> {
    pub name: String,
    /// Row-major (numpy) order; reversed on write.
    pub dims: Vec<usize>,
    pub data: TensorData<'a>,
}

fn i32_of(n: usize, what: &str) -> io::Result<i32> {
    i32::try_from(n).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{what} {n} does not fit the ggml format's i32"),
        )
    })
}

fn put_i32(w: &mut impl Write, v: i32) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

pub fn write_header(
    w: &mut impl Write,
    hp: &Hparams,
    mel: &[f32],
    n_mel: usize,
    n_bins: usize,
    vocab: &[Vec<u8>],
) -> io::Result<()> {
    if mel.len() != n_mel * n_bins {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "mel filterbank has {} values, expected {n_mel}×{n_bins}",
                mel.len()
            ),
        ));
    }
    w.write_all(&MAGIC.to_le_bytes())?;
    for v in hp.fields() {
        put_i32(w, v)?;
    }
    put_i32(w, i32_of(n_mel, "mel count")?)?;
    put_i32(w, i32_of(n_bins, "mel bins")?)?;
    for v in mel {
        w.write_all(&v.to_le_bytes())?;
    }
    put_i32(w, i32_of(vocab.len(), "vocabulary size")?)?;
    for tok in vocab {
        put_i32(w, i32_of(tok.len(), "token length")?)?;
        w.write_all(tok)?;
    }
    Ok(())
}

pub fn write_tensor(w: &mut impl Write, t: &Tensor<'_>) -> io::Result<()> {
    let numel: usize = t.dims.iter().product();
    let (ttype, len) = match &t.data {
        TensorData::F16(b) => (GGML_F16, b.len() / 2),
        TensorData::F32(v) => (GGML_F32, v.len()),
    };
    if len != numel {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {len} values for shape {:?}", t.name, t.dims),
        ));
    }
    put_i32(w, i32_of(t.dims.len(), "rank")?)?;
    put_i32(w, i32_of(t.name.len(), "name length")?)?;
    put_i32(w, ttype)?;
    for &d in t.dims.iter().rev() {
        put_i32(w, i32_of(d, "dimension")?)?;
    }
    w.write_all(t.name.as_bytes())?;
    match &t.data {
        TensorData::F16(b) => w.write_all(b)?,
        TensorData::F32(v) => {
            for x in v {
                w.write_all(&x.to_le_bytes())?;
            }
        }
    }
    Ok(())
}

/// A reader for the same format, used by tests to check what the writer produced.
#[cfg(test)]
pub mod read {
    use super::*;

    #[derive(Debug)]
    pub struct Parsed {
        pub hparams: Hparams,
        pub n_mel: usize,
        pub n_bins: usize,
        pub mel: Vec<f32>,
        pub vocab: Vec<Vec<u8>>,
        /// (name, ggml-order dims, type, raw bytes)
        pub tensors: Vec<(String, Vec<usize>, i32, Vec<u8>)>,
    }

    pub fn parse(buf: &[u8]) -> Parsed {
        let mut pos = 0usize;
        let i32_at = |pos: &mut usize| {
            let v = i32::from_le_bytes(buf[*pos..*pos + 4].try_into().unwrap());
            *pos += 4;
            v
        };
        assert_eq!(i32_at(&mut pos) as u32, MAGIC);
        let f: Vec<i32> = (0..11).map(|_| i32_at(&mut pos)).collect();
        let hparams = Hparams {
            n_vocab: f[0],
            n_audio_ctx: f[1],
            n_audio_state: f[2],
            n_audio_head: f[3],
            n_audio_layer: f[4],
            n_text_ctx: f[5],
            n_text_state: f[6],
            n_text_head: f[7],
            n_text_layer: f[8],
            n_mels: f[9],
            ftype: f[10],
        };
        let n_mel = i32_at(&mut pos) as usize;
        let n_bins = i32_at(&mut pos) as usize;
        let mel = (0..n_mel * n_bins)
            .map(|_| f32::from_bits(i32_at(&mut pos) as u32))
            .collect();
        let n_vocab = i32_at(&mut pos) as usize;
        let mut vocab = Vec::new();
        for _ in 0..n_vocab {
            let n = i32_at(&mut pos) as usize;
            vocab.push(buf[pos..pos + n].to_vec());
            pos += n;
        }
        let mut tensors = Vec::new();
        while pos < buf.len() {
            let rank = i32_at(&mut pos) as usize;
            let name_len = i32_at(&mut pos) as usize;
            let ttype = i32_at(&mut pos);
            let dims: Vec<usize> = (0..rank).map(|_| i32_at(&mut pos) as usize).collect();
            let name = String::from_utf8(buf[pos..pos + name_len].to_vec()).unwrap();
            pos += name_len;
            let size = if ttype == GGML_F32 { 4 } else { 2 };
            let n = dims.iter().product::<usize>() * size;
            tensors.push((name, dims, ttype, buf[pos..pos + n].to_vec()));
            pos += n;
        }
        Parsed {
            hparams,
            n_mel,
            n_bins,
            mel,
            vocab,
            tensors,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp() -> Hparams {
        Hparams {
            n_vocab: 5,
            n_audio_ctx: 6,
            n_audio_state: 4,
            n_audio_head: 2,
            n_audio_layer: 1,
            n_text_ctx: 3,
            n_text_state: 4,
            n_text_head: 2,
            n_text_layer: 1,
            n_mels: 2,
            ftype: 1,
        }
    }

    #[test]
    fn header_and_tensors_round_trip_with_reversed_dims() {
        let mut out = Vec::new();
        let vocab = vec![b"a".to_vec(), b" bc".to_vec()];
        write_header(
            &mut out,
            &hp(),
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            2,
            3,
            &vocab,
        )
        .unwrap();
        let f16: Vec<u8> = (0..6u16)
            .flat_map(|i| half::f16::from_f32(i as f32).to_le_bytes())
            .collect();
        write_tensor(
            &mut out,
            &Tensor {
                name: "w".into(),
                dims: vec![2, 3],
                data: TensorData::F16(Cow::Borrowed(&f16)),
            },
        )
        .unwrap();
        write_tensor(
            &mut out,
            &Tensor {
                name: "bias".into(),
                dims: vec![3, 1],
                data: TensorData::F32(vec![0.5, -1.0, 2.0]),
            },
        )
        .unwrap();

        // Magic is the first 4 bytes, little-endian "lmgg".
        assert_eq!(&out[..4], b"lmgg");
        let p = read::parse(&out);
        assert_eq!(p.hparams, hp());
        assert_eq!((p.n_mel, p.n_bins), (2, 3));
        assert_eq!(p.mel, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(p.vocab, vocab);
        assert_eq!(p.tensors.len(), 2);
        assert_eq!(p.tensors[0].0, "w");
        assert_eq!(p.tensors[0].1, vec![3, 2], "dims must be reversed");
        assert_eq!(p.tensors[0].2, GGML_F16);
        assert_eq!(p.tensors[0].3, f16);
        assert_eq!(p.tensors[1].1, vec![1, 3]);
        assert_eq!(p.tensors[1].2, GGML_F32);
        assert_eq!(&p.tensors[1].3[..4], &0.5f32.to_le_bytes());
    }

    #[test]
    fn refuses_mismatched_shapes() {
        let mut out = Vec::new();
        assert!(write_header(&mut out, &hp(), &[1.0; 5], 2, 3, &[]).is_err());
        let t = Tensor {
            name: "x".into(),
            dims: vec![4],
            data: TensorData::F32(vec![0.0; 3]),
        };
        assert!(write_tensor(&mut out, &t).is_err());
    }
}
