//! The echo canceller on a simulated room: the far end is the bundled synthetic replies (what
//! Piper says), the near end a real recording, and every signal's truth is known (the echo
//! alone, the user alone). Bands, not one machine's output: the engine's SIMD differs across
//! CPU families.

use std::path::Path;
use voxlat_audio::aec::room::EchoPath;
use voxlat_audio::aec::{erle_db, EchoCanceller, Sonora, FRAME, RATE};

fn clip(name: &str) -> Vec<f32> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/audio")
        .join(name);
    voxlat_audio::wav::read_at(&path, RATE)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .audio
        .samples
}

/// About 9 s of replies, back to back.
fn replies() -> Vec<f32> {
    let mut far = Vec::new();
    for name in [
        "synthetic-weather.wav",
        "synthetic-moon.wav",
        "synthetic-timer.wav",
        "synthetic-remind.wav",
        "synthetic-joke.wav",
    ] {
        far.extend(clip(name));
    }
    far
}

/// Faint noise, the same on every machine.
fn noise(n: usize, level: f32) -> Vec<f32> {
    let mut s: u32 = 12345;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            level * ((s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0)
        })
        .collect()
}

/// Runs `aec` over the microphone `mic` with the far end `far`, frame by frame, as the live
/// path will: each far frame first, then the microphone frame heard at the same time.
fn cancel(aec: &mut dyn EchoCanceller, far: &[f32], mic: &[f32]) -> Vec<f32> {
    let n = far.len().min(mic.len()) / FRAME * FRAME;
    let mut out = mic[..n].to_vec();
    for (f, m) in far[..n].chunks(FRAME).zip(out.chunks_mut(FRAME)) {
        aec.render(f).expect("a render frame");
        aec.capture(m).expect("a capture frame");
    }
    out
}

fn power(x: &[f32]) -> f32 {
    x.iter().map(|v| v * v).sum::<f32>()
}

#[test]
fn echo_alone_is_removed_once_the_canceller_has_converged() {
    let far = replies();
    let path = EchoPath::default();
    let echo = path.echo(&far, RATE);
    let hiss = noise(far.len(), 0.0005);
    let mic: Vec<f32> = echo.iter().zip(&hiss).map(|(e, n)| e + n).collect();
    let mut aec = Sonora::new();
    let out = cancel(&mut aec, &far, &mic);
    let erle = erle_db(&echo, &out, RATE as usize / 2, RATE);
    let after_2s = erle.median_from(2.0).expect("loud windows after 2 s");
    eprintln!(
        "output ERLE median after 2 s {after_2s:.1} dB; engine {:?}; windows {:?}",
        aec.stats(),
        erle.windows
    );
    assert!(after_2s >= 20.0, "ERLE {after_2s:.1} dB");
    let delay = aec.stats().delay_ms.expect("a delay estimate");
    assert!(
        (delay - f64::from(path.delay_ms)).abs() <= 20.0,
        "delay estimate {delay} ms against {} ms",
        path.delay_ms
    );
}

#[test]
fn the_user_is_kept_through_double_talk() {
    let far = replies();
    let path = EchoPath::default();
    let echo = path.echo(&far, RATE);
    // The user starts 4 s in, as loud as the echo over the stretch they speak (0 dB).
    let user_clip = clip("real-agent-alreadyon.wav");
    let start = 4 * RATE as usize;
    let end = (start + user_clip.len()).min(far.len());
    let span = start..end;
    let gain = (power(&echo[span.clone()]) / power(&user_clip[..end - start])).sqrt();
    let mut user = vec![0.0f32; far.len()];
    for (u, c) in user[span.clone()].iter_mut().zip(&user_clip) {
        *u = gain * c;
    }
    let mic: Vec<f32> = echo.iter().zip(&user).map(|(e, u)| e + u).collect();
    let mut aec = Sonora::new();
    let out = cancel(&mut aec, &far, &mic);
    // The user as the canceller gave them: how much of their power is left, and how far it
    // stands out of what is left of the echo alone just before they spoke. What it does to
    // their words is Whisper's to say (not measured here); the waveform and the envelope
    // are printed, as they show the canceller's double-talk distortion.
    let kept_db = 10.0 * (power(&out[span.clone()]) / power(&user[span.clone()])).log10();
    let before = start - 2 * RATE as usize..start;
    let mean_power = |x: &[f32]| power(x) / x.len() as f32;
    let stands_out_db = 10.0 * (mean_power(&out[span.clone()]) / mean_power(&out[before])).log10();
    let ncc = |a: &[f32], b: &[f32]| {
        let ab: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        ab / (power(a) * power(b)).sqrt()
    };
    let waveform = (0..480usize)
        .map(|lag| (lag, ncc(&out[start + lag..end], &user[start..end - lag])))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, 0.0));
    let envelope = |x: &[f32]| -> Vec<f32> {
        let e: Vec<f32> = x.chunks(320).map(|c| power(c).sqrt()).collect();
        let m = e.iter().sum::<f32>() / e.len() as f32;
        e.into_iter().map(|v| v - m).collect()
    };
    eprintln!(
        "user's power kept {kept_db:.1} dB; over the echo left before {stands_out_db:.1} dB; \
         waveform correlation {:.2} at a {} sample lag (microphone {:.2}); envelope correlation \
         {:.2} (microphone {:.2})",
        waveform.1,
        waveform.0,
        ncc(&mic[span.clone()], &user[span.clone()]),
        ncc(
            &envelope(&out[span.clone()]),
            &envelope(&user[span.clone()])
        ),
        ncc(&envelope(&mic[span.clone()]), &envelope(&user[span])),
    );
    assert!(kept_db >= -10.0, "the user's power kept: {kept_db:.1} dB");
    assert!(
        stands_out_db >= 15.0,
        "the user over the echo left: {stands_out_db:.1} dB"
    );
}

#[test]
fn a_frame_of_the_wrong_length_is_refused_and_named() {
    let mut aec = Sonora::new();
    let e = aec.render(&[0.0; 100]).unwrap_err();
    assert!(e.to_string().contains("100"), "{e}");
    let mut short = [0.0f32; 10];
    assert!(aec.capture(&mut short).is_err());
}
