//! AWS Lambda entry point of the runner route group alone (see `wc_functions::Surfaces`).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wc_functions::lambda::serve(wc_functions::Surfaces::RUNNER).await
}
