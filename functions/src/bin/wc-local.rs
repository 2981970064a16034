//! `wc-local`: wc on one machine. See `wc_functions::local`.

use clap::Parser;
use wc_functions::local::{LocalCli, run};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    wc_functions::telemetry::init();
    let cli = LocalCli::parse();
    let mut stdout = std::io::stdout();
    match run(cli, &mut stdout).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wc-local: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
