//! CPU time by role, read from `/proc`: what each part of the stack spent on a run's
//! operations. Throughput on a shared two-core box swings with everything else running on it,
//! and it does not say which part paid; CPU milliseconds per operation, split into server,
//! database and client, do.

use std::collections::BTreeMap;
use std::fs;

use serde_json::{Value, json};

/// Which role a process plays, by its command name; `None` for processes of no interest.
fn role(comm: &str) -> Option<&'static str> {
    if comm == "postgres" {
        Some("db")
    } else if comm.starts_with("wc-local") || comm.starts_with("wc-lambda") {
        Some("server")
    } else if comm.starts_with("wc-runner") {
        Some("runner")
    } else {
        None
    }
}

/// CPU time so far (user + system, in clock ticks) per process of interest.
#[derive(Debug, Clone, Default)]
pub struct CpuSnapshot {
    ticks: BTreeMap<u32, (&'static str, u64)>,
}

impl CpuSnapshot {
    /// Reads every process's counters; this process counts as the client. Empty where there
    /// is no `/proc`.
    pub fn take() -> Self {
        let own = std::process::id();
        let mut ticks = BTreeMap::new();
        let Ok(dir) = fs::read_dir("/proc") else {
            return Self { ticks };
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some((comm, used)) = parse_stat(&stat) {
                let role = if pid == own {
                    Some("client")
                } else {
                    role(comm)
                };
                if let Some(role) = role {
                    ticks.insert(pid, (role, used));
                }
            }
        }
        Self { ticks }
    }

    /// The CPU time each role spent between `self` and `later`; `None` with no `/proc`. A
    /// process that started in between counts whole; one that ended in between is missed
    /// (pools keep their connections through a run).
    pub fn spent_until(&self, later: &CpuSnapshot) -> Option<CpuSpent> {
        if later.ticks.is_empty() {
            return None;
        }
        let mut spent = CpuSpent::default();
        for (pid, (role, now)) in &later.ticks {
            let before = self.ticks.get(pid).map_or(0, |(_, t)| *t);
            *spent.ticks.entry(role).or_default() += now.saturating_sub(before);
        }
        Some(spent)
    }
}

/// CPU time (clock ticks) spent per role over one or more stretches of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuSpent {
    ticks: BTreeMap<&'static str, u64>,
}

impl CpuSpent {
    /// Adds another stretch's time to this one.
    pub fn add(&mut self, other: &CpuSpent) {
        for (role, t) in &other.ticks {
            *self.ticks.entry(role).or_default() += t;
        }
    }

    /// CPU milliseconds per operation by role; `None` with no operations.
    pub fn per_op(&self, ops: usize) -> Option<Value> {
        if ops == 0 {
            return None;
        }
        let tick_ms = 1000.0 / clock_ticks_per_second();
        let line: serde_json::Map<String, Value> = self
            .ticks
            .iter()
            .map(|(role, t)| {
                (
                    (*role).to_owned(),
                    json!(super::round(*t as f64 * tick_ms / ops as f64)),
                )
            })
            .collect();
        Some(Value::Object(line))
    }
}

/// The command name and user + system ticks of a `/proc/PID/stat` line. The name is between
/// the first `(` and the last `)` (it may hold either); utime and stime are the 14th and 15th
/// fields, the 12th and 13th after the name.
fn parse_stat(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    let mut rest = stat.get(close + 1..)?.split_ascii_whitespace().skip(11);
    let utime: u64 = rest.next()?.parse().ok()?;
    let stime: u64 = rest.next()?.parse().ok()?;
    Some((comm, utime + stime))
}

fn clock_ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_cpu_ticks() {
        let line = "4242 (wc-local (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 25 0 0 20 0 \
                    9 0 100 0 0 18446744073709551615";
        assert_eq!(parse_stat(line), Some(("wc-local (x)", 175)));
        assert_eq!(parse_stat("12 (postgres) S 1"), None);
    }

    #[test]
    fn roles_are_told_by_command_name() {
        assert_eq!(role("postgres"), Some("db"));
        assert_eq!(role("wc-local"), Some("server"));
        assert_eq!(role("wc-lambda-mcp"), Some("server"));
        assert_eq!(role("wc-runner"), Some("runner"));
        assert_eq!(role("bash"), None);
    }

    #[test]
    fn cpu_spent_is_divided_by_operations_per_role() {
        let before = CpuSnapshot {
            ticks: BTreeMap::from([(1, ("server", 100)), (2, ("db", 50))]),
        };
        // Process 3 started in between: all of its time counts.
        let after = CpuSnapshot {
            ticks: BTreeMap::from([(1, ("server", 300)), (2, ("db", 90)), (3, ("db", 60))]),
        };
        let ms = 1000.0 / clock_ticks_per_second();
        let spent = before.spent_until(&after).unwrap();
        let line = spent.per_op(4).unwrap();
        assert_eq!(line["server"], json!(crate::bench::round(200.0 * ms / 4.0)));
        assert_eq!(line["db"], json!(crate::bench::round(100.0 * ms / 4.0)));
        assert!(spent.per_op(0).is_none());
        assert!(before.spent_until(&CpuSnapshot::default()).is_none());
    }

    #[test]
    fn stretches_of_a_run_add_up_by_role() {
        let at = |server, db| CpuSnapshot {
            ticks: BTreeMap::from([(1, ("server", server)), (2, ("db", db))]),
        };
        let mut first = at(100, 50).spent_until(&at(150, 60)).unwrap();
        let second = at(400, 80).spent_until(&at(430, 110)).unwrap();
        first.add(&second);
        let ms = 1000.0 / clock_ticks_per_second();
        let line = first.per_op(2).unwrap();
        assert_eq!(line["server"], json!(crate::bench::round(80.0 * ms / 2.0)));
        assert_eq!(line["db"], json!(crate::bench::round(40.0 * ms / 2.0)));
        assert!(first.per_op(0).is_none());
    }

    #[test]
    fn this_process_is_seen_as_the_client() {
        let now = CpuSnapshot::take();
        assert!(
            now.ticks
                .get(&std::process::id())
                .is_some_and(|(role, _)| *role == "client"),
            "{now:?}"
        );
    }
}
