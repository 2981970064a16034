//! `wc-admin`: migrations and credentials. See `wc_functions::admin`.

use clap::Parser;
use wc_functions::admin::{AdminCli, run};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    wc_functions::telemetry::init();
    let cli = AdminCli::parse();
    let mut stdout = std::io::stdout().lock();
    match run(cli, &mut stdout).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wc-admin: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
