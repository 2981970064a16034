//! A job's environment: an allow list. The base set every job gets, the names the runner
//! configuration passes for its project, and the work's own additions; nothing else of the
//! runner's environment reaches a child.

use std::collections::BTreeMap;
use std::ffi::OsString;

use wc_runner_protocol::WorkItem;

use super::Host;
use crate::boundary::Project;

/// Whether the runner passes its environment variable `name` to every job: what programs need to
/// find their tools, their home and temporary directory, and the user's language and time zone.
/// Anything else (database URLs, webhooks, tokens under any name) stays with the runner unless
/// the configuration passes it for the project.
fn base_env(name: &str) -> bool {
    matches!(
        name,
        "PATH" | "HOME" | "LANG" | "TERM" | "USER" | "LOGNAME" | "TZ" | "TMPDIR"
    ) || name.starts_with("LC_")
}

/// The whole environment of a child: the runner's variables that [`base_env`] or the project's
/// `env_pass` name, `TMPDIR=/tmp` (the private tmp) when sandboxed, then the work's own `env`
/// additions, which were asked for.
pub(crate) fn child_env(
    host: &Host,
    item: &WorkItem,
    sandboxed: bool,
) -> Vec<(OsString, OsString)> {
    let project = host.project(&item.project);
    let pass = project.as_ref().map(Project::env_pass);
    let passed = |name: &str| {
        base_env(name) || pass.is_some_and(|names| names.iter().any(|n| n.as_str() == name))
    };
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(passed))
        .collect();
    if sandboxed {
        env.insert("TMPDIR".into(), "/tmp".into());
    }
    env.extend(
        item.env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;
    use wc_runner_protocol::WorkSpec;

    use super::*;
    use crate::config::EnvName;
    use crate::sandbox::Sandbox;

    #[test]
    fn only_the_base_set_passes_by_name() {
        let held_back = [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "NPM_AUTH",
            "WC_LOCAL_TOKEN",
            "WC_RUNNER_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "path",
            "PATHS",
            "HOMEDIR",
            "LD_PRELOAD",
            "SSH_AUTH_SOCK",
        ];
        for name in held_back {
            assert!(!base_env(name), "{name} must be held back");
        }
        for name in [
            "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "USER", "LOGNAME", "TZ", "TMPDIR",
        ] {
            assert!(base_env(name), "{name} must be passed on");
        }
    }

    fn host(env_pass: &[(&str, &[&str])]) -> Host {
        let root = std::env::temp_dir();
        Host::new(
            env_pass.iter().map(|(p, names)| {
                let names = names.iter().map(|n| EnvName::parse(n).unwrap()).collect();
                (p.to_string(), Project::register(&root, names).unwrap())
            }),
            Sandbox::from_settings(&Default::default(), []).unwrap(),
        )
    }

    fn work(project: &str, env: &[(&str, &str)]) -> WorkItem {
        WorkItem {
            protocol_version: wc_runner_protocol::PROTOCOL_VERSION,
            work_id: Uuid::new_v4(),
            project: project.into(),
            cwd: None,
            spec: WorkSpec::Process {
                argv: vec!["env".into()],
            },
            stdin: None,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            limits: wc_runner_protocol::WorkLimits {
                timeout_ms: 1000,
                output_bytes_per_stream: 1024,
            },
        }
    }

    #[test]
    fn a_childs_environment_is_the_allow_list_the_projects_names_and_the_works_additions() {
        // SAFETY: this test binary's environment is touched only through std, which serializes
        // `set_var` with reads; the names are unique to this test.
        unsafe {
            std::env::set_var("DATABASE_URL", "postgres://secret@db/wc");
            std::env::set_var(
                "SLACK_WEBHOOK_URL",
                "https://hooks.slack.com/services/T/B/x",
            );
            std::env::set_var("DB_CONN", "secret");
            std::env::set_var("NPM_AUTH", "secret");
            std::env::set_var("WC_LOCAL_TOKEN", "secret");
            std::env::set_var("EXEC_UNIT_CARGO_HOME", "/opt/cargo");
        }
        let host = host(&[("web", &["EXEC_UNIT_CARGO_HOME", "NPM_AUTH"])]);
        let names = |env: &[(OsString, OsString)]| -> Vec<String> {
            env.iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        };
        let api = child_env(&host, &work("api", &[("BUILD", "1")]), true);
        let api_names = names(&api);
        for secret in [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "NPM_AUTH",
            "WC_LOCAL_TOKEN",
            "EXEC_UNIT_CARGO_HOME",
        ] {
            assert!(
                !api_names.iter().any(|n| n == secret),
                "{secret}: {api_names:?}"
            );
        }
        assert!(api.contains(&("BUILD".into(), "1".into())), "{api_names:?}");
        assert!(
            api.contains(&("TMPDIR".into(), "/tmp".into())),
            "the private tmp"
        );
        assert!(api_names.iter().any(|n| n == "PATH"), "{api_names:?}");

        // The project that passes names gets exactly those, and a work addition wins.
        let web = child_env(&host, &work("web", &[("NPM_AUTH", "asked")]), false);
        assert!(web.contains(&("EXEC_UNIT_CARGO_HOME".into(), "/opt/cargo".into())));
        assert!(web.contains(&("NPM_AUTH".into(), "asked".into())));
        let web_names = names(&web);
        for secret in [
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "DB_CONN",
            "WC_LOCAL_TOKEN",
        ] {
            assert!(
                !web_names.iter().any(|n| n == secret),
                "{secret}: {web_names:?}"
            );
        }
    }
}
