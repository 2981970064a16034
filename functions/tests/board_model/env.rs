//! The system under test: two server instances over one database, called over MCP or REST.

use super::*;

/// The test application (one database, a credential and a registered project) and a second,
/// independent instance over the same database.
pub(super) struct Env {
    app: TestApp,
    b: AppState,
}

impl std::ops::Deref for Env {
    type Target = TestApp;
    fn deref(&self) -> &TestApp {
        &self.app
    }
}

impl Env {
    pub(super) async fn new() -> Env {
        let app = TestApp::with_projects(&[PROJECT]).await;
        let b = app.second();
        Env { app, b }
    }

    fn instance(&self, inst: Inst) -> &AppState {
        match inst {
            Inst::A => &self.app.st,
            Inst::B => &self.b,
        }
    }

    /// Calls `tool` and returns its `{success, output?, error?, session_attention?}`, after
    /// checking that the transport agrees with it. `wrapper` fields (MCP only) go next to the
    /// arguments.
    pub(super) async fn call(
        &self,
        at: At,
        tool: &str,
        args: Value,
        wrapper: Option<Value>,
    ) -> Check<Value> {
        let st = self.instance(at.inst);
        match at.surface {
            Surface::Mcp => {
                let mut args = args;
                if let Some(Value::Object(w)) = wrapper {
                    for (k, v) in w {
                        args[k] = v;
                    }
                }
                let body = rpc(
                    MODERN,
                    1,
                    "tools/call",
                    json!({ "name": tool, "arguments": args }),
                );
                let r = send(st, mcp_request(MODERN, Some(&self.key), &body)).await;
                ensure!(
                    r.status == StatusCode::OK && r.body.get("result").is_some(),
                    "{tool} over MCP answered HTTP {}: {}",
                    r.status,
                    r.text()
                );
                let result = &r.body["result"];
                let sc = result["structuredContent"].clone();
                ensure_eq!(
                    result["isError"],
                    json!(sc["success"] != true),
                    "{tool}: isError disagrees with structuredContent {sc}"
                );
                Ok(sc)
            }
            Surface::Rest => {
                ensure!(wrapper.is_none(), "wrapper fields are sent over MCP only");
                let r = rest(
                    st,
                    "/api/tools/call",
                    Some(&self.key),
                    json!({ "tool": tool, "arguments": args }),
                )
                .await;
                if r.body["success"] == true {
                    ensure!(
                        r.status == StatusCode::OK,
                        "{tool} over REST succeeded with HTTP {}: {}",
                        r.status,
                        r.text()
                    );
                } else {
                    ensure!(
                        r.status.is_client_error(),
                        "{tool} over REST failed with HTTP {}: {}",
                        r.status,
                        r.text()
                    );
                }
                Ok(r.body)
            }
        }
    }
}
