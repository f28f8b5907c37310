//! One engine on its own thread behind a bounded queue. Whisper and Piper block for hundreds
//! of ms and keep their state on the thread that loaded them, so requests wait here, and a
//! full queue is refused at once (503) rather than left to time out.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What the engine thread hands back: the engine's answer, and its queue and compute time.
pub struct Done<T> {
    pub result: T,
    pub queued: Duration,
    pub compute: Duration,
}

type Job<E, T> = (
    Box<dyn FnOnce(&mut E) -> T + Send>,
    Instant,
    oneshot::Sender<Done<T>>,
    Slot,
);

/// A place in the queue (waiting or running), held from once the request's body is read
/// until the engine is done with it. A handler may also take one and drop it at once before
/// reading the body, to refuse a full queue before the upload is buffered.
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why an engine could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot start the {name} thread: {source}")]
    Thread {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot load the {name} engine: {detail}")]
    Load { name: &'static str, detail: String },
}

pub enum Refused {
    /// Every slot is taken: come back later.
    Full,
    /// The engine thread has ended.
    Gone,
}

pub struct EngineQueue<E, T> {
    tx: SyncSender<Job<E, T>>,
    /// Requests holding a [`Slot`]; at most `depth` waiting and one running.
    held: Arc<AtomicUsize>,
    slots: usize,
}

impl<E: 'static, T: Send + 'static> EngineQueue<E, T> {
    /// Starts the thread, loads the engine there with `load`, and waits for it to be ready.
    /// `depth` requests may wait while one runs.
    pub fn start<L, Err>(
        name: &'static str,
        depth: usize,
        load: L,
    ) -> Result<EngineQueue<E, T>, StartError>
    where
        L: FnOnce() -> Result<E, Err> + Send + 'static,
        Err: std::fmt::Display,
    {
        let (tx, rx) = sync_channel::<Job<E, T>>(depth);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut engine = match load() {
                    Ok(e) => {
                        let _ = ready_tx.send(Ok(()));
                        e
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                for (work, enqueued, reply, slot) in rx {
                    let started = Instant::now();
                    let result = work(&mut engine);
                    drop(slot);
                    let _ = reply.send(Done {
                        result,
                        queued: started - enqueued,
                        compute: started.elapsed(),
                    });
                }
            })
            .map_err(|source| StartError::Thread { name, source })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(EngineQueue {
                tx,
                held: Arc::new(AtomicUsize::new(0)),
                slots: depth + 1,
            }),
            Ok(Err(detail)) => Err(StartError::Load { name, detail }),
            Err(_) => Err(StartError::Load {
                name,
                detail: "the thread ended while loading".into(),
            }),
        }
    }

    /// A place in the queue, unless every one is taken.
    pub fn reserve(&self) -> Result<Slot, Refused> {
        let taken = self.held.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(self.held.clone());
        if taken >= self.slots {
            return Err(Refused::Full);
        }
        Ok(slot)
    }

    /// Queues `work` in its reserved `slot`; the receiver yields its result.
    pub fn submit(
        &self,
        slot: Slot,
        work: impl FnOnce(&mut E) -> T + Send + 'static,
    ) -> Result<oneshot::Receiver<Done<T>>, Refused> {
        let (reply, rx) = oneshot::channel();
        match self
            .tx
            .try_send((Box::new(work), Instant::now(), reply, slot))
        {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) => Err(Refused::Full),
            Err(TrySendError::Disconnected(_)) => Err(Refused::Gone),
        }
    }
}
