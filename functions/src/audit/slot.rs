use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::kernel::Invoked;
use crate::kernel::ports::CallAudit;
use crate::kernel::telemetry::ModelErgonomics;

/// What a handler tells the audit layer about the request it served.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditNote {
    /// Action name (a tool name, for tool calls).
    pub action_name: String,
    /// Whether the action succeeded (a tool result's `success`).
    pub success: bool,
    /// Model-ergonomics telemetry of a tool call.
    pub model_ergonomics: Option<ModelErgonomics>,
    /// Extra summary fields.
    pub extra: Option<(String, Value)>,
}

/// A request-scoped slot, put in the request extensions by the audit middleware and filled by
/// the handler. Shared by `Arc`, so it survives the request being taken apart by rmcp.
#[derive(Debug, Clone, Default)]
pub struct AuditSlot(Arc<Mutex<Option<AuditNote>>>);

impl AuditSlot {
    /// Records the note (the last one wins).
    pub fn note(&self, note: AuditNote) {
        if let Ok(mut guard) = self.0.lock() {
            *guard = Some(note);
        }
    }

    /// Takes the note, if any.
    pub fn take(&self) -> Option<AuditNote> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

/// The kernel notes each tool call it finishes in the request's slot.
impl CallAudit for AuditSlot {
    fn note(&self, tool: &str, invoked: &Invoked) {
        AuditSlot::note(
            self,
            AuditNote {
                action_name: tool.to_owned(),
                success: invoked.result.success,
                model_ergonomics: Some(invoked.telemetry.clone()),
                extra: None,
            },
        );
    }
}
