//! Runner work: its id (also a job's id), its lifecycle and how it was asked for.

use uuid::Uuid;

use crate::ParseError;

string_enum! {
    /// Lifecycle of one unit of runner work.
    ///
    /// `queued → leased → succeeded | failed | cancelled`, and `leased → lost` when a lease
    /// expires or a newer runner instance replaces the one holding it. `queued → cancelled` is
    /// allowed (stopped before any runner took it). Terminal states never change again, and
    /// work that was leased is never put back in the queue: a started command is not replayed.
    "work state"
    pub enum WorkState {
        /// Waiting for a runner.
        Queued = "queued",
        /// Claimed by a runner instance under a lease.
        Leased = "leased",
        /// Finished and reported a result.
        Succeeded = "succeeded",
        /// Finished with a failure result.
        Failed = "failed",
        /// Stopped on request.
        Cancelled = "cancelled",
        /// Its runner vanished; the outcome is unknown.
        Lost = "lost",
    }
}

impl WorkState {
    /// Whether no further transition is possible.
    pub fn is_terminal(self) -> bool {
        !matches!(self, WorkState::Queued | WorkState::Leased)
    }

    /// Whether `self → next` is a legal transition.
    pub fn can_become(self, next: WorkState) -> bool {
        use WorkState::*;
        matches!(
            (self, next),
            (Queued, Leased)
                | (Queued, Cancelled)
                | (Leased, Succeeded)
                | (Leased, Failed)
                | (Leased, Cancelled)
                | (Leased, Lost)
        )
    }
}

string_enum! {
    /// How work was asked for.
    "work mode"
    pub enum WorkMode {
        /// The caller waits for it (`run_shell`, `run_process`).
        Sync = "sync",
        /// A background job (`run_job`).
        Job = "job",
    }
}

string_enum! {
    /// Which queue carries work to its runner.
    "work queue"
    pub enum WorkQueue {
        /// The row is the queue; runners long-poll the runner API.
        Postgres = "postgres",
        /// A message with the work id goes to the runner's SQS queue.
        Sqs = "sqs",
    }
}

string_enum! {
    /// Why work ended without a report from its runner.
    "work end reason"
    pub enum EndReason {
        /// Its lease expired: the runner stopped heartbeating.
        LeaseExpired = "lease_expired",
        /// A newer instance of its runner registered while it was leased.
        InstanceReplaced = "instance_replaced",
        /// Stopped before any runner took it.
        StoppedWhileQueued = "stopped_while_queued",
    }
}

/// The id of one unit of runner work; a job's `job_id`. A UUID, written in its hyphenated
/// lowercase form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkId(pub Uuid);

impl WorkId {
    /// The pattern of the JSON Schema: a hyphenated UUID.
    pub const PATTERN: &'static str =
        "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
    /// What a caller reads when an id breaks the pattern.
    pub const PROBLEM: &'static str =
        "must be a UUID in its hyphenated form (8-4-4-4-12 hex digits)";

    /// A fresh, time-ordered id (UUIDv7).
    pub fn generate() -> WorkId {
        WorkId(Uuid::now_v7())
    }

    /// Accepts the hyphenated form only (36 characters), the form the schema publishes.
    pub fn parse(raw: &str) -> Result<WorkId, ParseError> {
        let hyphenated = raw.len() == 36
            && raw.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        match raw.parse::<Uuid>() {
            Ok(id) if hyphenated => Ok(WorkId(id)),
            _ => Err(ParseError::new("job id", Self::PROBLEM)),
        }
    }

    /// The UUID.
    pub fn uuid(self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for WorkId {
    fn from(id: Uuid) -> WorkId {
        WorkId(id)
    }
}

impl std::fmt::Display for WorkId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl std::str::FromStr for WorkId {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WorkId::parse(s)
    }
}

impl serde::Serialize for WorkId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0.hyphenated())
    }
}

impl<'de> serde::Deserialize<'de> for WorkId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        WorkId::parse(&raw).map_err(serde::de::Error::custom)
    }
}

string_schema!(WorkId, "minLength": 36, "maxLength": 36, "pattern": WorkId::PATTERN,
    "x-problem": WorkId::PROBLEM);

#[cfg(feature = "postgres")]
impl postgres_types::ToSql for WorkId {
    fn to_sql(
        &self,
        ty: &postgres_types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres_types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.0.to_sql(ty, out)
    }
    fn accepts(ty: &postgres_types::Type) -> bool {
        <Uuid as postgres_types::ToSql>::accepts(ty)
    }
    postgres_types::to_sql_checked!();
}

#[cfg(feature = "postgres")]
impl<'a> postgres_types::FromSql<'a> for WorkId {
    fn from_sql(
        ty: &postgres_types::Type,
        raw: &'a [u8],
    ) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(WorkId(Uuid::from_sql(ty, raw)?))
    }
    fn accepts(ty: &postgres_types::Type) -> bool {
        <Uuid as postgres_types::FromSql>::accepts(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_spell_as_stored() {
        let spelled: Vec<&str> = WorkState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            spelled,
            [
                "queued",
                "leased",
                "succeeded",
                "failed",
                "cancelled",
                "lost"
            ]
        );
        for s in WorkState::ALL {
            assert_eq!(WorkState::parse(s.as_str()), Ok(*s));
        }
        let e = WorkState::parse("running").unwrap_err();
        assert_eq!(
            e.to_string(),
            "work state must be one of: queued leased succeeded failed cancelled lost"
        );
    }

    #[test]
    fn only_forward_transitions() {
        for from in WorkState::ALL {
            for to in WorkState::ALL {
                if from.is_terminal() || from == to {
                    assert!(!from.can_become(*to), "{from} -> {to}");
                }
            }
        }
        assert!(WorkState::Queued.can_become(WorkState::Cancelled));
        assert!(!WorkState::Leased.can_become(WorkState::Queued));
    }

    #[test]
    fn work_ids_take_the_hyphenated_form_only() {
        let id = WorkId::generate();
        assert_eq!(WorkId::parse(&id.to_string()), Ok(id));
        assert!(WorkId::parse("not-a-uuid").is_err());
        assert!(WorkId::parse(&id.0.simple().to_string()).is_err());
        assert!(WorkId::parse(&format!("{{{id}}}")).is_err());
        let pattern = regex::Regex::new(WorkId::PATTERN).unwrap();
        assert!(pattern.is_match(&id.to_string()));
    }
}

/// What a caller declared, before running something, about the result it expects. It never
/// changes whether the run succeeded: it classifies the outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultExpectation {
    /// Ordinary success is required (exit 0, or an accepted exit code).
    #[default]
    Success,
    /// A completed, known failure is expected (the process ran and exited non-zero).
    Failure,
    /// Either completed result is fine (the process ran and exited).
    Observe,
}

/// A plain string enum: every field that takes one says what the values mean, so listings do
/// not repeat a description per value in every execution tool.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for ResultExpectation {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ResultExpectation".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "enum": ["success", "failure", "observe"] })
    }
}
