//! `overview`: what a project is, from a bounded ignore-aware look at its tree and one
//! `git status`.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use wc_runner_protocol::{
    EntryKind, GitSummary, LanguageCount, MAX_OVERVIEW_ENTRIES, MAX_OVERVIEW_MANIFESTS,
    MAX_OVERVIEW_SCAN_FILES, Manifest, OverviewAnswer, RelativePath, TreeEntry, WorkAnswer,
};

use super::walk::{self, Entry, WalkSpec};
use super::{Ctx, Ended, Failure, Stop};
use crate::beneath::Root;
use crate::git::job::GitError;
use crate::git::status;

/// Instruction files for coding agents, looked for at these paths.
const INSTRUCTION_FILES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"];

/// Output of `git status` kept: the branch headers come first, and one entry says dirty.
const STATUS_BYTES: u64 = 64 * 1024;

pub(super) async fn run(ctx: &Ctx<'_>) -> Result<WorkAnswer, Ended> {
    let (scanned, git) = tokio::join!(ctx.blocking(scan), git_summary(ctx));
    let mut answer = scanned?;
    answer.git = git?;
    Ok(WorkAnswer::Overview(answer))
}

fn scan(root: &Root, stop: &Stop) -> Result<OverviewAnswer, Failure> {
    let mut tree = Vec::new();
    let mut tree_truncated = false;
    let top = WalkSpec {
        target: "",
        hidden: false,
        max_depth: Some(2),
        resume: None,
    };
    walk::walk(root, &top, stop, |entry: Entry<'_>| {
        let Some(path) = entry.rel.and_then(|r| RelativePath::parse(r).ok()) else {
            return Ok(ControlFlow::Continue(()));
        };
        // Named only when it is still there beneath the root.
        let Ok(opened) = root.open_raw(path.as_str(), false) else {
            return Ok(ControlFlow::Continue(()));
        };
        if tree.len() == MAX_OVERVIEW_ENTRIES {
            tree_truncated = true;
            return Ok(ControlFlow::Break(()));
        }
        tree.push(TreeEntry {
            path,
            kind: opened.kind(),
        });
        Ok(ControlFlow::Continue(()))
    })?;

    let mut languages: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut manifests = Vec::new();
    let mut files = 0;
    let mut scan_truncated = false;
    let all = WalkSpec {
        target: "",
        hidden: false,
        max_depth: None,
        resume: None,
    };
    walk::walk(root, &all, stop, |entry: Entry<'_>| {
        if !matches!(entry.kind, EntryKind::File | EntryKind::Symlink) {
            return Ok(ControlFlow::Continue(()));
        }
        if files == MAX_OVERVIEW_SCAN_FILES {
            scan_truncated = true;
            return Ok(ControlFlow::Break(()));
        }
        files += 1;
        let Some(rel) = entry.rel else {
            return Ok(ControlFlow::Continue(()));
        };
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if let Some(language) = language_of(name) {
            *languages.entry(language).or_default() += 1;
        }
        if let Some(ecosystem) = ecosystem_of(name)
            && manifests.len() < MAX_OVERVIEW_MANIFESTS
            && let Ok(path) = RelativePath::parse(rel)
        {
            manifests.push(Manifest {
                path,
                ecosystem: ecosystem.to_owned(),
            });
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let mut languages: Vec<LanguageCount> = languages
        .into_iter()
        .map(|(language, files)| LanguageCount {
            language: language.to_owned(),
            files,
        })
        .collect();
    languages.sort_by(|a, b| {
        b.files
            .cmp(&a.files)
            .then_with(|| a.language.cmp(&b.language))
    });

    let instruction_files = INSTRUCTION_FILES
        .iter()
        .filter(|name| {
            root.open_raw(name, true)
                .is_ok_and(|o| o.kind() == EntryKind::File)
        })
        .filter_map(|name| RelativePath::parse(name).ok())
        .collect();
    Ok(OverviewAnswer {
        root_name: root.name(),
        languages,
        manifests,
        instruction_files,
        tree,
        tree_truncated,
        scan_truncated,
        git: GitSummary::NotARepository,
    })
}

/// The Git state of the root: the same reading of `git status` as Git work's.
async fn git_summary(ctx: &Ctx<'_>) -> Result<GitSummary, Ended> {
    match status::query(&ctx.git(), STATUS_BYTES).await {
        Ok(out) => Ok(out.parse().summary()),
        Err(GitError::Interrupted(ended)) => Err(ended),
        Err(GitError::NotARepository) => Ok(GitSummary::NotARepository),
        Err(GitError::Unavailable(reason)) => Ok(GitSummary::Unavailable { reason }),
    }
}

/// The language of a file, by its extension.
fn language_of(name: &str) -> Option<&'static str> {
    let (_, ext) = name.rsplit_once('.')?;
    Some(match ext.to_ascii_lowercase().as_str() {
        "rs" => "Rust",
        "py" | "pyi" => "Python",
        "js" | "mjs" | "cjs" | "jsx" => "JavaScript",
        "ts" | "mts" | "cts" | "tsx" => "TypeScript",
        "go" => "Go",
        "java" => "Java",
        "kt" | "kts" => "Kotlin",
        "scala" => "Scala",
        "c" | "h" => "C",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "C++",
        "cs" => "C#",
        "fs" | "fsx" => "F#",
        "rb" => "Ruby",
        "php" => "PHP",
        "swift" => "Swift",
        "m" | "mm" => "Objective-C",
        "dart" => "Dart",
        "ex" | "exs" => "Elixir",
        "erl" | "hrl" => "Erlang",
        "hs" => "Haskell",
        "ml" | "mli" => "OCaml",
        "clj" | "cljs" => "Clojure",
        "lua" => "Lua",
        "r" => "R",
        "jl" => "Julia",
        "zig" => "Zig",
        "nim" => "Nim",
        "sh" | "bash" | "zsh" => "Shell",
        "ps1" => "PowerShell",
        "sql" => "SQL",
        "html" | "htm" => "HTML",
        "css" | "scss" | "sass" | "less" => "CSS",
        "vue" => "Vue",
        "svelte" => "Svelte",
        "tf" => "Terraform",
        "proto" => "Protocol Buffers",
        _ => return None,
    })
}

/// The ecosystem a build manifest belongs to, by its file name.
fn ecosystem_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "Cargo.toml" => "cargo",
        "package.json" => "npm",
        "deno.json" | "deno.jsonc" => "deno",
        "pyproject.toml" | "setup.py" | "setup.cfg" | "requirements.txt" | "Pipfile" => "python",
        "go.mod" => "go",
        "pom.xml" => "maven",
        "build.gradle" | "build.gradle.kts" | "settings.gradle" | "settings.gradle.kts" => "gradle",
        "Gemfile" => "bundler",
        "composer.json" => "composer",
        "Package.swift" => "swiftpm",
        "pubspec.yaml" => "pub",
        "mix.exs" => "mix",
        "rebar.config" => "rebar",
        "stack.yaml" => "stack",
        "CMakeLists.txt" => "cmake",
        "meson.build" => "meson",
        "build.zig" => "zig",
        "flake.nix" => "nix",
        _ if name.ends_with(".csproj") || name.ends_with(".fsproj") || name.ends_with(".sln") => {
            "dotnet"
        }
        _ if name.ends_with(".cabal") => "cabal",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_and_manifests_are_told_by_name() {
        assert_eq!(language_of("main.RS"), Some("Rust"));
        assert_eq!(language_of("Makefile"), None);
        assert_eq!(ecosystem_of("Cargo.toml"), Some("cargo"));
        assert_eq!(ecosystem_of("App.csproj"), Some("dotnet"));
        assert_eq!(ecosystem_of("README.md"), None);
    }
}
