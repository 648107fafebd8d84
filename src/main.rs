//! The `classifyd` binary: parse flags, set up logging, run a command
//! ([`classifyd::commands::execute`]), map errors to an exit status. All
//! logic lives in the library.

use std::process::ExitCode;

use classifyd::config::{self, ConfigError};

/// mimalloc: far fewer page faults than glibc's heap on the per-message
/// allocations (Cargo.toml says what it measured).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    classifyd::allocator::purge_at_once();
    // A file size limit (ulimit -f) makes a write fail with EFBIG, which
    // the daemon reports naming the file, instead of killing it (SIGXFSZ).
    // SAFETY: setting a signal's disposition to ignore, before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let (cli, file) = match config::parse_args(std::env::args_os().collect()) {
        Ok(parsed) => parsed,
        // Usage errors, --help and --version, printed as clap prints them.
        Err(ConfigError::Clap(e)) => e.exit(),
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| "info".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        // A log line that cannot be written (stderr on a full disk) is
        // lost, not the daemon: by default tracing reports the failure
        // with eprintln!, which panics when stderr cannot be written.
        .log_internal_errors(false)
        .init();
    match classifyd::commands::execute(cli.command, &file) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes, joined by ": ".
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}
