//! The shortened history evaluated ahead of the next turn
//! ([`crate::PipelineConfig::warm_cut_history`]).
//!
//! A turn that cuts the history leaves a prompt the server has never seen: the next turn
//! would evaluate all of it after its commit (live, 96 tokens and 390 ms on 2 cores, every
//! third turn). Evaluated while the user listens, it is in the prefix cache when the turn
//! comes. The request is dropped as soon as the user's next utterance needs the cores (its
//! first provisional end, or a turn starting): the server keeps what it evaluated by then.

use crate::record::Warmed;
use crate::respond::Pipeline;
use crate::stages::BoxFuture;
use voxlat_core::{clock, Nanos};
use voxlat_llm::Message;

pub(super) struct Warming<'p> {
    pub fut: BoxFuture<'p, Warmed>,
    started: Nanos,
}

impl<'p> Warming<'p> {
    /// A warm-up when the finished turn's history (`after`) no longer begins with the one
    /// the turn was asked with (`before`): the prompt's cached prefix is lost.
    pub fn after_turn(
        pipeline: &'p Pipeline,
        system_prompt: &str,
        before: &[Message],
        after: &[Message],
    ) -> Option<Warming<'p>> {
        if !pipeline.cfg.warm_cut_history || after.starts_with(before) {
            return None;
        }
        let started = clock::now();
        let request = pipeline.warm_prefix(system_prompt, after);
        Some(Warming {
            fut: Box::pin(async move {
                let finished = request.await;
                Warmed {
                    ms: since(started),
                    finished,
                }
            }),
            started,
        })
    }

    /// Dropped before it ended.
    pub fn abandon(self) -> Warmed {
        Warmed {
            ms: since(self.started),
            finished: false,
        }
    }
}

fn since(t: Nanos) -> f64 {
    clock::ns_to_ms(clock::now().signed_since(t))
}
