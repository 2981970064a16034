//! Tool specifications: what a tool is called, what it takes and returns, who may call it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::context::ToolContext;
use crate::auth::Scope;
use crate::result::{ErrorKind, ToolError};

/// Coarse grouping of tools, shown in listings and telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Finding out what exists: tools, projects, status.
    Discovery,
    /// Workflow Session lifecycle, ledger and handoff.
    Session,
    /// Running processes, shells, scripts and jobs on build hosts.
    Execution,
    /// Reading, searching and editing project files, and Git, on build hosts.
    Files,
    /// Fixtures of the MCP conformance suite (test-only mode).
    Conformance,
}

impl Category {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Discovery => "discovery",
            Category::Session => "session",
            Category::Execution => "execution",
            Category::Files => "files",
            Category::Conformance => "conformance",
        }
    }
}

/// What a tool declares about itself, built by the constructor of its [`Effect`]:
///
/// ```ignore
/// let meta = ToolMeta::reads(Category::Files, "git_status", "Git status")
///     .about("The project's Git state on the build host: …");
/// ```
///
/// Whether a tool also gets a named REST operation is the REST surface's choice
/// (`rest::NAMED_OPERATIONS`), not the tool's.
#[derive(Debug, Clone, Copy)]
pub struct ToolMeta {
    /// Wire name, snake_case.
    pub name: &'static str,
    /// Human-readable title.
    pub title: &'static str,
    /// What it does, for models: what they need to choose and call it (the detail is in
    /// docs/TOOLS.md; REST descriptions are cut to 300 characters).
    pub description: &'static str,
    /// Grouping.
    pub category: Category,
    /// Scopes the caller must hold, all of them: by default `project:read` for a tool that
    /// reads and `project:write` for one that changes anything ([`Self::scopes`] says
    /// otherwise).
    pub scopes: &'static [Scope],
    /// What calling it does to the world.
    pub effect: Effect,
}

/// What a tool's call does: the facts MCP annotations, GPT Actions' confirmation, the ledger
/// and the read-only session mode read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Only reads.
    Reads,
    /// Changes state in a way that is not consequential: adds to a board or ledger, or
    /// changes a session's own bookkeeping.
    Changes,
    /// Changes the project or runs its code on a build host (GPT Actions ask before calling
    /// it).
    Consequential,
}

impl ToolMeta {
    const fn of(
        effect: Effect,
        category: Category,
        name: &'static str,
        title: &'static str,
    ) -> Self {
        let scopes: &'static [Scope] = match effect {
            Effect::Reads => &[Scope::ProjectRead],
            Effect::Changes | Effect::Consequential => &[Scope::ProjectWrite],
        };
        ToolMeta {
            name,
            title,
            description: "",
            category,
            scopes,
            effect,
        }
    }

    /// A tool that only reads.
    pub const fn reads(category: Category, name: &'static str, title: &'static str) -> Self {
        Self::of(Effect::Reads, category, name, title)
    }

    /// A tool whose change is not consequential ([`Effect::Changes`]).
    pub const fn changes(category: Category, name: &'static str, title: &'static str) -> Self {
        Self::of(Effect::Changes, category, name, title)
    }

    /// A tool that changes the project or runs its code ([`Effect::Consequential`]).
    pub const fn consequential(
        category: Category,
        name: &'static str,
        title: &'static str,
    ) -> Self {
        Self::of(Effect::Consequential, category, name, title)
    }

    /// What it does, for models.
    pub const fn about(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    /// The scopes a caller must hold, when they are not its effect's.
    pub const fn scopes(mut self, scopes: &'static [Scope]) -> Self {
        self.scopes = scopes;
        self
    }

    /// Whether the tool only reads.
    pub fn read_only(&self) -> bool {
        self.effect == Effect::Reads
    }

    /// Whether its effect is consequential.
    pub fn is_consequential(&self) -> bool {
        self.effect == Effect::Consequential
    }
}

type Handler = Arc<
    dyn Fn(ToolContext, Value) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>
        + Send
        + Sync,
>;

/// How a tool uses the Workflow Session named by its `session_id` argument. The session
/// authority port loads and authorizes it before dispatch, whether or not the call is recorded in it
/// ([`BusinessPair`] says that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionUse {
    /// No `session_id` argument.
    None,
    /// Reads the session (any lifecycle).
    Reads,
    /// Changes the session (it must be active). Session management is allowed in read-only
    /// sessions: the mode restricts project work, not the session's own bookkeeping.
    Changes,
    /// Manages the session's lifecycle in any state (closing a finished session, say); also
    /// exempt from the read-only mode.
    Manages,
    /// Works in the session's context (execution defaults, evidence): it must be active, and
    /// a read-only session refuses the tool when it changes the project.
    Works,
    /// Creates a fresh session and names none (no `session_id` argument). Session
    /// management: a read-only recorder may record it, as it may record `work_on_project`.
    Creates,
}

impl SessionUse {
    /// Whether the tool only manages the session itself (and so may run in read-only sessions).
    pub fn is_session_management(self) -> bool {
        matches!(
            self,
            SessionUse::Changes | SessionUse::Manages | SessionUse::Creates
        )
    }
}

/// Whether a call's `tool_call_started`/`tool_call_finished` pair also lands, in the role
/// `business`, in the session named by its `session_id`. A call is always recorded where an
/// explicit `recording_session_id` names a session (role `recorder`); this is about the
/// business session on top of that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusinessPair {
    /// Never: `session_id` is the tool's target, authorized on its own, and the call is
    /// recorded only in an explicit recorder. The session tools (summaries, the message board,
    /// assignments, execution defaults, finish and close) work on a session; they do not work
    /// in it.
    Never,
    /// Always: the tool acts on the project in the session's context (execution,
    /// `work_on_project`), so the session keeps the call as its own work.
    Always,
    /// Only when the call names no recorder: the business session then records the call in its
    /// place (`session_handoff_summary`'s compatibility fallback, so a recovery call leaves its
    /// trace where it read); with an explicit recorder, only the recorder does.
    UnlessRecorded,
}

/// A registered tool: metadata, schemas, validator and handler.
pub struct ToolSpec {
    /// Declared metadata.
    pub meta: ToolMeta,
    /// How it uses a Workflow Session.
    pub session: SessionUse,
    /// Whether its calls are recorded in the session it names ([`Self::with_session`] derives
    /// it from the use, [`Self::with_business_pair`] declares it otherwise).
    pub business_pair: BusinessPair,
    /// JSON Schema (2020-12) of the arguments.
    pub input_schema: Arc<Map<String, Value>>,
    /// JSON Schema of the `output` field of a successful result.
    pub output_schema: Arc<Map<String, Value>>,
    /// Facts a successful call adds to its `tool_call_finished` events, derived from its
    /// output ([`Self::with_ledger_facts`]).
    pub ledger_facts: Option<LedgerFacts>,
    /// Which edit surface the tool is, for edit telemetry ([`Self::with_edit_surface`]).
    pub edit_surface: Option<EditSurface>,
    /// Whether the ledger facts are recorded for a failure that carries an output too (a
    /// lifecycle: the state a failed command left the shell in), not only for a success.
    pub facts_on_failure: bool,
    /// Arguments that never reach the ledger's argument summary (only their size does).
    pub private_arguments: &'static [&'static str],
    /// Whether and when a call may become a durable task ([`Self::with_task`]).
    pub task: Option<super::task::TaskSupport>,
    /// The compiled input schema, built on the tool's first call (compiling every tool's
    /// schema at start-up would delay every cold start for tools the instance may never run).
    validator: std::sync::OnceLock<jsonschema::Validator>,
    /// The input schema the validator checks, with the sentences that explain a refusal
    /// ([`wc_domain::text::PROBLEM_KEYWORD`]).
    pub(super) input_schema_value: Value,
    pub(super) handler: Handler,
}

/// The edit surfaces whose calls carry edit telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditSurface {
    /// Exact-text edits (`apply_text_edits`): the edit a model should reach for first.
    Canonical,
    /// Unified-diff patches (`apply_patch`).
    Advanced,
}

impl EditSurface {
    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EditSurface::Canonical => "canonical",
            EditSurface::Advanced => "advanced",
        }
    }
}

/// Derives, from a successful call's output, the bounded fields its `tool_call_finished`
/// events carry (exploration paths, changed paths). It must copy no content, pattern or
/// preview: only validated, bounded facts.
pub type LedgerFacts = fn(&Value) -> Map<String, Value>;

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.meta.name)
            .finish_non_exhaustive()
    }
}

/// JSON Schema 2020-12 for `T`, inlined (no `$ref`), without `$schema` and `title`, in the
/// portable form ([`Portable`]): the schema wc publishes.
pub fn schema_for<T: JsonSchema>() -> Map<String, Value> {
    let mut map = checked_schema_for::<T>();
    map.values_mut().for_each(without_problems);
    map
}

/// Drops every [`wc_domain::text::PROBLEM_KEYWORD`] below `node`: the sentences are for
/// refusals, not for readers of the schema.
pub(super) fn without_problems(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove(wc_domain::text::PROBLEM_KEYWORD);
            map.values_mut().for_each(without_problems);
        }
        Value::Array(items) => items.iter_mut().for_each(without_problems),
        _ => {}
    }
}

/// [`schema_for`] as the argument validator reads it: with the sentence each pattern's owner
/// gives a value that breaks it.
fn checked_schema_for<T: JsonSchema>() -> Map<String, Value> {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::RecursiveTransform(Portable))
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    let mut map = match schema.to_value() {
        Value::Object(map) => map,
        other => {
            let mut m = Map::new();
            m.insert("const".into(), other);
            m
        }
    };
    map.remove("title");
    map.remove("$schema");
    map
}

/// Rewrites a generated schema into the subset every MCP client and OpenAPI tool reads the
/// same way (clients that read `type` as one string reject or misread the rest, and Ajv warns
/// on formats it does not know):
///
/// - a `type` array (`["integer", "null"]`, how schemars spells `Option<T>`) becomes `anyOf`
///   with one branch per type, the constraints in the non-null branch and the annotations
///   (`description`, `default`, …) kept beside the `anyOf`;
/// - schemars' integer and float formats (`uint`, `uint32`, `int64`, `double`, …) are
///   dropped, their range kept as `minimum`/`maximum` where JSON numbers hold it exactly;
/// - a `const` or `enum` without a `type` gets its values' type, and an object schema
///   without one (an `anyOf` branch that only requires a property, an `if`) `"object"`;
/// - `unevaluatedProperties: false` (how schemars closes a struct with flattened parts, whose
///   properties it has already merged into `properties`) becomes `additionalProperties:
///   false`, which every reader knows;
/// - a description's line breaks, where its doc comment wrapped, become spaces (a blank line,
///   a new paragraph, stays).
///
/// The argument validator explains a failed nullable `anyOf` by its non-null branch
/// (`kernel::args`), so `invalid_arguments` still names the field and the rule it broke.
#[derive(Debug, Clone, Copy)]
pub struct Portable;

/// Keywords that describe a schema rather than constrain it: they stay beside an `anyOf`.
const ANNOTATIONS: [&str; 8] = [
    "description",
    "title",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

impl schemars::transform::Transform for Portable {
    fn transform(&mut self, schema: &mut schemars::Schema) {
        if let Some(object) = schema.as_object_mut() {
            portable_node(object);
        }
    }
}

fn portable_node(node: &mut Map<String, Value>) {
    if let Some(Value::String(text)) = node.get_mut("description")
        && text.contains('\n')
    {
        *text = text
            .split("\n\n")
            .map(|paragraph| paragraph.replace('\n', " "))
            .collect::<Vec<_>>()
            .join("\n\n");
    }
    if node.get("unevaluatedProperties") == Some(&Value::Bool(false))
        && node.contains_key("properties")
    {
        node.remove("unevaluatedProperties");
        node.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(format) = node.get("format").and_then(Value::as_str)
        && let Some((minimum, maximum)) = numeric_format_range(format)
    {
        node.remove("format");
        tighten(node, "minimum", minimum, |new, old| new > old);
        tighten(node, "maximum", maximum, |new, old| new < old);
    }
    if let Some(Value::Array(types)) = node.get("type").cloned() {
        let mut annotations = Map::new();
        let mut constraints = Map::new();
        for (key, value) in std::mem::take(node) {
            if key == "type" {
                continue;
            }
            if ANNOTATIONS.contains(&key.as_str()) {
                annotations.insert(key, value);
            } else {
                constraints.insert(key, value);
            }
        }
        let branches: Vec<Value> = types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| {
                let mut branch = Map::new();
                branch.insert("type".into(), json!(t));
                if t != "null" {
                    for (key, value) in &constraints {
                        branch.insert(key.clone(), without_null(key, value));
                    }
                }
                Value::Object(branch)
            })
            .collect();
        *node = annotations;
        if let [only] = branches.as_slice()
            && let Value::Object(only) = only
        {
            node.extend(only.clone());
        } else {
            node.insert("anyOf".into(), Value::Array(branches));
        }
    }
    if node.contains_key("type") {
        return;
    }
    let values: Vec<&Value> = match (node.get("const"), node.get("enum")) {
        (Some(c), _) => vec![c],
        (None, Some(Value::Array(options))) => options.iter().collect(),
        _ => Vec::new(),
    };
    if let Some(first) = values.first().map(|v| json_type(v))
        && values.iter().all(|v| json_type(v) == first)
    {
        node.insert("type".into(), json!(first));
        return;
    }
    let composed = ["anyOf", "oneOf", "allOf", "$ref", "const", "enum"]
        .iter()
        .any(|k| node.contains_key(*k));
    let objectish = ["properties", "required", "additionalProperties"]
        .iter()
        .any(|k| node.contains_key(*k));
    if objectish && !composed {
        node.insert("type".into(), json!("object"));
    }
}

/// The JSON Schema type of a value (`integer` for a number without a fraction).
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `null` taken out of an `enum` that also allowed it (it moves to its own branch).
fn without_null(key: &str, value: &Value) -> Value {
    match (key, value) {
        ("enum", Value::Array(options)) => {
            Value::Array(options.iter().filter(|o| !o.is_null()).cloned().collect())
        }
        _ => value.clone(),
    }
}

/// The range of a schemars numeric format, `None` for any other format. Bounds beyond 2^53
/// are left out: a JSON number cannot carry them exactly.
fn numeric_format_range(format: &str) -> Option<(Option<i64>, Option<i64>)> {
    Some(match format {
        "uint8" => (Some(0), Some(i64::from(u8::MAX))),
        "uint16" => (Some(0), Some(i64::from(u16::MAX))),
        "uint32" => (Some(0), Some(i64::from(u32::MAX))),
        "uint" | "uint64" | "uint128" => (Some(0), None),
        "int8" => (Some(i64::from(i8::MIN)), Some(i64::from(i8::MAX))),
        "int16" => (Some(i64::from(i16::MIN)), Some(i64::from(i16::MAX))),
        "int32" => (Some(i64::from(i32::MIN)), Some(i64::from(i32::MAX))),
        "int" | "int64" | "int128" | "float" | "double" => (None, None),
        _ => return None,
    })
}

/// Sets `node[key]` to `bound` unless it already holds one at least as tight.
fn tighten(
    node: &mut Map<String, Value>,
    key: &str,
    bound: Option<i64>,
    tighter: impl Fn(f64, f64) -> bool,
) {
    let Some(bound) = bound else { return };
    match node.get(key).and_then(Value::as_f64) {
        Some(old) if !tighter(bound as f64, old) => {}
        _ => {
            node.insert(key.into(), json!(bound));
        }
    }
}

impl ToolSpec {
    /// Builds a spec from a typed async handler. The input schema is generated from `A` and is
    /// the validator's schema too, so what the schema allows is exactly what parses.
    pub fn new<A, O, F, Fut>(meta: ToolMeta, handler: F) -> ToolSpec
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let mut checked_input = checked_schema_for::<A>();
        // The arguments struct's own doc ("Arguments of `x`") repeats the tool's name: the
        // tool's description says what it takes, the properties say the rest.
        checked_input.remove("description");
        let mut input_schema = checked_input.clone();
        input_schema.values_mut().for_each(without_problems);
        let mut output_schema = schema_for::<O>();
        // So does the result struct's ("What `x` returns"); a shared one says nothing of `x`.
        output_schema.remove("description");
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |ctx: ToolContext, args: Value| {
            let handler = handler.clone();
            Box::pin(async move {
                let args: A = serde_json::from_value(args).map_err(|e| {
                    ToolError::new(
                        ErrorKind::InvalidArguments,
                        format!("arguments do not parse: {e}"),
                    )
                })?;
                let out = handler(ctx, args).await?;
                serde_json::to_value(out).map_err(ToolError::internal)
            })
        });
        ToolSpec {
            meta,
            session: SessionUse::None,
            business_pair: BusinessPair::Never,
            input_schema_value: Value::Object(checked_input),
            input_schema: Arc::new(input_schema),
            output_schema: Arc::new(output_schema),
            ledger_facts: None,
            edit_surface: None,
            facts_on_failure: false,
            private_arguments: &[],
            task: None,
            validator: std::sync::OnceLock::new(),
            handler: erased,
        }
    }

    /// The argument validator, compiled on first use. Every tool's schema is compiled by a
    /// test, so the panic cannot happen in a released build.
    pub fn validator(&self) -> &jsonschema::Validator {
        self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.input_schema_value).unwrap_or_else(|e| {
                panic!(
                    "tool {}: input schema does not compile: {e}",
                    self.meta.name
                )
            })
        })
    }

    /// Declares how the tool uses its `session_id` argument (or, for [`SessionUse::Creates`],
    /// that it makes its session). A tool that works in the session's context
    /// ([`SessionUse::Works`]) is recorded there ([`BusinessPair::Always`]); every other use
    /// names a target ([`BusinessPair::Never`]) unless [`Self::with_business_pair`] says
    /// otherwise.
    pub fn with_session(mut self, session: SessionUse) -> ToolSpec {
        let names_a_session = self
            .input_schema
            .get("properties")
            .and_then(|p| p.get("session_id"))
            .is_some();
        assert!(
            names_a_session != (session == SessionUse::Creates),
            "tool {}: a tool that creates its session takes no session_id, every other session use needs one",
            self.meta.name
        );
        self.session = session;
        self.business_pair = match session {
            SessionUse::Works => BusinessPair::Always,
            _ => BusinessPair::Never,
        };
        self
    }

    /// Declares where the tool's calls are recorded besides an explicit recorder, for a tool
    /// whose [`SessionUse`] does not say it.
    pub fn with_business_pair(mut self, pair: BusinessPair) -> ToolSpec {
        assert!(
            !matches!(self.session, SessionUse::None | SessionUse::Creates)
                || pair == BusinessPair::Never,
            "tool {}: a tool that names no session has no business pair",
            self.meta.name
        );
        self.business_pair = pair;
        self
    }

    /// Declares the facts a successful call records in the ledger besides its outcome.
    pub fn with_ledger_facts(mut self, facts: LedgerFacts) -> ToolSpec {
        self.ledger_facts = Some(facts);
        self
    }

    /// Ledger facts recorded for every result with an output, success or not: lifecycle
    /// evidence (which state the call left its object in).
    pub fn with_lifecycle_facts(mut self, facts: LedgerFacts) -> ToolSpec {
        self.ledger_facts = Some(facts);
        self.facts_on_failure = true;
        self
    }

    /// Keeps `fields` of the arguments out of the ledger: the argument summary records only
    /// their size in bytes (`{"omitted": "private", "bytes": n}`).
    pub fn with_private_arguments(mut self, fields: &'static [&'static str]) -> ToolSpec {
        self.private_arguments = fields;
        self
    }

    /// Declares that a call may become a durable task (when the surface offers one), ended by
    /// `finish` from its ended work.
    pub fn with_task(
        mut self,
        when: super::task::TaskWhen,
        finish: super::task::FinishTask,
    ) -> ToolSpec {
        self.task = Some(super::task::TaskSupport { finish, when });
        self
    }

    /// Declares the tool an edit surface: its calls carry `edit_surface`, `edit_outcome` and
    /// `edit_conflict_kind` telemetry.
    pub fn with_edit_surface(mut self, surface: EditSurface) -> ToolSpec {
        self.edit_surface = Some(surface);
        self
    }

    /// The JSON Schema of the whole result (`{success, output, error}`), with `output` as this
    /// tool's output schema. This is the MCP `outputSchema`.
    pub fn result_schema(&self) -> Map<String, Value> {
        match json!({
            "type": "object",
            "properties": {
                "success": { "type": "boolean" },
                "output": Value::Object((*self.output_schema).clone()),
                "error": error_schema(),
                "session_attention": attention_schema(),
                "context_materials": { "type": "object" },
            },
            "required": ["success"],
        }) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }
}

/// Schema of the `session_attention` of a recorded call's result, kept short because every
/// tool's result schema carries it (the full shape is documented once, in docs/TOOLS.md and the
/// OpenAPI components).
pub fn attention_schema() -> Value {
    json!({
        "type": "object",
        "description": "Unresolved ACK-required messages of the recording session: echo their ids in ack_session_message_ids or resolve them."
    })
}

/// Schema of the `error` object of a failed result.
pub fn error_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "kind": { "type": "string" },
            "message": { "type": "string" },
        },
        "required": ["kind", "message"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Shade {
        Light,
        Dark,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        depth: u8,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// How many.
        #[schemars(range(min = 1, max = 500))]
        limit: Option<u32>,
        count: u64,
        offset: i32,
        ratio: f64,
        shade: Option<Shade>,
        inner: Option<Inner>,
        at: Option<chrono::DateTime<chrono::Utc>>,
    }

    #[test]
    fn generated_schemas_are_portable() {
        let schema = Value::Object(schema_for::<Sample>());
        let props = &schema["properties"];
        assert_eq!(
            props["limit"],
            json!({"description": "How many.", "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": 500},
                {"type": "null"}
            ]})
        );
        assert_eq!(props["count"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(
            props["offset"],
            json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX})
        );
        assert_eq!(props["ratio"], json!({"type": "number"}));
        let shade = props["shade"]["anyOf"].as_array().expect("shade is anyOf");
        assert!(shade.contains(&json!({"type": "null"})), "{shade:?}");
        assert!(
            shade.iter().all(|b| b["type"].is_string()
                && b.get("enum")
                    .is_none_or(|e| !e.as_array().unwrap().contains(&Value::Null))),
            "{shade:?}"
        );
        let inner = props["inner"]["anyOf"].as_array().expect("inner is anyOf");
        assert!(inner.contains(&json!({"type": "null"})), "{inner:?}");
        assert!(
            inner.iter().any(|b| b["type"] == "object"
                && b["properties"]["depth"]
                    == json!({"type": "integer", "minimum": 0, "maximum": 255})),
            "{inner:?}"
        );
        assert_eq!(
            props["at"],
            json!({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]})
        );
        // The validator still takes what the schema allows, and refuses the rest.
        let v = jsonschema::validator_for(&schema).unwrap();
        let ok = json!({"limit": null, "count": 3, "offset": -2, "ratio": 0.5, "shade": "dark",
                        "inner": {"depth": 9}, "at": "2026-01-01T00:00:00Z"});
        assert!(v.is_valid(&ok));
        for bad in [
            json!({"limit": 0, "count": 3, "offset": 0, "ratio": 0.5}),
            json!({"count": -1, "offset": 0, "ratio": 0.5}),
            json!({"count": 1, "offset": 0, "ratio": 0.5, "inner": {"depth": 256}}),
            json!({"count": 1, "offset": 0, "ratio": 0.5, "shade": "grey"}),
        ] {
            assert!(!v.is_valid(&bad), "{bad}");
        }
    }
}
