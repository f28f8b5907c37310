//! `voxlat models fetch|list|verify`: the user-facing side of voxlat-models. Progress bars
//! and messages go to stderr; `list` and `verify` tables go to stdout.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use voxlat_models::{Check, Event, FileState, Manifest, Model, Outcome, Reporter, Store};

#[derive(Args)]
pub struct ModelsArgs {
    /// A manifest to use instead of the built-in models/manifest.toml.
    #[arg(long, env = "VOXLAT_MANIFEST", global = true, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// The models cache [default: VOXLAT_MODELS_DIR, else the platform cache directory,
    /// e.g. ~/.cache/voxlat/models].
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    #[command(subcommand)]
    command: ModelsCommand,
}

#[derive(Subcommand)]
enum ModelsCommand {
    /// Download, convert and verify models (a no-op for those already present and intact).
    Fetch {
        /// Models to fetch; none means the same as --all.
        names: Vec<String>,
        /// Every model except optional ones (plus the selected default of each role).
        #[arg(long, conflicts_with = "names")]
        all: bool,
        /// Seconds to wait for a connection before falling through to the next source.
        #[arg(long, default_value_t = 5, value_name = "SECONDS")]
        connect_timeout: u64,
    },
    /// Show each model's status, size, licence and path (quick check: sizes and stamps).
    List,
    /// Re-hash every present file against the manifest; exits 1 if any is corrupt or missing.
    Verify {
        /// Models to verify; none means every default model and any optional one present.
        names: Vec<String>,
    },
}

pub fn run(args: ModelsArgs) -> Result<ExitCode> {
    let manifest = match &args.manifest {
        Some(p) => Manifest::load(p)?,
        None => Manifest::builtin()?,
    };
    let mut store = match args.dir {
        Some(dir) => Store::new(manifest, dir),
        None => Store::open_default(Some(manifest))?,
    };
    // The one conversion the manifest names; registered here so that the models crate (and
    // the LLM server, which uses it for paths) never links whisper.cpp.
    store.converters.insert(
        voxlat_models::CT2_WHISPER_GGML.to_string(),
        voxlat_asr::convert::convert_inputs,
    );
    match args.command {
        ModelsCommand::Fetch {
            names,
            all: _,
            connect_timeout,
        } => {
            store.http.connect_timeout = std::time::Duration::from_secs(connect_timeout.max(1));
            fetch(&store, &names)
        }
        ModelsCommand::List => list(&store),
        ModelsCommand::Verify { names } => verify(&store, &names),
    }
}

fn pick<'a>(store: &'a Store, names: &[String]) -> Result<Vec<&'a Model>> {
    if names.is_empty() {
        return Ok(store.manifest().default_set());
    }
    names
        .iter()
        .map(|n| store.manifest().require(n).map_err(Into::into))
        .collect()
}

fn fetch(store: &Store, names: &[String]) -> Result<ExitCode> {
    let models = pick(store, names)?;
    let reporter = Bars::new();
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    for m in &models {
        reporter.line(format!("{}:", m.name));
        match store.fetch(&m.name, &reporter) {
            Ok(Outcome::AlreadyPresent) => reporter.line("  already present and verified".into()),
            Ok(Outcome::Fetched { sources, failed }) => {
                let skipped = if failed.is_empty() {
                    String::new()
                } else {
                    format!(" (after {} unavailable source(s))", failed.len())
                };
                reporter.line(format!("  fetched from {}{skipped}", sources.join(", ")));
            }
            Err(e) => {
                reporter.line("  FAILED".to_string());
                failures.push((m.name.clone(), e));
            }
        }
    }
    eprintln!(
        "{} model(s) in {} ({:.1} s)",
        models.len(),
        store.dir().display(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for (name, e) in &failures {
        eprintln!("\nerror: {name}: {e}");
    }
    bail!(
        "{} of {} model(s) could not be fetched: {}",
        failures.len(),
        models.len(),
        failures
            .iter()
            .map(|f| f.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn human(bytes: u64) -> String {
    let mb = bytes as f64 / 1e6;
    if mb >= 1.0 {
        format!("{mb:.1} MB")
    } else {
        format!("{:.1} kB", bytes as f64 / 1e3)
    }
}

fn state_word(s: &FileState) -> String {
    match s {
        FileState::Ok { .. } => "ok".into(),
        FileState::Missing => "missing".into(),
        FileState::Corrupt { reason } => format!("CORRUPT ({reason})"),
    }
}

fn print_rows(rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(width[i] - c.chars().count() + 2));
            }
        }
        println!("{}", line.trim_end());
    }
}

fn list(store: &Store) -> Result<ExitCode> {
    let manifest = store.manifest();
    let mut rows = vec![vec![
        "MODEL".to_string(),
        "ROLE".into(),
        "STATUS".into(),
        "SIZE".into(),
        "LICENCE".into(),
        "PATH".into(),
    ]];
    for m in &manifest.models {
        let files = store.status(&m.name, Check::Fast, &voxlat_models::Quiet)?;
        let status = if files
            .iter()
            .all(|f| matches!(f.state, FileState::Ok { .. }))
        {
            "ok".to_string()
        } else if files.iter().all(|f| f.state == FileState::Missing) {
            "not fetched".to_string()
        } else {
            files
                .iter()
                .filter(|f| !matches!(f.state, FileState::Ok { .. }))
                .map(|f| format!("{}: {}", f.name, state_word(&f.state)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut role = m.role.as_str().to_string();
        if manifest.defaults.get(role.as_str()) == Some(&m.name) {
            role.push_str(" (default)");
        } else if m.optional {
            role.push_str(" (optional)");
        }
        let size: u64 = m.files.iter().map(|f| f.size).sum();
        rows.push(vec![
            m.name.clone(),
            role,
            status,
            human(size),
            m.licence.clone(),
            store.model_dir(&m.name).display().to_string(),
        ]);
    }
    print_rows(&rows);
    Ok(ExitCode::SUCCESS)
}

fn verify(store: &Store, names: &[String]) -> Result<ExitCode> {
    let explicit = !names.is_empty();
    let mut models: Vec<&Model> = pick(store, names)?;
    if !explicit {
        // Optional models count only if some of their files are present.
        for m in &store.manifest().models {
            let present = m
                .files
                .iter()
                .any(|f| store.path(&m.name, &f.name).exists());
            if present && !models.iter().any(|x| x.name == m.name) {
                models.push(m);
            }
        }
    }
    let reporter = Bars::new();
    let mut rows = vec![vec![
        "MODEL".to_string(),
        "FILE".into(),
        "STATUS".into(),
        "SHA256".into(),
    ]];
    let mut bad = 0;
    for m in &models {
        for f in store
            .status(&m.name, Check::Full, &reporter)
            .with_context(|| format!("verifying {}", m.name))?
        {
            let sha = match &f.state {
                FileState::Ok { sha256, .. } => sha256.clone(),
                _ => {
                    bad += 1;
                    String::new()
                }
            };
            rows.push(vec![
                m.name.clone(),
                f.path.display().to_string(),
                state_word(&f.state),
                sha,
            ]);
        }
    }
    reporter.clear();
    print_rows(&rows);
    if bad > 0 {
        eprintln!("{bad} file(s) missing or corrupt: run `voxlat models fetch` to (re)fetch them");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// indicatif bars for transfers and hashes (hidden when stderr is not a terminal), plain
/// lines for everything else.
struct Bars {
    multi: MultiProgress,
    bars: Mutex<HashMap<String, ProgressBar>>,
    tty: bool,
}

/// Smaller transfers finish before a bar would be readable.
const BAR_MIN_BYTES: u64 = 4 << 20;

impl Bars {
    fn new() -> Self {
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Self {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            bars: Mutex::new(HashMap::new()),
            tty,
        }
    }

    fn line(&self, s: String) {
        self.multi.suspend(|| eprintln!("{s}"));
    }

    fn clear(&self) {
        if let Ok(mut bars) = self.bars.lock() {
            for (_, b) in bars.drain() {
                b.finish_and_clear();
            }
        }
    }
}

impl Reporter for Bars {
    fn event(&self, event: Event<'_>) {
        match event {
            Event::Bytes {
                what, done, total, ..
            } => {
                if !self.tty || total.is_some_and(|t| t < BAR_MIN_BYTES) {
                    return;
                }
                let Ok(mut bars) = self.bars.lock() else {
                    return;
                };
                let bar = bars.entry(what.to_string()).or_insert_with(|| {
                    let b = self.multi.add(ProgressBar::new(total.unwrap_or(0)));
                    let style = ProgressStyle::with_template(
                        "  {msg:40!} [{bar:30}] {binary_bytes:>10}/{binary_total_bytes:<10} {binary_bytes_per_sec}",
                    )
                    .map(|s| s.progress_chars("=> "))
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
                    b.set_style(style);
                    b.set_message(what.to_string());
                    b
                });
                bar.set_position(done);
            }
            Event::BytesDone { what, .. } => {
                if let Ok(mut bars) = self.bars.lock() {
                    if let Some(b) = bars.remove(what) {
                        b.finish_and_clear();
                    }
                }
            }
            Event::Replacing { file, reason, .. } => {
                self.line(format!("  {file} is damaged ({reason}); fetching it again"))
            }
            Event::SourceStart { source, .. } => self.line(format!("  trying {source}")),
            Event::Step { message, .. } => self.line(format!("    {message}")),
            Event::SourceFailed { error, .. } => {
                self.line(format!("    unavailable: {error}"));
            }
            Event::FileReady {
                file,
                size,
                sha256,
                pinned_now,
                ..
            } => {
                let pin = if pinned_now {
                    " (not pinned in the manifest: recorded now)"
                } else {
                    ""
                };
                self.line(format!("    {file}: {} sha256 {sha256}{pin}", human(size)));
            }
            Event::AlreadyPresent { .. } => {}
        }
    }
}
