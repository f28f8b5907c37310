//! `voxlat eval-turns`: end-of-turn policies on a corpus with cut-off truth, eot-bench's way.

use crate::common::setup::Setup;
use crate::report::{print_choices, print_turn_eval, turn_eval_page};
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use voxlat_pipeline::turn_eval::{self, EvalPolicy, PolicySweep};
use voxlat_pipeline::LoadedTurn;
use voxlat_vad::EndpointerConfig;

/// Sweeps each end-of-turn policy over its knob on turns whose scenario gives the true end
/// (`speech_end_ms`) and the pauses inside the turn (`pauses_ms`), and reports what LiveKit's
/// eot-bench reports: the cut-off rate within a 300 and a 600 ms latency budget, and the
/// latency at 5 % and 10 % cut-offs. A commit inside a labelled pause (or before the end) cuts
/// the speaker off; latency is the silence after the true end until the commit, over the
/// turns not cut off. Runs only the endpointer (and Smart Turn), unpaced, in audio time:
/// the same input gives the same figures on the same CPU family.
#[derive(Args, Debug)]
pub struct EvalTurnsArgs {
    /// Scenario TOML files or directories of them (searched recursively; a file named twice
    /// counts once). [default: scenarios/turns/test, the half no constant was fitted on]
    #[arg(value_name = "SCENARIO")]
    pub scenarios: Vec<PathBuf>,
    /// Choose each policy's setting on these scenarios (the fastest at or under 5 %, 10 % and
    /// the default hangover's cut-off rate there), then report those settings, fixed, on the
    /// SCENARIO turns: figures that no choice made on the turns they describe.
    /// Give it again for more than one directory or file.
    #[arg(long, value_name = "DIR|FILE")]
    pub choose_on: Vec<PathBuf>,
    /// A recording of a room (WAV) to add under every turn, at --snr under its speech: the
    /// truth stays the clean clip's, so the figures say what the room costs.
    #[arg(long, value_name = "WAV", requires = "snr")]
    pub noise: Option<PathBuf>,
    /// The speech's active level over the noise's, dB (with --noise).
    #[arg(
        long,
        value_name = "DB",
        requires = "noise",
        allow_negative_numbers = true
    )]
    pub snr: Option<f64>,
    /// Policies to run: webrtc (the plain silence hangover, swept); smart-turn (Smart Turn
    /// v3.2 as Pipecat runs it: scored when the VAD has heard the action delay of silence,
    /// Pipecat's 200 ms among others, committed anyway after 3 s; threshold and delay
    /// swept, as eot-bench does); cues (at each 200 ms stop, a wait scaled by the
    /// Whisper transcript's tail and Smart Turn's vote, never below the speaker's own pauses
    /// so far; base wait swept), and cues-no-tail, cues-no-smart-turn, cues-no-speaker, each
    /// without one cue. [default: all]
    #[arg(long, value_delimiter = ',', value_name = "NAME,…", value_parser = ["webrtc", "smart-turn", "cues", "cues-no-tail", "cues-no-smart-turn", "cues-no-speaker"])]
    pub policy: Vec<String>,
    /// The webrtc hangovers to sweep, ms. [default: 100 to 2500]
    #[arg(long, value_delimiter = ',', value_name = "MS,…")]
    pub hangovers: Vec<f64>,
    /// The smart-turn thresholds to sweep, P(complete). [default: 0.02 to 0.999]
    #[arg(long, value_delimiter = ',', value_name = "P,…")]
    pub thresholds: Vec<f64>,
    /// The smart-turn action delays to sweep (silence before the score), ms, each with every
    /// threshold. [default: 200,300,400,500,700,1000,1500]
    #[arg(long, value_delimiter = ',', value_name = "MS,…")]
    pub delays: Vec<u32>,
    /// The cues rules' base waits to sweep, ms. [default: 100 to 1500]
    #[arg(long, value_delimiter = ',', value_name = "MS,…")]
    pub waits: Vec<f64>,
    /// Also write every figure, each policy's curve and every turn's commit per setting as
    /// JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw each policy's curve (cut-off rate against latency) into this HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn sweeps(args: &EvalTurnsArgs) -> Vec<PolicySweep> {
    let chosen: Vec<EvalPolicy> = if args.policy.is_empty() {
        EvalPolicy::ALL.to_vec()
    } else {
        // clap has checked the names.
        args.policy
            .iter()
            .filter_map(|n| EvalPolicy::from_name(n))
            .collect()
    };
    chosen
        .into_iter()
        .map(|policy| {
            let given = match policy {
                EvalPolicy::Webrtc => &args.hangovers,
                EvalPolicy::SmartTurn => &args.thresholds,
                _ => &args.waits,
            };
            let mut sweep = PolicySweep::default_for(policy);
            if !given.is_empty() {
                sweep.settings = given.clone();
            }
            if !args.delays.is_empty() && !sweep.delays_ms.is_empty() {
                sweep.delays_ms = args.delays.clone();
            }
            sweep
        })
        .collect()
}

/// The turns with a true end under `roots`, and the files they came from.
fn load_turns(roots: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<LoadedTurn>)> {
    let files = voxlat_pipeline::discover::scenario_files(roots, true);
    anyhow::ensure!(
        !files.is_empty(),
        "no scenario file found in {roots:?}: give TOML files with speech_end_ms and pauses_ms, or directories of them"
    );
    let loaded = voxlat_pipeline::scenario::load_all(&files);
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    for e in &loaded.skipped {
        eprintln!("error: {e} (skipped; the other turns still count)");
    }
    let turns: Vec<LoadedTurn> = loaded.turns().cloned().collect();
    anyhow::ensure!(
        !turns.is_empty(),
        "no turn could be loaded from {files:?} (the errors above say why)"
    );
    anyhow::ensure!(
        turns.iter().any(|t| t.speech_end_annotated),
        "no turn in {files:?} has speech_end_ms, the true end a commit is judged against"
    );
    Ok((files, turns))
}

pub fn run(args: EvalTurnsArgs) -> Result<ExitCode> {
    let roots = if args.scenarios.is_empty() {
        vec![PathBuf::from("scenarios/turns/test")]
    } else {
        args.scenarios.clone()
    };
    let noise = match &args.noise {
        Some(path) => {
            let n = voxlat_audio::wav::read_at(path, voxlat_audio::PIPELINE_RATE)
                .map(|d| d.audio.samples)
                .with_context(|| format!("reading the room noise {}", path.display()))?;
            anyhow::ensure!(
                n.iter().any(|&x| x != 0.0),
                "the room noise {} is silent: give a recording of a room",
                path.display()
            );
            Some(turn_eval::noise::looped(&n))
        }
        None => None,
    };
    let noisy = |turns: Vec<LoadedTurn>| -> Vec<LoadedTurn> {
        match (&noise, args.snr) {
            (Some(n), Some(snr)) => turns
                .iter()
                .enumerate()
                .filter_map(|(i, t)| {
                    turn_eval::noise::mix(t, n, snr, turn_eval::noise::offset_for(i, n.len()))
                })
                .collect(),
            _ => turns,
        }
    };
    let (files, turns) = load_turns(&roots)?;
    let turns = noisy(turns);
    let choice_set = if args.choose_on.is_empty() {
        None
    } else {
        let (chosen_files, chosen_turns) = load_turns(&args.choose_on)?;
        let canonical = |f: &PathBuf| f.canonicalize().unwrap_or_else(|_| f.clone());
        let reported: Vec<PathBuf> = files.iter().map(canonical).collect();
        let overlap: Vec<&PathBuf> = chosen_files
            .iter()
            .filter(|f| reported.contains(&canonical(f)))
            .collect();
        anyhow::ensure!(
            overlap.is_empty(),
            "--choose-on and the scenarios reported on share {overlap:?}: a setting chosen on the turns it reports flatters it; give two disjoint sets"
        );
        Some((chosen_files, noisy(chosen_turns)))
    };
    let sweeps = sweeps(&args);
    let base = EndpointerConfig::default();
    // Every setting is checked before a model loads or a turn runs.
    for s in &sweeps {
        for &v in &s.settings {
            s.policy
                .check(&base, v)
                .map_err(|e| anyhow::anyhow!("{e} (--hangovers, --thresholds or --waits)"))?;
        }
        for &d in &s.delays_ms {
            s.policy
                .endpointer(&base, 0.5, Some(d))
                .map_err(|e| anyhow::anyhow!("{e} (--delays)"))?;
        }
    }
    for path in args.json.iter().chain(&args.html) {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            voxlat_core::fsio::ensure_writable_dir(dir)?;
        }
    }
    let setup = Setup::open()?;
    let model = if sweeps.iter().any(|s| s.policy.needs_turn_model()) {
        Some(setup.turn_model()?)
    } else {
        None
    };
    let mut whisper = if sweeps.iter().any(|s| s.policy.needs_asr()) {
        let path = setup
            .model(voxlat_models::known::WHISPER)
            .context("the cues rules read a Whisper transcript at each stop; fetch the model with `voxlat models fetch`, or leave those rules out with --policy")?;
        let threads = setup.budget.asr;
        Some(
            voxlat_asr::engine::WhisperEngine::load(&path, threads)
                .with_context(|| format!("loading {}", path.display()))?,
        )
    } else {
        None
    };
    let mut transcribe = whisper
        .as_mut()
        .map(|w| move |audio: &[f32]| w.transcribe(audio).map(|t| t.text));
    let mut asr = transcribe.as_mut().map(|f| f as turn_eval::Transcribe<'_>);
    let on = match &choice_set {
        Some((_, chosen_turns)) => Some(turn_eval::evaluate(
            chosen_turns,
            &base,
            &sweeps,
            model.clone(),
            asr.as_mut().map(|f| &mut **f as turn_eval::Transcribe<'_>),
        )?),
        None => None,
    };
    let report = turn_eval::evaluate(&turns, &base, &sweeps, model, asr)?;
    let choices = on
        .as_ref()
        .map(|on| turn_eval::choose::choose(on, &report, f64::from(base.hangover_ms)));
    for f in &report.asr_failures {
        eprintln!("warning: a speculative transcription failed: {f} (its tail counts as bare)");
    }
    for l in &report.left_out {
        eprintln!("note: {l}");
    }
    let cpu = voxlat_core::cpu::CpuInfo::detect();
    print_turn_eval(&report, &cpu);
    if let (Some(c), Some(on), Some((chosen_files, _))) = (&choices, &on, &choice_set) {
        print_choices(c, on, &report, chosen_files);
    }
    if let Some(path) = &args.json {
        // The header records the CPU, whose family Smart Turn's scores depend on.
        let header =
            voxlat_core::report::ResultsHeader::new("eval-turns", env!("CARGO_PKG_VERSION"));
        let doc = serde_json::json!({
            "header": header,
            "scenarios": files,
            "noise": args.noise.as_ref().map(|p| serde_json::json!({"file": p, "snr_db": args.snr})),
            "endpointer": base,
            "turns": report.turns,
            "pauses": report.pauses,
            "left_out": report.left_out,
            "turn_score_ms": report.turn_score_ms,
            "speech_end": report.speech_end,
            "stops": report.stops,
            "policies": report.policies,
            "choose_on": choice_set.as_ref().map(|(f, _)| f),
            "chosen": choices,
        });
        voxlat_core::fsio::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("Results: {}", path.display());
    }
    if let Some(path) = &args.html {
        voxlat_core::fsio::write_atomic(path, turn_eval_page(&report, &cpu).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("Report: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
