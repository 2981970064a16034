//! `wc-runner`: the runner agent of one build host.
//!
//! This build validates its configuration (`--check-config`); the work loops (poll, heartbeat,
//! execution, cancellation) arrive with the runner API.

use wc_runner_agent::config;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

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
            println!("  sqs:      {url}");
        }
        println!(
            "  limits:   {} at once, {} bytes per output stream",
            cfg.limits.max_concurrency, cfg.limits.output_bytes_per_stream
        );
        println!("  protocol: v{}", wc_runner_protocol::PROTOCOL_VERSION);
        for (id, root) in &cfg.projects {
            println!("  project:  {id} -> {}", root.display());
        }
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "wc-runner: this build only validates configuration (--check-config); it does not execute work yet"
    );
    ExitCode::FAILURE
}
