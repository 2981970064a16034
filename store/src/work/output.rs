//! Kept output: chunks a runner reports under its lease, read back by offset.

use deadpool_postgres::GenericClient;
use uuid::Uuid;
use wc_domain::WorkState;

use crate::StoreError;

/// A kept output chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// Byte offset in the stream.
    pub offset: i64,
    /// Bytes (1..=64 KiB).
    pub data: Vec<u8>,
}

/// What a report under a lease did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Accepted; the work's state now.
    Accepted(WorkState),
    /// The lease is not held; nothing changed; the work's state now.
    LeaseLost(WorkState),
    /// A chunk lies beyond the work's output limit; nothing changed.
    BeyondLimit,
    /// No such work for this runner.
    NotFound,
}

pub(super) fn chunk_arrays(chunks: &[Chunk]) -> (Vec<&str>, Vec<i64>, Vec<&[u8]>) {
    (
        chunks.iter().map(|c| c.stream).collect(),
        chunks.iter().map(|c| c.offset).collect(),
        chunks.iter().map(|c| c.data.as_slice()).collect(),
    )
}

/// Stores kept output of running work under its live lease. Chunks already stored (a retried
/// request) are ignored.
pub async fn append_output(
    client: &impl GenericClient,
    client_id: &str,
    instance_id: Uuid,
    work_id: Uuid,
    lease_token: Uuid,
    chunks: &[Chunk],
) -> Result<Report, StoreError> {
    let (streams, offsets, data) = chunk_arrays(chunks);
    let stmt = client
        .prepare_cached(
            "WITH cur AS (SELECT state, (item->'limits'->>'output_bytes_per_stream')::bigint AS lim \
                          FROM runner_work WHERE id = $1 AND client_id = $2), \
             c AS (SELECT * FROM unnest($5::text[], $6::bigint[], $7::bytea[]) AS c(s, o, d)), \
             over AS (SELECT count(*) AS n FROM c, cur WHERE c.o + octet_length(c.d) > cur.lim), \
             ok AS (SELECT id FROM runner_work WHERE id = $1 AND client_id = $2 AND instance_id = $3 \
                      AND lease_token = $4 AND state = 'leased' AND lease_expires_at > now() \
                      AND (SELECT n FROM over) = 0 FOR SHARE), \
             ins AS (INSERT INTO runner_work_output (work_id, stream, byte_offset, data) \
                     SELECT ok.id, c.s, c.o, c.d FROM ok, c ON CONFLICT DO NOTHING RETURNING 1) \
             SELECT (SELECT state FROM cur), (SELECT count(*) FROM ok), (SELECT n FROM over)",
        )
        .await?;
    let row = client
        .query_one(
            &stmt,
            &[
                &work_id,
                &client_id,
                &instance_id,
                &lease_token,
                &streams,
                &offsets,
                &data,
            ],
        )
        .await?;
    let state: Option<WorkState> = row.get(0);
    let ok: i64 = row.get(1);
    let over: i64 = row.get(2);
    Ok(match (state, ok, over) {
        (None, _, _) => Report::NotFound,
        (Some(_), _, n) if n > 0 => Report::BeyondLimit,
        (Some(s), 1, _) => Report::Accepted(s),
        (Some(s), _, _) => Report::LeaseLost(s),
    })
}

/// Kept output of one stream: up to `limit` bytes from `offset`, and how many bytes are kept
/// in all.
pub async fn read_output(
    client: &impl GenericClient,
    id: Uuid,
    stream: &str,
    offset: i64,
    limit: i64,
) -> Result<(Vec<u8>, i64), StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT byte_offset, data, \
                    (SELECT coalesce(max(byte_offset + octet_length(data)), 0) FROM runner_work_output \
                     WHERE work_id = $1 AND stream = $2) AS kept \
             FROM runner_work_output WHERE work_id = $1 AND stream = $2 \
               AND byte_offset + octet_length(data) > $3 AND byte_offset < $3 + $4 \
             ORDER BY byte_offset",
        )
        .await?;
    let rows = client
        .query(&stmt, &[&id, &stream, &offset, &limit])
        .await?;
    let mut kept = 0;
    if rows.is_empty() {
        let stmt = client
            .prepare_cached(
                "SELECT coalesce(max(byte_offset + octet_length(data)), 0) FROM runner_work_output \
                 WHERE work_id = $1 AND stream = $2",
            )
            .await?;
        kept = client.query_one(&stmt, &[&id, &stream]).await?.get(0);
    }
    let chunks: Vec<(i64, Vec<u8>)> = rows
        .iter()
        .map(|r| {
            kept = r.get("kept");
            (r.get("byte_offset"), r.get("data"))
        })
        .collect();
    Ok((assemble(&chunks, offset, limit), kept))
}

/// The contiguous bytes of `chunks` (ascending offsets) in `offset..offset + limit`, stopping
/// at the first gap (output still arriving).
fn assemble(chunks: &[(i64, Vec<u8>)], offset: i64, limit: i64) -> Vec<u8> {
    let end = offset + limit;
    let mut next = offset;
    let mut out = Vec::new();
    for (at, data) in chunks {
        if *at > next {
            break;
        }
        let from = (next - at) as usize;
        let to = ((end - at).max(0) as usize).min(data.len());
        if from < to {
            out.extend_from_slice(&data[from..to]);
            next = at + to as i64;
        }
    }
    out
}

/// The first `limit` kept bytes of stdout and of stderr, in one query.
pub async fn read_heads(
    client: &impl GenericClient,
    id: Uuid,
    limit: i64,
) -> Result<(Vec<u8>, Vec<u8>), StoreError> {
    let stmt = client
        .prepare_cached(
            "SELECT stream, byte_offset, data FROM runner_work_output \
             WHERE work_id = $1 AND byte_offset < $2 ORDER BY stream, byte_offset",
        )
        .await?;
    let rows = client.query(&stmt, &[&id, &limit]).await?;
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut err: Vec<(i64, Vec<u8>)> = Vec::new();
    for r in rows {
        let chunk = (r.get::<_, i64>(1), r.get::<_, Vec<u8>>(2));
        match r.get::<_, &str>(0) {
            "stdout" => out.push(chunk),
            _ => err.push(chunk),
        }
    }
    Ok((assemble(&out, 0, limit), assemble(&err, 0, limit)))
}
