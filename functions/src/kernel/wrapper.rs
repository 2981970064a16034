//! Wrapper metadata: fields a host may add to any tool call's arguments that belong to the
//! runtime, not to the tool. They are split off before the tool's own arguments are parsed.
//!
//! - `recording_session_id` — a Workflow Session to record this call in.
//! - `ack_session_message_ids` — at most 8 ACK-required session message ids this request
//!   acknowledges.
//! - `context_request` — a bounded request for context material.

use schemars::JsonSchema;
use serde_json::{Map, Value, json};
use wc_domain::{MessageId, SessionId};

/// Names of the wrapper fields.
pub const WRAPPER_FIELDS: [&str; 3] = [
    "recording_session_id",
    "ack_session_message_ids",
    "context_request",
];

/// Most ids one request may acknowledge.
pub const MAX_ACK_IDS: usize = 8;
/// Most materials one context request may name.
pub const MAX_CONTEXT_MATERIALS: usize = 8;

/// Wrapper metadata of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrapperMeta {
    /// Session to record the call in.
    pub recording_session_id: Option<SessionId>,
    /// Messages acknowledged by this request.
    pub ack_session_message_ids: Vec<MessageId>,
    /// Context materials requested.
    pub context_materials: Vec<String>,
}

/// A malformed wrapper field; on MCP this is `-32602 invalid params`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct WrapperError {
    /// The offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// Removes the wrapper fields from `args` and validates them.
pub fn split(args: &mut Map<String, Value>) -> Result<WrapperMeta, WrapperError> {
    let mut meta = WrapperMeta::default();
    if let Some(v) = args.remove("recording_session_id") {
        let id = v
            .as_str()
            .ok_or("must be a string".to_owned())
            .and_then(|s| SessionId::parse(s).map_err(|e| e.problem));
        match id {
            Ok(id) => meta.recording_session_id = Some(id),
            Err(problem) => {
                return Err(WrapperError {
                    field: "recording_session_id",
                    problem,
                });
            }
        }
    }
    if let Some(v) = args.remove("ack_session_message_ids") {
        let Some(items) = v.as_array() else {
            return Err(WrapperError {
                field: "ack_session_message_ids",
                problem: "must be an array".into(),
            });
        };
        if items.len() > MAX_ACK_IDS {
            return Err(WrapperError {
                field: "ack_session_message_ids",
                problem: format!("at most {MAX_ACK_IDS} ids per request"),
            });
        }
        for item in items {
            match item.as_str().map(MessageId::parse) {
                Some(Ok(id)) => meta.ack_session_message_ids.push(id),
                Some(Err(e)) => {
                    return Err(WrapperError {
                        field: "ack_session_message_ids",
                        problem: format!("every item {}", e.problem),
                    });
                }
                None => {
                    return Err(WrapperError {
                        field: "ack_session_message_ids",
                        problem: "every item must be a session message id (a string)".into(),
                    });
                }
            }
        }
    }
    if let Some(v) = args.remove("context_request") {
        let materials = v.as_object().and_then(|o| {
            if o.keys().any(|k| k != "materials") {
                return None;
            }
            match o.get("materials") {
                None => Some(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect(),
                Some(_) => None,
            }
        });
        match materials {
            Some(m)
                if m.len() <= MAX_CONTEXT_MATERIALS
                    && m.iter().all(|s| !s.is_empty() && s.chars().count() <= 64) =>
            {
                meta.context_materials = m;
            }
            _ => {
                return Err(WrapperError {
                    field: "context_request",
                    problem: format!(
                        "must be {{\"materials\": [string…]}} with at most {MAX_CONTEXT_MATERIALS} names of 1-64 characters"
                    ),
                });
            }
        }
    }
    Ok(meta)
}

/// A published contract that projects wrapper fields into tool input schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// MCP before 2026-07-28 (the handshake era).
    LegacyMcp,
    /// The stateless 2026-07-28 MCP contract.
    StatelessMcp,
    /// The REST actions and their OpenAPI document.
    Rest,
}

impl Surface {
    /// Whether `field` is part of this surface's published contract. The `context_request`
    /// sidecar belongs to the stateless MCP contract only; REST takes only the recorder.
    pub fn publishes(self, field: &str) -> bool {
        match self {
            Surface::StatelessMcp => true,
            Surface::LegacyMcp => field != "context_request",
            Surface::Rest => field == "recording_session_id",
        }
    }
}

/// JSON Schema of the wrapper fields `surface` publishes, added to every runtime tool's
/// input schema there. MCP listings carry them without descriptions: the same three fields
/// on every tool are described once, in the server's instructions ([`INSTRUCTIONS`]), so the
/// listing's bytes go to the tools' own arguments.
pub fn schema_properties(surface: Surface) -> Map<String, Value> {
    let mut all = all_schema_properties();
    all.retain(|field, _| surface.publishes(field));
    if surface != Surface::Rest {
        for schema in all.values_mut() {
            if let Some(schema) = schema.as_object_mut() {
                schema.remove("description");
            }
        }
    }
    all
}

/// What the MCP server's instructions say about the wrapper fields every tool takes.
pub const INSTRUCTIONS: &str = "Tools that act on a project take project (its id, \
     agent:<runner>:<name>, from list_projects) or session_id (a Workflow Session to work in: \
     its project, defaults and ledger). Every tool also takes recording_session_id (a Workflow \
     Session to record the call in) and ack_session_message_ids (ACK-required session messages \
     the call acknowledges); on 2026-07-28, context_request {materials} adds named materials \
     (project.instructions, webcodex.workflow, …) to the result.";

/// The published schema of a domain type, as its own `JsonSchema` impl writes it.
fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = T::json_schema(&mut schemars::SchemaGenerator::default()).to_value();
    super::spec::without_problems(&mut schema);
    schema
}

fn all_schema_properties() -> Map<String, Value> {
    let mut recording = schema_of::<SessionId>();
    recording["description"] = "Session to record this call in.".into();
    match json!({
        "recording_session_id": recording,
        "ack_session_message_ids": {
            "type": "array",
            "maxItems": MAX_ACK_IDS,
            "items": schema_of::<MessageId>(),
            "description": "Session messages this call acknowledges."
        },
        "context_request": {
            "type": "object",
            "properties": {
                "materials": {
                    "type": "array",
                    "maxItems": MAX_CONTEXT_MATERIALS,
                    "items": { "type": "string", "minLength": 1, "maxLength": 64 }
                }
            },
            "additionalProperties": false,
            "description": "Materials to add to the result."
        }
    }) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID: &str = "wc_sess_abc-1AAAAAAAAAAAAAAAAAAAA";

    fn msg(i: usize) -> String {
        format!("wc_msg_{i:0>22}")
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn wrappers_are_removed_and_the_rest_is_left_alone() {
        let mut args = obj(json!({
            "project": "p",
            "recording_session_id": SID,
            "ack_session_message_ids": [msg(1), msg(2)],
            "context_request": {"materials": ["webcodex.workflow"]}
        }));
        let meta = split(&mut args).unwrap();
        assert_eq!(args, obj(json!({"project": "p"})));
        assert_eq!(meta.recording_session_id.unwrap().as_str(), SID);
        assert_eq!(meta.ack_session_message_ids.len(), 2);
        assert_eq!(meta.context_materials, ["webcodex.workflow"]);
    }

    #[test]
    fn material_names_are_bounded_in_characters_like_the_schema() {
        // 64 four-byte characters: 256 bytes, yet within the published maxLength of 64.
        let wide = "\u{1D57F}".repeat(64);
        let meta = split(&mut obj(json!({"context_request": {"materials": [wide]}}))).unwrap();
        assert_eq!(meta.context_materials[0].chars().count(), 64);
        let over = "\u{1D57F}".repeat(65);
        let err = split(&mut obj(json!({"context_request": {"materials": [over]}}))).unwrap_err();
        assert_eq!(err.field, "context_request");
    }

    #[test]
    fn malformed_wrappers_are_refused() {
        let nine: Vec<String> = (0..9).map(msg).collect();
        for (bad, field) in [
            (
                json!({"recording_session_id": "sess_1"}),
                "recording_session_id",
            ),
            (
                json!({"recording_session_id": "wc_sess_"}),
                "recording_session_id",
            ),
            (
                json!({"recording_session_id": "wc_sess_short"}),
                "recording_session_id",
            ),
            (
                json!({"ack_session_message_ids": ["wc_msg_1"]}),
                "ack_session_message_ids",
            ),
            (json!({"recording_session_id": 5}), "recording_session_id"),
            (
                json!({"ack_session_message_ids": nine}),
                "ack_session_message_ids",
            ),
            (
                json!({"ack_session_message_ids": ["wc_msg_a b"]}),
                "ack_session_message_ids",
            ),
            (
                json!({"ack_session_message_ids": msg(1)}),
                "ack_session_message_ids",
            ),
            (
                json!({"context_request": {"materials": "x"}}),
                "context_request",
            ),
            (json!({"context_request": {"other": []}}), "context_request"),
        ] {
            let err = split(&mut obj(bad.clone())).unwrap_err();
            assert_eq!(err.field, field, "{bad}");
        }
    }

    #[test]
    fn the_published_schema_accepts_what_split_accepts() {
        let schema = json!({"type": "object", "properties": schema_properties(Surface::StatelessMcp), "additionalProperties": false});
        let v = jsonschema::validator_for(&schema).unwrap();
        let good = json!({"recording_session_id": SID, "ack_session_message_ids": [msg(7)], "context_request": {"materials": ["m"]}});
        assert!(v.is_valid(&good));
        assert!(split(&mut obj(good)).is_ok());
        for bad in [
            json!({"recording_session_id": "wc_sess_x"}),
            json!({"ack_session_message_ids": ["wc_msg_y"]}),
        ] {
            assert!(!v.is_valid(&bad), "{bad}");
            assert!(split(&mut obj(bad)).is_err());
        }
        let nine: Vec<String> = (0..9).map(msg).collect();
        assert!(!v.is_valid(&json!({"ack_session_message_ids": nine})));
    }

    #[test]
    fn only_the_stateless_mcp_contract_publishes_the_context_request_sidecar() {
        let names = |s: Surface| {
            let mut v: Vec<String> = schema_properties(s).keys().cloned().collect();
            v.sort();
            v
        };
        assert_eq!(names(Surface::StatelessMcp).len(), WRAPPER_FIELDS.len());
        assert_eq!(
            names(Surface::LegacyMcp),
            ["ack_session_message_ids", "recording_session_id"]
        );
        assert_eq!(names(Surface::Rest), ["recording_session_id"]);
    }
}
