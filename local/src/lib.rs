//! `wc-local`: the whole of wc on one machine.
//!
//! One process serves every HTTP surface on one listener, over the database given by
//! `DATABASE_URL`/`--database-url-file` or, failing both, a private PostgreSQL cluster kept
//! in wc-local's state directory (created on first run, reused afterwards, stopped on exit).
//! The state directory is one per working directory, outside every served project
//! ([`state_dir`]); a `.wc/` left in the working directory by an earlier version is moved
//! there once. Projects given with `--project` are registered as `agent:local:NAME`.
//!
//! Secrets never travel in argv (`/proc/<pid>/cmdline` is readable by every local user): the
//! token and the database URL come from the environment or from files, and the value-taking
//! `--token`/`--database-url` of earlier versions are refused with the replacement named.
//!
//! A crate of its own, apart from `wc-functions`, because it embeds the runner agent: the
//! Lambda binaries, built from `wc-functions` alone, link no runner code.
#![warn(missing_docs)]

mod secrets;
mod state;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::json;
use wc_store::cluster::{ClusterOptions, LocalCluster};
use wc_store::config::{DatabaseConfig, DatabaseUrl};
use wc_store::connect::Connector;
use wc_store::credentials::{self, CredentialKind, NewCredential};
use wc_store::{migrate, pool, projects};

use wc_functions::admin::default_scopes;
use wc_functions::auth::token;
use wc_functions::config::ServerConfig;
use wc_functions::wake::Wakeups;
use wc_functions::{AppState, VERSION, app};
use wc_runner_agent::agent::{AgentOptions, Stop};
use wc_runner_agent::config::{Limits, RunnerConfig, Secret, WorkspaceSettings};
use wc_runner_agent::sandbox::{SandboxMode, SandboxSettings};

use secrets::{SecretSource, given_database_url, given_token};
pub use state::state_dir;
use state::{check_state_dir, move_old_state};

/// Command line of `wc-local`.
#[derive(Debug, Parser)]
#[command(
    name = "wc-local",
    version,
    about = "Run wc on this machine: MCP, REST and the database in one process"
)]
pub struct LocalCli {
    /// A project directory to serve, as DIR or NAME=DIR (repeatable). NAME defaults to the
    /// directory's base name; the project id is agent:local:NAME.
    #[arg(long = "project", value_name = "DIR|NAME=DIR")]
    pub projects: Vec<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,
    /// File holding the PostgreSQL URL (or set DATABASE_URL); without either an embedded
    /// cluster is used.
    #[arg(long, value_name = "PATH")]
    pub database_url_file: Option<PathBuf>,
    /// File holding the bearer token to accept, at least 20 visible ASCII characters (or set
    /// WC_LOCAL_TOKEN); without either a shared key is generated and printed.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Refused: a value on the command line is readable by every local user. Kept only to
    /// name the replacement.
    #[arg(long = "token", value_name = "TOKEN", hide = true)]
    pub token_in_argv: Option<String>,
    /// Refused, like `--token`.
    #[arg(long = "database-url", value_name = "URL", hide = true)]
    pub database_url_in_argv: Option<String>,
    /// Serve callers without a token as the Open Anonymous principal (no scopes, no projects).
    /// Never on by default; logged loudly.
    #[arg(long)]
    pub allow_anonymous: bool,
    /// Register the MCP conformance suite's fixture tools, resources and prompts. Test only:
    /// refused by a build without the `conformance-fixtures` feature.
    #[arg(long)]
    pub conformance_fixtures: bool,
    /// Do not start the embedded runner (run `wc-runner` separately, or serve no host).
    #[arg(long)]
    pub no_runner: bool,
    /// Run the embedded runner's jobs without the bubblewrap sandbox: they get this user's full
    /// access (its files, its other processes, this server's state directory).
    #[arg(long, env = "WC_LOCAL_NO_SANDBOX", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_sandbox: bool,
    /// Where wc-local keeps its own files (the embedded cluster and its password). Default:
    /// `$XDG_STATE_HOME/wc/<dir>-<digest>` (or `~/.local/state/wc/…`) for this working
    /// directory. Never inside a served project.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// A directory beneath which a caller may open a checkout with work_on_project's
    /// `client_id` + `path`, as itself or as a managed worktree (repeatable; default none).
    /// Worktrees go in `<state dir>-worktrees`.
    #[arg(long = "open", value_name = "DIR")]
    pub open: Vec<PathBuf>,
    /// A file or directory that jobs and file tools must not see, besides the default
    /// credential paths (repeatable; absolute, or `~/…`).
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<String>,
    /// A default hidden credential path that jobs may see after all, written as listed in
    /// docs/SECURITY.md, such as `~/.npmrc` (repeatable).
    #[arg(long = "unhide", value_name = "PATH")]
    pub unhide: Vec<String>,
}

/// A project served by this wc-local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalProject {
    /// Short name.
    pub name: String,
    /// Canonical root directory.
    pub root: PathBuf,
}

impl LocalProject {
    /// Project id: `agent:local:NAME`.
    pub fn id(&self) -> String {
        format!("agent:local:{}", self.name)
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.starts_with('.')
}

/// Parses `--project` values into named, canonical directories.
pub fn resolve_projects(args: &[String]) -> anyhow::Result<Vec<LocalProject>> {
    let mut by_name = BTreeMap::new();
    for arg in args {
        let (name, dir) = match arg.split_once('=') {
            Some((name, dir)) if valid_name(name) => (Some(name.to_owned()), dir),
            _ => (None, arg.as_str()),
        };
        let root = std::fs::canonicalize(dir)
            .with_context(|| format!("--project {arg}: cannot resolve directory {dir:?}"))?;
        if !root.is_dir() {
            bail!("--project {arg}: {} is not a directory", root.display());
        }
        let name = match name {
            Some(n) => n,
            None => {
                let base = root
                    .file_name()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_owned();
                if !valid_name(&base) {
                    bail!(
                        "--project {arg}: the directory name {base:?} is not a valid project name \
                         (1-64 of A-Z a-z 0-9 . _ -); give one as NAME=DIR"
                    );
                }
                base
            }
        };
        if let Some(prev) = by_name.insert(name.clone(), root.clone()) {
            bail!(
                "project name {name:?} is used for both {} and {}",
                prev.display(),
                root.display()
            );
        }
    }
    Ok(by_name
        .into_iter()
        .map(|(name, root)| LocalProject { name, root })
        .collect())
}

/// Runs wc-local until SIGINT or SIGTERM; `out` receives the banner.
pub async fn run(cli: LocalCli, out: &mut (impl Write + Send)) -> anyhow::Result<()> {
    let projects = resolve_projects(&cli.projects)?;
    let token = given_token(&cli)?;
    if let Some((t, source)) = &token
        && !token::is_plausible(t)
    {
        bail!(
            "the token from {source} must be {}-{} visible ASCII characters",
            token::MIN_TOKEN_LEN,
            token::MAX_TOKEN_LEN
        );
    }
    let database_url = given_database_url(&cli)?;
    // Configuration errors, a refused switch among them, come before any database work.
    let mut config = ServerConfig::from_env()?;
    config.allow_anonymous |= cli.allow_anonymous;
    if cli.conformance_fixtures {
        config.enable_conformance_fixtures("--conformance-fixtures")?;
    }
    let listener = tokio::net::TcpListener::bind(cli.listen)
        .await
        .with_context(|| format!("cannot listen on {}", cli.listen))?;
    // Needed for the embedded cluster only; without one, an unknown home is no error.
    let state = match &cli.state_dir {
        Some(dir) => Ok(std::path::absolute(dir)?),
        None => state_dir(&std::env::current_dir()?),
    };
    if let Ok(state) = &state {
        check_state_dir(state, &projects)?;
    }
    // Jobs and file tools never see wc-local's own files.
    let mut hide = cli.hide.clone();
    for own in [
        state.as_ref().ok(),
        cli.token_file.as_ref(),
        cli.database_url_file.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        hide.push(std::path::absolute(own)?.display().to_string());
    }
    let workspaces = match (&cli.open[..], &state) {
        ([], _) => WorkspaceSettings::default(),
        (open, Ok(state)) => WorkspaceSettings {
            open: open.to_vec(),
            store: Some(worktree_store(state)),
        },
        (_, Err(e)) => bail!("--open needs a state directory for its worktrees: {e}"),
    };
    let switches = Switches {
        config,
        // A runner with nothing to serve would only displace another wc-local's runner.
        embedded_runner: !cli.no_runner && (!cli.projects.is_empty() || !cli.open.is_empty()),
        workspaces,
        // What is hidden holds for the file tools also when jobs run unsandboxed.
        sandbox: SandboxSettings {
            mode: cli.no_sandbox.then_some(SandboxMode::Off),
            hide,
            unhide: cli.unhide.clone(),
            ..SandboxSettings::default()
        },
    };
    match database_url {
        Some((url, source)) => {
            let url = DatabaseUrl::parse(&url).with_context(|| format!("the URL from {source}"))?;
            serve(
                listener,
                url,
                &projects,
                token,
                switches,
                format!("the one from {source}"),
                out,
            )
            .await
        }
        None => {
            let root = state?;
            move_old_state(&std::env::current_dir()?, &root, out)?;
            std::fs::create_dir_all(&root)
                .with_context(|| format!("cannot create {}", root.display()))?;
            let cluster = LocalCluster::start(
                &wc_store::cluster::placement(&root.join("postgres"))?,
                &ClusterOptions::default(),
            )
            .await?;
            let described = format!(
                "embedded cluster in {} (port {})",
                cluster.root().display(),
                cluster.port()
            );
            let result = async {
                wc_store::cluster::ensure_database(&cluster.url("postgres"), "wc").await?;
                serve(
                    listener,
                    cluster.url("wc"),
                    &projects,
                    token,
                    switches,
                    described,
                    out,
                )
                .await
            }
            .await;
            let stopped = cluster.stop().await;
            result?;
            stopped?;
            Ok(())
        }
    }
}

/// What to serve: the server configuration (the environment's, with the command line's
/// switches applied) and whether and how the embedded runner runs.
#[derive(Debug)]
struct Switches {
    config: ServerConfig,
    embedded_runner: bool,
    /// What callers may open through the embedded runner.
    workspaces: WorkspaceSettings,
    /// How the embedded runner's jobs are sandboxed, and what they and its file tools never see.
    sandbox: SandboxSettings,
}

async fn serve(
    listener: tokio::net::TcpListener,
    url: DatabaseUrl,
    projects: &[LocalProject],
    token: Option<(String, SecretSource)>,
    switches: Switches,
    database: String,
    out: &mut (impl Write + Send),
) -> anyhow::Result<()> {
    let db = DatabaseConfig::new(url);
    let report = migrate::migrate(&db)
        .await
        .context("cannot migrate the database")?;
    for m in &report.applied {
        tracing::info!(migration = %m, "applied migration");
    }
    let connector = Connector::new(&db)?;
    let pool = pool::build_pool_with(&db, connector.clone())?;
    let token = ensure_token(&pool, token).await?;
    {
        let client = pool.get().await?;
        for p in projects {
            projects::register(&client, &p.id(), &p.name, "local").await?;
        }
    }
    let addr = listener.local_addr()?;
    let mut config = switches.config;
    if config.public_url.is_none() {
        config.public_url = Some(format!("http://{addr}"));
    }
    let host = addr.ip().to_string();
    if !config.allowed_hosts.iter().any(|h| h == &host) {
        config.allowed_hosts.push(host);
    }
    if config.allow_anonymous {
        tracing::warn!(
            "ANONYMOUS ACCESS IS ON: callers without a token are served as the Open Anonymous principal"
        );
    }
    let wake = if config.notify {
        Wakeups::listening(connector)
    } else {
        Wakeups::polling()
    };
    let publisher = wc_functions::queue_publisher(&config);
    // The embedded runner receives from SQS when its client id has a queue.
    let runner_sqs = config.runner_sqs_queues.get(LOCAL_RUNNER).map(|url| {
        (
            url.clone(),
            config.sqs_endpoint_url.clone(),
            config.sqs_region.clone(),
        )
    });
    let state = AppState::new(pool.clone(), config)
        .with_wakeups(wake)
        .with_publisher(publisher);
    let reaper = tokio::spawn(reap_forever(state.clone()));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app(state))
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });
    let (runner, runner_state) = if switches.embedded_runner {
        let before = registered_instance(&pool).await;
        let (stop, mut joined) = start_runner(
            &pool,
            addr,
            projects,
            runner_sqs,
            switches.sandbox,
            &switches.workspaces,
        )
        .await?;
        // Ready means ready to execute: the banner waits for the runner to register, or
        // for it to refuse to start (its sandbox cannot run here).
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let mut refused = None;
        while registered_instance(&pool).await == before {
            if joined.is_finished() {
                refused = Some(match (&mut joined).await {
                    Ok(Err(e)) => e.to_string(),
                    Ok(Ok(())) => "it stopped before registering".to_owned(),
                    Err(e) => format!("it failed: {e}"),
                });
                break;
            }
            if std::time::Instant::now() >= deadline {
                tracing::warn!("the embedded runner has not registered after 15 s");
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match refused {
            None => (Some((stop, joined)), EmbeddedRunner::Running),
            Some(why) => {
                tracing::warn!(error = %why, "the embedded runner is not started");
                (None, EmbeddedRunner::NotStarted(why))
            }
        }
    } else {
        (None, EmbeddedRunner::None)
    };
    print_banner(
        out,
        addr,
        projects,
        &switches.workspaces,
        &token,
        &database,
        &runner_state,
    )?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    // The runner stops first (cancelling and reporting its work) while the server still answers.
    if let Some((runner_stop, joined)) = runner {
        let _ = runner_stop.send(Stop::Now);
        match tokio::time::timeout(Duration::from_secs(15), joined).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the embedded runner ended with an error"),
            Ok(_) => {}
            Err(_) => tracing::warn!("the embedded runner did not stop within 15 s"),
        }
    }
    reaper.abort();
    let _ = stop_tx.send(());
    match tokio::time::timeout(Duration::from_secs(10), server).await {
        Ok(joined) => joined??,
        Err(_) => tracing::warn!("connections still open after 10 s; closing them"),
    }
    Ok(())
}

/// The embedded runner's registered instance, if any.
async fn registered_instance(pool: &wc_store::Pool) -> Option<uuid::Uuid> {
    let client = pool.get().await.ok()?;
    wc_store::runners::get(&client, LOCAL_RUNNER)
        .await
        .ok()
        .flatten()
        .and_then(|r| r.instance_id)
}

/// Work items the embedded runner runs at once.
const EMBEDDED_RUNNER_CONCURRENCY: usize = 16;

/// The client id of the runner embedded in wc-local.
pub const LOCAL_RUNNER: &str = "local";

/// What became of the embedded runner, for the banner.
enum EmbeddedRunner {
    /// Registered (or still registering) and executing work for the projects.
    Running,
    /// Not started: it refused to start, typically because its jobs would be sandboxed and the
    /// sandbox cannot run here (the reason).
    /// wc-local still serves sessions, the board and audit; execution tools answer
    /// `runner_unavailable`.
    NotStarted(String),
    /// No projects, or `--no-runner`.
    None,
}

/// Starts the embedded runner for `projects`, talking to this server over loopback through the
/// runner API exactly as a remote runner would. Each start gives it a fresh token. The agent
/// probes its sandbox before registering and ends with the reason when it cannot run (jobs are
/// never run unsandboxed unless `--no-sandbox` says so).
async fn start_runner(
    pool: &wc_store::Pool,
    addr: SocketAddr,
    projects: &[LocalProject],
    sqs: Option<(String, Option<String>, String)>,
    sandbox: SandboxSettings,
    workspaces: &WorkspaceSettings,
) -> anyhow::Result<(
    tokio::sync::watch::Sender<Stop>,
    tokio::task::JoinHandle<Result<(), wc_runner_agent::agent::AgentError>>,
)> {
    let secret = wc_functions::runner_api::auth::generate();
    {
        let client = pool.get().await?;
        wc_store::runners::create(
            &client,
            LOCAL_RUNNER,
            Some("wc-local embedded runner"),
            &token::digest(&secret),
            true,
        )
        .await?;
    }
    let mut cfg = RunnerConfig::embedded(
        &format!("http://{addr}"),
        LOCAL_RUNNER,
        Secret::new(secret),
        projects
            .iter()
            .map(|p| (p.name.clone(), p.root.clone()))
            .collect(),
        Limits {
            // One machine, one user: enough slots that concurrent calls do not queue behind
            // each other.
            max_concurrency: EMBEDDED_RUNNER_CONCURRENCY,
            ..Limits::default()
        },
        sandbox,
    )?;
    if let Some(workspaces) = workspaces.policy()? {
        cfg = cfg.with_workspaces(workspaces);
    }
    if let Some((queue_url, endpoint_url, region)) = &sqs {
        cfg = cfg.with_sqs(queue_url, endpoint_url.as_deref(), Some(region))?;
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(Stop::Run);
    let joined = tokio::spawn(wc_runner_agent::agent::run(
        cfg,
        AgentOptions::default(),
        stop_rx,
    ));
    Ok((stop_tx, joined))
}

/// Runs a [`wc_functions::maintenance`] pass a quarter of the lease apart (pruning hourly).
/// Persistent shells are closed, and MCP tasks ended and expired, by the same pass.
async fn reap_forever(state: AppState) {
    let deps = &state.deps;
    let every = (deps.config.runner_lease / 4).max(Duration::from_millis(250));
    let mut tick = tokio::time::interval(every);
    let mut last_prune = std::time::Instant::now() - Duration::from_secs(3600);
    loop {
        tick.tick().await;
        let prune = last_prune.elapsed() >= Duration::from_secs(3600);
        if prune {
            last_prune = std::time::Instant::now();
        }
        // Failures are logged by the pass; the next tick tries again.
        let _ = wc_functions::maintenance::upkeep(&state, prune).await;
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The token wc-local accepts.
#[derive(Debug)]
enum AcceptedToken {
    /// Made by this start: the banner prints it, since nobody else knows it.
    Generated(String),
    /// The operator's: never printed, only where it came from.
    Given(SecretSource),
}

/// The token wc-local accepts: the given one (registered as a shared key if new), or a fresh one.
async fn ensure_token(
    pool: &wc_store::Pool,
    given: Option<(String, SecretSource)>,
) -> anyhow::Result<AcceptedToken> {
    let client = pool.get().await?;
    let (secret, accepted) = match given {
        Some((t, source)) => (t, AcceptedToken::Given(source)),
        None => {
            let t = token::generate(CredentialKind::SharedKey);
            (t.clone(), AcceptedToken::Generated(t))
        }
    };
    let digest = token::digest(&secret);
    if credentials::find_active_by_digest(&client, &digest)
        .await?
        .is_none()
    {
        let inserted = credentials::insert(
            &client,
            &NewCredential {
                kind: CredentialKind::SharedKey,
                label: Some("wc-local".into()),
                authority_group: Some("wc-local".into()),
                scopes: default_scopes(CredentialKind::SharedKey).to_strings(),
                projects: Vec::new(),
                secret_sha256: digest,
            },
        )
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if e.is_unique_violation() => bail!("that token was revoked; choose another"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(accepted)
}

fn print_banner(
    out: &mut impl Write,
    addr: SocketAddr,
    projects: &[LocalProject],
    workspaces: &WorkspaceSettings,
    token: &AcceptedToken,
    database: &str,
    runner: &EmbeddedRunner,
) -> std::io::Result<()> {
    let base = format!("http://{addr}");
    writeln!(out, "wc-local {VERSION} is serving")?;
    writeln!(out, "  MCP endpoint:  {base}/mcp")?;
    writeln!(out, "  REST base URL: {base}/api")?;
    writeln!(out, "  Health:        {base}/healthz")?;
    writeln!(out, "  Database:      {database}")?;
    if projects.is_empty() {
        writeln!(out, "  Projects:      none (add --project DIR)")?;
    }
    for p in projects {
        writeln!(out, "  Project:       {} -> {}", p.id(), p.root.display())?;
    }
    for dir in &workspaces.open {
        writeln!(
            out,
            "  Open:          checkouts beneath {} (work_on_project client_id={LOCAL_RUNNER} path=…)",
            dir.display()
        )?;
    }
    if let (false, Some(store)) = (workspaces.open.is_empty(), &workspaces.store) {
        writeln!(out, "  Worktrees:     {}", store.display())?;
    }
    match runner {
        EmbeddedRunner::Running => writeln!(
            out,
            "  Runner:        embedded ({LOCAL_RUNNER}), executing work for these projects"
        )?,
        EmbeddedRunner::NotStarted(why) => writeln!(
            out,
            "  Runner:        NOT STARTED, nothing will execute: {why}"
        )?,
        EmbeddedRunner::None => writeln!(
            out,
            "  Runner:        none (no --project, or --no-runner); connect wc-runner with a token from `wc-admin runner create`"
        )?,
    }
    let bearer = match token {
        AcceptedToken::Generated(t) => {
            writeln!(
                out,
                "  Token:         {t}  (generated; set WC_LOCAL_TOKEN or pass --token-file PATH to keep one)"
            )?;
            t.as_str()
        }
        AcceptedToken::Given(source) => {
            writeln!(out, "  Token:         the one from {source} (not shown)")?;
            "<your token>"
        }
    };
    let config = json!({
        "mcpServers": {
            "wc": {
                "type": "http",
                "url": format!("{base}/mcp"),
                "headers": { "Authorization": format!("Bearer {bearer}") },
            }
        }
    });
    writeln!(out, "MCP client configuration:")?;
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&config).expect("static json")
    )?;
    writeln!(out, "Press Ctrl-C to stop.")?;
    out.flush()
}

/// Where the embedded runner makes managed worktrees: beside the state directory, never in
/// it (jobs never see the state directory).
pub fn worktree_store(state: &Path) -> PathBuf {
    let mut name = state.file_name().unwrap_or_default().to_os_string();
    name.push("-worktrees");
    state.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names_default_to_the_directory_and_may_be_given() {
        let dir = std::env::temp_dir().join(format!("wc-proj-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let got = resolve_projects(&[
            dir.display().to_string(),
            format!("other={}", dir.display()),
        ])
        .unwrap();
        let names: Vec<_> = got.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["other", base.as_str()]);
        assert_eq!(got[1].id(), format!("agent:local:{base}"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_projects_are_refused_with_the_reason() {
        let err = resolve_projects(&["/definitely/not/here".into()]).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot resolve directory"),
            "{err:#}"
        );
        let file = std::env::temp_dir().join(format!("wc-file-{}", uuid::Uuid::new_v4().simple()));
        std::fs::write(&file, "x").unwrap();
        let err = resolve_projects(&[file.display().to_string()]).unwrap_err();
        assert!(format!("{err:#}").contains("is not a directory"), "{err:#}");
        std::fs::remove_file(&file).unwrap();
        let tmp = std::env::temp_dir();
        let err = resolve_projects(&[
            format!("a={}", tmp.display()),
            format!("a={}", tmp.display()),
        ])
        .unwrap_err();
        assert!(format!("{err:#}").contains("used for both"), "{err:#}");
    }

    #[test]
    fn names_are_plain() {
        assert!(valid_name("my-proj_1.x"));
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
