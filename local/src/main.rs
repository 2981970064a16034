//! `wc-local`: wc on one machine. See the `wc_local` library.

/// The server's allocator (see `wc_functions::Allocator`).
#[global_allocator]
static ALLOCATOR: wc_functions::Allocator = wc_functions::Allocator;

use clap::Parser;
use wc_local::{LocalCli, run};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    wc_functions::telemetry::init();
    if let Err(e) = wc_functions::hardening::forbid_inspection() {
        eprintln!("wc-local: cannot make the process non-dumpable: {e}");
        return std::process::ExitCode::FAILURE;
    }
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
