//! `wc-runner`: the runner agent of one build host.
//!
//! `--check-config` validates the configuration, probes the sandbox, and exits; otherwise the
//! agent runs until SIGTERM or SIGINT (finish running work while heartbeating, then exit); a
//! second signal, or SIGQUIT, cancels running work at once.
//!
//! The process makes itself non-dumpable first: other processes of its user cannot read its
//! memory or `/proc/<pid>/environ` (which hold the runner token), nor attach to it.

use wc_runner_agent::config;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tokio::sync::watch;
use wc_runner_agent::agent::{self, AgentOptions, Stop};
use wc_runner_agent::sandbox::SandboxMode;

/// Command line of `wc-runner`.
#[derive(Debug, Parser)]
#[command(name = "wc-runner", version, about = "Run wc work on this build host")]
struct Cli {
    /// Configuration file.
    #[arg(long, default_value = "/etc/wc/runner.toml")]
    config: PathBuf,
    /// Validate the configuration, print a summary, and exit.
    #[arg(long)]
    check_config: bool,
}

fn main() -> ExitCode {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("wc-runner: cannot make the process non-dumpable: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    let cfg = match config::RunnerConfig::load(&cli.config) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("wc-runner: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    if cli.check_config {
        println!("configuration ok: {}", cli.config.display());
        println!("  server:   {}", cfg.server_url);
        println!("  client:   {}", cfg.client_id);
        println!(
            "  token:    {}",
            if cfg.token.is_empty() {
                "missing"
            } else {
                "configured"
            }
        );
        println!("  queue:    {:?}", cfg.queue);
        if let Some(url) = &cfg.sqs_queue_url {
            println!("  sqs:      {url} (region {})", cfg.sqs_signing_region());
        }
        if let Some(url) = &cfg.sqs_endpoint_url {
            println!("  endpoint: {url}");
        }
        println!(
            "  limits:   {} at once, {} bytes per output stream",
            cfg.limits.max_concurrency, cfg.limits.output_bytes_per_stream
        );
        println!("  protocol: v{}", wc_runner_protocol::PROTOCOL_VERSION);
        for (id, project) in &cfg.projects {
            let root = project.root().display();
            let pass: Vec<&str> = project.env_pass().iter().map(|n| n.as_str()).collect();
            if pass.is_empty() {
                println!("  project:  {id} -> {root}");
            } else {
                println!("  project:  {id} -> {root} (passes {})", pass.join(", "));
            }
            for dir in project.git_dirs() {
                println!("  git:      {id} also writes {}", dir.display());
            }
        }
        println!("  sandbox:  {}", cfg.sandbox.describe());
        if cfg.sandbox.mode() == SandboxMode::Bubblewrap {
            for dir in cfg.sandbox.writable() {
                println!("  writable: {}", dir.display());
            }
            for path in cfg.sandbox.hidden() {
                println!("  hidden:   {}", path.display());
            }
        }
        let limits = cfg.sandbox.limits();
        let show = |v: Option<u64>| v.map_or("unbounded".to_owned(), |v| v.to_string());
        println!(
            "  limits:   per job {} processes, {} MiB, CPU weight {}",
            show(limits.max_processes),
            show(limits.max_memory.map(|b| b >> 20)),
            show(limits.cpu_weight)
        );
        println!("  bounds:   {}", wc_runner_agent::cgroup::describe());
        if let Err(e) = cfg.sandbox.probe() {
            eprintln!("wc-runner: {e}");
            return ExitCode::FAILURE;
        }
        if cfg.sandbox.mode() == SandboxMode::Bubblewrap {
            println!("  probe:    a sandboxed `true` ran");
        }
        return ExitCode::SUCCESS;
    }
    init_logs();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("wc-runner: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(Stop::Run);
        tokio::spawn(signals(stop_tx));
        match agent::run(cfg, AgentOptions::default(), stop_rx).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("wc-runner: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

fn init_logs() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("WC_RUNNER_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// SIGTERM/SIGINT: drain; again, or SIGQUIT: stop now.
async fn signals(stop: watch::Sender<Stop>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        eprintln!("wc-runner: cannot install signal handlers");
        let _ = stop.send(Stop::Now);
        return;
    };
    loop {
        let now = tokio::select! {
            _ = term.recv() => false,
            _ = int.recv() => false,
            _ = quit.recv() => true,
        };
        let next = if now || *stop.borrow() != Stop::Run {
            Stop::Now
        } else {
            Stop::Drain
        };
        tracing::info!(?next, "signal received");
        let _ = stop.send(next);
    }
}
