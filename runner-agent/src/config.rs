//! Typed runner configuration: a TOML file plus environment overrides.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::boundary::Project;
use crate::cgroup::JobLimitSettings;
use crate::opened::Workspaces;
use crate::sandbox::{Sandbox, SandboxSettings};

/// The runner token. Never printed.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// A secret holding `text`.
    pub fn new(text: String) -> Self {
        Secret(text)
    }

    /// Whether the secret has any text (never the text itself).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The text, for the one place that sends it (the Authorization header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How work reaches this runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueBackend {
    /// Long-poll the runner API (the Postgres queue).
    ApiPoll,
    /// Receive from an SQS queue.
    Sqs,
}

/// Limits on what one runner does at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Work items executed at once.
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// Bytes kept per output stream of one work item.
    #[serde(default = "default_output_bytes")]
    pub output_bytes_per_stream: usize,
}

fn default_concurrency() -> usize {
    4
}

fn default_output_bytes() -> usize {
    1024 * 1024
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrency: default_concurrency(),
            output_bytes_per_stream: default_output_bytes(),
        }
    }
}

/// The `[git]` table as written: who the runner's commits are by.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitSettings {
    /// Author and committer name; absent: `wc-runner`.
    pub author_name: Option<String>,
    /// Author and committer email; absent: `wc-runner@<client_id>`.
    pub author_email: Option<String>,
}

/// Who the commits of Git work are by, as author and committer: the runner's own identity,
/// never the host user's Git configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitIdentity {
    name: String,
    email: String,
}

impl GitIdentity {
    /// Longest name or email, in bytes.
    const MAX_BYTES: usize = 256;

    /// Checks `name` and `email`: 1-256 bytes without control characters, `<` or `>` (which
    /// would break the identity line of a commit), and an email without spaces.
    pub fn new(name: &str, email: &str) -> anyhow::Result<Self> {
        let well_formed = |s: &str| {
            (1..=Self::MAX_BYTES).contains(&s.len())
                && !s.chars().any(|c| c.is_control() || c == '<' || c == '>')
        };
        if !well_formed(name) || name.trim() != name {
            bail!(
                "git.author_name must be 1-256 bytes without control characters, `<`, `>` or \
                 surrounding spaces"
            );
        }
        if !well_formed(email) || email.contains(char::is_whitespace) {
            bail!(
                "git.author_email must be 1-256 bytes without spaces, control characters, `<` or `>`"
            );
        }
        Ok(GitIdentity {
            name: name.to_owned(),
            email: email.to_owned(),
        })
    }

    /// The identity `settings` name, with the defaults of a runner called `client_id`.
    pub fn from_settings(settings: &GitSettings, client_id: &str) -> anyhow::Result<Self> {
        let name = settings.author_name.as_deref().unwrap_or("wc-runner");
        let email = match &settings.author_email {
            Some(email) => email.clone(),
            None => format!("wc-runner@{client_id}"),
        };
        Self::new(name, &email)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The email.
    pub fn email(&self) -> &str {
        &self.email
    }
}

pub use crate::boundary::EnvName;

/// One `[projects]` entry: a root directory, or a table with the root and the environment
/// variables its jobs receive from the runner.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a project root directory, or a table with `root`, `env_pass`, `writable`, `max_processes`, `max_memory_mib` and `cpu_weight` (no other keys)"
)]
enum RawProject {
    Root(PathBuf),
    Table(RawProjectTable),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProjectTable {
    root: PathBuf,
    #[serde(default)]
    env_pass: Vec<String>,
    /// Caches this project's jobs write instead of `[sandbox] writable`.
    writable: Option<Vec<String>>,
    /// Processes and threads one of its jobs may have (0: unbounded).
    max_processes: Option<u64>,
    /// Memory one of its jobs may use, in MiB (0: unbounded).
    max_memory_mib: Option<u64>,
    /// One of its jobs' share of the CPU, 1-10000.
    cpu_weight: Option<u64>,
}

/// The `[workspaces]` table: what callers may open on this host.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSettings {
    /// Directories beneath which a caller may open a checkout (empty: none).
    #[serde(default)]
    pub open: Vec<PathBuf>,
    /// Where the runner makes managed worktrees and keeps its manifest of opened projects;
    /// required when `open` lists a directory.
    pub store: Option<PathBuf>,
}

impl WorkspaceSettings {
    /// The policy these settings describe: `None` when nothing may be opened.
    pub fn policy(&self) -> anyhow::Result<Option<Workspaces>> {
        if self.open.is_empty() {
            return Ok(None);
        }
        let Some(store) = &self.store else {
            bail!("workspaces.store is required when workspaces.open lists a directory");
        };
        Workspaces::new(&self.open, store).map(Some)
    }
}

/// The file format.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server_url: String,
    client_id: String,
    token: Option<Secret>,
    token_file: Option<PathBuf>,
    #[serde(default = "default_queue")]
    queue: QueueBackend,
    sqs_queue_url: Option<String>,
    sqs_endpoint_url: Option<String>,
    sqs_region: Option<String>,
    #[serde(default)]
    allowed_roots: Vec<PathBuf>,
    #[serde(default)]
    projects: BTreeMap<String, RawProject>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    sandbox: SandboxSettings,
    #[serde(default)]
    git: GitSettings,
    #[serde(default)]
    workspaces: WorkspaceSettings,
}

fn default_queue() -> QueueBackend {
    QueueBackend::ApiPoll
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Base URL of the wc functions.
    pub server_url: String,
    /// Stable id of this runner.
    pub client_id: String,
    /// Runner token.
    pub token: Secret,
    /// Queue backend.
    pub queue: QueueBackend,
    /// SQS queue URL, for the `sqs` backend.
    pub sqs_queue_url: Option<String>,
    /// SQS endpoint override (a local moto server); `None` for AWS itself.
    pub sqs_endpoint_url: Option<String>,
    /// AWS region of the queue; `None`: the region in an AWS queue URL, else `AWS_REGION`,
    /// else `us-east-1`.
    pub sqs_region: Option<String>,
    /// Project id → the project as registered (its canonical root, the Git metadata it owns
    /// outside the root, the environment its jobs receive).
    pub projects: BTreeMap<String, Project>,
    /// Limits.
    pub limits: Limits,
    /// How jobs are confined.
    pub sandbox: Sandbox,
    /// Who Git work commits as.
    pub git: GitIdentity,
    /// What callers may open on this host (`None`: nothing).
    pub workspaces: Option<std::sync::Arc<Workspaces>>,
}

fn valid_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn http_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

fn valid_region(s: &str) -> bool {
    (1..=32).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The region of an AWS SQS queue URL, `https://sqs.<region>.amazonaws.com/<account>/<name>`.
fn region_in_queue_url(url: &str) -> Option<String> {
    let host = url.strip_prefix("https://")?.split('/').next()?;
    let region = host.strip_prefix("sqs.")?.split('.').next()?;
    valid_region(region).then(|| region.to_owned())
}

fn check_sqs(
    queue_url: Option<&str>,
    endpoint_url: Option<&str>,
    region: Option<&str>,
) -> anyhow::Result<()> {
    if let Some(url) = queue_url
        && !http_url(url)
    {
        bail!("sqs_queue_url must be an http:// or https:// URL");
    }
    if let Some(url) = endpoint_url
        && !http_url(url)
    {
        bail!("sqs_endpoint_url must be an http:// or https:// URL");
    }
    if let Some(r) = region
        && !valid_region(r)
    {
        bail!("sqs_region must be an AWS region name such as eu-west-1");
    }
    Ok(())
}

impl RunnerConfig {
    /// A configuration built in code (the runner embedded in `wc-local`): the same checks as a
    /// file, for projects given as `id → root`.
    pub fn embedded(
        server_url: &str,
        client_id: &str,
        token: Secret,
        projects: BTreeMap<String, PathBuf>,
        limits: Limits,
        sandbox: SandboxSettings,
    ) -> anyhow::Result<RunnerConfig> {
        Self::validate(
            RawConfig {
                server_url: server_url.to_owned(),
                client_id: client_id.to_owned(),
                token: Some(token),
                token_file: None,
                queue: QueueBackend::ApiPoll,
                sqs_queue_url: None,
                sqs_endpoint_url: None,
                sqs_region: None,
                allowed_roots: Vec::new(),
                projects: projects
                    .into_iter()
                    .map(|(id, root)| (id, RawProject::Root(root)))
                    .collect(),
                limits,
                sandbox,
                git: GitSettings::default(),
                workspaces: WorkspaceSettings::default(),
            },
            None,
            None,
        )
    }

    /// The same configuration letting callers open what `workspaces` allows; its manifest is
    /// hidden from every job.
    pub fn with_workspaces(mut self, workspaces: Workspaces) -> RunnerConfig {
        self.sandbox = self.sandbox.also_hiding(workspaces.manifest_path());
        self.workspaces = Some(std::sync::Arc::new(workspaces));
        self
    }

    /// The same configuration receiving work from the SQS queue `queue_url` (the runner
    /// embedded in `wc-local` when its client id has a queue), with an optional endpoint
    /// override and region.
    pub fn with_sqs(
        mut self,
        queue_url: &str,
        endpoint_url: Option<&str>,
        region: Option<&str>,
    ) -> anyhow::Result<RunnerConfig> {
        check_sqs(Some(queue_url), endpoint_url, region)?;
        self.queue = QueueBackend::Sqs;
        self.sqs_queue_url = Some(queue_url.to_owned());
        self.sqs_endpoint_url = endpoint_url.map(str::to_owned);
        self.sqs_region = region.map(str::to_owned);
        Ok(self)
    }

    /// The region the SQS client signs for: `sqs_region`, else the region named in an AWS
    /// queue URL (`https://sqs.<region>.amazonaws.com/…`), else `AWS_REGION`, else
    /// `us-east-1`.
    pub fn sqs_signing_region(&self) -> String {
        self.sqs_region
            .clone()
            .or_else(|| self.sqs_queue_url.as_deref().and_then(region_in_queue_url))
            .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| valid_region(r)))
            .unwrap_or_else(|| "us-east-1".to_owned())
    }

    /// Loads `path`; `WC_RUNNER_TOKEN` overrides the token.
    pub fn load(path: &Path) -> anyhow::Result<RunnerConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let raw: RawConfig =
            toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
        let env_token = std::env::var("WC_RUNNER_TOKEN").ok().map(Secret);
        Self::validate(raw, env_token, Some(path))
    }

    /// Checks `raw`; `path` is the file it came from (hidden from sandboxed jobs).
    fn validate(
        raw: RawConfig,
        env_token: Option<Secret>,
        path: Option<&Path>,
    ) -> anyhow::Result<RunnerConfig> {
        if !(raw.server_url.starts_with("http://") || raw.server_url.starts_with("https://")) {
            bail!("server_url must be an http:// or https:// URL");
        }
        if !valid_id(&raw.client_id) {
            bail!("client_id must be 1-64 of A-Z a-z 0-9 . _ -");
        }
        // Jobs never see the runner's own files.
        let always_hidden: Vec<PathBuf> = raw
            .token_file
            .iter()
            .map(PathBuf::as_path)
            .chain(path)
            .map(PathBuf::from)
            .collect();
        let token = match (env_token, raw.token, raw.token_file) {
            (Some(t), _, _) => t,
            (None, Some(t), None) => t,
            (None, None, Some(file)) => Secret(
                std::fs::read_to_string(&file)
                    .with_context(|| format!("cannot read token_file {}", file.display()))?
                    .trim()
                    .to_owned(),
            ),
            (None, Some(_), Some(_)) => bail!("give token or token_file, not both"),
            (None, None, None) => bail!("no token: set token_file (or token), or WC_RUNNER_TOKEN"),
        };
        if token.is_empty() {
            bail!("the runner token is empty");
        }
        if raw.queue == QueueBackend::Sqs && raw.sqs_queue_url.is_none() {
            bail!("queue = \"sqs\" needs sqs_queue_url");
        }
        check_sqs(
            raw.sqs_queue_url.as_deref(),
            raw.sqs_endpoint_url.as_deref(),
            raw.sqs_region.as_deref(),
        )?;
        if raw.limits.max_concurrency == 0 || raw.limits.max_concurrency > 256 {
            bail!("limits.max_concurrency must be 1-256");
        }
        if raw.limits.output_bytes_per_stream < 1024
            || raw.limits.output_bytes_per_stream > 64 * 1024 * 1024
        {
            bail!("limits.output_bytes_per_stream must be 1 KiB-64 MiB");
        }
        let allowed: Vec<PathBuf> = raw
            .allowed_roots
            .iter()
            .map(|r| {
                std::fs::canonicalize(r)
                    .with_context(|| format!("allowed root {} does not resolve", r.display()))
            })
            .collect::<anyhow::Result<_>>()?;
        let mut projects = BTreeMap::new();
        for (id, entry) in raw.projects {
            let (root, pass, writable, limits) = match entry {
                RawProject::Root(root) => (root, Vec::new(), None, JobLimitSettings::default()),
                RawProject::Table(t) => {
                    let limits = JobLimitSettings {
                        max_processes: t.max_processes,
                        max_memory_mib: t.max_memory_mib,
                        cpu_weight: t.cpu_weight,
                    };
                    (t.root, t.env_pass, t.writable, limits)
                }
            };
            if !valid_id(&id) {
                bail!("project id {id:?} must be 1-64 of A-Z a-z 0-9 . _ -");
            }
            let pass = pass
                .iter()
                .map(|n| EnvName::parse(n))
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("project {id}: env_pass"))?;
            let mut project = Project::register(&root, pass).with_context(|| {
                format!("project {id}: root {} does not resolve", root.display())
            })?;
            if let Some(writable) = writable {
                let dirs = crate::sandbox::expand_all("writable", &writable)
                    .with_context(|| format!("project {id}"))?;
                project = project.with_writable(dirs);
            }
            project = project
                .with_limits(limits)
                .map_err(|e| anyhow::anyhow!("project {id}: {e}"))?;
            let canon = project.root();
            if !allowed.is_empty() && !allowed.iter().any(|a| canon.starts_with(a)) {
                bail!("project {id}: {} is outside allowed_roots", canon.display());
            }
            projects.insert(id, project);
        }
        let sandbox = Sandbox::from_settings(&raw.sandbox, always_hidden)?;
        let git = GitIdentity::from_settings(&raw.git, &raw.client_id)?;
        let workspaces = raw.workspaces.policy()?;
        let cfg = RunnerConfig {
            server_url: raw.server_url.trim_end_matches('/').to_owned(),
            client_id: raw.client_id,
            token,
            queue: raw.queue,
            sqs_queue_url: raw.sqs_queue_url,
            sqs_endpoint_url: raw.sqs_endpoint_url,
            sqs_region: raw.sqs_region,
            projects,
            limits: raw.limits,
            sandbox,
            git,
            workspaces: None,
        };
        Ok(match workspaces {
            Some(workspaces) => cfg.with_workspaces(workspaces),
            None => cfg,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::SandboxMode;

    fn parse(text: &str) -> anyhow::Result<RunnerConfig> {
        RunnerConfig::validate(toml::from_str(text)?, None, None)
    }

    #[test]
    fn nothing_opens_without_a_listed_directory_and_a_store() {
        let head = "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n";
        assert!(parse(head).unwrap().workspaces.is_none());
        let tmp = tempfile::tempdir().unwrap();
        let (open, store) = (tmp.path().join("src"), tmp.path().join("trees"));
        std::fs::create_dir_all(&open).unwrap();
        let err = parse(&format!(
            "{head}[workspaces]\nopen = [\"{}\"]\n",
            open.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("workspaces.store is required"), "{err}");
        let cfg = parse(&format!(
            "{head}[workspaces]\nopen = [\"{}\"]\nstore = \"{}\"\n",
            open.display(),
            store.display()
        ))
        .unwrap();
        let workspaces = cfg.workspaces.expect("a policy");
        assert_eq!(workspaces.open(), [open.canonicalize().unwrap()]);
        assert!(
            workspaces.manifest_path().exists(),
            "the manifest is made at start"
        );
        let nested = parse(&format!(
            "{head}[workspaces]\nopen = [\"{}\"]\nstore = \"{}\"\n",
            tmp.path().display(),
            store.display()
        ))
        .unwrap_err()
        .to_string();
        assert!(nested.contains("must not contain one another"), "{nested}");
        let unknown = parse(&format!("{head}[workspaces]\nallow = []\n"));
        assert!(unknown.is_err());
    }

    #[test]
    fn a_complete_config_validates_and_canonicalizes_roots() {
        let tmp = std::env::temp_dir();
        let cfg = parse(&format!(
            "server_url = \"https://wc.example/\"\nclient_id = \"host-1\"\ntoken = \"wcrk_x\"\n\
             allowed_roots = [\"{0}\"]\n[projects]\nscratch = \"{0}/.\"\n",
            tmp.display()
        ))
        .unwrap();
        assert_eq!(cfg.server_url, "https://wc.example");
        assert_eq!(
            cfg.projects["scratch"].root(),
            std::fs::canonicalize(&tmp).unwrap()
        );
        assert_eq!(cfg.queue, QueueBackend::ApiPoll);
        assert!(!format!("{cfg:?}").contains("wcrk_x"), "token printed");
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        for (text, expect) in [
            (
                "server_url = \"ftp://x\"\nclient_id = \"a\"\ntoken = \"t\"",
                "server_url",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a b\"\ntoken = \"t\"",
                "client_id",
            ),
            ("server_url = \"http://x\"\nclient_id = \"a\"", "no token"),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\nqueue = \"sqs\"",
                "sqs_queue_url",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\nqueue = \"sqs\"\nsqs_queue_url = \"http://q\"\nsqs_endpoint_url = \"localhost:5000\"",
                "sqs_endpoint_url",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\nqueue = \"sqs\"\nsqs_queue_url = \"http://q\"\nsqs_region = \"Mars 1\"",
                "sqs_region",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n[projects]\np = \"/no/such/root\"",
                "does not resolve",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\nallowed_roots = [\"/usr\"]\n[projects]\np = \"/tmp\"",
                "outside allowed_roots",
            ),
            (
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\nsurprise = 1",
                "unknown field",
            ),
        ] {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(expect), "{text}: {err}");
        }
    }

    #[test]
    fn an_sqs_runner_names_its_queue_endpoint_and_region() {
        let cfg = parse(
            "server_url = \"https://wc.example\"\nclient_id = \"host-1\"\ntoken = \"t\"\n\
             queue = \"sqs\"\nsqs_queue_url = \"https://sqs.eu-west-1.amazonaws.com/1/q\"\n",
        )
        .unwrap();
        assert_eq!(cfg.queue, QueueBackend::Sqs);
        assert_eq!(cfg.sqs_signing_region(), "eu-west-1", "from the queue URL");
        let cfg = parse(
            "server_url = \"https://wc.example\"\nclient_id = \"host-1\"\ntoken = \"t\"\n\
             queue = \"sqs\"\nsqs_queue_url = \"http://127.0.0.1:5000/1/q\"\n\
             sqs_endpoint_url = \"http://127.0.0.1:5000\"\nsqs_region = \"us-west-2\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.sqs_endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
        assert_eq!(cfg.sqs_signing_region(), "us-west-2");
        let embedded = RunnerConfig::embedded(
            "http://127.0.0.1:1",
            "local",
            Secret::new("t".into()),
            BTreeMap::new(),
            Limits::default(),
            SandboxSettings::default(),
        )
        .unwrap()
        .with_sqs(
            "http://127.0.0.1:5000/1/q",
            Some("http://127.0.0.1:5000"),
            None,
        )
        .unwrap();
        assert_eq!(embedded.queue, QueueBackend::Sqs);
        assert!(
            embedded
                .clone()
                .with_sqs("q", None, None)
                .unwrap_err()
                .to_string()
                .contains("sqs_queue_url")
        );
    }

    #[test]
    fn a_project_may_name_its_own_caches() {
        let tmp = std::env::temp_dir();
        let cfg = parse(&format!(
            "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n\
             [projects]\nshared = \"{0}\"\n[projects.own]\nroot = \"{0}\"\n\
             writable = [\"/var/cache/own\"]\n[projects.none]\nroot = \"{0}\"\nwritable = []\n",
            tmp.display()
        ))
        .unwrap();
        assert_eq!(cfg.projects["shared"].writable(), None);
        assert_eq!(
            cfg.projects["own"].writable(),
            Some(&[PathBuf::from("/var/cache/own")][..])
        );
        assert_eq!(cfg.projects["none"].writable(), Some(&[][..]));
        let err = format!(
            "{:#}",
            parse(&format!(
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n\
                 [projects.p]\nroot = \"{}\"\nwritable = [\"relative\"]\n",
                tmp.display()
            ))
            .unwrap_err()
        );
        assert!(
            err.contains("project p") && err.contains("absolute"),
            "{err}"
        );
    }

    #[test]
    fn projects_name_the_environment_their_jobs_receive() {
        let tmp = std::env::temp_dir();
        let cfg = parse(&format!(
            "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n\
             [projects]\nplain = \"{0}\"\n[projects.rust]\nroot = \"{0}\"\n\
             env_pass = [\"CARGO_HOME\", \"_X1\"]\n",
            tmp.display()
        ))
        .unwrap();
        let names = |p: &str| -> Vec<&str> {
            cfg.projects[p]
                .env_pass()
                .iter()
                .map(EnvName::as_str)
                .collect()
        };
        assert_eq!(names("rust"), ["CARGO_HOME", "_X1"]);
        assert!(names("plain").is_empty());
        assert_eq!(
            cfg.projects["rust"].root(),
            std::fs::canonicalize(&tmp).unwrap()
        );

        for (pass, expect) in [
            ("\"WC_RUNNER_TOKEN\"", "runner's own settings"),
            ("\"wc_lower\"", "runner's own settings"),
            ("\"1ABC\"", "not starting with a digit"),
            ("\"A-B\"", "not starting with a digit"),
            ("\"\"", "not starting with a digit"),
            (
                "\"X\"]\nsurprise = [1",
                "a table with `root`, `env_pass`, `writable`",
            ),
        ] {
            let text = format!(
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n\
                 [projects.p]\nroot = \"{}\"\nenv_pass = [{pass}]\n",
                tmp.display()
            );
            let err = format!("{:#}", parse(&text).unwrap_err());
            assert!(err.contains(expect), "{pass}: {err}");
            assert!(
                err.contains("project p") || err.contains("[projects.p]"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_sandbox_table_chooses_the_mode_and_always_hides_the_runners_files() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("runner.token");
        std::fs::write(&token_file, "wcrk_x\n").unwrap();
        let config = dir.path().join("runner.toml");
        std::fs::write(
            &config,
            format!(
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken_file = {:?}\n\
                 [sandbox]\nmode = \"off\"\nhide = [\"/etc/wc\"]\nwritable = [\"/var/cache/x\"]\n",
                token_file.display().to_string()
            ),
        )
        .unwrap();
        let cfg = RunnerConfig::load(&config).unwrap();
        assert_eq!(cfg.sandbox.mode(), SandboxMode::Off);
        let hidden = cfg.sandbox.hidden();
        for path in [Path::new("/etc/wc"), &token_file, &config] {
            assert!(
                hidden.iter().any(|h| h == path),
                "{path:?} not in {hidden:?}"
            );
        }
        assert_eq!(cfg.sandbox.writable(), [PathBuf::from("/var/cache/x")]);

        for (table, expect) in [
            ("mode = \"docker\"", "unknown variant"),
            ("hide = [\"etc/wc\"]", "must be an absolute path"),
            ("writable = [\"/\"]", "names the whole filesystem"),
            ("surprise = 1", "unknown field"),
        ] {
            let text = format!(
                "server_url = \"http://x\"\nclient_id = \"a\"\ntoken = \"t\"\n[sandbox]\n{table}\n"
            );
            let err = format!("{:#}", parse(&text).unwrap_err());
            assert!(err.contains(expect), "{table}: {err}");
        }
    }

    #[test]
    fn commits_are_by_the_runner_unless_the_git_table_names_someone() {
        let base = "server_url = \"http://x\"\nclient_id = \"host-1\"\ntoken = \"t\"\n";
        let cfg = parse(base).unwrap();
        assert_eq!(
            (cfg.git.name(), cfg.git.email()),
            ("wc-runner", "wc-runner@host-1")
        );
        let cfg = parse(&format!(
            "{base}[git]\nauthor_name = \"Build Bot\"\nauthor_email = \"bot@example.com\"\n"
        ))
        .unwrap();
        assert_eq!(
            (cfg.git.name(), cfg.git.email()),
            ("Build Bot", "bot@example.com")
        );
        for (table, expect) in [
            ("author_name = \"\"", "git.author_name"),
            ("author_name = \"A <b>\"", "git.author_name"),
            ("author_name = \"a\\nb\"", "git.author_name"),
            ("author_email = \"a b@c\"", "git.author_email"),
            ("author_email = \"<a@b>\"", "git.author_email"),
            ("committer = \"x\"", "unknown field"),
        ] {
            let err = format!(
                "{:#}",
                parse(&format!("{base}[git]\n{table}\n")).unwrap_err()
            );
            assert!(err.contains(expect), "{table}: {err}");
        }
    }

    #[test]
    fn the_sample_configuration_has_the_shape_the_runner_reads() {
        let sample = include_str!("../../infra/runner/runner.toml.sample");
        let raw: RawConfig = toml::from_str(sample).unwrap();
        assert_eq!(raw.sandbox.mode, Some(SandboxMode::Bubblewrap));
        assert!(matches!(raw.projects["api"], RawProject::Table(_)));
        assert!(matches!(raw.projects["webapp"], RawProject::Root(_)));
        let identity = GitIdentity::from_settings(&raw.git, &raw.client_id).unwrap();
        assert_eq!(identity.name(), "wc-runner");
    }
}
