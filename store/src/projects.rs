//! The `projects` aggregate: projects the control plane knows, and the runner that serves each.
//! A project is configured on its runner (announced at registration) or opened by a caller
//! through it (a checkout, or a managed worktree); a removed worktree's row stays, for its
//! history, but is no longer a project anyone can name.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use wc_domain::{ProjectId, ProjectOrigin};

use crate::StoreError;

/// A registered project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// Canonical id, `agent:<client_id>:<name>`.
    pub id: ProjectId,
    /// Short name.
    pub name: String,
    /// Runner client that serves it.
    pub client_id: String,
    /// First registration.
    pub registered_at: DateTime<Utc>,
    /// Last registration.
    pub updated_at: DateTime<Utc>,
    /// How it came to be served; the rest is `None` for a configured project.
    pub origin: ProjectOrigin,
    /// Opened: its root on the runner's host, as the runner answered.
    pub root: Option<String>,
    /// Opened: the checkout it was opened from.
    pub source_path: Option<String>,
    /// A worktree: the commit it was made at.
    pub base_commit: Option<String>,
    /// Opened: the kind of caller who opened it.
    pub opened_by_kind: Option<String>,
    /// Opened: the authority of the caller who opened it.
    pub opened_by_authority: Option<String>,
    /// Opened: when.
    pub opened_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, name, client_id, registered_at, updated_at, origin, root, \
    source_path, base_commit, opened_by_kind, opened_by_authority, opened_at";

fn from_row(row: &Row) -> Project {
    Project {
        id: row.get("id"),
        name: row.get("name"),
        client_id: row.get("client_id"),
        registered_at: row.get("registered_at"),
        updated_at: row.get("updated_at"),
        origin: row.get("origin"),
        root: row.get("root"),
        source_path: row.get("source_path"),
        base_commit: row.get("base_commit"),
        opened_by_kind: row.get("opened_by_kind"),
        opened_by_authority: row.get("opened_by_authority"),
        opened_at: row.get("opened_at"),
    }
}

/// Registers a project, or refreshes an existing registration. A single upsert statement, so
/// concurrent registrations of one id cannot interleave. An opened project announced again
/// keeps its facts.
pub async fn register(
    client: &impl GenericClient,
    id: &str,
    name: &str,
    client_id: &str,
) -> Result<Project, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO projects (id, name, client_id) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, client_id = EXCLUDED.client_id, \
                 updated_at = now(), version = projects.version + 1 \
             RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client.query_one(&stmt, &[&id, &name, &client_id]).await?;
    Ok(from_row(&row))
}

/// A project a caller opened, as its runner answered.
#[derive(Debug, Clone)]
pub struct Opened<'a> {
    /// Its canonical id.
    pub id: &'a ProjectId,
    /// Its runner-local name.
    pub name: &'a str,
    /// Its runner.
    pub client_id: &'a str,
    /// A checkout or a worktree.
    pub origin: ProjectOrigin,
    /// Its root on the runner's host.
    pub root: &'a str,
    /// The checkout it came from.
    pub source_path: &'a str,
    /// A worktree's base commit.
    pub base_commit: Option<&'a str>,
    /// Who opened it: the caller's kind and authority.
    pub opened_by_kind: &'a str,
    /// The caller's authority.
    pub opened_by_authority: &'a str,
}

/// Records an opened project, once: a project already known by this id (the runner served
/// the checkout already, configured or opened) keeps its row and facts, and is returned.
pub async fn record_opened(
    client: &impl GenericClient,
    opened: &Opened<'_>,
) -> Result<Project, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "WITH new AS ( \
                 INSERT INTO projects (id, name, client_id, origin, root, source_path, \
                     base_commit, opened_by_kind, opened_by_authority, opened_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now()) \
                 ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}) \
             SELECT {COLUMNS} FROM new \
             UNION ALL SELECT {COLUMNS} FROM projects WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM new)"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &opened.id,
                &opened.name,
                &opened.client_id,
                &opened.origin,
                &opened.root,
                &opened.source_path,
                &opened.base_commit,
                &opened.opened_by_kind,
                &opened.opened_by_authority,
            ],
        )
        .await?;
    Ok(from_row(&row))
}

/// Every project, by id.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Project>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM projects WHERE removed_at IS NULL ORDER BY id"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// Up to `limit` projects by id, restricted to `only` and to `origin` when given.
pub async fn list_visible(
    client: &impl GenericClient,
    only: Option<&[ProjectId]>,
    origin: Option<ProjectOrigin>,
    limit: i64,
) -> Result<Vec<Project>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM projects \
             WHERE removed_at IS NULL AND ($1::text[] IS NULL OR id = ANY($1)) \
                 AND ($2::text IS NULL OR origin = $2) \
             ORDER BY id LIMIT $3"
        ))
        .await?;
    Ok(client
        .query(&stmt, &[&only, &origin, &limit])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// The project `id`, if registered and not removed.
pub async fn get(
    client: &impl GenericClient,
    id: &ProjectId,
) -> Result<Option<Project>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM projects WHERE id = $1 AND removed_at IS NULL"
        ))
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id])
        .await?
        .as_ref()
        .map(from_row))
}

/// Marks the managed worktree `id` removed; whether this call did (false: it was not a live
/// worktree).
pub async fn mark_removed(client: &impl GenericClient, id: &ProjectId) -> Result<bool, StoreError> {
    let stmt = client
        .prepare_cached(
            "UPDATE projects SET removed_at = now(), updated_at = now(), version = version + 1 \
             WHERE id = $1 AND origin = 'worktree' AND removed_at IS NULL",
        )
        .await?;
    Ok(client.execute(&stmt, &[&id]).await? == 1)
}
