//! Runs the embedded LLM server (`voxlat-server`, next to this executable) as a child process
//! for commands that need an LLM and were given no URL: bench-llm now, the pipeline later.
//!
//! The child never outlives us: [`EmbeddedServer`] kills it on drop (normal exit, `?`, panic
//! unwinding), and on Linux the kernel kills it if this process dies without unwinding
//! (SIGKILL, abort) through `PR_SET_PDEATHSIG`. It runs in its own process group, so a
//! terminal's Ctrl-C reaches only us: we finish our results first, then stop it.

mod builds;
mod watch;

use anyhow::{bail, Context, Result};
pub use builds::{ServerBuild, SERVER_BIN};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use watch::advice_for_signal;
pub use watch::{CrashWatch, ServerWatch};

/// The `voxlat-server` builds installed or built beside the running `voxlat`, best first
/// (`builds` says how they are chosen); a note on stderr when a variant is passed over.
pub fn server_builds() -> Result<Vec<ServerBuild>> {
    let exe = std::env::current_exe().context("cannot locate the running executable")?;
    let dir = exe
        .parent()
        .context("the running executable has no directory")?;
    let (all, note) = builds::candidates(dir, builds::Choice::from_env()?, builds::cpu_has)?;
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    Ok(all)
}

#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// `--model` for the server (a GGUF path or manifest name); None: the manifest default.
    pub model: Option<String>,
    pub threads: Option<u32>,
    /// Threads for prefill only (`--batch-threads`); `threads` when absent.
    pub batch_threads: Option<u32>,
    /// Further server flags, e.g. `--ctx 8192`.
    pub extra_args: Vec<String>,
    /// Directory for the server's log file (created if missing).
    pub log_dir: PathBuf,
    /// How long the model may take to load before we give up.
    pub ready_timeout: Duration,
}

impl SpawnOptions {
    pub fn new(log_dir: impl Into<PathBuf>) -> SpawnOptions {
        SpawnOptions {
            model: None,
            threads: None,
            batch_threads: None,
            extra_args: Vec::new(),
            log_dir: log_dir.into(),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

/// A running child `voxlat-server`, stopped when dropped.
pub struct EmbeddedServer {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
    build: &'static str,
}

impl EmbeddedServer {
    /// Starts the best server build this CPU runs on a free loopback port and waits until
    /// `/health` answers. A build for a CPU family must also answer a first request, or the
    /// next build is started instead (said on stderr). Blocking; call it from a thread that
    /// lives as long as the server should (on Linux the parent-death signal fires when the
    /// *thread* that spawned the child exits).
    pub fn spawn(opts: &SpawnOptions) -> Result<EmbeddedServer> {
        let all = server_builds()?;
        // The last candidate (the portable build, or the one build asked for) starts without
        // the first-request check: nothing is left to fall back to.
        let Some((last, earlier)) = all.split_last() else {
            bail!("no {SERVER_BIN} build to start");
        };
        for build in earlier {
            match Self::spawn_build(build.clone(), opts).and_then(|mut s| {
                s.first_request()?;
                Ok(s)
            }) {
                Ok(s) => return Ok(s),
                Err(e) => eprintln!(
                    "warning: {SERVER_BIN}-{} failed ({e:#}); starting the portable build",
                    build.name
                ),
            }
        }
        Self::spawn_build(last.clone(), opts)
    }

    fn spawn_build(build: ServerBuild, opts: &SpawnOptions) -> Result<EmbeddedServer> {
        let bin = build.path.clone();
        std::fs::create_dir_all(&opts.log_dir)
            .with_context(|| format!("cannot create {}", opts.log_dir.display()))?;
        let log = opts.log_dir.join(format!(
            "voxlat-server-{}-{}.log",
            voxlat_core::clock::wall_label_compact(),
            std::process::id()
        ));
        // The free port is found by binding and releasing it; another process could take it
        // in between, so a bind failure is retried on a new port.
        let mut last_err = None;
        for _ in 0..3 {
            let port = free_port()?;
            match Self::start_once(&bin, build.name, opts, port, &log) {
                Ok(s) => return Ok(s),
                Err(StartError::PortTaken) => last_err = Some(format!("port {port} was taken")),
                Err(StartError::Other(e)) => return Err(e),
            }
        }
        bail!(
            "could not start {SERVER_BIN}: {}",
            last_err.unwrap_or_default()
        )
    }

    fn start_once(
        bin: &Path,
        build: &'static str,
        opts: &SpawnOptions,
        port: u16,
        log: &Path,
    ) -> Result<EmbeddedServer, StartError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot write the server log {}", log.display()))?;
        let file2 = file
            .try_clone()
            .with_context(|| format!("cannot write the server log {}", log.display()))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
        if let Some(m) = &opts.model {
            cmd.args(["--model", m]);
        }
        if let Some(t) = opts.threads {
            cmd.args(["--threads", &t.to_string()]);
        }
        if let Some(t) = opts.batch_threads {
            cmd.args(["--batch-threads", &t.to_string()]);
        }
        cmd.args(&opts.extra_args)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(file2);
        guard_child(&mut cmd);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let mut server = EmbeddedServer {
            child,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            log: log.to_path_buf(),
            build,
        };
        server.wait_ready(opts.ready_timeout)?;
        Ok(server)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), StartError> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().context("cannot poll the server")? {
                let tail = log_tail(&self.log, 15);
                if tail.contains("in use") {
                    return Err(StartError::PortTaken);
                }
                #[cfg(unix)]
                let advice = std::os::unix::process::ExitStatusExt::signal(&status)
                    .map_or("", advice_for_signal);
                #[cfg(not(unix))]
                let advice = "";
                return Err(StartError::Other(anyhow::anyhow!(
                    "{SERVER_BIN} exited ({status}) before it was ready.{advice} Its log ({}) ends:\n{tail}",
                    self.log.display()
                )));
            }
            if health_ok(self.addr) {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(StartError::Other(anyhow::anyhow!(
                    "{SERVER_BIN} did not answer /health within {:?} (model still loading, or a \
                     very slow machine); see its log {}",
                    timeout,
                    self.log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One short completion, the first thing a build for a CPU family must get through: a
    /// kernel the CPU cannot run kills the server at its first prefill, not at load.
    fn first_request(&mut self) -> Result<()> {
        let body = r#"{"messages":[{"role":"user","content":"Say OK, and nothing else."}],"max_tokens":2,"temperature":0}"#;
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let answered = answers_200(
            self.addr,
            &request,
            Duration::from_secs(2),
            Duration::from_secs(60),
        );
        let died = || {
            std::thread::sleep(Duration::from_millis(100));
            self.watch().exited()
        };
        match answered {
            Ok(true) => Ok(()),
            Ok(false) => bail!("its first request was refused; see {}", self.log.display()),
            Err(e) => match died() {
                Some(how) => bail!("it died at its first request: {how}"),
                None => bail!("its first request failed: {e}"),
            },
        }
    }

    /// Which build runs: `portable`, or the CPU family it was built for.
    pub fn build(&self) -> &'static str {
        self.build
    }

    /// The OpenAI base URL, with `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// A handle that notices the server exiting while a run still needs it.
    pub fn watch(&self) -> ServerWatch {
        ServerWatch {
            pid: self.child.id(),
            log: self.log.clone(),
        }
    }

    /// Stops the server: SIGTERM, a moment to finish, then SIGKILL.
    pub fn stop(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(3) {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.stop();
    }
}

enum StartError {
    PortTaken,
    Other(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(e: anyhow::Error) -> Self {
        StartError::Other(e)
    }
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
    Ok(l.local_addr()?.port())
}

/// A plain HTTP/1.1 GET /health: no client library needed for one request on loopback.
fn health_ok(addr: SocketAddr) -> bool {
    let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    answers_200(
        addr,
        request,
        Duration::from_millis(200),
        Duration::from_millis(500),
    )
    .unwrap_or(false)
}

/// Writes one raw HTTP/1.1 request and says whether the status line is `200`.
fn answers_200(
    addr: SocketAddr,
    request: &str,
    connect: Duration,
    read: Duration,
) -> std::io::Result<bool> {
    let mut s = TcpStream::connect_timeout(&addr, connect)?;
    s.set_read_timeout(Some(read))?;
    s.write_all(request.as_bytes())?;
    let mut buf = [0u8; 12];
    s.read_exact(&mut buf)?;
    Ok(buf.starts_with(b"HTTP/1.1 200"))
}

pub(super) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Own process group (Ctrl-C is ours to handle), and on Linux death with its parent.
fn guard_child(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        {
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: runs in the forked child before exec; prctl, getppid and _exit are
            // async-signal-safe and nothing is allocated.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // The parent may have died before prctl took effect.
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A "server" that dies of SIGILL as it starts, as a build for a newer CPU does.
    #[test]
    fn a_server_killed_by_sigill_is_reported_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join(SERVER_BIN);
        std::fs::write(&bin, "#!/bin/sh\nkill -ILL $$\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let build = ServerBuild {
            name: "portable",
            path: bin,
        };
        // A thread of this test binary that forks while the script is still open for writing
        // makes its exec fail with ETXTBSY for a moment: try again then.
        let mut msg = String::new();
        for _ in 0..10 {
            let Err(e) = EmbeddedServer::spawn_build(build.clone(), &SpawnOptions::new(dir.path()))
            else {
                panic!("the server started");
            };
            msg = format!("{e:#}");
            if !msg.contains("busy") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(msg.contains("instructions this CPU lacks"), "{msg}");
        assert!(msg.contains("scripts/setup.sh"), "{msg}");
    }
}
