//! AWS Lambda entry point of the audit route group alone (see `wc_functions::Surfaces`).

/// The server's allocator (see `wc_functions::Allocator`).
#[global_allocator]
static ALLOCATOR: wc_functions::Allocator = wc_functions::Allocator;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wc_functions::lambda::serve(wc_functions::Surfaces::AUDIT).await
}
