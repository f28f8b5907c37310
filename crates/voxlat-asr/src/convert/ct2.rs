//! Reader for CTranslate2's `model.bin`: a flat list of named, typed tensors plus aliases.
//!
//! Layout (little-endian): u32 binary version, spec name, u32 revision, u32 variable count;
//! each variable is name, u8 rank, rank×u32 dims, u8 dtype, u32 byte count, raw bytes; then u32
//! alias count and (alias, target) name pairs. Strings are a u16 length that counts a trailing
//! NUL, then the bytes.

use super::ConvertError;

/// CTranslate2's `DataType` enum values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    I8,
    I16,
    I32,
    F16,
    Bf16,
}

impl Dtype {
    fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0 => Dtype::F32,
            1 => Dtype::I8,
            2 => Dtype::I16,
            3 => Dtype::I32,
            4 => Dtype::F16,
            5 => Dtype::Bf16,
            _ => return None,
        })
    }

    pub fn code(self) -> u8 {
        match self {
            Dtype::F32 => 0,
            Dtype::I8 => 1,
            Dtype::I16 => 2,
            Dtype::I32 => 3,
            Dtype::F16 => 4,
            Dtype::Bf16 => 5,
        }
    }

    pub fn size(self) -> usize {
        match self {
            Dtype::I8 => 1,
            Dtype::I16 | Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
        }
    }
}

/// One tensor, borrowing its bytes from the file buffer.
#[derive(Debug, Clone)]
pub struct Variable<'a> {
    pub name: String,
    pub dims: Vec<usize>,
    pub dtype: Dtype,
    pub data: &'a [u8],
}

impl Variable<'_> {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

#[derive(Debug)]
pub struct Ct2Model<'a> {
    pub binary_version: u32,
    pub spec: String,
    pub revision: u32,
    pub variables: Vec<Variable<'a>>,
    pub aliases: Vec<(String, String)>,
}

impl<'a> Ct2Model<'a> {
    pub fn get(&self, name: &str) -> Option<&Variable<'a>> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// Like [`get`](Self::get) but an absent tensor is an error naming it.
    pub fn require(&self, name: &str) -> Result<&Variable<'a>, ConvertError> {
        self.get(name)
            .ok_or_else(|| ConvertError::MissingTensor(name.to_string()))
    }
}

/// Binary versions this reader understands. Version 6 is what current CTranslate2 writes;
/// older ones differ in how byte counts are stored, so they are refused rather than misread.
const SUPPORTED_VERSION: u32 = 6;

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ConvertError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(ConvertError::Truncated {
                what: what.to_string(),
                offset: self.pos,
            }),
        }
    }

    fn u8(&mut self, what: &str) -> Result<u8, ConvertError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, ConvertError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, ConvertError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self, what: &str) -> Result<String, ConvertError> {
        let len = self.u16(what)? as usize;
        let bytes = self.take(len, what)?;
        let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        String::from_utf8(bytes.to_vec()).map_err(|_| ConvertError::Format {
            offset: self.pos,
            detail: format!("{what} is not UTF-8"),
        })
    }
}

/// Parses a whole `model.bin` held in memory. Every length is bounds-checked, so a truncated
/// or corrupt file yields an error with the offset, never a panic.
pub fn parse(buf: &[u8]) -> Result<Ct2Model<'_>, ConvertError> {
    let mut c = Cursor { buf, pos: 0 };
    let binary_version = c.u32("binary version")?;
    if binary_version != SUPPORTED_VERSION {
        return Err(ConvertError::Format {
            offset: 0,
            detail: format!(
                "CTranslate2 binary version {binary_version}, expected {SUPPORTED_VERSION}"
            ),
        });
    }
    let spec = c.string("spec name")?;
    let revision = c.u32("spec revision")?;
    let count = c.u32("variable count")?;
    let mut variables = Vec::new();
    for _ in 0..count {
        let name = c.string("variable name")?;
        let rank = c.u8("rank")?;
        let mut dims = Vec::with_capacity(rank as usize);
        for _ in 0..rank {
            dims.push(c.u32("dimension")? as usize);
        }
        let offset = c.pos;
        let code = c.u8("dtype")?;
        let dtype = Dtype::from_code(code).ok_or_else(|| ConvertError::Format {
            offset,
            detail: format!("{name}: unknown dtype code {code}"),
        })?;
        let nbytes = c.u32("byte count")? as usize;
        let numel = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.size()));
        if numel != Some(nbytes) {
            return Err(ConvertError::Format {
                offset,
                detail: format!("{name}: {nbytes} bytes do not match shape {dims:?} of {dtype:?}"),
            });
        }
        let data = c.take(nbytes, &name)?;
        variables.push(Variable {
            name,
            dims,
            dtype,
            data,
        });
    }
    let mut aliases = Vec::new();
    // Files written without aliases simply end here.
    if c.pos < buf.len() {
        let n = c.u32("alias count")?;
        for _ in 0..n {
            let alias = c.string("alias name")?;
            let target = c.string("alias target")?;
            aliases.push((alias, target));
        }
    }
    Ok(Ct2Model {
        binary_version,
        spec,
        revision,
        variables,
        aliases,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a `model.bin` image the way CTranslate2's Python writer does.
    #[derive(Default)]
    pub struct Builder {
        vars: Vec<(String, Vec<u32>, Dtype, Vec<u8>)>,
        aliases: Vec<(String, String)>,
    }

    fn put_str(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&((s.len() + 1) as u16).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }

    impl Builder {
        pub fn var(mut self, name: &str, dims: &[u32], dtype: Dtype, data: Vec<u8>) -> Self {
            self.vars.push((name.into(), dims.to_vec(), dtype, data));
            self
        }

        /// An f16 tensor whose element i holds `base + i` (exact in f16 for small values).
        pub fn f16(self, name: &str, dims: &[u32], base: f32) -> Self {
            let n: u32 = dims.iter().product();
            let data = (0..n)
                .flat_map(|i| half::f16::from_f32(base + i as f32).to_le_bytes())
                .collect();
            self.var(name, dims, Dtype::F16, data)
        }

        pub fn alias(mut self, a: &str, t: &str) -> Self {
            self.aliases.push((a.into(), t.into()));
            self
        }

        pub fn build(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&6u32.to_le_bytes());
            put_str(&mut out, "WhisperSpec");
            out.extend_from_slice(&3u32.to_le_bytes());
            out.extend_from_slice(&(self.vars.len() as u32).to_le_bytes());
            for (name, dims, dtype, data) in &self.vars {
                put_str(&mut out, name);
                out.push(dims.len() as u8);
                for d in dims {
                    out.extend_from_slice(&d.to_le_bytes());
                }
                out.push(dtype.code());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(data);
            }
            out.extend_from_slice(&(self.aliases.len() as u32).to_le_bytes());
            for (a, t) in &self.aliases {
                put_str(&mut out, a);
                put_str(&mut out, t);
            }
            out
        }
    }

    #[test]
    fn parses_variables_scalars_and_aliases() {
        let img = Builder::default()
            .var(
                "encoder/num_heads",
                &[],
                Dtype::I16,
                6i16.to_le_bytes().to_vec(),
            )
            .f16("decoder/embeddings/weight", &[3, 2], 1.0)
            .alias("decoder/projection/weight", "decoder/embeddings/weight")
            .build();
        let m = parse(&img).unwrap();
        assert_eq!(m.spec, "WhisperSpec");
        assert_eq!(m.revision, 3);
        assert_eq!(m.variables.len(), 2);
        let heads = m.require("encoder/num_heads").unwrap();
        assert_eq!(heads.dims, Vec::<usize>::new());
        assert_eq!(heads.data, &[6, 0]);
        let emb = m.require("decoder/embeddings/weight").unwrap();
        assert_eq!(emb.dims, vec![3, 2]);
        assert_eq!(emb.numel(), 6);
        assert_eq!(emb.data.len(), 12);
        assert_eq!(
            half::f16::from_le_bytes([emb.data[10], emb.data[11]]).to_f32(),
            6.0
        );
        assert_eq!(
            m.aliases,
            vec![(
                "decoder/projection/weight".to_string(),
                "decoder/embeddings/weight".to_string()
            )]
        );
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let img = Builder::default()
            .f16("a", &[2, 2], 0.0)
            .alias("b", "a")
            .build();
        for len in 0..img.len() {
            // Cutting exactly before the alias block (count + two 4-byte names) leaves a
            // valid alias-less file.
            let r = parse(&img[..len]);
            if len == img.len() - 12 {
                continue;
            }
            assert!(r.is_err(), "prefix of {len} bytes parsed");
        }
        assert!(parse(&img).is_ok());
    }

    #[test]
    fn rejects_wrong_version_and_inconsistent_sizes() {
        let mut img = Builder::default().f16("a", &[2], 0.0).build();
        img[0] = 5;
        assert!(matches!(parse(&img), Err(ConvertError::Format { .. })));

        let bad = Builder::default()
            .var("a", &[4], Dtype::F16, vec![0; 6])
            .build();
        let err = parse(&bad).unwrap_err().to_string();
        assert!(err.contains("do not match shape"), "{err}");

        let bad_dtype = Builder::default()
            .var("a", &[1], Dtype::I8, vec![0])
            .build();
        let mut bad_dtype = bad_dtype;
        // name "a\0" => dtype byte sits after: 4+2+12+4+4 header, 2+2 name, 1 rank, 4 dim.
        let pos = 4 + 2 + 12 + 4 + 4 + 2 + 2 + 1 + 4;
        bad_dtype[pos] = 9;
        let err = parse(&bad_dtype).unwrap_err().to_string();
        assert!(err.contains("unknown dtype code 9"), "{err}");
    }
}
