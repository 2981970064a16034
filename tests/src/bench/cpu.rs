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

    /// CPU milliseconds per operation by role, spent between `self` and `later`; `None` with
    /// no operations or no `/proc`. A process that started in between counts whole; one that
    /// ended in between is missed (pools keep their connections through a run).
    pub fn per_op(&self, later: &CpuSnapshot, ops: usize) -> Option<Value> {
        if ops == 0 || later.ticks.is_empty() {
            return None;
        }
        let tick_ms = 1000.0 / clock_ticks_per_second();
        let mut by_role: BTreeMap<&str, u64> = BTreeMap::new();
        for (pid, (role, now)) in &later.ticks {
            let before = self.ticks.get(pid).map_or(0, |(_, t)| *t);
            *by_role.entry(role).or_default() += now.saturating_sub(before);
        }
        let line: serde_json::Map<String, Value> = by_role
            .into_iter()
            .map(|(role, t)| {
                (
                    role.to_owned(),
                    json!(super::round(t as f64 * tick_ms / ops as f64)),
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
        let line = before.per_op(&after, 4).unwrap();
        assert_eq!(line["server"], json!(crate::bench::round(200.0 * ms / 4.0)));
        assert_eq!(line["db"], json!(crate::bench::round(100.0 * ms / 4.0)));
        assert!(before.per_op(&after, 0).is_none());
        assert!(before.per_op(&CpuSnapshot::default(), 4).is_none());
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
