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
    .with_raw_output_schema(Arc::new(spec.result_schema()))
    .with_annotations(annotations)
}
