//! `search_project_texts` against ripgrep: the same pattern over the same generated tree,
//! wc's tool call (every page, over MCP, through the queue to the embedded runner) against
//! `rg` run as a process by this benchmark, in alternating order, several times.
//!
//! The tree ([`generate`]) is 20,000 files that a search walks: source-like text files in
//! nested directories and some binary files, beside a `.gitignore`d build directory and a
//! hidden one, both full of matches that neither search may report. The tree is a Git
//! repository (`git init`, nothing committed), so `rg` applies its `.gitignore` at its
//! defaults, as wc does with or without Git. Both counts of matching lines must agree.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use serde_json::{Value, json};

use super::mcp::{mcp_request, post_mcp};
use super::{OpFuture, median, round};
use crate::client::Client;

/// The tree's directory under the project root.
pub const TREE_DIR: &str = "search-tree";

/// The pattern searched: a planted identifier family, in about one file in sixteen.
pub const PATTERN: &str = r"retry_[a-z]+_budget\b";

/// Matches per page asked of wc: the tool's maximum.
pub const PAGE_LIMIT: u32 = 500;

/// Files a search walks (text and binary); the ignored and hidden ones come on top.
pub const TREE_FILES: usize = 20_000;

/// Every how many files one is binary.
const BINARY_EVERY: usize = 100;

/// Files in the ignored build directory and in the hidden directory.
const IGNORED_FILES: usize = 500;
const HIDDEN_FILES: usize = 50;

/// A small deterministic generator (SplitMix64), so every run searches the same tree.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }
}

const WORDS: &[&str] = &[
    "session", "ledger", "runner", "queue", "lease", "window", "board", "message", "token",
    "project", "shell", "audit", "event", "cursor", "page", "answer", "result", "config", "buffer",
    "stream", "handle", "state", "limit", "budget", "retry", "worker", "client",
];

/// What [`generate`] made; the tree is removed when this is dropped.
#[derive(Debug)]
pub struct Tree {
    /// The tree's root.
    pub root: PathBuf,
    /// Text files a search walks.
    pub text_files: usize,
    /// Binary files a search walks and skips.
    pub binary_files: usize,
    /// Bytes of the text files.
    pub text_bytes: u64,
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            eprintln!("wc-bench: cannot remove {}: {e}", self.root.display());
        }
    }
}

/// One source-like line in the style of `ext`.
fn line(mix: &mut Mix, ext: &str) -> String {
    let (a, b, c) = (mix.pick(WORDS), mix.pick(WORDS), mix.pick(WORDS));
    let n = mix.below(1000);
    match (ext, mix.below(6)) {
        (_, 0) => format!("// {a} {b} {c}: see the {b} notes for {n}"),
        ("py", _) => format!("    {a}_{b} = self.{c}_{a}({n})"),
        ("ts", _) => format!("  const {a}{n} = await {b}.{c}({n});"),
        ("md", _) => format!("The {a} keeps its {b} until the {c} ends ({n})."),
        ("toml", _) => format!("{a}_{b} = {n}"),
        _ => format!("    let {a}_{b} = {c}_{a}(&{b}, {n})?;"),
    }
}

/// A text file of 200 bytes to 8 KiB in the style of `ext`; with `plant`, one line of it
/// matches [`PATTERN`].
fn text_file(mix: &mut Mix, ext: &str, plant: bool) -> String {
    let target = 200 + mix.below(8 * 1024 - 200);
    let plant_at = if plant { Some(mix.below(target)) } else { None };
    let mut text = String::with_capacity(target + 128);
    let mut planted = !plant;
    let planted_line = |mix: &mut Mix| {
        format!(
            "    if self.retry_{}_budget == 0 {{ return Err(Exhausted); }}\n",
            mix.pick(WORDS)
        )
    };
    while text.len() < target {
        if !planted && plant_at.is_some_and(|at| text.len() >= at) {
            text.push_str(&planted_line(mix));
            planted = true;
        }
        text.push_str(&line(mix, ext));
        text.push('\n');
    }
    if !planted {
        text.push_str(&planted_line(mix));
    }
    text
}

/// A binary file: a PNG-like header with NUL bytes up front, then bytes that would match.
fn binary_file(mix: &mut Mix) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    for _ in 0..64 {
        bytes.extend_from_slice(&mix.next().to_le_bytes());
        bytes.extend_from_slice(b" retry_queue_budget ");
    }
    bytes
}

/// Generates the tree under `root` (which must not exist): [`TREE_FILES`] files in
/// `crateNN/src/modNN/` directories, every [`BINARY_EVERY`]th binary, plus a `.gitignore`d
/// `target/` and `*.log` files and a hidden `.cache/`, all full of matches; then `git init`.
pub fn generate(root: &Path) -> anyhow::Result<Tree> {
    const EXTS: &[&str] = &["rs", "rs", "rs", "ts", "py", "md", "toml"];
    let mut mix = Mix(0x5EED);
    let mut tree = Tree {
        root: root.to_owned(),
        text_files: 0,
        binary_files: 0,
        text_bytes: 0,
    };
    std::fs::create_dir_all(root)?;
    std::fs::write(root.join(".gitignore"), "target/\n*.log\n")?;
    for i in 0..TREE_FILES {
        let dir = root.join(format!("crate{:02}/src/mod{:02}", i / 1000, (i / 100) % 10));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        if i % BINARY_EVERY == BINARY_EVERY - 1 {
            std::fs::write(dir.join(format!("asset{i:05}.png")), binary_file(&mut mix))?;
            tree.binary_files += 1;
            continue;
        }
        let ext = mix.pick(EXTS);
        let plant = mix.below(16) == 0;
        let text = text_file(&mut mix, ext, plant);
        tree.text_bytes += text.len() as u64;
        std::fs::write(dir.join(format!("file{i:05}.{ext}")), text)?;
        tree.text_files += 1;
    }
    for (dir, files) in [
        ("target/debug/build", IGNORED_FILES),
        (".cache", HIDDEN_FILES),
    ] {
        let dir = root.join(dir);
        std::fs::create_dir_all(&dir)?;
        for i in 0..files {
            std::fs::write(
                dir.join(format!("out{i:04}.rs")),
                text_file(&mut mix, "rs", true),
            )?;
        }
    }
    std::fs::write(
        root.join("crate00/build.log"),
        text_file(&mut mix, "md", true),
    )?;
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .context("cannot run git init in the search tree")?;
    anyhow::ensure!(git.success(), "git init in the search tree failed: {git}");
    Ok(tree)
}

/// `rg --version`'s first line; an error that says how to get it when `rg` is missing.
pub async fn rg_version() -> anyhow::Result<String> {
    let out = tokio::process::Command::new("rg")
        .arg("--version")
        .output()
        .await
        .context(
            "rg (ripgrep) is needed by search_project_texts_vs_rg and is not installed: \
             scripts/bench installs it as root (apt-get install ripgrep)",
        )?;
    anyhow::ensure!(out.status.success(), "rg --version failed: {}", out.status);
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}

/// A pattern no file holds: the same walk and search, nearly nothing to answer. Set beside
/// [`PATTERN`], it tells the walk and search from the pages and their transport.
pub const NO_MATCH_PATTERN: &str = r"retry_[a-z]+_budget_never_written\b";

/// One wc search end to end: every page of `pattern` under [`TREE_DIR`], [`PAGE_LIMIT`]
/// matches a page, following `next_cursor` until there is none. Returns the matching lines
/// and the pages.
async fn wc_search(
    client: &Client,
    url: &str,
    token: &str,
    project: &str,
    pattern: &str,
) -> anyhow::Result<(u64, u32)> {
    let (mut matches, mut pages) = (0u64, 0u32);
    let mut cursor: Option<String> = None;
    loop {
        let mut arguments = json!({
            "project": project,
            "pattern": pattern,
            "path": TREE_DIR,
            "limit": PAGE_LIMIT,
        });
        if let Some(c) = &cursor {
            arguments["cursor"] = json!(c);
        }
        let (mut headers, body) = mcp_request(
            "tools/call",
            Some("search_project_texts"),
            json!({ "name": "search_project_texts", "arguments": arguments }),
        );
        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
        let (reply, _) = post_mcp(client, url, &headers, body.into(), "tools/call").await?;
        let output = &reply["result"]["structuredContent"]["output"];
        let page = output["matches"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("search_project_texts gave no matches: {reply}"))?;
        matches += page.len() as u64;
        pages += 1;
        match output["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok((matches, pages)),
        }
    }
}

/// One wc search of [`PATTERN`] over the tree at [`TREE_DIR`] (every page) on the server at
/// `base`, which must find `lines` matching lines: the operation of a paired
/// `search_project_texts`.
pub fn search_op(
    base: &str,
    token: &str,
    project: &str,
    lines: u64,
) -> impl Fn(usize) -> OpFuture + Send + Sync + 'static {
    let client = Client::new();
    let url = Arc::new(format!("{base}/mcp"));
    let (token, project) = (Arc::new(token.to_owned()), Arc::new(project.to_owned()));
    move |_| {
        let (client, url, token, project) =
            (client.clone(), url.clone(), token.clone(), project.clone());
        Box::pin(async move {
            let (found, _) = wc_search(&client, &url, &token, &project, PATTERN).await?;
            anyhow::ensure!(found == lines, "{found} lines match {PATTERN}, not {lines}");
            Ok(vec![])
        })
    }
}

/// The lines of the tree at `root` that match [`PATTERN`], as `rg` counts them.
pub async fn matching_lines(root: &Path) -> anyhow::Result<u64> {
    rg_search(root, PATTERN).await
}

/// One `rg` run of `pattern` over the tree at its defaults, every matching line read from its
/// stdout by this process as wc's replies are. Returns the matching lines.
async fn rg_search(tree: &Path, pattern: &str) -> anyhow::Result<u64> {
    let out = tokio::process::Command::new("rg")
        .args([
            "--line-number",
            "--no-heading",
            "--color",
            "never",
            "-e",
            pattern,
        ])
        .current_dir(tree)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run rg")?;
    let lines = out.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
    // rg exits 1 when nothing matched.
    let found_nothing = out.status.code() == Some(1) && lines == 0;
    anyhow::ensure!(
        out.status.success() || found_nothing,
        "rg failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(lines)
}

/// One pattern measured on both sides.
struct Measured {
    matching_lines: u64,
    pages: u32,
    wc_ms: Vec<f64>,
    rg_ms: Vec<f64>,
}

impl Measured {
    /// The line's fields for this pattern, each name prefixed with `prefix`.
    fn fields(&self, prefix: &str) -> serde_json::Map<String, Value> {
        let ratios: Vec<f64> = self
            .wc_ms
            .iter()
            .zip(&self.rg_ms)
            .map(|(w, r)| w / r)
            .collect();
        let rounded = |v: &[f64]| v.iter().map(|x| round(*x)).collect::<Vec<_>>();
        let mut fields = serde_json::Map::new();
        for (name, value) in [
            ("matching_lines", json!(self.matching_lines)),
            ("pages", json!(self.pages)),
            ("wc_median_ms", json!(round(median(&self.wc_ms)))),
            ("rg_median_ms", json!(round(median(&self.rg_ms)))),
            ("ratio_to_rg", json!(round(median(&ratios)))),
            ("ratio_to_rg_by_round", json!(rounded(&ratios))),
            ("wc_ms_by_round", json!(rounded(&self.wc_ms))),
            ("rg_ms_by_round", json!(rounded(&self.rg_ms))),
        ] {
            fields.insert(format!("{prefix}{name}"), value);
        }
        fields
    }
}

/// Both sides' searches of `pattern`: one unmeasured search of each (the page cache then
/// holds the tree for both, and both must find the same lines), then `repetitions` rounds of
/// one wc search and one `rg` run, the order alternating round by round (wc first in even
/// rounds), so the box's drift falls on both.
async fn measure(
    client: &Client,
    url: &str,
    token: &str,
    project: &str,
    tree: &Tree,
    pattern: &str,
    repetitions: usize,
) -> anyhow::Result<Measured> {
    let (wc_matches, pages) = wc_search(client, url, token, project, pattern).await?;
    let rg_matches = rg_search(&tree.root, pattern).await?;
    anyhow::ensure!(
        wc_matches == rg_matches,
        "wc found {wc_matches} lines matching {pattern} and rg {rg_matches}: the searches differ"
    );
    let mut m = Measured {
        matching_lines: wc_matches,
        pages,
        wc_ms: Vec::new(),
        rg_ms: Vec::new(),
    };
    for round_no in 0..repetitions {
        let order = if round_no % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for wc_side in order {
            let t = Instant::now();
            let found = if wc_side {
                wc_search(client, url, token, project, pattern).await?.0
            } else {
                rg_search(&tree.root, pattern).await?
            };
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            anyhow::ensure!(found == wc_matches, "{found} lines, then {wc_matches}");
            if wc_side {
                m.wc_ms.push(ms);
            } else {
                m.rg_ms.push(ms);
            }
        }
    }
    Ok(m)
}

/// `search_project_texts_vs_rg`: [`PATTERN`] and then [`NO_MATCH_PATTERN`] measured by
/// [`measure`]. Reports each side's median wall time and the median of the rounds' ratios
/// (wc over rg), with every round's; the no-match figures are prefixed `no_match_`.
pub async fn against_rg(
    base: &str,
    token: &str,
    project: &str,
    tree: &Tree,
    repetitions: usize,
) -> anyhow::Result<Value> {
    let rg = rg_version().await?;
    let client = Client::new();
    let url = format!("{base}/mcp");
    let matching = measure(&client, &url, token, project, tree, PATTERN, repetitions).await?;
    let nothing = measure(
        &client,
        &url,
        token,
        project,
        tree,
        NO_MATCH_PATTERN,
        repetitions,
    )
    .await?;
    let mut line = json!({
        "scenario": "search_project_texts_vs_rg",
        "repetitions": repetitions,
        "files": tree.text_files + tree.binary_files,
        "text_files": tree.text_files,
        "binary_files": tree.binary_files,
        "text_bytes": tree.text_bytes,
        "pattern": PATTERN,
        "page_limit": PAGE_LIMIT,
        "rg": rg,
    });
    if let Some(fields) = line.as_object_mut() {
        fields.extend(matching.fields(""));
        fields.extend(nothing.fields("no_match_"));
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_file_matches_the_pattern_on_one_line_and_others_never() {
        let mut mix = Mix(7);
        for ext in ["rs", "ts", "py", "md", "toml"] {
            let planted = text_file(&mut mix, ext, true);
            let count = planted.lines().filter(|l| l.contains("_budget ==")).count();
            assert_eq!(count, 1, "{planted}");
            let plain = text_file(&mut mix, ext, false);
            assert!(!plain.contains("_budget =="), "{plain}");
        }
    }
}
