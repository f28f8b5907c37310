//! WAV files of any common encoding (8/16/24/32-bit integer, 32-bit float; 1–32 channels;
//! 8–384 kHz) read as mono f32. What is decodable is kept: a truncated file yields the
//! samples before the cut and a warning, not an error. Header numbers outside those bounds are
//! refused before anything is sized from them.

use crate::resample::{resample, RATE_RANGE};
use crate::Audio;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// The channel counts a header may declare. Beyond 32 it is corrupt rather than a
/// multichannel recording, and every channel is decoded only to be averaged away.
pub const CHANNELS_RANGE: RangeInclusive<u16> = 1..=32;

/// The longest file `read`, `read_at` and `decode` accept, in seconds of audio. Ten minutes
/// holds any utterance, turn or test recording; past it the samples alone would take hundreds
/// of megabytes (and Whisper minutes). The count is made on the decoded samples, not on the
/// header's claim, so a file is refused as soon as its real audio passes the cap.
pub const MAX_DURATION_S: u32 = 600;

#[derive(Debug, thiserror::Error)]
pub enum WavError {
    #[error("{path}: file not found")]
    NotFound { path: PathBuf },
    #[error("{path}: cannot read: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("{path}: not a WAV file this reader understands ({detail}); convert it, e.g. `sox in.ext -r 16000 -c 1 -b 16 out.wav`")]
    Format { path: PathBuf, detail: String },
    /// A header field outside the bounds this reader supports (`field` as in the WAV header:
    /// `sample_rate` in Hz, `channels`).
    #[error("{path}: header field {field} = {value}{unit} is outside the supported range {min}–{max}{unit}")]
    OutOfRange {
        path: PathBuf,
        field: &'static str,
        value: u64,
        min: u64,
        max: u64,
        unit: &'static str,
    },
    /// More audio than the cap; `seconds` is how much had been decoded when it was passed.
    #[error("{path}: longer than the {max_s} s of audio allowed (refused after {seconds:.1} s)")]
    TooLong {
        path: PathBuf,
        seconds: f64,
        max_s: u32,
    },
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
    read_limited(path, MAX_DURATION_S)
}

/// As [`read`], refusing files with more than `max_s` seconds of audio.
pub fn read_limited(path: &Path, max_s: u32) -> Result<Decoded, WavError> {
    if !path.exists() {
        return Err(WavError::NotFound { path: path.into() });
    }
    let file = std::fs::File::open(path).map_err(|e| WavError::Read {
        path: path.into(),
        detail: e.to_string(),
    })?;
    decode_limited(std::io::BufReader::new(file), path, max_s)
}

/// Decodes WAV bytes from any reader; `path` only names the input in errors and warnings.
/// Nothing in the header is trusted: a declared length that the data does not back becomes a
/// truncation warning, not an allocation of the declared size.
pub fn decode<R: std::io::Read>(input: R, path: &Path) -> Result<Decoded, WavError> {
    decode_limited(input, path, MAX_DURATION_S)
}

/// As [`decode`], refusing more than `max_s` seconds of audio.
pub fn decode_limited<R: std::io::Read>(
    input: R,
    path: &Path,
    max_s: u32,
) -> Result<Decoded, WavError> {
    // The file is open, so a read that fails inside the header is almost always a file too
    // short to be a WAV (hound: "Failed to read enough bytes."), not a failed disk.
    let mut reader = hound::WavReader::new(input).map_err(|e| match e {
        hound::Error::IoError(io) => WavError::Format {
            path: path.into(),
            detail: format!("its header cannot be read: {io}"),
        },
        other => WavError::Format {
            path: path.into(),
            detail: other.to_string(),
        },
    })?;
    let spec = reader.spec();
    let out_of_range = |field, value: u64, min: u64, max: u64, unit| WavError::OutOfRange {
        path: path.into(),
        field,
        value,
        min,
        max,
        unit,
    };
    if !RATE_RANGE.contains(&spec.sample_rate) {
        return Err(out_of_range(
            "sample_rate",
            spec.sample_rate.into(),
            (*RATE_RANGE.start()).into(),
            (*RATE_RANGE.end()).into(),
            " Hz",
        ));
    }
    if !CHANNELS_RANGE.contains(&spec.channels) {
        return Err(out_of_range(
            "channels",
            spec.channels.into(),
            (*CHANNELS_RANGE.start()).into(),
            (*CHANNELS_RANGE.end()).into(),
            "",
        ));
    }
    let channels = spec.channels;
    let max_frames = u64::from(max_s) * u64::from(spec.sample_rate);
    let expected = reader.len() as usize;
    let mut collector = Collector {
        channels: usize::from(channels),
        // The header's sample count is only a claim: reserve at most a minute of CD audio up
        // front and let the vector grow with what is really there.
        samples: Vec::with_capacity((expected / usize::from(channels)).min(44_100 * 60)),
        frame_sum: 0.0,
        in_frame: 0,
        index: 0,
        max_frames,
        clipped: 0,
        peak: 0.0,
    };
    let flow = match spec.sample_format {
        hound::SampleFormat::Float => collector.take(reader.samples::<f32>()),
        hound::SampleFormat::Int => {
            // Full scale of a signed integer of `bits` bits; 8-bit WAV is unsigned on disk but
            // hound hands it out already centred on zero.
            let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(8, 32) - 1)) as f32;
            collector.take(reader.samples::<i32>().map(|s| s.map(|v| v as f32 * scale)))
        }
    };
    let mut warnings = Vec::new();
    match flow {
        Flow::Done => {}
        Flow::Cut(detail) => warnings.push(format!(
            "{}: truncated ({detail}): kept {} of {} samples",
            path.display(),
            collector.index,
            expected
        )),
        Flow::NotFinite(index) => {
            return Err(WavError::NotFinite {
                path: path.into(),
                index,
            })
        }
        Flow::TooLong => {
            return Err(WavError::TooLong {
                path: path.into(),
                seconds: collector.samples.len() as f64 / f64::from(spec.sample_rate),
                max_s,
            })
        }
    }
    if collector.samples.is_empty() {
        return Err(WavError::Empty { path: path.into() });
    }
    if collector.clipped > 0 {
        warnings.push(format!(
            "{}: {} float samples were past full scale (±1, largest {:e}) and were clipped{}",
            path.display(),
            collector.clipped,
            collector.peak,
            if collector.peak > 2.0 {
                "; is it integer-scaled audio stored as float?"
            } else {
                ""
            }
        ));
    }
    Ok(Decoded {
        audio: Audio {
            samples: collector.samples,
            rate: spec.sample_rate,
        },
        channels,
        bits: spec.bits_per_sample,
        float: spec.sample_format == hound::SampleFormat::Float,
        warnings,
    })
}

/// How reading the samples ended.
enum Flow {
    Done,
    /// A read error (truncation) after some samples, with hound's reason.
    Cut(String),
    /// The interleaved index of the first NaN or infinity.
    NotFinite(usize),
    TooLong,
}

/// Downmixes interleaved samples to mono as they are read, so memory is one mono buffer
/// (never the interleaved copy, up to 32 times larger), and stops at the duration cap.
struct Collector {
    channels: usize,
    samples: Vec<f32>,
    frame_sum: f32,
    in_frame: usize,
    /// Interleaved samples read so far.
    index: usize,
    max_frames: u64,
    /// Float samples past full scale, and the largest magnitude among them.
    clipped: usize,
    peak: f32,
}

impl Collector {
    fn take<E: std::fmt::Display>(&mut self, it: impl Iterator<Item = Result<f32, E>>) -> Flow {
        for s in it {
            let v = match s {
                Ok(v) => v,
                Err(e) => return Flow::Cut(e.to_string()),
            };
            if !v.is_finite() {
                return Flow::NotFinite(self.index);
            }
            // A float WAV may hold any finite value, but past full scale it is not a signal
            // any stage can use, and left alone (3e38 is finite) the downmix and the
            // resampler's sums overflowed to infinity. Clip it, as a sound card would.
            let v = if v.abs() > 1.0 {
                self.clipped += 1;
                self.peak = self.peak.max(v.abs());
                v.clamp(-1.0, 1.0)
            } else {
                v
            };
            self.index += 1;
            self.frame_sum += v;
            self.in_frame += 1;
            if self.in_frame == self.channels {
                if self.samples.len() as u64 >= self.max_frames {
                    return Flow::TooLong;
                }
                // Divide as the sum of the frame, not per sample, to keep the historical
                // rounding of the average bit for bit.
                self.samples.push(self.frame_sum / self.channels as f32);
                self.frame_sum = 0.0;
                self.in_frame = 0;
            }
        }
        Flow::Done
    }
}

/// Reads any WAV and resamples it to `rate` (mono).
pub fn read_at(path: &Path, rate: u32) -> Result<Decoded, WavError> {
    read_at_limited(path, rate, MAX_DURATION_S)
}

/// As [`read_at`], refusing files with more than `max_s` seconds of audio.
pub fn read_at_limited(path: &Path, rate: u32, max_s: u32) -> Result<Decoded, WavError> {
    let mut d = read_limited(path, max_s)?;
    if d.audio.rate != rate {
        // The file's rate was checked on decoding, so only the caller's target can be out of
        // range here.
        let samples =
            resample(&d.audio.samples, d.audio.rate, rate).map_err(|e| WavError::OutOfRange {
                path: path.into(),
                field: if e.which == "input" {
                    "sample_rate"
                } else {
                    "target sample_rate"
                },
                value: e.value.into(),
                min: (*RATE_RANGE.start()).into(),
                max: (*RATE_RANGE.end()).into(),
                unit: " Hz",
            })?;
        d.audio = Audio { samples, rate };
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
        // Not RIFF at all, and too short to hold a header.
        for (name, bytes) in [
            ("junk.wav", &b"definitely not RIFF"[..]),
            ("short.wav", b"hi\n"),
        ] {
            let p = d.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            let e = read(&p).unwrap_err();
            assert!(
                matches!(e, WavError::Format { .. }) && e.to_string().contains(name),
                "{e}"
            );
        }
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

    /// A PCM WAV built byte by byte, so the header can say what no writer would: `data_claim`
    /// is the data chunk's declared length, `data` what really follows.
    fn raw_wav(channels: u16, rate: u32, bits: u16, data_claim: u32, data: &[u8]) -> Vec<u8> {
        let block_align = channels * (bits / 8);
        let mut v = Vec::new();
        v.extend_from_slice(b"RIFF");
        v.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&channels.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&(u32::from(block_align).wrapping_mul(rate)).to_le_bytes());
        v.extend_from_slice(&block_align.to_le_bytes());
        v.extend_from_slice(&bits.to_le_bytes());
        v.extend_from_slice(b"data");
        v.extend_from_slice(&data_claim.to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    fn pcm8(n: usize) -> Vec<u8> {
        (0..n).map(|i| 128u8.wrapping_add((i % 64) as u8)).collect()
    }

    #[test]
    fn sample_rates_outside_8k_to_384k_are_refused_naming_file_field_and_range() {
        let d = tempfile::tempdir().unwrap();
        // 0 Hz panicked in the resampler (divide by zero), 4,294,967,291 Hz aborted allocating
        // 17 GB, and 1 Hz stretched 1.2 KB into ten minutes of audio.
        for rate in [0u32, 1, 7_999, 384_001, 4_294_967_291] {
            let p = d.path().join(format!("r{rate}.wav"));
            std::fs::write(&p, raw_wav(1, rate, 8, 1200, &pcm8(1200))).unwrap();
            let e = read_at(&p, crate::PIPELINE_RATE).unwrap_err();
            match &e {
                WavError::OutOfRange {
                    field: "sample_rate",
                    value,
                    min: 8_000,
                    max: 384_000,
                    ..
                } => assert_eq!(*value, u64::from(rate)),
                other => panic!("{rate} Hz: {other:?}"),
            }
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("r{rate}.wav"))
                    && msg.contains("sample_rate")
                    && msg.contains("8000–384000 Hz"),
                "{msg}"
            );
        }
        // The edges of the range are accepted and resampled.
        for rate in [8_000u32, 384_000] {
            let p = d.path().join(format!("ok{rate}.wav"));
            std::fs::write(&p, raw_wav(1, rate, 8, 4800, &pcm8(4800))).unwrap();
            let dec = read_at(&p, crate::PIPELINE_RATE).unwrap();
            let want = 4800 * 16_000 / rate as usize;
            assert_eq!(dec.audio.samples.len(), want, "{rate} Hz");
        }
    }

    #[test]
    fn channel_counts_outside_1_to_32_are_refused() {
        for channels in [33u16, 1000, u16::MAX] {
            let bytes = raw_wav(channels, 16_000, 8, 0, &[]);
            let e = decode(&bytes[..], Path::new("many.wav")).unwrap_err();
            assert!(
                matches!(
                    e,
                    WavError::OutOfRange {
                        field: "channels",
                        min: 1,
                        max: 32,
                        ..
                    }
                ),
                "{channels}: {e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("channels = {channels} ")) && msg.contains("many.wav"),
                "{msg}"
            );
        }
        // 32 channels is a (large) recording, and is averaged to mono.
        let bytes = raw_wav(32, 16_000, 8, 32 * 10, &[200u8; 32 * 10]);
        let dec = decode(&bytes[..], Path::new("32.wav")).unwrap();
        assert_eq!((dec.channels, dec.audio.samples.len()), (32, 10));
    }

    #[test]
    fn a_header_claiming_4_gb_of_samples_yields_only_the_real_ones() {
        let bytes = raw_wav(1, 16_000, 16, 0xFFFF_FFFE, &[0x10; 100]);
        let dec = decode(&bytes[..], Path::new("liar.wav")).unwrap();
        assert_eq!(dec.audio.samples.len(), 50);
        // The capacity reserved from the claim is bounded (a minute of CD audio), not 8 GB.
        assert!(dec.audio.samples.capacity() <= 44_100 * 60);
        assert!(dec.warnings[0].contains("truncated"), "{:?}", dec.warnings);
    }

    #[test]
    fn audio_past_the_duration_cap_is_refused() {
        // Two seconds of 8 kHz stereo against a one-second cap.
        let bytes = raw_wav(2, 8_000, 8, 32_000, &pcm8(32_000));
        let e = decode_limited(&bytes[..], Path::new("long.wav"), 1).unwrap_err();
        match &e {
            WavError::TooLong { seconds, max_s, .. } => {
                assert_eq!(*max_s, 1);
                assert!((*seconds - 1.0).abs() < 1e-9, "{seconds}");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            e.to_string().contains("long.wav") && e.to_string().contains("1 s"),
            "{e}"
        );
        // Exactly at the cap is accepted.
        let exact = raw_wav(2, 8_000, 8, 16_000, &pcm8(16_000));
        let dec = decode_limited(&exact[..], Path::new("exact.wav"), 1).unwrap();
        assert_eq!(dec.audio.samples.len(), 8_000);
    }

    /// Found by the wav_reader fuzz target: finite float samples near f32::MAX overflowed the
    /// downmix and the resampler to infinity.
    #[test]
    fn float_samples_past_full_scale_are_clipped_and_reported() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("loud.wav");
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 16000,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let mut w = hound::WavWriter::create(&p, spec).unwrap();
        for i in 0..800 {
            let x = if i % 2 == 0 { 3e38f32 } else { -3e38 };
            w.write_sample(x).unwrap();
            w.write_sample(x).unwrap();
        }
        for _ in 0..800 {
            w.write_sample(0.25f32).unwrap();
            w.write_sample(0.75f32).unwrap();
        }
        w.finalize().unwrap();
        let got = read(&p).unwrap();
        let x = &got.audio.samples;
        assert_eq!(x.len(), 1600);
        assert_eq!((x[0], x[1], x[1599]), (1.0, -1.0, 0.5));
        assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
        let w = &got.warnings[0];
        assert!(
            w.contains("loud.wav") && w.contains("1600 float samples"),
            "{w}"
        );
        assert!(w.contains("integer-scaled"), "{w}");
        for to in [16000, 44100, 8000] {
            let out = crate::resample::resample(x, 16000, to).unwrap();
            assert!(out.iter().all(|v| v.is_finite()), "to {to} Hz");
        }
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
