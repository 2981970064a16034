//! One build of the server against another (`wc-bench --baseline-wc-local`): the same scenario
//! on two servers, each over its own fresh database, measured in alternating slices
//! ([`drive_paired`]), the baseline as `a` and the current build as `b`, so a drift of the
//! box's speed falls on both builds alike.
//!
//! Only scenarios whose every operation goes to the server can be paired: the store floors
//! run the benchmark's own store code, which is the same for both builds.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wc_store::Pool;

use super::board::{self, Target};
use super::search::{self, Tree};
use super::{OpFuture, drive, drive_paired, files, runner, sessions};

/// A scenario that can be measured against a baseline build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// `runner_roundtrip`: `run_process ["true"]` to the embedded runner and back.
    RunnerRoundtrip,
    /// `board_post_hot` and `board_post_distinct`: a note posted over MCP.
    BoardPost(Target),
    /// `mcp_recorded_call`: `session_summary` recorded in the caller's session.
    RecordedCall,
    /// `read_files_roundtrip`: one 4 KB file read through the embedded runner.
    ReadFiles,
    /// `search_project_texts`: one search of a 20,000-file tree, every page.
    Search,
}

impl Scenario {
    /// Every pairable scenario, in the order `wc-bench` runs them.
    pub const ALL: [Scenario; 6] = [
        Scenario::RunnerRoundtrip,
        Scenario::BoardPost(Target::Hot),
        Scenario::BoardPost(Target::Distinct),
        Scenario::RecordedCall,
        Scenario::ReadFiles,
        Scenario::Search,
    ];

    /// The scenario's name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::RunnerRoundtrip => "runner_roundtrip",
            Scenario::BoardPost(Target::Hot) => "board_post_hot",
            Scenario::BoardPost(Target::Distinct) => "board_post_distinct",
            Scenario::RecordedCall => "mcp_recorded_call",
            Scenario::ReadFiles => "read_files_roundtrip",
            Scenario::Search => "search_project_texts",
        }
    }

    /// The scenarios `names` asks for, in run order. Refuses an empty list (which means every
    /// scenario, most of which cannot be paired) and any name that cannot be paired.
    pub fn select(names: &[String]) -> anyhow::Result<Vec<Scenario>> {
        let pairable = Self::ALL.map(Scenario::name).join(", ");
        anyhow::ensure!(
            !names.is_empty(),
            "--baseline-wc-local needs the scenarios to pair named with --scenario ({pairable})"
        );
        let unpaired: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !Self::ALL.iter().any(|s| s.name() == *n))
            .collect();
        anyhow::ensure!(
            unpaired.is_empty(),
            "--baseline-wc-local cannot pair {}: only {pairable} can be",
            unpaired.join(", ")
        );
        Ok(Self::ALL
            .into_iter()
            .filter(|s| names.iter().any(|n| n == s.name()))
            .collect())
    }
}

/// One of the two servers of a paired run, as the scenarios reach it.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The bearer token it accepts.
    pub token: String,
    /// The project its embedded runner serves.
    pub project: String,
    /// Pool on its database.
    pub pool: Pool,
    /// One Workflow Session per worker, started on it.
    pub sessions: Arc<Vec<String>>,
    /// The tree `search_project_texts` searches, with its count of matching lines, once
    /// [`Server::prepare`] made it.
    pub search: Option<(Tree, u64)>,
}

impl Server {
    /// Writes under the project root `root` what `scenarios` read: the file of
    /// `read_files_roundtrip`, the tree of `search_project_texts`.
    pub async fn prepare(&mut self, scenarios: &[Scenario], root: &Path) -> anyhow::Result<()> {
        if scenarios.contains(&Scenario::ReadFiles) {
            files::prepare_read(root)?;
        }
        if scenarios.contains(&Scenario::Search) {
            let tree = search::generate(&root.join(search::TREE_DIR))?;
            let lines = search::matching_lines(&tree.root).await?;
            self.search = Some((tree, lines));
        }
        Ok(())
    }

    fn op(&self, scenario: Scenario) -> Box<dyn Fn(usize) -> OpFuture + Send + Sync> {
        let sessions = self.sessions.clone();
        match scenario {
            Scenario::RunnerRoundtrip => {
                Box::new(runner::roundtrip_op(&self.base, &self.token, &self.project))
            }
            Scenario::BoardPost(target) => {
                Box::new(board::post_op(&self.base, &self.token, sessions, target))
            }
            Scenario::RecordedCall => Box::new(sessions::recorded_call_op(
                &self.base,
                &self.token,
                sessions,
            )),
            Scenario::ReadFiles => Box::new(files::read_op(&self.base, &self.token, &self.project)),
            Scenario::Search => Box::new(search::search_op(
                &self.base,
                &self.token,
                &self.project,
                self.search.as_ref().map_or(0, |(_, lines)| *lines),
            )),
        }
    }
}

/// How long each build runs a scenario unmeasured before its paired run.
const WARM_UP: Duration = Duration::from_millis(500);

/// `scenario` on `baseline` and `current` in alternating slices: the report line of
/// [`super::Paired::against_baseline`]; the runner's queue breakdown for each build in its
/// part of the line.
///
/// Each build first runs the scenario unmeasured for [`WARM_UP`]: the baseline takes the
/// first slice, and would otherwise pay alone for opening its pool's connections and
/// preparing the scenario's statements.
pub async fn against_baseline(
    scenario: Scenario,
    baseline: &Server,
    current: &Server,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Value> {
    for server in [baseline, current] {
        drive(concurrency, WARM_UP, server.op(scenario)).await;
    }
    let since = chrono::Utc::now();
    let mut paired = drive_paired(
        concurrency,
        duration,
        baseline.op(scenario),
        current.op(scenario),
    )
    .await;
    if scenario == Scenario::RunnerRoundtrip {
        paired
            .a
            .extra
            .extend(runner::breakdown(&baseline.pool, since).await?);
        paired
            .b
            .extra
            .extend(runner::breakdown(&current.pool, since).await?);
    }
    Ok(paired.against_baseline(scenario.name(), concurrency))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn the_pairable_scenarios_are_selected_in_run_order() {
        let picked = Scenario::select(&names(&["mcp_recorded_call", "board_post_distinct"]));
        assert_eq!(
            picked.unwrap(),
            vec![
                Scenario::BoardPost(Target::Distinct),
                Scenario::RecordedCall
            ]
        );
        let all = names(&Scenario::ALL.map(Scenario::name));
        assert_eq!(Scenario::select(&all).unwrap(), Scenario::ALL.to_vec());
    }

    #[test]
    fn a_scenario_that_cannot_be_paired_is_refused_by_name() {
        let err = Scenario::select(&names(&[
            "runner_roundtrip",
            "sql_floor_recorded_call",
            "cas_hot_row",
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("cannot pair sql_floor_recorded_call, cas_hot_row:"),
            "{err}"
        );
        assert!(err.contains("runner_roundtrip, board_post_hot"), "{err}");
    }

    #[test]
    fn pairing_every_scenario_by_default_is_refused() {
        let err = Scenario::select(&[]).unwrap_err().to_string();
        assert!(err.contains("--scenario"), "{err}");
    }
}
