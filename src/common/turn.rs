//! `--turn-model` and its thresholds, shared by `replay` and `run`.

use anyhow::Result;
use clap::Args;
use voxlat_vad::TurnPolicy;

/// The end-of-turn rules `--turn-model` chooses from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TurnRule {
    SmartTurn,
    Cues,
    Off,
}

impl TurnRule {
    /// As the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            TurnRule::SmartTurn => "smart-turn",
            TurnRule::Cues => "cues",
            TurnRule::Off => "off",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct TurnArgs {
    /// End-of-turn rule: off (the plain silence hangover); smart-turn (Smart Turn v3.2
    /// scores the turn after a short silence: a confident "done" ends it early, an unsure one
    /// holds past the hangover); or cues (the hangover scaled by the speculative transcript's
    /// tail: half after a question, three times after "and", "the", a comma; never less than
    /// the speaker's own pauses so far; `voxlat eval-turns` measures it). Off by default:
    /// neither rule beats the plain hangover on voices it was not tuned on (README).
    #[arg(long, value_name = "RULE", value_enum, default_value_t = TurnRule::Off)]
    pub turn_model: TurnRule,
    /// Silence (ms) before the first score. [default: 200]
    #[arg(long, value_name = "MS")]
    pub turn_first: Option<u32>,
    /// Commit at once when P(turn complete) is at least this. Thresholds are per CPU family:
    /// the int8 model scores differently with and without VNNI (0.942 against 0.597 on one
    /// clip), so a value tuned on one family does not carry to the other. [default: 0.9]
    #[arg(long, value_name = "P")]
    pub turn_high: Option<f32>,
    /// From the hangover on, commit when P is at least this (per CPU family, as --turn-high).
    /// [default: 0.5]
    #[arg(long, value_name = "P")]
    pub turn_low: Option<f32>,
    /// Longest silence (ms) held for an unsure turn. [default: 1600]
    #[arg(long, value_name = "MS")]
    pub turn_max: Option<u32>,
}

impl TurnArgs {
    /// Smart Turn decides: its model is loaded.
    pub fn enabled(&self) -> bool {
        self.turn_model == TurnRule::SmartTurn
    }

    /// The `cues` rule decides, on the hangover as its base wait.
    pub fn cues(&self) -> bool {
        self.turn_model == TurnRule::Cues
    }

    /// The flags given, over `policy`; names the flag when the result is inconsistent.
    pub fn apply(&self, policy: &mut TurnPolicy, hangover_ms: u32) -> Result<()> {
        if let Some(v) = self.turn_first {
            policy.first_ms = v;
        }
        if let Some(v) = self.turn_high {
            policy.high = v;
        }
        if let Some(v) = self.turn_low {
            policy.low = v;
        }
        if let Some(v) = self.turn_max {
            policy.max_ms = v;
        }
        if self.enabled() {
            policy.validate(hangover_ms).map_err(|e| {
                anyhow::anyhow!(
                    "{e} (--turn-first, --turn-high, --turn-low, --turn-max, --hangover), or pass --turn-model off"
                )
            })?;
        }
        Ok(())
    }
}

/// Smart Turn is int8-quantised and ONNX Runtime's int8 kernels differ by CPU (without VNNI,
/// x86's 8-bit dot products saturate), so its scores, and the thresholds read against them,
/// belong to one CPU family. No per-family calibration is attempted: this says so instead.
pub fn per_cpu_family_note() -> String {
    let cpu = voxlat_core::cpu::CpuInfo::detect();
    format!(
        "note: Smart Turn's thresholds (--turn-high, --turn-low) are per CPU family: scored here on {}; the same clip scored 0.942 without VNNI and 0.597 with it, so values tuned on one family do not carry to another (results headers record the CPU as header.cpu)",
        cpu.describe()
    )
}
