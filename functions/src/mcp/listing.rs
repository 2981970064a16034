//! MCP tool listings: the kernel's specs rendered as MCP tools, with the wrapper metadata of
//! the caller's protocol era projected into every input schema, built once per scope set and
//! era and shared.

use std::sync::{Arc, OnceLock};

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use crate::auth::{Scope, ScopeSet};
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

/// A spec's input schema with the wrapper fields of `era` added to its properties.
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
    schema
}

/// Whether a spec's own arguments already use a wrapper field name (such a tool cannot be
/// called with wrapper metadata: the call is refused as invalid params).
pub fn conflicts_with_wrapper(spec: &ToolSpec) -> Option<&'static str> {
    let props = spec.input_schema.get("properties")?.as_object()?;
    wrapper::WRAPPER_FIELDS
        .into_iter()
        .find(|f| props.contains_key(*f))
}

/// An output schema as listed: the result envelope (`success`, `error` naming its fields,
/// `session_attention`) with `output` an object naming the fields a successful output always
/// has. The full output
/// schemas (every field, constraint and description) are in docs/TOOLS.md and the OpenAPI
/// document; the listing carries what a client needs to validate the envelope, and stays small
/// enough to hold every tool (models read input schemas, clients validate results).
fn listed_result_schema(spec: &ToolSpec) -> Map<String, Value> {
    let mut output = Map::new();
    output.insert("type".into(), Value::from("object"));
    if let Some(required) = spec.output_schema.get("required") {
        output.insert("required".into(), required.clone());
    }
    let mut result = spec.result_schema();
    if let Some(Value::Object(props)) = result.get_mut("properties") {
        props.insert("output".into(), Value::Object(output));
        // The error's fields are documented once (docs/ERRORS.md); its two required names stay.
        props.insert(
            "error".into(),
            serde_json::json!({ "type": "object", "required": ["kind", "message"] }),
        );
        if let Some(Value::Object(attention)) = props.get_mut("session_attention") {
            attention.remove("description");
        }
        // The context sidecar answers only requests that ask for it.
        props.remove("context_materials");
    }
    result
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
    annotations.destructive_hint = (!m.read_only() && !m.consequential()).then_some(false);
    annotations.idempotent_hint = m.read_only().then_some(true);
    annotations.open_world_hint = Some(false);
    Tool::new_with_raw(
        m.name,
        Some(m.description.into()),
        Arc::new(published_input_schema(spec, era)),
    )
    .with_title(m.title)
    .with_raw_output_schema(Arc::new(listed_result_schema(spec)))
    .with_annotations(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listed_input_schemas_are_complete() {
        // The fact this test keeps true; flipping it means rewriting the test.
        const { assert!(!crate::audit::COMPACT_SCHEMAS) };
        for spec in crate::tools::all() {
            for era in [Era::Legacy, Era::Stateless] {
                let listed = published_input_schema(&spec, era);
                for (key, value) in spec.input_schema.iter() {
                    if key == "properties" {
                        let props = listed[key].as_object().unwrap();
                        for (name, schema) in value.as_object().unwrap() {
                            assert_eq!(props.get(name), Some(schema), "{} {name}", spec.meta.name);
                        }
                    } else {
                        assert_eq!(listed.get(key), Some(value), "{} {key}", spec.meta.name);
                    }
                }
            }
        }
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
    fn listed_output_schemas_are_the_result_envelope_naming_the_output_fields() {
        for spec in crate::tools::all() {
            let listed = Value::Object(listed_result_schema(&spec));
            let name = spec.meta.name;
            assert_eq!(listed["required"], json!(["success"]), "{name}");
            assert_eq!(listed["properties"]["success"]["type"], "boolean", "{name}");
            assert_eq!(
                listed["properties"]["error"]["required"],
                json!(["kind", "message"])
            );
            let output = &listed["properties"]["output"];
            assert_eq!(output["type"], "object", "{name}");
            assert_eq!(
                output.get("required"),
                spec.output_schema.get("required"),
                "{name}"
            );
            assert!(output.get("properties").is_none(), "{name}");
        }
        // A real result validates against its listed schema.
        let spec = crate::tools::all()
            .into_iter()
            .find(|s| s.meta.name == "list_projects")
            .unwrap();
        let listed = Value::Object(listed_result_schema(&spec));
        let ok =
            json!({"success": true, "output": {"projects": [], "returned": 0, "truncated": false}});
        let bad = json!({"success": true, "output": {}});
        let validator = jsonschema::validator_for(&listed).unwrap();
        assert!(validator.is_valid(&ok));
        assert!(
            !validator.is_valid(&bad),
            "a missing output field must not validate"
        );
    }
}
