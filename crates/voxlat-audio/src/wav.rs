//! WAV files of any common encoding (8/16/24/32-bit integer, 32-bit float; any channel
//! count; any rate) read as mono f32. What is decodable is kept: a truncated file yields the
//! samples before the cut and a warning, not an error.

use crate::resample::resample;
use crate::Audio;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WavError {
    #[error("{path}: file not found")]
    NotFound { path: PathBuf },
    #[error("{path}: cannot read: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("{path}: not a WAV file this reader understands ({detail}); convert it, e.g. `sox in.ext -r 16000 -c 1 -b 16 out.wav`")]
    Format { path: PathBuf, detail: String },
    #[error("{path}: contains no audio samples")]
    Empty { path: PathBuf },
    #[error(
        "{path}: sample {index} is not a finite number (NaN or infinity); the file is corrupt"
    )]
    NotFinite { path: PathBuf, index: usize },
    #[error("{path}: cannot write: {detail}")]
    Write { path: PathBuf, detail: String },
}

/// A decoded file, with anything odd about it noted.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub audio: Audio,
    pub channels: u16,
    pub bits: u16,
    pub float: bool,
    /// Problems that did not stop decoding (e.g. truncation).
    pub warnings: Vec<String>,
}

/// Reads any WAV as mono (channels averaged) f32 at its own rate.
pub fn read(path: &Path) -> Result<Decoded, WavError> {
    if !path.exists() {
        return Err(WavError::NotFound { path: path.into() });
    }
    let file = std::fs::File::open(path).map_err(|e| WavError::Read {
        path: path.into(),
        detail: e.to_string(),
    })?;
    decode(std::io::BufReader::new(file), path)
}

/// Decodes WAV bytes from any reader; `path` only names the input in errors and warnings.
/// Nothing in the header is trusted: a declared length that the data does not back becomes a
/// truncation warning, not an allocation of the declared size.
pub fn decode<R: std::io::Read>(input: R, path: &Path) -> Result<Decoded, WavError> {
    let mut reader = hound::WavReader::new(input).map_err(|e| match e {
        hound::Error::IoError(io) => WavError::Read {
            path: path.into(),
            detail: io.to_string(),
        },
        other => WavError::Format {
            path: path.into(),
            detail: other.to_string(),
        },
    })?;
    let spec = reader.spec();
    let channels = spec.channels.max(1);
    let mut warnings = Vec::new();
    let expected = reader.len() as usize;
    // The header's sample count is only a claim: reserve at most a minute of CD audio up front
    // and let the vector grow with what is really there.
    let mut interleaved: Vec<f32> = Vec::with_capacity(expected.min(44_100 * 2 * 60));
    let mut cut: Option<String> = None;
    match spec.sample_format {
        hound::SampleFormat::Float => {
            for s in reader.samples::<f32>() {
                match s {
                    Ok(v) => interleaved.push(v),
                    Err(e) => {
                        cut = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        hound::SampleFormat::Int => {
            // Full scale of a signed integer of `bits` bits; 8-bit WAV is unsigned on disk but
            // hound hands it out already centred on zero.
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(8, 32) - 1)) as f32;
            for s in reader.samples::<i32>() {
                match s {
                    Ok(v) => interleaved.push(v as f32 * scale),
                    Err(e) => {
                        cut = Some(e.to_string());
                        break;
                    }
                }
            }
        }
    }
    if let Some(detail) = cut {
        warnings.push(format!(
            "{}: truncated ({detail}): kept {} of {} samples",
            path.display(),
            interleaved.len(),
            expected
        ));
    }
    if let Some(index) = interleaved.iter().position(|v| !v.is_finite()) {
        return Err(WavError::NotFinite {
            path: path.into(),
            index,
        });
    }
    let frames = interleaved.len() / channels as usize;
    if frames == 0 {
        return Err(WavError::Empty { path: path.into() });
    }
    let samples: Vec<f32> = interleaved
        .chunks_exact(channels as usize)
        .map(|f| f.iter().sum::<f32>() / f32::from(channels))
        .collect();
    Ok(Decoded {
        audio: Audio {
            samples,
            rate: spec.sample_rate,
        },
        channels,
        bits: spec.bits_per_sample,
        float: spec.sample_format == hound::SampleFormat::Float,
        warnings,
    })
}

/// Reads any WAV and resamples it to `rate` (mono).
pub fn read_at(path: &Path, rate: u32) -> Result<Decoded, WavError> {
    let mut d = read(path)?;
    if d.audio.rate != rate {
        d.audio = Audio {
            samples: resample(&d.audio.samples, d.audio.rate, rate),
            rate,
        };
    }
    Ok(d)
}

/// Writes mono 16-bit PCM, atomically (temp file + rename).
pub fn write(path: &Path, samples: &[f32], rate: u32) -> Result<(), WavError> {
    let err = |detail: String| WavError::Write {
        path: path.into(),
        detail,
    };
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut cursor = std::io::Cursor::new(Vec::with_capacity(samples.len() * 2 + 44));
    {
        let mut w = hound::WavWriter::new(&mut cursor, spec).map_err(|e| err(e.to_string()))?;
        for &s in samples {
            let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
            w.write_sample(v).map_err(|e| err(e.to_string()))?;
        }
        w.finalize().map_err(|e| err(e.to_string()))?;
    }
    voxlat_core::fsio::write_atomic(path, cursor.get_ref()).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_spec(path: &Path, spec: hound::WavSpec, frames: usize) {
        let mut w = hound::WavWriter::create(path, spec).unwrap();
        for i in 0..frames {
            for c in 0..spec.channels {
                let x = ((i as f32) * 0.05).sin() * 0.5 * if c == 0 { 1.0 } else { 0.0 };
                match (spec.sample_format, spec.bits_per_sample) {
                    (hound::SampleFormat::Float, _) => w.write_sample(x).unwrap(),
                    (_, 8) => w.write_sample((x * 127.0) as i8).unwrap(),
                    (_, 16) => w.write_sample((x * 32767.0) as i16).unwrap(),
                    (_, 24) => w.write_sample((x * 8_388_607.0) as i32).unwrap(),
                    _ => w.write_sample((x * 2_147_483_647.0) as i32).unwrap(),
                }
            }
        }
        w.finalize().unwrap();
    }

    #[test]
    fn every_common_encoding_decodes_to_the_same_mono_signal() {
        let d = tempfile::tempdir().unwrap();
        let cases = [
            (1, 8, hound::SampleFormat::Int),
            (1, 16, hound::SampleFormat::Int),
            (1, 24, hound::SampleFormat::Int),
            (1, 32, hound::SampleFormat::Int),
            (1, 32, hound::SampleFormat::Float),
            (2, 16, hound::SampleFormat::Int),
        ];
        for (ch, bits, fmt) in cases {
            let p = d.path().join(format!("{ch}-{bits}-{fmt:?}.wav"));
            write_spec(
                &p,
                hound::WavSpec {
                    channels: ch,
                    sample_rate: 16000,
                    bits_per_sample: bits,
                    sample_format: fmt,
                },
                1600,
            );
            let dec = read(&p).unwrap();
            assert_eq!(dec.audio.samples.len(), 1600, "{p:?}");
            // Stereo with the right channel silent averages to half amplitude.
            let want = if ch == 2 { 0.25 } else { 0.5 };
            let peak = dec.audio.samples.iter().fold(0f32, |m, v| m.max(v.abs()));
            let tol = if bits == 8 { 0.02 } else { 0.001 };
            assert!((peak - want).abs() < tol, "{p:?}: peak {peak}");
            assert!(dec.warnings.is_empty());
        }
    }

    #[test]
    fn resampled_read_has_the_right_length() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("44k.wav");
        write_spec(
            &p,
            hound::WavSpec {
                channels: 2,
                sample_rate: 44100,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            },
            44100,
        );
        let dec = read_at(&p, 16000).unwrap();
        assert_eq!(dec.audio.rate, 16000);
        assert!(
            (dec.audio.samples.len() as i64 - 16000).abs() <= 2,
            "{}",
            dec.audio.samples.len()
        );
    }

    #[test]
    fn truncated_file_keeps_what_was_decodable() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.wav");
        write_spec(
            &p,
            hound::WavSpec {
                channels: 1,
                sample_rate: 16000,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            },
            1000,
        );
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 501]).unwrap();
        let dec = read(&p).unwrap();
        assert!(
            dec.audio.samples.len() < 1000 && dec.audio.samples.len() > 700,
            "{}",
            dec.audio.samples.len()
        );
        assert!(dec.warnings[0].contains("truncated"), "{:?}", dec.warnings);
    }

    #[test]
    fn bad_files_are_named_in_the_error() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("missing.wav");
        assert!(matches!(read(&missing), Err(WavError::NotFound { .. })));
        let junk = d.path().join("junk.wav");
        std::fs::write(&junk, b"definitely not RIFF").unwrap();
        let e = read(&junk).unwrap_err();
        assert!(
            matches!(e, WavError::Format { .. }) && e.to_string().contains("junk.wav"),
            "{e}"
        );
        let empty = d.path().join("empty.wav");
        write_spec(
            &empty,
            hound::WavSpec {
                channels: 1,
                sample_rate: 16000,
                bits_per_sample: 16,
                sample_format: hound::SampleFormat::Int,
            },
            0,
        );
        assert!(matches!(read(&empty), Err(WavError::Empty { .. })));
        let nan = d.path().join("nan.wav");
        let mut w = hound::WavWriter::create(
            &nan,
            hound::WavSpec {
                channels: 1,
                sample_rate: 16000,
                bits_per_sample: 32,
                sample_format: hound::SampleFormat::Float,
            },
        )
        .unwrap();
        for v in [0.0f32, f32::NAN, 0.1] {
            w.write_sample(v).unwrap();
        }
        w.finalize().unwrap();
        assert!(matches!(
            read(&nan),
            Err(WavError::NotFinite { index: 1, .. })
        ));
    }

    #[test]
    fn write_then_read_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("o.wav");
        let x: Vec<f32> = (0..800).map(|i| (i as f32 * 0.01).sin() * 0.3).collect();
        write(&p, &x, 22050).unwrap();
        let back = read(&p).unwrap();
        assert_eq!(back.audio.rate, 22050);
        assert!(x
            .iter()
            .zip(&back.audio.samples)
            .all(|(a, b)| (a - b).abs() < 1e-4));
    }
}
