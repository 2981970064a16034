//! Wrapper metadata: fields a host may add to any tool call's arguments that belong to the
//! runtime, not to the tool. They are split off before the tool's own arguments are parsed.
//!
//! - `recording_session_id` — a Workflow Session to record this call in.
//! - `ack_session_message_ids` — at most 8 ACK-required session message ids this request
//!   acknowledges.
//! - `context_request` — a bounded request for context material.

use serde_json::{Map, Value, json};

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
    pub recording_session_id: Option<String>,
    /// Messages acknowledged by this request.
    pub ack_session_message_ids: Vec<String>,
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

fn id_with_prefix(s: &str, prefix: &str) -> bool {
    s.len() <= 128
        && s.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
}

/// Removes the wrapper fields from `args` and validates them.
pub fn split(args: &mut Map<String, Value>) -> Result<WrapperMeta, WrapperError> {
    let mut meta = WrapperMeta::default();
    if let Some(v) = args.remove("recording_session_id") {
        match v.as_str() {
            Some(s) if id_with_prefix(s, "wc_sess_") => {
                meta.recording_session_id = Some(s.to_owned())
            }
            _ => {
                return Err(WrapperError {
                    field: "recording_session_id",
                    problem: "must be a Workflow Session id (wc_sess_…)".into(),
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
            match item.as_str() {
                Some(s) if id_with_prefix(s, "wc_msg_") => {
                    meta.ack_session_message_ids.push(s.to_owned())
                }
                _ => {
                    return Err(WrapperError {
                        field: "ack_session_message_ids",
                        problem: "every item must be a session message id (wc_msg_…)".into(),
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
/// input schema there.
pub fn schema_properties(surface: Surface) -> Map<String, Value> {
    let mut all = all_schema_properties();
    all.retain(|field, _| surface.publishes(field));
    all
}

fn all_schema_properties() -> Map<String, Value> {
    match json!({
        "recording_session_id": {
            "type": "string",
            "pattern": "^wc_sess_[A-Za-z0-9_-]+$",
            "maxLength": 128,
            "description": "Workflow Session to record this call in (wrapper metadata)."
        },
        "ack_session_message_ids": {
            "type": "array",
            "maxItems": MAX_ACK_IDS,
            "items": { "type": "string", "pattern": "^wc_msg_[A-Za-z0-9_-]+$", "maxLength": 128 },
            "description": "ACK-required session messages this request acknowledges (wrapper metadata)."
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
            "description": "Context material to project after the call (wrapper metadata)."
        }
    }) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn wrappers_are_removed_and_the_rest_is_left_alone() {
        let mut args = obj(json!({
            "project": "p",
            "recording_session_id": "wc_sess_abc-1",
            "ack_session_message_ids": ["wc_msg_1", "wc_msg_2"],
            "context_request": {"materials": ["webcodex.workflow"]}
        }));
        let meta = split(&mut args).unwrap();
        assert_eq!(args, obj(json!({"project": "p"})));
        assert_eq!(meta.recording_session_id.as_deref(), Some("wc_sess_abc-1"));
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
        let nine: Vec<String> = (0..9).map(|i| format!("wc_msg_{i}")).collect();
        for (bad, field) in [
            (
                json!({"recording_session_id": "sess_1"}),
                "recording_session_id",
            ),
            (
                json!({"recording_session_id": "wc_sess_"}),
                "recording_session_id",
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
                json!({"ack_session_message_ids": "wc_msg_1"}),
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
        let good = json!({"recording_session_id": "wc_sess_x", "ack_session_message_ids": ["wc_msg_y"], "context_request": {"materials": ["m"]}});
        assert!(v.is_valid(&good));
        assert!(split(&mut obj(good)).is_ok());
        let nine: Vec<String> = (0..9).map(|i| format!("wc_msg_{i}")).collect();
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
