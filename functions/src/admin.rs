//! `wc-admin`: operator commands run against the database directly.
//!
//! `migrate` applies the embedded migrations (a one-off at deploy time, never per cold start).
//! `credential create|revoke|list` manages bearer credentials; `create` prints the token once,
//! alone on the last line of stdout, and nothing ever prints a stored secret.

use std::io::Write;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use uuid::Uuid;
use wc_store::config::{DatabaseConfig, DatabaseUrl, TlsSettings};
use wc_store::credentials::{self, CredentialKind, NewCredential, Revocation};
use wc_store::{ChangeOutcome, migrate, pool};

use crate::auth::{Scope, ScopeSet, token};

/// Command line of `wc-admin`.
#[derive(Debug, Parser)]
#[command(
    name = "wc-admin",
    version,
    about = "Operate a wc deployment: migrations, credentials and runners"
)]
pub struct AdminCli {
    /// PostgreSQL URL of the wc database.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    database_url: Option<String>,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Apply pending schema migrations (safe to run concurrently; each applies once).
    Migrate,
    /// Manage bearer credentials.
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// Manage runner tokens (one per build host).
    #[command(subcommand)]
    Runner(RunnerCommand),
    /// Print a generated reference document (no database needed).
    Docs {
        /// Which document.
        #[arg(value_enum)]
        which: DocArg,
    },
}

#[derive(Debug, Subcommand)]
enum RunnerCommand {
    /// Create a runner and print its token once, alone on the last line of stdout.
    Create {
        /// Stable id of the build host (projects become agent:<client_id>:<project>).
        client_id: String,
        /// Operator label.
        #[arg(long)]
        label: Option<String>,
        /// Replace the token of an existing runner: the old one stops working at once, and
        /// the runner's registered instances are forgotten, so the first agent to register
        /// with the new token becomes its current instance.
        #[arg(long)]
        rotate: bool,
    },
    /// Revoke a runner's token; its agent stops at its next request.
    Revoke {
        /// The runner.
        client_id: String,
    },
    /// List runners (never their tokens).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DocArg {
    /// docs/TOOLS.md
    Tools,
    /// docs/ERRORS.md
    Errors,
}

#[derive(Debug, Subcommand)]
enum CredentialCommand {
    /// Create a credential and print its token once, alone on the last line of stdout.
    Create {
        /// Kind of credential.
        #[arg(long, value_enum)]
        kind: KindArg,
        /// Scope to grant (repeatable). Default: every scope for shared keys,
        /// project:read and project:write for project credentials.
        #[arg(long = "scope", value_name = "SCOPE")]
        scopes: Vec<String>,
        /// Project id to grant (repeatable; required for project credentials).
        #[arg(long = "project", value_name = "PROJECT")]
        projects: Vec<String>,
        /// Operator-facing label.
        #[arg(long)]
        label: Option<String>,
        /// Authority group shared with other credentials (default: a group of its own).
        #[arg(long)]
        authority_group: Option<String>,
    },
    /// Revoke a credential by id.
    Revoke {
        /// Credential id.
        id: Uuid,
    },
    /// List credentials (never their secrets).
    List {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    SharedKey,
    Project,
}

impl From<KindArg> for CredentialKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::SharedKey => CredentialKind::SharedKey,
            KindArg::Project => CredentialKind::Project,
        }
    }
}

/// Default scopes of a newly created credential of `kind`.
pub fn default_scopes(kind: CredentialKind) -> ScopeSet {
    match kind {
        CredentialKind::SharedKey => ScopeSet::all(),
        CredentialKind::Project => [Scope::ProjectRead, Scope::ProjectWrite]
            .into_iter()
            .collect(),
    }
}

/// Runs one `wc-admin` invocation, writing its report to `out`.
pub async fn run(cli: AdminCli, out: &mut impl Write) -> anyhow::Result<()> {
    if let AdminCommand::Docs { which } = cli.command {
        let text = match which {
            DocArg::Tools => {
                let runtime = crate::kernel::Registry::new(crate::tools::all());
                crate::docs::tools_markdown(&runtime)
            }
            DocArg::Errors => crate::docs::errors_markdown(),
        };
        out.write_all(text.as_bytes())?;
        return Ok(());
    }
    let db = match cli.database_url.as_deref() {
        // The URL's sslmode decides TLS; WC_DB_SSLROOTCERT names the CA bundle to trust.
        Some(url) => DatabaseConfig {
            tls: TlsSettings::from_env(),
            ..DatabaseConfig::new(DatabaseUrl::parse(url)?)
        },
        // The functions' own cloud configuration: WC_DB_HOST and friends, with IAM auth
        // through RDS Proxy when WC_DB_IAM_AUTH=1.
        None => DatabaseConfig::from_env().context(
            "no usable database configuration: pass --database-url, or set DATABASE_URL or WC_DB_HOST \
             (with WC_DB_IAM_AUTH=1 for IAM auth through RDS Proxy)",
        )?,
    };
    match cli.command {
        AdminCommand::Migrate => {
            let report = migrate::migrate(&db).await?;
            if report.applied.is_empty() {
                writeln!(out, "schema is current at level {}", report.level)?;
            } else {
                for m in &report.applied {
                    writeln!(out, "applied {m}")?;
                }
                writeln!(out, "schema is now at level {}", report.level)?;
            }
        }
        AdminCommand::Credential(cmd) => {
            let pool = pool::build_pool(&db)?;
            credential(&pool, cmd, out).await?;
        }
        AdminCommand::Runner(cmd) => {
            let pool = pool::build_pool(&db)?;
            runner(&pool, cmd, out).await?;
        }
        AdminCommand::Docs { .. } => unreachable!("handled above"),
    }
    Ok(())
}

async fn runner(
    pool: &wc_store::Pool,
    cmd: RunnerCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let client = pool.get().await?;
    match cmd {
        RunnerCommand::Create {
            client_id,
            label,
            rotate,
        } => {
            if !wc_runner_protocol::valid_name(&client_id) {
                bail!("client_id must be 1-64 of A-Z a-z 0-9 . _ -");
            }
            if label.as_ref().is_some_and(|l| l.chars().count() > 200) {
                bail!("label must be at most 200 characters");
            }
            let secret = crate::runner_api::auth::generate();
            let created = wc_store::runners::create(
                &client,
                &client_id,
                label.as_deref(),
                &token::digest(&secret),
                rotate,
            )
            .await?;
            if created.is_none() {
                bail!("runner {client_id} exists; pass --rotate to give it a new token");
            }
            writeln!(
                out,
                "{} runner {client_id}; its token (shown once) follows",
                if rotate { "rotated" } else { "created" }
            )?;
            writeln!(out, "{secret}")?;
        }
        RunnerCommand::Revoke { client_id } => {
            if wc_store::runners::revoke(&client, &client_id).await? {
                writeln!(out, "revoked runner {client_id}")?;
            } else {
                bail!("no active runner {client_id}");
            }
        }
        RunnerCommand::List { json } => {
            for r in wc_store::runners::list(&client, None, None, 10_000).await? {
                let state = if r.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                if json {
                    let line = serde_json::json!({
                        "client_id": r.client_id,
                        "state": state,
                        "label": r.label,
                        "instance_id": r.instance_id,
                        "last_seen_at": r.last_seen_at,
                        "agent_version": r.agent_version,
                        "queue": r.queue,
                        "projects": r.projects,
                        "work_in_flight": r.work_in_flight,
                    });
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(
                        out,
                        "{:<24}  {:<7}  last seen {}  {} in flight  {}",
                        r.client_id,
                        state,
                        r.last_seen_at
                            .map(|t| t.to_rfc3339())
                            .unwrap_or_else(|| "never".into()),
                        r.work_in_flight,
                        r.projects.join(",")
                    )?;
                }
            }
        }
    }
    Ok(())
}

async fn credential(
    pool: &wc_store::Pool,
    cmd: CredentialCommand,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match cmd {
        CredentialCommand::Create {
            kind,
            scopes,
            projects,
            label,
            authority_group,
        } => {
            let kind = CredentialKind::from(kind);
            let scopes = if scopes.is_empty() {
                default_scopes(kind)
            } else {
                ScopeSet::parse_all(&scopes)?
            };
            if kind == CredentialKind::Project && projects.is_empty() {
                bail!("a project credential needs at least one --project");
            }
            if kind == CredentialKind::SharedKey && !projects.is_empty() {
                bail!(
                    "a shared key reaches every project; --project applies to project credentials only"
                );
            }
            for p in &projects {
                if p.is_empty() || p.len() > 300 || p.chars().any(char::is_control) {
                    bail!("invalid project id {p:?}: 1-300 characters, no control characters");
                }
            }
            if let Some(l) = &label
                && (l.len() > 200 || l.chars().any(char::is_control))
            {
                bail!("invalid label: at most 200 characters, no control characters");
            }
            if let Some(g) = &authority_group
                && (g.is_empty() || g.len() > 200 || g.chars().any(char::is_control))
            {
                bail!("invalid authority group: 1-200 characters, no control characters");
            }
            let secret = token::generate(kind);
            let client = pool.get().await?;
            let cred = credentials::insert(
                &client,
                &NewCredential {
                    kind,
                    label,
                    authority_group,
                    scopes: scopes.to_strings(),
                    projects,
                    secret_sha256: token::digest(&secret),
                },
            )
            .await?;
            writeln!(out, "created {} credential {}", kind.as_str(), cred.id)?;
            writeln!(out, "scopes: {}", cred.scopes.join(" "))?;
            if !cred.projects.is_empty() {
                writeln!(out, "projects: {}", cred.projects.join(" "))?;
            }
            writeln!(out, "the token below is shown once; store it now")?;
            writeln!(out, "{secret}")?;
        }
        CredentialCommand::Revoke { id } => match credentials::revoke(pool, id).await? {
            ChangeOutcome::Applied {
                value: Revocation::Revoked(c),
                ..
            } => writeln!(out, "revoked {}", c.id)?,
            ChangeOutcome::Applied {
                value: Revocation::AlreadyRevoked(c),
                ..
            } => writeln!(out, "{} was already revoked", c.id)?,
            ChangeOutcome::Applied {
                value: Revocation::NotFound,
                ..
            } => bail!("no credential with id {id}"),
            ChangeOutcome::Conflict { .. } => {
                bail!("credential {id} is being changed concurrently; try again")
            }
        },
        CredentialCommand::List { json } => {
            let client = pool.get().await?;
            let all = credentials::list(&client).await?;
            if !json {
                writeln!(
                    out,
                    "{:<36}  {:<10}  {:<7}  {:<20}  SCOPES / PROJECTS",
                    "ID", "KIND", "STATE", "LABEL"
                )?;
            }
            for c in all {
                let state = if c.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                if json {
                    let line = serde_json::json!({
                        "id": c.id,
                        "kind": c.kind.as_str(),
                        "state": state,
                        "label": c.label,
                        "authority_group": c.authority_group,
                        "scopes": c.scopes,
                        "projects": c.projects,
                        "created_at": c.created_at,
                        "revoked_at": c.revoked_at,
                    });
                    writeln!(out, "{line}")?;
                } else {
                    let projects = if c.projects.is_empty() {
                        "*".to_owned()
                    } else {
                        c.projects.join(",")
                    };
                    writeln!(
                        out,
                        "{:<36}  {:<10}  {:<7}  {:<20}  {} / {}",
                        c.id,
                        c.kind.as_str(),
                        state,
                        c.label.as_deref().unwrap_or("-"),
                        c.scopes.join(","),
                        projects
                    )?;
                }
            }
        }
    }
    Ok(())
}
