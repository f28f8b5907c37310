//! Plays clicks on the default output and finds them on the default input: on a loopback
//! (the PulseAudio null sink of scripts/pulse-null-sink.sh) the capture time of each click
//! should equal its scheduled playback time. Prints both and the difference.
//!
//! `PULSE_SERVER=… cargo run -p voxlat-audio --example loopback`

use std::time::{Duration, Instant};
use voxlat_audio::capture::Capture;
use voxlat_audio::device::{self, Direction};
use voxlat_audio::playback::Playback;
use voxlat_audio::playout::{OutStamp, ReplyPlayout};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    voxlat_core::clock::init();
    let host = device::host(None)?;
    let input = device::pick(&host, Direction::Input, None)?;
    let output = device::pick(&host, Direction::Output, None)?;
    let mut cap = Capture::open(&input, 16_000, None)?;
    let mut play = Playback::open(&output, None)?;
    println!(
        "input {} {} Hz x{} (clock ±{} ns); output {} {} Hz x{} (clock ±{} ns)",
        cap.device,
        cap.rate,
        cap.channels,
        cap.clock.error_ns,
        play.device,
        play.rate,
        play.channels,
        play.clock.error_ns
    );
    {
        use cpal::traits::StreamTrait;
        println!(
            "periods: input {:?} frames, output {:?} frames",
            cap.period(),
            play.stream().buffer_size()
        );
    }
    let t0 = Instant::now();
    while !cap.health().started() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(500));
    cap.discard();
    let mut captured: Vec<(f32, voxlat_core::Nanos)> = Vec::new();
    let mut stamps: Vec<OutStamp> = Vec::new();
    let mut diffs = Vec::new();
    for k in 0..5 {
        // A 5 ms 1 kHz burst at full scale.
        let n = play.rate as usize / 200;
        let burst: Vec<f32> = (0..n)
            .map(|i| {
                (i as f32 * 2.0 * std::f32::consts::PI * 1000.0 / play.rate as f32).sin() * 0.8
            })
            .collect();
        let start = play.pushed();
        let queued = voxlat_core::clock::now();
        play.push(&burst);
        let mut p = ReplyPlayout::new(start, play.rate);
        let until = Instant::now() + Duration::from_millis(600);
        while Instant::now() < until {
            stamps.clear();
            play.drain_stamps(&mut stamps);
            for s in &stamps {
                p.observe(s);
            }
            while let Some(f) = cap.next_frame(160) {
                let n = f.samples.len() as u64;
                for (i, v) in f.samples.iter().enumerate() {
                    let back = (n - 1 - i as u64) * 1_000_000_000 / 16_000;
                    captured.push((*v, voxlat_core::Nanos(f.t_end.0 - back)));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        p.finish(start + burst.len() as u64);
        let Some(first) = p.first_at() else {
            println!("click {k}: never played");
            continue;
        };
        let scheduled = play.to_process(first);
        let device_ms = scheduled.signed_since(queued) as f64 / 1e6;
        let window = scheduled.0.saturating_sub(200_000_000);
        let heard = captured
            .iter()
            .find(|(v, t)| v.abs() > 0.2 && t.0 >= window);
        match heard {
            Some((_, t)) => {
                let d = t.signed_since(scheduled) as f64 / 1e6;
                diffs.push(d);
                println!(
                    "click {k}: queued → scheduled {device_ms:.1} ms; captured − scheduled {d:+.2} ms"
                );
            }
            None => println!("click {k}: not captured"),
        }
        captured.clear();
    }
    println!("dropped capture samples: {}", cap.dropped());
    if !diffs.is_empty() {
        diffs.sort_by(f64::total_cmp);
        println!(
            "median captured − scheduled: {:+.2} ms",
            diffs[diffs.len() / 2]
        );
    }
    Ok(())
}
