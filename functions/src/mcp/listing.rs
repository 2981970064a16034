//! MCP tool listings: the kernel's specs rendered as MCP tools, with the wrapper metadata of
//! the caller's protocol era projected into every input schema, built once per scope set and
//! era and shared.

use std::sync::{Arc, OnceLock};

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use crate::auth::{Scope, ScopeSet};
use crate::execution::ProjectOrSession;
use crate::kernel::Registry;
use crate::kernel::spec::ToolSpec;
use crate::kernel::wrapper::{self, Surface};

/// Which MCP contract a caller speaks: the wrapper fields published differ between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Before 2026-07-28 (the handshake era).
    Legacy,
    /// The stateless 2026-07-28 contract.
    Stateless,
}

impl Era {
    fn surface(self) -> Surface {
        match self {
            Era::Legacy => Surface::LegacyMcp,
            Era::Stateless => Surface::StatelessMcp,
        }
    }
}

/// Listings by scope set and era (a scope set is a small bitset, so a table indexed by it,
/// one per era).
pub struct Listings {
    registry: Arc<Registry>,
    legacy: Vec<OnceLock<Arc<Vec<Tool>>>>,
    stateless: Vec<OnceLock<Arc<Vec<Tool>>>>,
    every: Vec<Tool>,
}

impl Listings {
    /// Empty listings over `registry`.
    pub fn new(registry: Arc<Registry>) -> Self {
        let every = registry
            .specs()
            .iter()
            .map(|s| render(s, Era::Stateless))
            .collect();
        let slots = 1usize << Scope::ALL.len();
        Self {
            registry,
            legacy: (0..slots).map(|_| OnceLock::new()).collect(),
            stateless: (0..slots).map(|_| OnceLock::new()).collect(),
            every,
        }
    }

    /// The tools a holder of `scopes` sees in `era`, in name order.
    pub fn for_scopes(&self, scopes: ScopeSet, era: Era) -> Arc<Vec<Tool>> {
        let table = match era {
            Era::Legacy => &self.legacy,
            Era::Stateless => &self.stateless,
        };
        table[scopes.bits() as usize]
            .get_or_init(|| {
                Arc::new(
                    self.registry
                        .visible(scopes)
                        .map(|s| render(s, era))
                        .collect(),
                )
            })
            .clone()
    }

    /// Any registered tool by name, regardless of scope, as the stateless contract lists it
    /// (for `Mcp-Name` header validation, which exists only there).
    pub fn get(&self, name: &str) -> Option<Tool> {
        self.every.iter().find(|t| t.name == name).cloned()
    }
}

/// A spec's input schema as MCP lists it: the compact form ([`compact`]) of its schema, with
/// the wrapper fields of `era` added to its properties.
pub fn published_input_schema(spec: &ToolSpec, era: Era) -> Map<String, Value> {
    let mut schema = (*spec.input_schema).clone();
    let props = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        for (k, v) in wrapper::schema_properties(era.surface()) {
            props.entry(k).or_insert(v);
        }
    }
    compact(&mut schema);
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        for (name, said) in said_once() {
            if let Some(Value::Object(prop)) = props.get_mut(name)
                && prop.get("description") == said.get("description")
            {
                prop.remove("description");
            }
        }
    }
    schema
}

/// The properties whose description the server's instructions ([`wrapper::INSTRUCTIONS`]) say
/// once instead of every tool: the target every project tool takes ([`ProjectOrSession`]).
/// A tool that gives one of them its own meaning describes it in its own words, and keeps them.
fn said_once() -> &'static Map<String, Value> {
    static SAID: OnceLock<Map<String, Value>> = OnceLock::new();
    SAID.get_or_init(|| {
        match crate::kernel::spec::schema_for::<ProjectOrSession>().remove("properties") {
            Some(Value::Object(props)) => props,
            _ => Map::new(),
        }
    })
}

/// Rewrites a schema into the form a model reads to choose and call a tool: every property,
/// type, bound, enum and description stays; what only a validator reads goes. The full schema
/// is the OpenAPI document's and docs/TOOLS.md's, and the argument validator checks it (a
/// value the compact form lets through is refused there with a sentence that says why):
///
/// - `pattern`, `minLength` and `maxLength` go (models follow the description, which states
///   the bounds a caller meets, not a regular expression), and so does every `not` whose
///   subschema this rewrite would loosen (a looser `not` forbids more);
/// - an optional value's `anyOf` of the value and `null` becomes the value's schema (leaving
///   a field out is how a caller says nothing; `null` is still accepted);
/// - a `oneOf` of described constants becomes one `enum`;
/// - below the arguments object, `additionalProperties: false` goes (the arguments object
///   keeps it: it says which arguments exist at all);
/// - a branch of `anyOf`, `oneOf` or `allOf` keeps what it requires, not the schemas of
///   properties its parent already lists (`anyOf: [{required: [project]}, …]`).
fn compact(node: &mut Map<String, Value>) {
    for validator_only in ["pattern", "minLength", "maxLength"] {
        node.remove(validator_only);
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = node.get_mut(key) {
            children.values_mut().for_each(compact_value);
        }
    }
    for key in [
        "items",
        "additionalProperties",
        "if",
        "then",
        "else",
        "contains",
    ] {
        if let Some(child) = node.get_mut(key) {
            compact_value(child);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(branches)) = node.get_mut(key) {
            branches.iter_mut().for_each(compact_value);
        }
    }
    if let Some(Value::Object(listed)) = node.get("properties") {
        let listed: Vec<String> = listed.keys().cloned().collect();
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(branches)) = node.get_mut(key) {
                branches.iter_mut().for_each(|b| drop_restated(b, &listed));
            }
        }
    }
    if let Some(not) = node.get("not") {
        let mut compacted = not.clone();
        compact_value(&mut compacted);
        if &compacted != not {
            node.remove("not");
        }
    }
    if let Some(value) = optional_value(node) {
        node.remove("anyOf");
        for (key, constraint) in value {
            node.entry(key).or_insert(constraint);
        }
    }
    if let Some(Value::Array(branches)) = node.get("oneOf")
        && let Some(values) = branches
            .iter()
            .map(|b| b.get("const").cloned())
            .collect::<Option<Vec<Value>>>()
        && let Some(Value::String(kind)) = branches.first().and_then(|b| b.get("type")).cloned()
        && branches
            .iter()
            .all(|b| b.get("type") == Some(&Value::String(kind.clone())))
    {
        node.remove("oneOf");
        node.insert("type".into(), Value::String(kind));
        node.insert("enum".into(), Value::Array(values));
    }
}

/// Drops, from a branch and the branches below it, the schemas of properties in `listed`.
fn drop_restated(branch: &mut Value, listed: &[String]) {
    let Value::Object(branch) = branch else {
        return;
    };
    if let Some(Value::Object(props)) = branch.get_mut("properties") {
        props.retain(|name, _| !listed.contains(name));
        if props.is_empty() {
            branch.remove("properties");
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = branch.get_mut(key) {
            branches.iter_mut().for_each(|b| drop_restated(b, listed));
        }
    }
}

fn compact_value(node: &mut Value) {
    if let Value::Object(map) = node {
        if map.get("additionalProperties") == Some(&Value::Bool(false)) {
            map.remove("additionalProperties");
        }
        compact(map);
    }
}

/// The value's schema of an `anyOf` of a value and `null`.
fn optional_value(node: &Map<String, Value>) -> Option<Map<String, Value>> {
    let Some(Value::Array(branches)) = node.get("anyOf") else {
        return None;
    };
    match branches.as_slice() {
        [Value::Object(value), null] | [null, Value::Object(value)] if is_null_type(null) => {
            Some(value.clone())
        }
        _ => None,
    }
}

fn is_null_type(schema: &Value) -> bool {
    schema
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.get("type") == Some(&Value::from("null")))
}

/// Whether a spec's own arguments already use a wrapper field name (such a tool cannot be
/// called with wrapper metadata: the call is refused as invalid params).
pub fn conflicts_with_wrapper(spec: &ToolSpec) -> Option<&'static str> {
    let props = spec.input_schema.get("properties")?.as_object()?;
    wrapper::WRAPPER_FIELDS
        .into_iter()
        .find(|f| props.contains_key(*f))
}

/// The output schema every tool lists: the result envelope, one shape for all of them
/// (`success`, and `output` and `error` objects). Each tool's own output schema (every field,
/// constraint and description) is in docs/TOOLS.md and the OpenAPI document, and the error's
/// in docs/ERRORS.md: the listing is what a model reads to choose and call a tool, and a
/// client validates a result's envelope by it.
fn listed_result_schema() -> Map<String, Value> {
    match serde_json::json!({
        "type": "object",
        "properties": {
            "success": { "type": "boolean" },
            "output": { "type": "object" },
            "error": { "type": "object" },
        },
        "required": ["success"],
    }) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn render(spec: &ToolSpec, era: Era) -> Tool {
    let m = &spec.meta;
    // Hints are listed where they differ from the protocol's defaults (readOnly false,
    // destructive true, idempotent false, openWorld true), which say the rest. The 2026-07-28
    // contract reads the tool's own `title`; earlier clients may read only the annotation's.
    let mut annotations = ToolAnnotations::default();
    if era == Era::Legacy {
        annotations.title = Some(m.title.to_owned());
    }
    annotations.read_only_hint = m.read_only().then_some(true);
    annotations.destructive_hint = (!m.read_only() && !m.is_consequential()).then_some(false);
    annotations.idempotent_hint = m.read_only().then_some(true);
    annotations.open_world_hint = Some(false);
    Tool::new_with_raw(
        m.name,
        Some(m.description.into()),
        Arc::new(published_input_schema(spec, era)),
    )
    .with_title(m.title)
    .with_raw_output_schema(Arc::new(listed_result_schema()))
    .with_annotations(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every `pattern` keyword below `node` (property names are not keywords).
    fn patterns(node: &Value) -> usize {
        match node {
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("pattern", Value::String(_)) => 1,
                    ("properties", Value::Object(props)) => props.values().map(patterns).sum(),
                    _ => patterns(v),
                })
                .sum(),
            Value::Array(items) => items.iter().map(patterns).sum(),
            _ => 0,
        }
    }

    #[test]
    fn listed_input_schemas_are_the_compact_form_of_the_full_ones() {
        // The fact this test keeps true; flipping it means rewriting the test.
        const { assert!(crate::audit::COMPACT_SCHEMAS) };
        let mut full_bytes = 0;
        let mut listed_bytes = 0;
        for spec in crate::tools::all() {
            let name = spec.meta.name;
            for era in [Era::Legacy, Era::Stateless] {
                let listed = published_input_schema(&spec, era);
                // Every argument is listed, and what is required is required.
                let listed_props = listed["properties"].as_object().unwrap();
                let own = spec
                    .input_schema
                    .get("properties")
                    .and_then(Value::as_object);
                for prop in own.into_iter().flat_map(|p| p.keys()) {
                    assert!(listed_props.contains_key(prop), "{name} {prop}");
                }
                assert_eq!(
                    listed.get("required"),
                    spec.input_schema.get("required"),
                    "{name}"
                );
                assert_eq!(
                    listed.get("anyOf").is_some(),
                    spec.input_schema.get("anyOf").is_some()
                );
                assert_eq!(patterns(&Value::Object(listed.clone())), 0, "{name}");
                let text = serde_json::to_string(&listed).unwrap();
                assert!(!text.contains(r#"{"type":"null"}"#), "{name}: {text}");
                full_bytes += serde_json::to_string(&*spec.input_schema).unwrap().len();
                listed_bytes += text.len();
            }
        }
        assert!(listed_bytes < full_bytes, "{listed_bytes} >= {full_bytes}");
    }

    #[test]
    fn the_compact_form_accepts_what_the_validator_accepts_and_leaves_refusals_to_it() {
        let spec = crate::tools::all()
            .into_iter()
            .find(|s| s.meta.name == "run_job")
            .unwrap();
        let listed = Value::Object(published_input_schema(&spec, Era::Legacy));
        let listed = jsonschema::validator_for(&listed).unwrap();
        let good =
            json!({"project": "agent:local:p", "command": "ls", "cwd": "src", "shell": "bash"});
        assert!(spec.validator().is_valid(&good));
        assert!(listed.is_valid(&good));
        // Both still refuse what either form can say: an unknown shell, both command and argv,
        // no target, an unknown argument.
        for bad in [
            json!({"project": "agent:local:p", "command": "ls", "shell": "zsh"}),
            json!({"project": "agent:local:p", "command": "ls", "argv": ["ls"]}),
            json!({"command": "ls"}),
            json!({"project": "agent:local:p", "command": "ls", "old": 1}),
        ] {
            assert!(!spec.validator().is_valid(&bad), "{bad}");
            assert!(!listed.is_valid(&bad), "{bad}");
        }
        // A path's form is the validator's to explain.
        let absolute = json!({"project": "agent:local:p", "command": "ls", "cwd": "/etc"});
        assert!(!spec.validator().is_valid(&absolute));
        assert!(listed.is_valid(&absolute));
    }

    #[test]
    fn the_shared_target_is_described_once_in_the_instructions() {
        let said = said_once();
        assert!(said.contains_key("project") && said.contains_key("session_id"));
        for word in ["project", "session_id", "agent:<runner>:<name>"] {
            assert!(wrapper::INSTRUCTIONS.contains(word), "{word}");
        }
        let spec = crate::tools::all()
            .into_iter()
            .find(|s| s.meta.name == "git_status")
            .unwrap();
        let listed = published_input_schema(&spec, Era::Stateless);
        for name in ["project", "session_id"] {
            // The full schema describes it; the listing leaves that to the instructions.
            assert!(
                spec.input_schema["properties"][name]
                    .get("description")
                    .is_some()
            );
            assert!(
                listed["properties"][name].get("description").is_none(),
                "{name}"
            );
        }
        // A tool that gives `session_id` its own meaning keeps its own words.
        let board = crate::tools::all()
            .into_iter()
            .find(|s| s.meta.name == "list_session_messages")
            .unwrap();
        let listed = published_input_schema(&board, Era::Stateless);
        assert!(
            listed["properties"]["session_id"]
                .get("description")
                .is_some()
        );
    }

    #[test]
    fn no_registered_tool_is_a_gateway() {
        const { assert!(!crate::audit::GATEWAY_TOOL_INCLUDED) };
        // A gateway takes another tool's name and free-form arguments to pass on.
        for spec in crate::tools::all() {
            let props = spec
                .input_schema
                .get("properties")
                .and_then(Value::as_object);
            let takes_arguments = props.is_some_and(|p| p.contains_key("arguments"));
            assert!(!takes_arguments, "{} looks like a gateway", spec.meta.name);
        }
    }

    #[test]
    fn only_the_stateless_era_lists_the_context_request_sidecar() {
        for spec in crate::tools::all() {
            let legacy = published_input_schema(&spec, Era::Legacy);
            let stateless = published_input_schema(&spec, Era::Stateless);
            let name = spec.meta.name;
            assert!(
                legacy["properties"].get("context_request").is_none(),
                "{name}"
            );
            assert!(
                stateless["properties"]["context_request"].is_object(),
                "{name}"
            );
            for field in ["recording_session_id", "ack_session_message_ids"] {
                assert!(legacy["properties"][field].is_object(), "{name} {field}");
                assert!(stateless["properties"][field].is_object(), "{name} {field}");
            }
        }
    }

    #[test]
    fn every_tool_lists_the_result_envelope_its_results_validate_against() {
        let listed = Value::Object(listed_result_schema());
        let validator = jsonschema::validator_for(&listed).unwrap();
        let ok =
            json!({"success": true, "output": {"projects": [], "returned": 0, "truncated": false}});
        let failed = json!({"success": false, "error": {"kind": "not_found", "message": "gone"}});
        assert!(validator.is_valid(&ok));
        assert!(validator.is_valid(&failed));
        for bad in [
            json!({"output": {}}),
            json!({"success": "yes"}),
            json!({"success": true, "output": []}),
        ] {
            assert!(!validator.is_valid(&bad), "{bad}");
        }
        // Each tool's own output schema is the OpenAPI document's and the docs'.
        for spec in crate::tools::all() {
            assert_eq!(
                spec.result_schema()["properties"]["output"],
                Value::Object((*spec.output_schema).clone())
            );
        }
    }
}
