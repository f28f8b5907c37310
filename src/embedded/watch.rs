//! Watching the embedded server from a run's event loop: its exit, described with what to do.

use super::{log_tail, EmbeddedServer, SERVER_BIN};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Watches the embedded server from the run's event loop. A crash mid-run ends the run with
/// the reason recorded: it is never restarted silently, because numbers from a restarted (cold)
/// server mixed with a warm one's would describe neither.
#[derive(Clone, Debug)]
pub struct ServerWatch {
    pub(super) pid: u32,
    pub(super) log: PathBuf,
}

impl ServerWatch {
    /// The server's exit, described, once it has exited; `None` while it runs.
    pub fn exited(&self) -> Option<String> {
        #[cfg(unix)]
        {
            // SAFETY: waitid writes only into the zeroed siginfo we own. WNOWAIT leaves the
            // child waitable, so `EmbeddedServer::stop` still reaps it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    self.pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            if r != 0 {
                // ECHILD: already reaped, so it is gone.
                return Some("it is no longer running".into());
            }
            // SAFETY: si_pid and si_status are valid after a successful waitid.
            let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
            if pid == 0 {
                return None;
            }
            let how = if info.si_code == libc::CLD_EXITED {
                format!("exit status {status}")
            } else {
                format!("killed by signal {status}{}", advice_for_signal(status))
            };
            Some(how)
        }
        #[cfg(not(unix))]
        None
    }

    /// Resolves with a full explanation when the server exits; pending forever otherwise.
    pub async fn crashed(&self) -> String {
        loop {
            if let Some(how) = self.exited() {
                return self.explain(&how);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// After a connection failure: the explanation if the server exits within `grace` (a
    /// dying process closes its sockets before the kernel reports its exit), else `None`.
    pub async fn crashed_within(&self, grace: Duration) -> Option<String> {
        let t0 = Instant::now();
        loop {
            if let Some(how) = self.exited() {
                return Some(self.explain(&how));
            }
            if t0.elapsed() >= grace {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn explain(&self, how: &str) -> String {
        format!(
            "the embedded LLM server ({SERVER_BIN}, pid {}) exited mid-run: {how}. It was not restarted. Its log ({}) ends:\n{}",
            self.pid,
            self.log.display(),
            log_tail(&self.log, 15)
        )
    }
}

/// What to do about a server killed by `signal`, when there is something to do: SIGILL is a
/// build for another CPU (one copied from a newer machine, or a variant whose first request
/// passed but a later kernel did not).
pub(super) fn advice_for_signal(signal: i32) -> &'static str {
    #[cfg(unix)]
    if signal == libc::SIGILL {
        return " SIGILL: this build of voxlat-server uses instructions this CPU lacks. Build it \
                on this machine (bash scripts/setup.sh leaves out what the CPU lacks), or set \
                VOXLAT_SERVER_BUILD=portable if voxlat chose a variant.";
    }
    let _ = signal;
    ""
}

/// The embedded server's death, awaited; never, when the LLM is another server. Owned, so a
/// command's event loop can hold it beside the server.
pub struct CrashWatch(Option<ServerWatch>);

impl CrashWatch {
    pub fn of(server: Option<&EmbeddedServer>) -> CrashWatch {
        CrashWatch(server.map(EmbeddedServer::watch))
    }

    /// See [`ServerWatch::crashed`].
    pub async fn crashed(&self) -> String {
        match &self.0 {
            Some(w) => w.crashed().await,
            None => std::future::pending().await,
        }
    }

    /// See [`ServerWatch::crashed_within`].
    pub async fn crashed_within(&self, grace: Duration) -> Option<String> {
        match &self.0 {
            Some(w) => w.crashed_within(grace).await,
            None => None,
        }
    }
}
