//! MCP tool listings: the kernel's specs rendered as MCP tools, with the wrapper metadata
//! projected into every input schema, built once per scope set and shared.

use std::sync::{Arc, OnceLock};

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use crate::auth::{Scope, ScopeSet};
use crate::kernel::ToolRuntime;
use crate::kernel::spec::ToolSpec;
use crate::kernel::wrapper;

/// Listings by scope set (a scope set is a small bitset, so a table indexed by it).
pub struct Listings {
    runtime: Arc<ToolRuntime>,
    by_scopes: Vec<OnceLock<Arc<Vec<Tool>>>>,
    every: Vec<Tool>,
}

impl Listings {
    /// Empty listings over `runtime`.
    pub fn new(runtime: Arc<ToolRuntime>) -> Self {
        let every = runtime.specs().iter().map(|s| render(s)).collect();
        let slots = 1usize << Scope::ALL.len();
        Self {
            runtime,
            by_scopes: (0..slots).map(|_| OnceLock::new()).collect(),
            every,
        }
    }

    /// The tools a holder of `scopes` sees, in name order.
    pub fn for_scopes(&self, scopes: ScopeSet) -> Arc<Vec<Tool>> {
        self.by_scopes[scopes.bits() as usize]
            .get_or_init(|| Arc::new(self.runtime.visible(scopes).map(|s| render(s)).collect()))
            .clone()
    }

    /// Any registered tool by name, regardless of scope (for header validation).
    pub fn get(&self, name: &str) -> Option<Tool> {
        self.every.iter().find(|t| t.name == name).cloned()
    }
}

/// A spec's input schema with the wrapper fields added to its properties.
pub fn published_input_schema(spec: &ToolSpec) -> Map<String, Value> {
    let mut schema = (*spec.input_schema).clone();
    let props = schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(props) = props {
        for (k, v) in wrapper::schema_properties() {
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

/// An output schema as listed: the same constraints without the `description` keywords (they
/// are in docs/TOOLS.md; clients validate results against the shape, and the listing stays
/// small). A property that happens to be *named* `description` is kept.
fn without_descriptions(mut schema: Map<String, Value>) -> Map<String, Value> {
    fn strip(node: &mut Value) {
        let Value::Object(map) = node else { return };
        map.remove("description");
        for (key, child) in map.iter_mut() {
            match (key.as_str(), child) {
                ("properties" | "$defs" | "patternProperties", Value::Object(props)) => {
                    props.values_mut().for_each(strip)
                }
                (_, Value::Array(items)) => items.iter_mut().for_each(strip),
                (_, child @ Value::Object(_)) => strip(child),
                _ => {}
            }
        }
    }
    let mut root = Value::Object(std::mem::take(&mut schema));
    strip(&mut root);
    match root {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn render(spec: &ToolSpec) -> Tool {
    let m = &spec.meta;
    let mut annotations = ToolAnnotations::default();
    annotations.title = Some(m.title.to_owned());
    annotations.read_only_hint = Some(m.read_only);
    annotations.destructive_hint = Some(!m.read_only && m.consequential);
    annotations.idempotent_hint = Some(m.read_only);
    annotations.open_world_hint = Some(false);
    Tool::new_with_raw(
        m.name,
        Some(m.description.into()),
        Arc::new(published_input_schema(spec)),
    )
    .with_title(m.title)
    .with_raw_output_schema(Arc::new(without_descriptions(spec.result_schema())))
    .with_annotations(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn listed_output_schemas_drop_descriptions_but_keep_every_constraint() {
        let schema = json!({
            "type": "object",
            "description": "root",
            "properties": {
                "description": {"type": "string", "description": "a property named description", "maxLength": 3},
                "items": {"type": "array", "items": {"type": "object", "description": "x",
                          "properties": {"a": {"anyOf": [{"type": "null", "description": "y"}, {"type": "integer"}]}}}}
            },
            "required": ["description"]
        });
        let Value::Object(map) = schema else {
            unreachable!()
        };
        let stripped = Value::Object(without_descriptions(map));
        assert_eq!(
            stripped,
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "maxLength": 3},
                    "items": {"type": "array", "items": {"type": "object",
                              "properties": {"a": {"anyOf": [{"type": "null"}, {"type": "integer"}]}}}}
                },
                "required": ["description"]
            })
        );
    }
}
