//! `wc-admin`: migrations and credentials. See `wc_functions::admin`.

use clap::Parser;
use wc_functions::admin::{AdminCli, run};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    // An operator command prints its own report; logs are for warnings and failures.
    wc_functions::telemetry::init_with_default("warn");
    if let Err(e) = wc_functions::hardening::forbid_inspection() {
        eprintln!("wc-admin: cannot make the process non-dumpable: {e}");
        return std::process::ExitCode::FAILURE;
    }
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
