//! The REST / GPT Actions surface, in-process over a real database: the OpenAPI document, the
//! action and generic tool routes, HTTP statuses by error kind, and the same behaviour as MCP.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{Value, json};
use wc_functions::config::ServerConfig;
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

async fn openapi(state: &wc_functions::AppState) -> Value {
    let r = send(
        state,
        Request::get("/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.headers["content-type"], "application/json");
    r.body
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((path.clone(), method.clone(), op.clone()));
        }
    }
    out
}

fn is_camel_case(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase()) && chars.all(|c| c.is_ascii_alphanumeric())
}

#[tokio::test]
async fn the_openapi_document_fits_gpt_actions() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            public_url: Some("https://wc.example.com".into()),
            ..ServerConfig::default()
        },
    );
    let doc = openapi(&st).await;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["servers"], json!([{ "url": "https://wc.example.com" }]));
    // The sentences that explain a refused pattern are the validator's, never published.
    assert!(!doc.to_string().contains(wc_domain::text::PROBLEM_KEYWORD));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearerAuth"],
        json!({ "type": "http", "scheme": "bearer" })
    );
    assert_eq!(doc["security"], json!([{ "bearerAuth": [] }]));

    let ops = operations(&doc);
    assert!(!ops.is_empty());
    assert!(ops.len() <= 30, "{} operations", ops.len());
    let mut ids = Vec::new();
    for (path, method, op) in &ops {
        let id = op["operationId"].as_str().unwrap_or_default();
        assert!(is_camel_case(id), "{method} {path}: operationId {id:?}");
        ids.push(id.to_owned());
        let description = op["description"].as_str().unwrap_or_default();
        assert!(!description.is_empty(), "{id}: no description");
        assert!(
            description.chars().count() <= 300,
            "{id}: description of {} characters",
            description.chars().count()
        );
        assert!(
            op["x-openai-isConsequential"].is_boolean(),
            "{id}: x-openai-isConsequential missing"
        );
        assert!(
            !path.starts_with("/api/audit"),
            "audit route {path} is published"
        );
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicate operationIds: {ids:?}");
    for required in ["callRuntimeTool", "listRuntimeTools"] {
        assert!(
            ids.iter().any(|i| i == required),
            "{required} missing: {ids:?}"
        );
    }
    assert!(
        !serde_json::to_string(&doc).unwrap().contains("/api/audit"),
        "the document mentions audit routes"
    );
    // Every named action operation is a registered tool with a REST operation of its own.
    for (path, _, op) in &ops {
        if let Some(tool) = path.strip_prefix("/api/actions/") {
            let spec = st
                .runtime
                .get(tool)
                .unwrap_or_else(|| panic!("{path}: no such tool"));
            assert!(
                wc_functions::rest::openapi::is_named(spec.meta.name),
                "{tool}"
            );
            assert_eq!(
                op["x-openai-isConsequential"],
                spec.meta.is_consequential(),
                "{tool}"
            );
        }
    }

    // Without a public URL the server is relative.
    let doc = openapi(&state(&db)).await;
    assert_eq!(doc["servers"], json!([{ "url": "/" }]));
}

#[tokio::test]
async fn rest_publishes_only_the_recording_wrapper_field() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    // The context_request sidecar (stateless MCP only) appears nowhere in the OpenAPI
    // document; no request body takes it or MCP's ACK ids, every one takes
    // recording_session_id.
    let doc = openapi(&st).await;
    let text = serde_json::to_string(&doc).unwrap();
    assert!(
        !text.contains("context_request"),
        "the OpenAPI document names context_request"
    );
    for (path, _, op) in operations(&doc) {
        if path.starts_with("/api/actions/") || path == "/api/tools/call" {
            let body = &op["requestBody"]["content"]["application/json"]["schema"];
            let body = match body.get("$ref").and_then(Value::as_str) {
                Some(r) => doc
                    .pointer(&r[1..])
                    .unwrap_or_else(|| panic!("{path}: {r}")),
                None => body,
            };
            assert!(
                body["properties"]["recording_session_id"].is_object(),
                "{path}: {body}"
            );
            assert!(
                body["properties"].get("ack_session_message_ids").is_none(),
                "{path}: {body}"
            );
        }
    }
    let listed = rest(&st, "/api/tools/list", Some(&key), json!({})).await;
    for t in output(&listed.body)["tools"].as_array().unwrap() {
        let props = t["input_schema"]["properties"].as_object().unwrap();
        assert!(props.contains_key("recording_session_id"), "{}", t["name"]);
        for field in ["context_request", "ack_session_message_ids"] {
            assert!(!props.contains_key(field), "{} lists {field}", t["name"]);
        }
    }
    assert!(
        operations(&doc)
            .iter()
            .any(|(path, _, _)| path == "/api/actions/start_session"),
        "start_session has no action"
    );
}

#[tokio::test]
async fn rest_answers_the_same_result_body_as_mcp() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for tool in ["runtime_status", "list_tools"] {
        let via_mcp = tools_call(&st, MODERN, Some(&key), tool, json!({})).await;
        let expected = via_mcp.result()["structuredContent"].clone();
        assert_eq!(expected["success"], true, "{expected}");

        let action = rest(&st, &format!("/api/actions/{tool}"), Some(&key), json!({})).await;
        assert_eq!(action.status, StatusCode::OK, "{}", action.text());
        assert_eq!(action.body, expected, "{tool} via /api/actions");

        let call = rest(
            &st,
            "/api/tools/call",
            Some(&key),
            json!({ "tool": tool, "arguments": {} }),
        )
        .await;
        assert_eq!(call.status, StatusCode::OK, "{}", call.text());
        assert_eq!(call.body, expected, "{tool} via /api/tools/call");
        // Arguments may be left out when there are none.
        let bare = rest(&st, "/api/tools/call", Some(&key), json!({ "tool": tool })).await;
        assert_eq!(bare.body, expected, "{tool} without arguments");
    }
    // The runtime_status output in full, not just its shape.
    let r = rest(&st, "/api/actions/runtime_status", Some(&key), json!({})).await;
    let out = output(&r.body);
    assert_eq!(out["server_version"], wc_functions::VERSION);
    assert_eq!(out["database"]["reachable"], true);
    assert_eq!(
        out["database"]["schema_level"],
        out["database"]["expected_schema_level"]
    );
    assert_eq!(out["tools_visible"], st.runtime.registry().specs().len());
}

#[tokio::test]
async fn http_status_follows_the_error_kind() {
    let TestApp { db, st, key } = TestApp::new().await;
    let limited = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    let cases: Vec<(&str, &str, Value, StatusCode, &str)> = vec![
        (
            &key,
            "/api/actions/list_projects",
            json!({ "limit": 0 }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &key,
            "/api/tools/call",
            json!({ "tool": "list_projects", "arguments": { "limit": "ten" } }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &key,
            "/api/actions/runtime_status",
            json!({ "bogus": true }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &limited,
            "/api/actions/list_projects",
            json!({}),
            StatusCode::FORBIDDEN,
            "insufficient_scope",
        ),
        (
            &limited,
            "/api/tools/call",
            json!({ "tool": "list_projects" }),
            StatusCode::FORBIDDEN,
            "insufficient_scope",
        ),
        (
            &key,
            "/api/tools/call",
            json!({ "tool": "no_such_tool", "arguments": {} }),
            StatusCode::NOT_FOUND,
            "unknown_tool",
        ),
        (
            &key,
            "/api/actions/no_such_tool",
            json!({}),
            StatusCode::NOT_FOUND,
            "unknown_tool",
        ),
        (
            &key,
            "/api/actions/runtime_status",
            json!({ "recording_session_id": "wc_sess_nobody0000000000000000" }),
            StatusCode::NOT_FOUND,
            "unknown_session_id",
        ),
        (
            &key,
            "/api/tools/call",
            json!({ "tool": "runtime_status", "extra": 1 }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &key,
            "/api/tools/list",
            json!({ "verbose": true }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &key,
            "/api/tools/call",
            json!({
                "tool": "runtime_status",
                "arguments": { "recording_session_id": "wc_sess_a000000000000000000000" },
                "recording_session_id": "wc_sess_b000000000000000000000",
            }),
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
        ),
        (
            &key,
            "/api/tools/call",
            json!({ "tool": "runtime_status", "arguments": { "recording_session_id": "wc_sess_a000000000000000000000" } }),
            StatusCode::NOT_FOUND,
            "unknown_session_id",
        ),
    ];
    for (auth, path, body, status, kind) in cases {
        let r = rest(&st, path, Some(auth), body.clone()).await;
        assert_eq!(r.status, status, "{path} {body}: {}", r.text());
        assert_eq!(r.body["success"], false, "{path} {body}: {}", r.text());
        assert_eq!(r.body["error"]["kind"], kind, "{path} {body}: {}", r.text());
    }
    // The field and rule are named on REST as on MCP.
    let r = rest(
        &st,
        "/api/actions/list_projects",
        Some(&key),
        json!({ "limit": 0 }),
    )
    .await;
    assert_eq!(r.body["error"]["pointer"], "/limit");
    assert_eq!(r.body["error"]["rule"], "minimum");
    // A body that is not JSON is invalid_arguments, not a server error.
    let req = Request::post("/api/actions/runtime_status")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Body::from("{nope"))
        .unwrap();
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.body["error"]["kind"], "invalid_arguments");
}

#[tokio::test]
async fn the_rest_tool_list_reaches_every_visible_tool() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let full = full_key(&db).await;
    let limited = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    for key in [&full, &limited] {
        let listed = rest(&st, "/api/tools/list", Some(key), json!({})).await;
        assert_eq!(listed.status, StatusCode::OK, "{}", listed.text());
        assert_eq!(listed.body["success"], true);
        let tools = listed.body["output"]["tools"].as_array().unwrap();
        assert_eq!(listed.body["output"]["count"], tools.len());
        let names: Vec<String> = tools
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        let mcp_names = tool_names(tools_list(&st, MODERN, Some(key)).await.result());
        assert_eq!(names, mcp_names, "REST and MCP list different tools");
        for t in tools {
            let name = t["name"].as_str().unwrap();
            assert!(
                t["input_schema"]["properties"]["recording_session_id"].is_object(),
                "{name}"
            );
            let r = rest(
                &st,
                "/api/tools/call",
                Some(key),
                json!({ "tool": name, "arguments": {} }),
            )
            .await;
            // Reaching the tool: a tool without required arguments runs; one with required
            // arguments is refused by its own validator, naming the missing field.
            let mut required = t["input_schema"]["required"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            // "One of these is required" (anyOf over required lists, alone or inside allOf)
            // names its first field.
            let schema = &t["input_schema"];
            let any_ofs = std::iter::once(&schema["anyOf"]).chain(
                schema["allOf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|part| &part["anyOf"]),
            );
            for branch in any_ofs.filter_map(Value::as_array).flatten() {
                required.extend(branch["required"].as_array().cloned().unwrap_or_default());
            }
            if required.is_empty() {
                assert_eq!(r.status, StatusCode::OK, "{name}: {}", r.text());
                assert_eq!(r.body["success"], true, "{name}: {}", r.text());
            } else {
                assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}: {}", r.text());
                assert_eq!(r.body["error"]["kind"], "invalid_arguments", "{name}");
                assert_eq!(r.body["error"]["rule"], "required", "{name}");
                let pointer = r.body["error"]["pointer"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches('/')
                    .to_owned();
                assert!(
                    required.iter().any(|f| f == &json!(pointer)),
                    "{name}: {pointer}"
                );
            }
        }
    }
    // The limited caller does not see what it cannot call.
    let listed = rest(&st, "/api/tools/list", Some(&limited), json!({})).await;
    assert_eq!(listed.body["success"], true, "{}", listed.text());
    assert!(
        !listed.text().contains("\"list_projects\""),
        "{}",
        listed.text()
    );
}

/// For each registered tool, identical arguments from one principal give the same result on
/// MCP (every revision) and on REST (the generic route, and the named action where there is
/// one).
#[tokio::test]
async fn every_tool_behaves_the_same_on_mcp_and_rest() {
    let db = TestDatabase::new().await;
    {
        let client = db.pool().get().await.unwrap();
        for (id, name, runner) in [
            ("agent:local:alpha", "alpha", "local"),
            ("agent:local:beta", "beta", "local"),
            ("agent:other:gamma", "gamma", "other"),
        ] {
            wc_store::projects::register(&client, id, name, runner)
                .await
                .unwrap();
        }
    }
    let st = state(&db);
    let principals = [
        full_key(&db).await,
        credential(
            &db,
            CredentialKind::Project,
            &["project:read"],
            &["agent:local:beta"],
        )
        .await,
        credential(&db, CredentialKind::Project, &[], &["agent:local:alpha"]).await,
    ];
    let arg_cases = [
        json!({}),
        json!({ "limit": 1 }),
        json!({ "category": "discovery" }),
        json!({ "category": "" }),
        json!({ "bogus": 1 }),
        json!({ "recording_session_id": "wc_sess_nobody0000000000000000" }),
    ];
    let mut compared = 0;
    for spec in st.runtime.registry().specs() {
        let tool = spec.meta.name;
        for key in &principals {
            for args in &arg_cases {
                let rest_call = rest(
                    &st,
                    "/api/tools/call",
                    Some(key),
                    json!({ "tool": tool, "arguments": args }),
                )
                .await;
                for version in VERSIONS {
                    let r = tools_call(&st, version, Some(key), tool, args.clone()).await;
                    let sc = &r.result()["structuredContent"];
                    assert_eq!(
                        &rest_call.body, sc,
                        "{tool} {args} on {version}: REST {} vs MCP {}",
                        rest_call.body, sc
                    );
                    compared += 1;
                }
                if wc_functions::rest::openapi::is_named(spec.meta.name) {
                    let action = rest(
                        &st,
                        &format!("/api/actions/{tool}"),
                        Some(key),
                        args.clone(),
                    )
                    .await;
                    assert_eq!(action.body, rest_call.body, "{tool} {args} via its action");
                    assert_eq!(action.status, rest_call.status, "{tool} {args}");
                }
                let expected_status = match rest_call.body["error"]["kind"].as_str() {
                    None => 200,
                    Some("invalid_arguments") => 400,
                    Some("insufficient_scope") => 403,
                    Some("unknown_session_id") => 404,
                    Some(other) => panic!("{tool} {args}: unexpected kind {other}"),
                };
                assert_eq!(rest_call.status.as_u16(), expected_status, "{tool} {args}");
            }
        }
    }
    assert!(compared >= 3 * 3 * 6 * 3);
}
