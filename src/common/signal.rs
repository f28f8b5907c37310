//! Ctrl-C and SIGTERM: every command that measures stops on either and keeps what it has.

use std::process::ExitCode;

/// A request to stop from outside: Ctrl-C or a service manager's SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The shell convention: 128 + the signal number.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        })
    }
}

pub async fn shutdown_signal() -> StopSignal {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => StopSignal::Interrupt,
                _ = term.recv() => StopSignal::Terminate,
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    StopSignal::Interrupt
}
