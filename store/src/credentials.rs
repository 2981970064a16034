//! The `credentials` aggregate: bearer credentials stored as SHA-256 digests.
//!
//! Strategy: a credential is inserted once and changed only by [`revoke`], a read–decide–write
//! change under the credential row's lock ([`crate::change`]), the same path as every other
//! aggregate's read–decide–write changes; revocations are rare, so nothing faster is needed.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::StoreError;
use crate::change::{self, ChangeOutcome, RETRY, StepFuture};

/// The kinds of stored credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// An operator key: every project, the scopes it was created with.
    SharedKey,
    /// A key limited to the projects it was granted.
    Project,
}

impl CredentialKind {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::SharedKey => "shared_key",
            CredentialKind::Project => "project",
        }
    }

    fn from_db(s: &str) -> Result<Self, StoreError> {
        match s {
            "shared_key" => Ok(CredentialKind::SharedKey),
            "project" => Ok(CredentialKind::Project),
            other => Err(StoreError::CorruptRow {
                table: "credentials",
                detail: format!("unknown kind {other:?}"),
            }),
        }
    }
}

/// A credential to insert. The secret itself never reaches the store.
#[derive(Debug, Clone)]
pub struct NewCredential {
    /// Kind of credential.
    pub kind: CredentialKind,
    /// Optional operator-facing label.
    pub label: Option<String>,
    /// Authority group; `None` gives the credential a group of its own.
    pub authority_group: Option<String>,
    /// Granted scopes, already validated by the caller.
    pub scopes: Vec<String>,
    /// Granted projects (required for project credentials).
    pub projects: Vec<String>,
    /// SHA-256 of the bearer secret.
    pub secret_sha256: [u8; 32],
}

/// A stored credential, without any secret material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Stable id.
    pub id: Uuid,
    /// Kind of credential.
    pub kind: CredentialKind,
    /// Operator-facing label.
    pub label: Option<String>,
    /// Authority group owning what this credential creates.
    pub authority_group: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
    /// Granted projects.
    pub projects: Vec<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Revocation time, if revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

const COLUMNS: &str = "id, kind, label, authority_group, scopes, projects, created_at, revoked_at";

fn from_row(row: &Row) -> Result<Credential, StoreError> {
    Ok(Credential {
        id: row.get("id"),
        kind: CredentialKind::from_db(row.get("kind"))?,
        label: row.get("label"),
        authority_group: row.get("authority_group"),
        scopes: row.get("scopes"),
        projects: row.get("projects"),
        created_at: row.get("created_at"),
        revoked_at: row.get("revoked_at"),
    })
}

/// Inserts a credential and returns it.
pub async fn insert(
    client: &impl GenericClient,
    new: &NewCredential,
) -> Result<Credential, StoreError> {
    let id = Uuid::now_v7();
    let group = new
        .authority_group
        .clone()
        .unwrap_or_else(|| format!("credential:{id}"));
    let stmt = client
        .prepare_cached(&format!(
            "INSERT INTO credentials (id, kind, label, authority_group, scopes, projects, secret_sha256) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        ))
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &id,
                &new.kind.as_str(),
                &new.label,
                &group,
                &new.scopes,
                &new.projects,
                &&new.secret_sha256[..],
            ],
        )
        .await?;
    from_row(&row)
}

/// The active (not revoked) credential whose secret has this digest.
pub async fn find_active_by_digest(
    client: &impl GenericClient,
    digest: &[u8; 32],
) -> Result<Option<Credential>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM credentials WHERE secret_sha256 = $1 AND revoked_at IS NULL"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&&digest[..]])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The active (not revoked) credential with this id: how a call admitted earlier is checked
/// again before it answers after a wait.
pub async fn find_active_by_id(
    client: &impl GenericClient,
    id: Uuid,
) -> Result<Option<Credential>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM credentials WHERE id = $1 AND revoked_at IS NULL"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&id])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Every credential, oldest first.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Credential>, StoreError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM credentials ORDER BY created_at, id"
        ))
        .await?;
    client
        .query(&stmt, &[])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// What revoking did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// The credential is now revoked.
    Revoked(Credential),
    /// It was already revoked; nothing changed.
    AlreadyRevoked(Credential),
    /// No credential has this id.
    NotFound,
}

/// Revokes a credential: decided on its locked row ([`change::locked`]).
pub async fn revoke(pool: &Pool, id: Uuid) -> Result<ChangeOutcome<Revocation>, StoreError> {
    let load = format!("SELECT {COLUMNS} FROM credentials WHERE id = $1 FOR UPDATE");
    let ran = change::locked(
        pool,
        &RETRY,
        &load,
        &[&id],
        |tx, row| -> StepFuture<'_, Revocation> {
            Box::pin(async move {
                let Some(row) = row else {
                    return Ok(Revocation::NotFound);
                };
                let current = from_row(&row)?;
                if current.revoked_at.is_some() {
                    return Ok(Revocation::AlreadyRevoked(current));
                }
                let stmt = tx
                    .prepare_cached(&format!(
                        "UPDATE credentials SET revoked_at = now(), version = version + 1 \
                         WHERE id = $1 AND revoked_at IS NULL RETURNING {COLUMNS}"
                    ))
                    .await?;
                let written = tx.query_opt(&stmt, &[&id]).await?;
                Ok(Revocation::Revoked(from_row(&change::guarded(
                    written,
                    "credentials",
                )?)?))
            })
        },
    )
    .await;
    ChangeOutcome::of(ran, &RETRY)
}
