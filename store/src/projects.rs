//! The `projects` aggregate: projects the control plane knows, and the runner that serves each.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use wc_domain::ProjectId;

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
}

fn from_row(row: &Row) -> Project {
    Project {
        id: row.get("id"),
        name: row.get("name"),
        client_id: row.get("client_id"),
        registered_at: row.get("registered_at"),
        updated_at: row.get("updated_at"),
    }
}

/// Registers a project, or refreshes an existing registration. A single upsert statement, so
/// concurrent registrations of one id cannot interleave.
pub async fn register(
    client: &impl GenericClient,
    id: &str,
    name: &str,
    client_id: &str,
) -> Result<Project, StoreError> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO projects (id, name, client_id) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, client_id = EXCLUDED.client_id, \
                 updated_at = now(), version = projects.version + 1 \
             RETURNING id, name, client_id, registered_at, updated_at",
        )
        .await?;
    let row = client.query_one(&stmt, &[&id, &name, &client_id]).await?;
    Ok(from_row(&row))
}

/// Every project, by id.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Project>, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT id, name, client_id, registered_at, updated_at FROM projects ORDER BY id",
        )
        .await?;
    Ok(client
        .query(&stmt, &[])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// Up to `limit` projects, by id, restricted to `only` when given.
pub async fn list_visible(
    client: &impl GenericClient,
    only: Option<&[ProjectId]>,
    limit: i64,
) -> Result<Vec<Project>, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT id, name, client_id, registered_at, updated_at FROM projects \
             WHERE ($1::text[] IS NULL OR id = ANY($1)) ORDER BY id LIMIT $2",
        )
        .await?;
    Ok(client
        .query(&stmt, &[&only, &limit])
        .await?
        .iter()
        .map(from_row)
        .collect())
}

/// The project `id`, if registered.
pub async fn get(
    client: &impl GenericClient,
    id: &ProjectId,
) -> Result<Option<Project>, StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT id, name, client_id, registered_at, updated_at FROM projects WHERE id = $1",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id])
        .await?
        .as_ref()
        .map(from_row))
}
