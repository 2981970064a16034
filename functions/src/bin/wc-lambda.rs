//! AWS Lambda entry point serving every route group (one function for the whole API).

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    wc_functions::lambda::serve(wc_functions::Surfaces::ALL).await
}
