//! Tool specifications: what a tool is called, what it takes and returns, who may call it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::context::ToolContext;
use super::result::{ErrorKind, ToolError};
use crate::auth::Scope;

/// Coarse grouping of tools, shown in listings and telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// Finding out what exists: tools, projects, status.
    Discovery,
    /// Workflow Session lifecycle, ledger and handoff.
    Session,
    /// Running processes, shells, scripts and jobs on build hosts.
    Execution,
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
            Category::Conformance => "conformance",
        }
    }
}

/// What a tool declares about itself.
#[derive(Debug, Clone, Copy)]
pub struct ToolMeta {
    /// Wire name, snake_case.
    pub name: &'static str,
    /// Human-readable title.
    pub title: &'static str,
    /// What it does, for models (REST descriptions are cut to 300 characters).
    pub description: &'static str,
    /// Grouping.
    pub category: Category,
    /// Scopes the caller must hold, all of them.
    pub scopes: &'static [Scope],
    /// Whether it only reads.
    pub read_only: bool,
    /// Whether its effect is consequential (GPT Actions ask before calling it).
    pub consequential: bool,
    /// Whether it gets a named REST operation (at most 28 do; the rest go through
    /// `callRuntimeTool`).
    pub rest_operation: bool,
}

type Handler = Arc<
    dyn Fn(ToolContext, Value) -> Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send>>
        + Send
        + Sync,
>;

/// How a tool uses the Workflow Session named by its `session_id` argument. The kernel loads
/// and authorizes that session before dispatch and records the call's business event pair in
/// it.
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

/// A registered tool: metadata, schemas, validator and handler.
pub struct ToolSpec {
    /// Declared metadata.
    pub meta: ToolMeta,
    /// How it uses a Workflow Session.
    pub session: SessionUse,
    /// Whether it writes its business event pair inside its own transaction
    /// ([`Self::with_inline_evidence`]).
    pub inline_evidence: bool,
    /// JSON Schema (2020-12) of the arguments.
    pub input_schema: Arc<Map<String, Value>>,
    /// JSON Schema of the `output` field of a successful result.
    pub output_schema: Arc<Map<String, Value>>,
    /// The compiled input schema, built on the tool's first call (compiling every tool's
    /// schema at start-up would delay every cold start for tools the instance may never run).
    validator: std::sync::OnceLock<jsonschema::Validator>,
    /// The input schema as a value, for explaining validation errors.
    pub(super) input_schema_value: Value,
    pub(super) handler: Handler,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.meta.name)
            .finish_non_exhaustive()
    }
}

/// JSON Schema 2020-12 for `T`, inlined (no `$ref`), without `$schema` and `title`.
pub fn schema_for<T: JsonSchema>() -> Map<String, Value> {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
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
        let input_schema = schema_for::<A>();
        let output_schema = schema_for::<O>();
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
            inline_evidence: false,
            input_schema_value: Value::Object(input_schema.clone()),
            input_schema: Arc::new(input_schema),
            output_schema: Arc::new(output_schema),
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
    /// that it makes its session).
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
        self
    }

    /// Declares that the tool's effect is a change of its business session that writes the
    /// call's business pair in the same transaction (`ToolContext::inline_pair`); when it
    /// writes nothing, the kernel writes the pair after the call.
    pub fn with_inline_evidence(mut self) -> ToolSpec {
        assert!(
            matches!(self.session, SessionUse::Changes) && !self.meta.read_only,
            "tool {}: inline evidence is for tools that change their business session",
            self.meta.name
        );
        self.inline_evidence = true;
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
