//! The MCP surface at `POST /mcp`, driven with real JSON-RPC over HTTP through the router,
//! against a real database: protocol revisions, header rules, transport guards, the tool
//! listing and tool calls.

mod common;

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode, header};
use base64::Engine;
use base64::prelude::BASE64_STANDARD;
use common::*;
use serde_json::{Value, json};
use wc_functions::config::ServerConfig;
use wc_store::credentials::CredentialKind;
use wc_store::testing::TestDatabase;

// ---------------------------------------------------------------------------------------------
// 2026-07-28

#[tokio::test]
async fn discover_lists_the_supported_versions_and_server_info_in_meta() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = mcp(&st, MODERN, Some(&key), "server/discover", json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let result = r.result();
    assert_eq!(
        result["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"]),
        "{result}"
    );
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "wc", "{result}");
    assert_eq!(info["version"], wc_functions::VERSION, "{result}");
    assert_eq!(result["resultType"], "complete", "{result}");
}

#[tokio::test]
async fn modern_tools_list_is_complete_and_carries_cache_hints() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = tools_list(&st, MODERN, Some(&key)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let result = r.result();
    assert_eq!(result["resultType"], "complete", "{result}");
    assert!(
        result["ttlMs"].as_u64().is_some_and(|t| t > 0),
        "ttlMs: {}",
        result["ttlMs"]
    );
    assert!(
        result["cacheScope"].is_string(),
        "cacheScope: {}",
        result["cacheScope"]
    );
}

#[tokio::test]
async fn a_modern_request_without_meta_is_invalid_params() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {} });
    let r = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    assert_eq!(r.rpc_code(), Some(-32602), "{}", r.text());
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.body["id"], 7, "{}", r.text());
    // And with `_meta` present but missing a required key.
    let mut body = rpc(MODERN, 8, "tools/list", json!({}));
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    let r = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    assert_eq!(r.rpc_code(), Some(-32602), "{}", r.text());
}

#[tokio::test]
async fn an_mcp_method_header_that_contradicts_the_body_is_400_32020() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let mut req = mcp_request(MODERN, Some(&key), &rpc(MODERN, 1, "tools/list", json!({})));
    set_header(&mut req, "mcp-method", "tools/call");
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.rpc_code(), Some(-32020), "{}", r.text());
    // The header is required on 2026-07-28, too.
    let mut req = mcp_request(MODERN, Some(&key), &rpc(MODERN, 1, "tools/list", json!({})));
    req.headers_mut().remove("mcp-method");
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.rpc_code(), Some(-32020), "{}", r.text());
}

#[tokio::test]
async fn a_base64_mcp_name_is_accepted_when_it_decodes_to_the_tool() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": "runtime_status", "arguments": {} }),
    );
    let encoded = |s: &str| format!("=?base64?{}?=", BASE64_STANDARD.encode(s));

    let mut req = mcp_request(MODERN, Some(&key), &body);
    set_header(&mut req, "mcp-name", &encoded("runtime_status"));
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.result()["structuredContent"]["success"],
        true,
        "{}",
        r.text()
    );

    for wrong in [encoded("list_tools"), "list_tools".to_owned()] {
        let mut req = mcp_request(MODERN, Some(&key), &body);
        set_header(&mut req, "mcp-name", &wrong);
        let r = send(&st, req).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{wrong}: {}", r.text());
        assert_eq!(r.rpc_code(), Some(-32020), "{wrong}: {}", r.text());
    }
}

#[tokio::test]
async fn an_unsupported_version_is_32022_naming_the_supported_ones() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let mut body = rpc(MODERN, 3, "tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let mut req = mcp_request(MODERN, Some(&key), &body);
    set_header(&mut req, "mcp-protocol-version", "2099-01-01");
    let r = send(&st, req).await;
    assert_eq!(r.rpc_code(), Some(-32022), "{}", r.text());
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(
        r.body["error"]["data"]["supported"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"]),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn unknown_and_removed_methods_are_404_32601() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for method in ["ping", "foo/bar"] {
        let r = mcp(&st, MODERN, Some(&key), method, json!({})).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{method}: {}", r.text());
        assert_eq!(r.rpc_code(), Some(-32601), "{method}: {}", r.text());
    }
}

// ---------------------------------------------------------------------------------------------
// Legacy revisions

#[tokio::test]
async fn legacy_revisions_initialize_ping_and_list() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in LEGACY {
        let init = mcp(
            &st,
            version,
            Some(&key),
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": { "name": "wc-tests", "version": "1.0.0" },
            }),
        )
        .await;
        assert_eq!(init.status, StatusCode::OK, "{version}: {}", init.text());
        assert_eq!(
            init.result()["protocolVersion"],
            version,
            "{version}: {}",
            init.text()
        );
        assert_eq!(init.result()["serverInfo"]["name"], "wc");

        let note = send(
            &st,
            mcp_request(
                version,
                Some(&key),
                &notification("notifications/initialized"),
            ),
        )
        .await;
        assert_eq!(
            note.status,
            StatusCode::ACCEPTED,
            "{version}: {}",
            note.text()
        );

        let ping = mcp(&st, version, Some(&key), "ping", json!({})).await;
        assert_eq!(ping.status, StatusCode::OK, "{version}: {}", ping.text());
        assert_eq!(ping.result(), &json!({}), "{version}");
    }
}

#[tokio::test]
async fn every_revision_lists_tools_with_the_wrapper_properties_of_its_contract() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        let r = tools_list(&st, version, Some(&key)).await;
        assert_eq!(r.status, StatusCode::OK, "{version}: {}", r.text());
        let tools = r.result()["tools"].as_array().unwrap();
        assert!(!tools.is_empty(), "{version}");
        for t in tools {
            let props = &t["inputSchema"]["properties"];
            for field in ["recording_session_id", "ack_session_message_ids"] {
                assert!(
                    props.get(field).is_some(),
                    "{version}: {} lacks {field}",
                    t["name"]
                );
            }
            // The context_request sidecar is part of the stateless 2026-07-28 contract only.
            assert_eq!(
                props.get("context_request").is_some(),
                version == MODERN,
                "{version}: {}",
                t["name"]
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Transport guards

#[tokio::test]
async fn a_caller_session_id_never_creates_or_selects_state() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        for (method, params) in [
            ("tools/list", json!({})),
            (
                "tools/call",
                json!({ "name": "list_tools", "arguments": {} }),
            ),
        ] {
            let body = rpc(version, 1, method, params);
            let plain = send(&st, mcp_request(version, Some(&key), &body)).await;
            assert_eq!(plain.status, StatusCode::OK, "{}", plain.text());
            for sid in ["abc", "6b1c2f2e-0000-4000-8000-000000000000"] {
                let mut req = mcp_request(version, Some(&key), &body);
                set_header(&mut req, "mcp-session-id", sid);
                let with = send(&st, req).await;
                assert_eq!(
                    with.status,
                    plain.status,
                    "{version} {method}: {}",
                    with.text()
                );
                assert_eq!(with.body, plain.body, "{version} {method} {sid}");
                assert!(
                    with.headers.get("mcp-session-id").is_none(),
                    "{version} {method}: a session id came back"
                );
            }
            assert!(plain.headers.get("mcp-session-id").is_none());
        }
    }
    // Initialize does not hand one out either.
    let init = mcp(
        &st,
        LEGACY[0],
        Some(&key),
        "initialize",
        json!({ "protocolVersion": LEGACY[0], "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } }),
    )
    .await;
    assert_eq!(init.status, StatusCode::OK, "{}", init.text());
    assert!(init.headers.get("mcp-session-id").is_none());
}

#[tokio::test]
async fn get_and_delete_on_mcp_are_405() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for method in ["GET", "DELETE"] {
        let req = Request::builder()
            .method(method)
            .uri("/mcp")
            .header(header::HOST, "localhost")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header("mcp-protocol-version", MODERN)
            .header("mcp-session-id", "abc")
            .body(Body::empty())
            .unwrap();
        let r = send(&st, req).await;
        assert_eq!(
            r.status,
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}: {}",
            r.text()
        );
    }
}

#[tokio::test]
async fn origins_outside_the_allowed_hosts_are_403() {
    let TestApp { db, st, key } = TestApp::new().await;
    let body = rpc(MODERN, 1, "tools/list", json!({}));
    let mut req = mcp_request(MODERN, Some(&key), &body);
    set_header(&mut req, "origin", "https://evil.example");
    let r = send(&st, req).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(r.body.get("result").is_none());

    for ok in ["http://localhost:5173", "https://127.0.0.1"] {
        let mut req = mcp_request(MODERN, Some(&key), &body);
        set_header(&mut req, "origin", ok);
        let r = send(&st, req).await;
        assert_eq!(r.status, StatusCode::OK, "{ok}: {}", r.text());
        assert!(r.result()["tools"].is_array());
    }

    // Configured extra origins pass; an allowed host's origin passes on any port.
    let custom = state_with(
        &db,
        ServerConfig {
            allowed_hosts: vec!["wc.example.com".into()],
            allowed_origins: vec!["https://chat.example".into()],
            ..ServerConfig::default()
        },
    );
    for (origin, expect) in [
        ("https://chat.example", StatusCode::OK),
        ("https://wc.example.com:8443", StatusCode::OK),
        ("https://evil.example", StatusCode::FORBIDDEN),
        ("http://localhost:5173", StatusCode::FORBIDDEN),
    ] {
        let mut req = mcp_request(MODERN, Some(&key), &body);
        set_header(&mut req, "host", "wc.example.com");
        set_header(&mut req, "origin", origin);
        let r = send(&custom, req).await;
        assert_eq!(r.status, expect, "{origin}: {}", r.text());
    }
}

#[tokio::test]
async fn hosts_outside_the_allowed_list_are_rejected() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let body = rpc(MODERN, 1, "tools/list", json!({}));

    let default = state(&db);
    let mut req = mcp_request(MODERN, Some(&key), &body);
    set_header(&mut req, "host", "evil.example");
    let r = send(&default, req).await;
    assert!(r.status.is_client_error(), "{}: {}", r.status, r.text());
    assert!(r.body.get("result").is_none(), "{}", r.text());

    let custom = state_with(
        &db,
        ServerConfig {
            allowed_hosts: vec!["wc.example.com".into()],
            ..ServerConfig::default()
        },
    );
    let mut req = mcp_request(MODERN, Some(&key), &body);
    set_header(&mut req, "host", "wc.example.com");
    let r = send(&custom, req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert!(r.result()["tools"].is_array());
    // The default loopback host is no longer accepted by that instance.
    let r = send(&custom, mcp_request(MODERN, Some(&key), &body)).await;
    assert!(r.status.is_client_error(), "{}: {}", r.status, r.text());
}

// ---------------------------------------------------------------------------------------------
// tools/list

#[tokio::test]
async fn the_listing_is_sorted_and_identical_across_calls_and_instances() {
    let db = TestDatabase::new().await;
    let key = full_key(&db).await;
    let a = state(&db);
    let b = second_instance(&db, ServerConfig::default());
    for version in VERSIONS {
        let first = tools_list(&a, version, Some(&key)).await;
        let names = tool_names(first.result());
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "{version}: not in name order");
        assert!(names.len() >= 3, "{names:?}");
        for st in [&a, &b, &a, &b] {
            let again = tools_list(st, version, Some(&key)).await;
            assert_eq!(
                again.result()["tools"],
                first.result()["tools"],
                "{version}: the listing changed"
            );
            assert_eq!(again.bytes, first.bytes, "{version}: bytes differ");
        }
    }
}

#[tokio::test]
async fn tools_needing_a_scope_the_caller_lacks_are_hidden() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let without = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    let with = credential(
        &db,
        CredentialKind::Project,
        &["project:read"],
        &["agent:local:a"],
    )
    .await;
    for version in VERSIONS {
        let names = tool_names(tools_list(&st, version, Some(&without)).await.result());
        assert!(
            !names.contains(&"list_projects".to_owned()),
            "{version}: {names:?}"
        );
        assert!(names.contains(&"runtime_status".to_owned()), "{names:?}");
        let names = tool_names(tools_list(&st, version, Some(&with)).await.result());
        assert!(
            names.contains(&"list_projects".to_owned()),
            "{version}: {names:?}"
        );
    }
}

#[tokio::test]
async fn every_input_schema_publishes_the_wrapper_fields() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = tools_list(&st, MODERN, Some(&key)).await;
    let tools = r.result()["tools"].as_array().unwrap();
    for t in tools {
        let name = &t["name"];
        let props = &t["inputSchema"]["properties"];
        let rec = &props["recording_session_id"];
        assert_eq!(rec["type"], "string", "{name}");
        // The listing is the compact form: the id's pattern is the validator's.
        assert!(rec.get("pattern").is_none(), "{name}");
        let ack = &props["ack_session_message_ids"];
        assert_eq!(ack["type"], "array", "{name}");
        assert_eq!(ack["maxItems"], 8, "{name}");
        assert_eq!(ack["items"]["type"], "string", "{name}");
        let ctx = &props["context_request"];
        assert_eq!(ctx["type"], "object", "{name}");
        assert!(ctx["properties"]["materials"].is_object(), "{name}");
    }
}

#[tokio::test]
async fn the_full_listing_fits_in_100_kb_and_90_tools_would_fit_in_120() {
    let TestApp { db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        let r = tools_list(&st, version, Some(&key)).await;
        assert_eq!(r.status, StatusCode::OK);
        let mut sizes: Vec<(usize, String)> = r.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t.to_string().len(), t["name"].to_string()))
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        // The sentences that explain a refused pattern are the validator's, never published.
        assert!(
            !r.text().contains(wc_domain::text::PROBLEM_KEYWORD),
            "{version}"
        );
        assert!(
            r.bytes.len() <= 100 * 1024,
            "{version}: {} bytes; the largest tools: {:?}",
            r.bytes.len(),
            &sizes[..8.min(sizes.len())]
        );
        // The surface doubles to ~90 tools and the list stays within 120,000 bytes: a tool
        // costs at most a ninetieth of that, on average, today.
        let per_tool = r.bytes.len() / sizes.len();
        assert!(
            per_tool <= 120_000 / 90,
            "{version}: {per_tool} bytes a tool; the largest: {:?}",
            &sizes[..8.min(sizes.len())]
        );
        assert_eq!(
            tool_names(r.result()).len(),
            wc_functions::AppState::new(db.pool().clone(), ServerConfig::default())
                .runtime
                .registry()
                .specs()
                .len()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// tools/call

#[tokio::test]
async fn call_results_are_the_result_object_in_structured_and_text_form() {
    let TestApp { db, st, key } = TestApp::new().await;
    let project_key = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    for version in VERSIONS {
        for (auth, name, args, success) in [
            (&key, "runtime_status", json!({}), true),
            (&key, "list_tools", json!({}), true),
            (&key, "list_projects", json!({ "limit": 0 }), false),
            (&project_key, "list_projects", json!({}), false),
        ] {
            let r = tools_call(&st, version, Some(auth), name, args).await;
            assert_eq!(r.status, StatusCode::OK, "{version} {name}: {}", r.text());
            let result = r.result();
            let sc = &result["structuredContent"];
            assert_eq!(sc["success"], success, "{version} {name}: {sc}");
            let keys: Vec<&String> = sc.as_object().unwrap().keys().collect();
            for k in &keys {
                assert!(["success", "output", "error"].contains(&k.as_str()), "{k}");
            }
            assert_eq!(sc.get("output").is_some(), success, "{sc}");
            assert_eq!(sc.get("error").is_some(), !success, "{sc}");
            let content = result["content"].as_array().unwrap();
            assert_eq!(content.len(), 1, "{result}");
            assert_eq!(content[0]["type"], "text");
            let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(&text, sc, "{version} {name}");
            assert_eq!(result["isError"], !success, "{version} {name}");
        }
    }
}

#[tokio::test]
async fn calling_an_unknown_tool_is_invalid_params() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        let r = tools_call(&st, version, Some(&key), "no_such_tool", json!({})).await;
        assert_eq!(r.rpc_code(), Some(-32602), "{version}: {}", r.text());
    }
}

#[tokio::test]
async fn invalid_arguments_name_the_field_and_the_rule() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        for (name, args, pointer, rule) in [
            ("list_projects", json!({ "limit": 0 }), "/limit", "minimum"),
            ("list_projects", json!({ "limit": "x" }), "/limit", "type"),
            (
                "list_tools",
                json!({ "category": "" }),
                "/category",
                "minLength",
            ),
            (
                "runtime_status",
                json!({ "bogus": 1 }),
                "/bogus",
                "additionalProperties",
            ),
            (
                "list_tools",
                json!({ "verbose": true }),
                "/verbose",
                "additionalProperties",
            ),
        ] {
            let r = tools_call(&st, version, Some(&key), name, args.clone()).await;
            let sc = &r.result()["structuredContent"];
            assert_eq!(sc["success"], false, "{version} {name} {args}: {sc}");
            assert_eq!(sc["error"]["kind"], "invalid_arguments", "{sc}");
            assert_eq!(
                sc["error"]["pointer"], pointer,
                "{version} {name} {args}: {sc}"
            );
            assert_eq!(sc["error"]["rule"], rule, "{version} {name} {args}: {sc}");
        }
    }
}

/// A refusal says what was wrong in the words of the type that owns the rule, and an unknown
/// argument is told what it probably meant: what a caller new to the tools reads.
#[tokio::test]
async fn refusals_say_what_was_wrong_and_what_was_meant() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let project = "agent:local:demo";
    let digest = "0".repeat(64);
    for (name, args, pointer, message) in [
        (
            "read_files",
            json!({"project": project, "files": [{"path": "/etc/passwd"}]}),
            "/files/0/path",
            "argument /files/0/path: must be relative to the project root, like `src/main.rs`",
        ),
        (
            "read_files",
            json!({"project": project, "files": [{"path": "src/../../x"}]}),
            "/files/0/path",
            "no `..` segment",
        ),
        (
            "apply_text_edits",
            json!({"project": project, "path": "a.txt", "edits": [{"old": "x", "new": "y"}]}),
            "/edits/0/new",
            "is not a known argument, nor is `old`: did you mean `new_text` and `old_text`?",
        ),
        (
            "apply_text_edits",
            json!({"project": project, "path": "a.txt", "sha256": digest,
                   "edits": [{"old_text": "x", "new_text": "y"}]}),
            "/sha256",
            "did you mean `expected_sha256`?",
        ),
        (
            "apply_text_edits",
            json!({"project": project, "path": "a.txt", "expected_sha256": "ABC",
                   "edits": [{"old_text": "x", "new_text": "y"}]}),
            "/expected_sha256",
            "must be 64 lowercase hexadecimal digits",
        ),
        (
            "search_project_texts",
            json!({"project": project, "pattern": "x", "glob": "a\nb"}),
            "/glob",
            "must be one line without control characters",
        ),
        (
            "run_script",
            json!({"project": project, "script": "true", "interpreter": "/bin/sh"}),
            "/interpreter",
            "not a path",
        ),
        (
            "cargo_test",
            json!({"project": project, "package": "x", "no_default_feature": true}),
            "/no_default_feature",
            "did you mean `no_default_features`?",
        ),
        (
            "list_projects",
            json!({"limt": 3}),
            "/limt",
            "did you mean `limit`?",
        ),
    ] {
        let r = tools_call(&st, MODERN, Some(&key), name, args.clone()).await;
        let sc = &r.result()["structuredContent"];
        assert_eq!(sc["success"], false, "{name} {args}: {sc}");
        assert_eq!(sc["error"]["kind"], "invalid_arguments", "{sc}");
        assert_eq!(sc["error"]["pointer"], pointer, "{name} {args}: {sc}");
        let said = sc["error"]["message"].as_str().unwrap();
        assert!(said.contains(message), "{name} {args}: {said}");
        assert!(!said.contains("must match the pattern"), "{said}");
    }
}

#[tokio::test]
async fn wrapper_fields_are_stripped_before_the_arguments_are_parsed() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        let plain = tools_call(&st, version, Some(&key), "runtime_status", json!({})).await;
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "runtime_status",
            json!({
                "ack_session_message_ids": [
                    "wc_msg_1000000000000000000000",
                    "wc_msg_two0000000000000000000"
                ],
                "context_request": { "materials": ["webcodex.workflow"] },
            }),
        )
        .await;
        let mut sc = r.result()["structuredContent"].clone();
        assert_eq!(sc["success"], true, "{version}: {sc}");
        // The stateless contract answers the context sidecar after the call; older revisions
        // strip it unanswered.
        let materials = sc.as_object_mut().unwrap().remove("context_materials");
        match version {
            MODERN => assert_eq!(
                materials.unwrap()["webcodex.workflow"]["status"],
                "available",
                "{version}"
            ),
            _ => assert_eq!(materials, None, "{version}"),
        }
        assert_eq!(sc, plain.result()["structuredContent"], "{version}");
    }
}

#[tokio::test]
async fn malformed_wrapper_metadata_is_invalid_params() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let nine: Vec<String> = (0..9).map(|i| format!("wc_msg_{i:0>22}")).collect();
    let eight: Vec<String> = (0..8).map(|i| format!("wc_msg_{i:0>22}")).collect();
    for version in VERSIONS {
        for bad in [
            json!({ "ack_session_message_ids": nine }),
            json!({ "ack_session_message_ids": ["msg_1"] }),
            json!({ "ack_session_message_ids": ["wc_msg_1"] }),
            json!({ "recording_session_id": "wc_sess_short" }),
            json!({ "recording_session_id": "sess_1" }),
            json!({ "recording_session_id": "wc_sess_has space" }),
            json!({ "context_request": { "other": [] } }),
        ] {
            let r = tools_call(&st, version, Some(&key), "runtime_status", bad.clone()).await;
            assert_eq!(r.rpc_code(), Some(-32602), "{version} {bad}: {}", r.text());
        }
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "runtime_status",
            json!({ "ack_session_message_ids": eight }),
        )
        .await;
        assert_eq!(
            r.result()["structuredContent"]["success"],
            true,
            "{}",
            r.text()
        );
    }
}

#[tokio::test]
async fn a_recording_session_that_names_no_session_is_unknown_session_id() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for version in VERSIONS {
        let r = tools_call(
            &st,
            version,
            Some(&key),
            "runtime_status",
            json!({ "recording_session_id": "wc_sess_nobody0000000000000000" }),
        )
        .await;
        let sc = &r.result()["structuredContent"];
        assert_eq!(sc["success"], false, "{sc}");
        assert_eq!(sc["error"]["kind"], "unknown_session_id", "{version}: {sc}");
    }
}

#[tokio::test]
async fn calling_a_tool_without_its_scope_is_insufficient_scope() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let key = credential(&db, CredentialKind::Project, &[], &["agent:local:a"]).await;
    for version in VERSIONS {
        let r = tools_call(&st, version, Some(&key), "list_projects", json!({})).await;
        let sc = &r.result()["structuredContent"];
        assert_eq!(sc["success"], false, "{sc}");
        assert_eq!(sc["error"]["kind"], "insufficient_scope", "{version}: {sc}");
        assert_eq!(sc["error"]["scope"], "project:read", "{sc}");
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input

fn raw_mcp(auth: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", LEGACY[0])
        .header(header::AUTHORIZATION, format!("Bearer {auth}"))
        .body(body.into())
        .unwrap()
}

#[tokio::test]
async fn malformed_json_is_400_32700() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = send(&st, raw_mcp(&key, r#"{"jsonrpc":"2.0","id":1,"method":"#)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert_eq!(r.rpc_code(), Some(-32700), "{}", r.text());
}

#[tokio::test]
async fn a_wrong_jsonrpc_version_is_32600() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = send(
        &st,
        raw_mcp(&key, r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
    )
    .await;
    assert_eq!(r.rpc_code(), Some(-32600), "{}", r.text());
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
}

#[tokio::test]
async fn deeply_nested_input_is_a_400_not_a_crash() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    let r = send(&st, raw_mcp(&key, "[".repeat(100_000))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    // Nested inside a real request, too.
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"runtime_status","arguments":{{"x":{}}}}}}}"#,
        "[".repeat(100_000)
    );
    let r = send(&st, raw_mcp(&key, nested)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    // The server is still serving.
    let r = tools_list(&st, MODERN, Some(&key)).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn an_oversized_body_is_413_before_parsing() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            max_body_bytes: 4096,
            ..ServerConfig::default()
        },
    );
    let key = full_key(&db).await;
    // Not JSON at all: a parse would say -32700; the limit answers first.
    let r = send(&st, raw_mcp(&key, vec![b'{'; 5000])).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!(r.body["error"]["kind"], "payload_too_large");
    // A well-formed request over the limit likewise.
    let big = rpc(
        LEGACY[0],
        1,
        "tools/call",
        json!({ "name": "list_tools", "arguments": { "category": "x".repeat(5000) } }),
    );
    let r = send(&st, mcp_request(LEGACY[0], Some(&key), &big)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(
        events(&db).await.is_empty(),
        "an oversized request was audited"
    );
}

#[tokio::test]
async fn a_header_with_invalid_utf8_is_400() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    for name in ["x-custom", "mcp-method", "mcp-session-id"] {
        let mut req = mcp_request(MODERN, Some(&key), &rpc(MODERN, 1, "tools/list", json!({})));
        req.headers_mut().insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(b"ab\xffcd").unwrap(),
        );
        let r = send(&st, req).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{name}: {}", r.text());
    }
}

// ---------------------------------------------------------------------------------------------
// The host window

#[tokio::test(flavor = "current_thread")]
async fn the_openai_session_value_never_leaves_the_request() {
    let TestApp { db, st, key } = TestApp::new().await;
    let (logs, _guard) = capture_logs();
    let marker = "window-secret-7f3a9c";
    let mut replies = Vec::new();
    for version in VERSIONS {
        for (method, params) in [
            (
                "tools/call",
                json!({ "name": "runtime_status", "arguments": {} }),
            ),
            (
                "tools/call",
                json!({ "name": "list_tools", "arguments": { "category": "x" } }),
            ),
            ("tools/list", json!({})),
        ] {
            let mut body = rpc(version, 1, method, params);
            body["params"]["_meta"]["openai/session"] = json!(marker);
            let r = send(&st, mcp_request(version, Some(&key), &body)).await;
            assert_eq!(r.status, StatusCode::OK, "{version} {method}: {}", r.text());
            replies.push(r);
        }
        // An object-valued window, too.
        let mut body = rpc(
            version,
            2,
            "tools/call",
            json!({ "name": "runtime_status", "arguments": {} }),
        );
        body["params"]["_meta"]["openai/session"] = json!({ "id": marker });
        let r = send(&st, mcp_request(version, Some(&key), &body)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        replies.push(r);
    }
    for r in &replies {
        assert!(
            !r.text().contains(marker),
            "response echoes the window: {}",
            r.text()
        );
        for (name, value) in &r.headers {
            assert!(
                !String::from_utf8_lossy(value.as_bytes()).contains(marker),
                "header {name} echoes the window"
            );
        }
    }
    let text = logs.text();
    for r in &replies {
        let id = r.headers["x-request-id"].to_str().unwrap();
        assert!(text.contains(id), "request {id} not logged");
    }
    assert!(!text.contains(marker), "window leaked into logs:\n{text}");
    let rows = events(&db).await;
    assert_eq!(rows.len(), replies.len(), "one audit row per request");
    let audit = audit_tables_text(&db).await;
    assert!(
        !audit.contains(marker),
        "window leaked into audit rows:\n{audit}"
    );
    assert!(!audit.contains("openai/session"), "{audit}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_stateless_call_logs_one_line_of_ours_and_no_rmcp_service_lifecycle() {
    let TestApp { db: _db, st, key } = TestApp::new().await;
    // At debug, the most verbose level the capture allows: the rmcp cap holds even there.
    let (logs, _guard) = capture_logs();
    let body = rpc(
        MODERN,
        1,
        "tools/call",
        json!({ "name": "runtime_status", "arguments": {} }),
    );
    let r = send(&st, mcp_request(MODERN, Some(&key), &body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let text = logs.text();
    let id = r.headers["x-request-id"].to_str().unwrap();
    assert!(text.contains(id), "request {id} not logged:\n{text}");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("log lines are JSON");
        let target = v["target"].as_str().unwrap_or_default();
        assert!(
            !target.starts_with("rmcp::service"),
            "rmcp service line logged: {line}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Anonymous callers

#[tokio::test]
async fn without_anonymous_access_a_tokenless_call_is_401() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    for version in VERSIONS {
        let r = tools_list(&st, version, None).await;
        assert_eq!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "{version}: {}",
            r.text()
        );
        assert!(r.headers.get(header::WWW_AUTHENTICATE).is_some());
    }
    let r = rest(&st, "/api/tools/list", None, json!({})).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text());
    assert!(events(&db).await.is_empty());
}

#[tokio::test]
async fn the_anonymous_principal_lists_tools_but_not_projects_or_audit() {
    let db = TestDatabase::new().await;
    let st = state_with(
        &db,
        ServerConfig {
            allow_anonymous: true,
            ..ServerConfig::default()
        },
    );
    for version in VERSIONS {
        let r = tools_list(&st, version, None).await;
        assert_eq!(r.status, StatusCode::OK, "{version}: {}", r.text());
        let names = tool_names(r.result());
        assert!(names.contains(&"runtime_status".to_owned()), "{names:?}");
        assert!(!names.contains(&"list_projects".to_owned()), "{names:?}");
        let r = tools_call(&st, version, None, "runtime_status", json!({})).await;
        assert_eq!(r.result()["structuredContent"]["success"], true);
        let r = tools_call(&st, version, None, "list_projects", json!({})).await;
        assert_eq!(
            r.result()["structuredContent"]["error"]["kind"],
            "insufficient_scope"
        );
    }
    // A bad token is still refused, not downgraded to anonymous.
    let r = tools_list(&st, MODERN, Some("wcsk_not-a-real-token-at-all-000000000")).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text());
    for path in [
        "/api/audit/sessions",
        "/api/audit/session",
        "/api/audit/session/close",
        "/api/audit/stats",
    ] {
        let r = rest(&st, path, None, json!({})).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}: {}", r.text());
    }
    let rows = events(&db).await;
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|e| e.principal_kind.as_deref() == Some("anonymous")),
        "{rows:?}"
    );
}
