//! `update_session_context`: set or clear a Workflow Session's execution defaults
//! (`default_cwd`, `default_shell`, `resource`). A field that is absent keeps its value; `null`
//! clears it. Invalid values fail without changing anything.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};
use wc_domain::{EventKind, EventRole, SessionId};
use wc_macros::{tool, tool_args};
use wc_store::sessions::{Decision, NewEvent, SessionChange};

use crate::kernel::context::ToolContext;
use crate::result::{ErrorKind, ToolError};
use crate::workflow::exec_context::{
    ExecutionContext, ResourceName, Shell, project_cwd, remote_path, valid_resource,
};
use crate::workflow::mutation;

/// Present-and-null is `Some(None)`; absent is `None` (with `#[serde(default)]`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[tool_args]
pub struct Args {
    /// The session.
    pub session_id: SessionId,
    /// Default working directory: project-relative (no absolute paths, URIs, `..` or control
    /// characters), or a remote path when `resource` is set; never credentials. `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schemars(length(max = 1024))]
    pub default_cwd: Option<Option<String>>,
    /// Default shell for shell tools. `null` clears it.
    #[serde(default, deserialize_with = "present")]
    pub default_shell: Option<Option<Shell>>,
    /// Named runner resource: 1-64 of `A-Z a-z 0-9 . _ -`, never a credential. `null` clears it.
    #[serde(default, deserialize_with = "present")]
    pub resource: Option<Option<ResourceName>>,
}

/// Output of `update_session_context`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// The session.
    pub session_id: SessionId,
    /// The execution defaults now in force.
    pub execution_context: ExecutionContext,
    /// Whether anything changed.
    pub changed: bool,
}

fn invalid(pointer: &str, message: String) -> ToolError {
    ToolError::new(ErrorKind::InvalidArguments, message)
        .with("pointer", pointer.to_owned())
        .with("rule", "execution_context")
}

/// The context `args` asks for, starting from `current`; validated, so storing it is safe.
fn desired(current: &ExecutionContext, args: &Args) -> Result<ExecutionContext, ToolError> {
    let mut next = current.clone();
    if let Some(resource) = &args.resource {
        if let Some(name) = resource
            && !valid_resource(name.as_str())
        {
            return Err(invalid(
                "/resource",
                "resource must be 1-64 of A-Z a-z 0-9 . _ - and not a credential".into(),
            ));
        }
        next.resource = resource.clone().map(ResourceName::into_string);
    }
    if let Some(shell) = args.default_shell {
        next.default_shell = shell;
    }
    if let Some(cwd) = &args.default_cwd {
        next.default_cwd = match cwd {
            None => None,
            Some(raw) if next.resource.is_some() => Some(
                remote_path(raw)
                    .map_err(|e| invalid("/default_cwd", format!("default_cwd {e}")))?,
            ),
            Some(raw) => Some(
                project_cwd(raw)
                    .map_err(|e| invalid("/default_cwd", format!("default_cwd {e}")))?
                    .into_string(),
            ),
        };
    } else if args.resource.is_some() && next.resource.is_none() && current.resource.is_some() {
        // Dropping the resource leaves a remote cwd meaningless: it must be valid locally.
        if let Some(cwd) = &next.default_cwd {
            project_cwd(cwd).map_err(|e| {
                invalid("/default_cwd", format!("the remote default_cwd is not a valid project path once the resource is cleared: {e}"))
            })?;
        }
    }
    Ok(next)
}

/// Set or clear a Workflow Session's execution defaults: default_cwd, default_shell (sh or bash)
/// and a named runner resource. null clears a field.
#[tool(changes, Session, "Update session context", session = Changes)]
async fn update_session_context(ctx: ToolContext, args: Args) -> Result<Output, ToolError> {
    let session = ctx.business_session(&args.session_id)?;
    let current: ExecutionContext =
        serde_json::from_value(session.execution_context.clone()).unwrap_or_default();
    // Validate against what the kernel loaded; the mutation re-derives from the locked row.
    desired(&current, &args)?;
    let invocation_id = ctx.invocation_id;
    let ((execution_context, changed), _) =
        mutation::mutate(&ctx.deps.pool, &session.id, move |row| {
            if !row.is_active() {
                return Decision::Leave(Err(mutation::closed(row)));
            }
            let current: ExecutionContext =
                serde_json::from_value(row.execution_context.clone()).unwrap_or_default();
            let next = match desired(&current, &args) {
                Ok(n) => n,
                Err(e) => return Decision::Leave(Err(e)),
            };
            if next == current {
                return Decision::Leave(Ok((next, false)));
            }
            let changed: Vec<&str> = [
                ("default_cwd", next.default_cwd != current.default_cwd),
                ("default_shell", next.default_shell != current.default_shell),
                ("resource", next.resource != current.resource),
            ]
            .into_iter()
            .filter_map(|(k, c)| c.then_some(k))
            .collect();
            let mut payload = json!({ "changed": changed, "execution_context": next });
            crate::redaction::redact_json(&mut payload);
            let event = NewEvent {
                kind: EventKind::SessionContextUpdated,
                call_id: uuid::Uuid::now_v7(),
                invocation_id,
                role: EventRole::Business,
                tool_name: Some("update_session_context".into()),
                payload,
            };
            let value: Value = serde_json::to_value(&next).unwrap_or_default();
            Decision::Write(
                SessionChange {
                    execution_context: Some(value),
                    ..Default::default()
                },
                vec![event],
                Ok((next, true)),
            )
        })
        .await?;
    Ok(Output {
        session_id: session.id.clone(),
        execution_context,
        changed,
    })
}
