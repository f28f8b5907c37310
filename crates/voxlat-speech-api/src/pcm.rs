//! Audio on the wire: the WAV a transcription upload carries, and the 16-bit PCM or WAV a
//! speech response streams back.
//!
//! The streaming decoder is written here rather than taken from `hound`: hound reads a whole
//! seekable file, and a speech response must be decoded as its bytes arrive, split anywhere,
//! including inside a sample or inside the WAV header.

use std::io::Cursor;

/// The rate OpenAI's `pcm` format is defined at; servers that follow it send no rate header.
pub const OPENAI_PCM_RATE: u32 = 24_000;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PcmError {
    #[error("the WAV header is malformed: {0}")]
    BadHeader(String),
    #[error("the WAV stream is {what}; only 16-bit integer PCM, mono or stereo, is read")]
    Unsupported { what: String },
    #[error("the audio ended inside a sample ({bytes} bytes is not a whole number of frames)")]
    Partial { bytes: u64 },
}

/// 16-bit PCM WAV bytes of mono `samples` at `rate` (values past ±1 are clipped).
pub fn wav_bytes(samples: &[f32], rate: u32) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut out = Cursor::new(Vec::with_capacity(44 + samples.len() * 2));
    // Writing to memory cannot fail, and the spec is valid by construction.
    if let Ok(mut w) = hound::WavWriter::new(&mut out, spec) {
        for &s in samples {
            let _ = w.write_sample(to_i16(s));
        }
        let _ = w.finalize();
    }
    out.into_inner()
}

/// Raw little-endian 16-bit PCM, OpenAI's `pcm` response format.
pub fn pcm16_le(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|&s| to_i16(s).to_le_bytes())
        .collect()
}

fn to_i16(s: f32) -> i16 {
    (s.clamp(-1.0, 1.0) * 32767.0).round() as i16
}

/// Decodes a response body as it arrives: raw 16-bit PCM at a known rate, or a WAV stream
/// (detected by its `RIFF` magic) whose header gives the rate and channels.
pub struct StreamDecoder {
    state: State,
    pending: Vec<u8>,
    channels: u16,
    rate: u32,
    bytes: u64,
    samples: Vec<f32>,
}

enum State {
    /// Fewer than 4 bytes seen: PCM or WAV is not known yet.
    Sniffing,
    Header,
    Data,
}

impl StreamDecoder {
    /// `pcm_rate`: the rate raw PCM is read at (the response's rate header, else
    /// [`OPENAI_PCM_RATE`]). A WAV stream's own header overrides it.
    pub fn new(pcm_rate: u32) -> StreamDecoder {
        StreamDecoder {
            state: State::Sniffing,
            pending: Vec::new(),
            channels: 1,
            rate: pcm_rate,
            bytes: 0,
            samples: Vec::new(),
        }
    }

    pub fn sample_rate(&self) -> u32 {
        self.rate
    }

    /// Feeds the next bytes of the body.
    pub fn push(&mut self, data: &[u8]) -> Result<(), PcmError> {
        self.bytes += data.len() as u64;
        self.pending.extend_from_slice(data);
        loop {
            match self.state {
                State::Sniffing if self.pending.len() < 4 => return Ok(()),
                State::Sniffing => {
                    self.state = if self.pending.starts_with(b"RIFF") {
                        State::Header
                    } else {
                        State::Data
                    };
                }
                State::Header => match self.parse_header()? {
                    Some(data_start) => {
                        self.pending.drain(..data_start);
                        self.state = State::Data;
                    }
                    None => return Ok(()),
                },
                State::Data => {
                    self.take_frames();
                    return Ok(());
                }
            }
        }
    }

    /// The whole audio, mono. Fails when the body ended inside a frame or a header.
    pub fn finish(mut self) -> Result<(Vec<f32>, u32), PcmError> {
        if matches!(self.state, State::Sniffing) && !self.pending.is_empty() {
            self.state = State::Data;
            self.take_frames();
        }
        match self.state {
            State::Header => Err(PcmError::BadHeader(format!(
                "the stream ended after {} bytes, before the data chunk",
                self.bytes
            ))),
            _ if !self.pending.is_empty() => Err(PcmError::Partial { bytes: self.bytes }),
            _ => Ok((self.samples, self.rate)),
        }
    }

    /// Samples decoded so far.
    pub fn decoded(&self) -> usize {
        self.samples.len()
    }

    fn take_frames(&mut self) {
        let frame = 2 * usize::from(self.channels);
        let whole = self.pending.len() / frame * frame;
        for f in self.pending[..whole].chunks_exact(frame) {
            let sum: f32 = f
                .chunks_exact(2)
                .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
                .sum();
            self.samples.push(sum / f32::from(self.channels));
        }
        self.pending.drain(..whole);
    }

    /// The offset of the PCM data once the header up to the `data` chunk has arrived.
    fn parse_header(&mut self) -> Result<Option<usize>, PcmError> {
        let b = &self.pending;
        if b.len() < 12 {
            return Ok(None);
        }
        if &b[8..12] != b"WAVE" {
            return Err(PcmError::BadHeader("RIFF without WAVE".into()));
        }
        let mut at = 12;
        let mut fmt_seen = false;
        while b.len() >= at + 8 {
            let id = &b[at..at + 4];
            let size = u32::from_le_bytes([b[at + 4], b[at + 5], b[at + 6], b[at + 7]]) as usize;
            if id == b"data" {
                if !fmt_seen {
                    return Err(PcmError::BadHeader("data chunk before fmt".into()));
                }
                return Ok(Some(at + 8));
            }
            let body = at + 8;
            if id == b"fmt " {
                if !(16..=64).contains(&size) {
                    return Err(PcmError::BadHeader(format!("fmt chunk of {size} bytes")));
                }
                if b.len() < body + 16 {
                    return Ok(None);
                }
                let u16_at = |i: usize| u16::from_le_bytes([b[body + i], b[body + i + 1]]);
                let (format, channels, bits) = (u16_at(0), u16_at(2), u16_at(14));
                let rate = u32::from_le_bytes([b[body + 4], b[body + 5], b[body + 6], b[body + 7]]);
                // 0xFFFE is WAVE_FORMAT_EXTENSIBLE, which 16-bit PCM writers also use.
                if !(format == 1 || format == 0xFFFE) || bits != 16 {
                    return Err(PcmError::Unsupported {
                        what: format!("format {format}, {bits}-bit"),
                    });
                }
                if !(1..=2).contains(&channels) || !(1_000..=384_000).contains(&rate) {
                    return Err(PcmError::Unsupported {
                        what: format!("{channels} channels at {rate} Hz"),
                    });
                }
                self.channels = channels;
                self.rate = rate;
                fmt_seen = true;
            }
            // Chunks are padded to an even size.
            at = body + size + (size & 1);
            if at > 1 << 20 {
                return Err(PcmError::BadHeader("no data chunk in the first MiB".into()));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * 0.05).sin() * 0.5).collect()
    }

    /// Every split of the body, one byte at a time, decodes to what hound reads from the
    /// whole file (the independent reference).
    #[test]
    fn a_wav_split_anywhere_decodes_like_hound_reads_it() {
        let bytes = wav_bytes(&tone(301), 22_050);
        let reference: Vec<f32> = hound::WavReader::new(Cursor::new(&bytes))
            .unwrap()
            .samples::<i16>()
            .map(|s| f32::from(s.unwrap()) / 32768.0)
            .collect();
        for step in [1, 3, 7, 44, 45, 1000] {
            let mut d = StreamDecoder::new(OPENAI_PCM_RATE);
            for piece in bytes.chunks(step) {
                d.push(piece).unwrap();
            }
            let (samples, rate) = d.finish().unwrap();
            assert_eq!(rate, 22_050, "step {step}");
            assert_eq!(samples, reference, "step {step}");
        }
    }

    #[test]
    fn raw_pcm_is_read_at_the_given_rate_and_a_cut_sample_is_an_error() {
        let bytes = pcm16_le(&[0.5, -0.25, 1.5]);
        assert_eq!(bytes.len(), 6);
        let mut d = StreamDecoder::new(OPENAI_PCM_RATE);
        // Five bytes: two whole samples and half of the third, which waits for its other half.
        d.push(&bytes[..5]).unwrap();
        assert_eq!(d.decoded(), 2);
        d.push(&bytes[5..]).unwrap();
        let (samples, rate) = d.finish().unwrap();
        assert_eq!(rate, 24_000);
        assert_eq!(samples.len(), 3);
        assert!((samples[0] - 0.5).abs() < 1e-3 && (samples[2] - 1.0).abs() < 1e-3);
        let mut cut = StreamDecoder::new(OPENAI_PCM_RATE);
        cut.push(&bytes[..5]).unwrap();
        assert_eq!(cut.finish(), Err(PcmError::Partial { bytes: 5 }));
    }

    #[test]
    fn unsupported_wavs_are_named() {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate: 16_000,
            bits_per_sample: 32,
            sample_format: hound::SampleFormat::Float,
        };
        let mut out = Cursor::new(Vec::new());
        let mut w = hound::WavWriter::new(&mut out, spec).unwrap();
        w.write_sample(0.1f32).unwrap();
        w.finalize().unwrap();
        let mut d = StreamDecoder::new(OPENAI_PCM_RATE);
        let e = d.push(out.get_ref()).unwrap_err();
        assert!(e.to_string().contains("32-bit"), "{e}");
        let mut short = StreamDecoder::new(OPENAI_PCM_RATE);
        short.push(&wav_bytes(&tone(4), 16_000)[..30]).unwrap();
        assert!(matches!(short.finish(), Err(PcmError::BadHeader(_))));
    }
}
