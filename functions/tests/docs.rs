//! The committed reference documents match what the code generates.

use wc_functions::docs;
use wc_functions::kernel::Registry;

fn check(path: &str, generated: String) {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(&full).unwrap_or_default();
    assert!(
        committed == generated,
        "{path} is out of date: regenerate it with `cargo run -q --bin wc-admin -- docs {}` > {path}",
        if path.ends_with("TOOLS.md") {
            "tools"
        } else {
            "errors"
        }
    );
}

#[test]
fn tools_reference_is_current() {
    let runtime = Registry::new(wc_functions::tools::all());
    check("docs/TOOLS.md", docs::tools_markdown(&runtime));
}

#[test]
fn errors_reference_is_current() {
    check("docs/ERRORS.md", docs::errors_markdown());
}
