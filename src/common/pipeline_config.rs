//! The pipeline configuration that `run` and `replay` share, built from their shared flags in
//! one place, so the two commands cannot drift apart.

use crate::common::reply::ReplyArgs;
use crate::common::session_args::SessionArgs;
use crate::common::turn::TurnArgs;
use anyhow::Result;
use voxlat_pipeline::PipelineConfig;
use voxlat_vad::EndpointerConfig;

/// The configuration for `endpointer` and the reply, turn-taking and session flags; each
/// command sets what is its own (pacing, prompt, token cap) on top.
pub fn pipeline_config(
    endpointer: EndpointerConfig,
    reply: &ReplyArgs,
    turn: &TurnArgs,
    session: &SessionArgs,
) -> Result<PipelineConfig> {
    let cfg = PipelineConfig {
        speculative_asr: endpointer.provisional_ms > 0,
        endpointer,
        speculative_reply: reply.speculative_reply(),
        whole_turn_asr: !reply.part_asr,
        turn_cues: turn.cues(),
        first_chunk_max_chars: reply.first_chunk_max_chars(),
        history_cap: usize::from(reply.history),
        save_replies: session.save_replies.clone(),
        ..PipelineConfig::default()
    };
    anyhow::ensure!(
        !cfg.turn_cues || cfg.speculative_asr,
        "--turn-model cues reads the speculative transcript at each provisional end: give --provisional above 0, or choose another --turn-model"
    );
    Ok(cfg)
}
