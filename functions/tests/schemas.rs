//! Every schema the server publishes is portable: the input and output schemas of MCP
//! `tools/list` on every protocol revision, the REST tool list, and every schema of the OpenAPI
//! document. Portable means what every MCP client and OpenAPI tool reads the same way:
//!
//! - `type` is one string (never an array such as `["integer", "null"]`: nullable is `anyOf`
//!   with `{"type": "null"}`);
//! - `format` is one a JSON Schema validator knows (never schemars' `uint`, `uint32`, `int64`,
//!   `double`, which Ajv warns about; integers carry `minimum`/`maximum` instead);
//! - every schema has a `type`, unless it only composes others (`anyOf`, `oneOf`, `allOf`) or
//!   refers to one (`$ref`); a boolean schema appears only as `additionalProperties` or
//!   `unevaluatedProperties`.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{Value, json};
use wc_store::testing::TestDatabase;

/// Formats every common validator knows (JSON Schema 2020-12's, as Ajv's formats name them).
const KNOWN_FORMATS: [&str; 13] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "regex",
    "json-pointer",
];

/// Keywords whose value is one subschema.
const ONE_SUBSCHEMA: [&str; 10] = [
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
];
/// Keywords whose value is an array of subschemas.
const SUBSCHEMA_LISTS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to subschemas.
const SUBSCHEMA_MAPS: [&str; 4] = [
    "properties",
    "patternProperties",
    "$defs",
    "dependentSchemas",
];

/// The non-portable constructs of `schema` (at `at`), one line each.
fn problems(schema: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, at, false, &mut out);
    out
}

fn walk(schema: &Value, at: &str, boolean_allowed: bool, out: &mut Vec<String>) {
    let node = match schema {
        Value::Bool(_) if boolean_allowed => return,
        Value::Object(node) => node,
        other => {
            out.push(format!("{at}: a schema that is {other}, not an object"));
            return;
        }
    };
    match node.get("type") {
        Some(Value::String(_)) => {}
        Some(other) => out.push(format!("{at}: type is {other}, not one string")),
        None => {
            let composes = ["anyOf", "oneOf", "allOf", "$ref"]
                .iter()
                .any(|k| node.contains_key(*k));
            if !composes {
                out.push(format!("{at}: no type"));
            }
        }
    }
    if let Some(format) = node.get("format")
        && !format.as_str().is_some_and(|f| KNOWN_FORMATS.contains(&f))
    {
        out.push(format!("{at}: format {format} is not a known format"));
    }
    for key in ONE_SUBSCHEMA {
        if let Some(child) = node.get(key) {
            let boolean_allowed = matches!(key, "additionalProperties" | "unevaluatedProperties");
            walk(child, &format!("{at}/{key}"), boolean_allowed, out);
        }
    }
    for key in SUBSCHEMA_LISTS {
        if let Some(children) = node.get(key) {
            match children.as_array() {
                Some(children) => {
                    for (i, child) in children.iter().enumerate() {
                        walk(child, &format!("{at}/{key}/{i}"), false, out);
                    }
                }
                None => out.push(format!("{at}/{key}: not an array")),
            }
        }
    }
    for key in SUBSCHEMA_MAPS {
        if let Some(children) = node.get(key) {
            match children.as_object() {
                Some(children) => {
                    for (name, child) in children {
                        walk(child, &format!("{at}/{key}/{name}"), false, out);
                    }
                }
                None => out.push(format!("{at}/{key}: not an object")),
            }
        }
    }
}

#[test]
fn the_check_finds_every_non_portable_construct() {
    let cases = [
        (json!({"type": ["integer", "null"]}), "type is"),
        (json!({"type": "integer", "format": "uint32"}), "format"),
        (json!({"type": "number", "format": "double"}), "format"),
        (json!({"description": "anything"}), "no type"),
        (
            json!({"type": "object", "properties": {"a": true}}),
            "not an object",
        ),
        (
            json!({"type": "object", "properties": {"a": {"anyOf": [{"required": ["x"]}]}}}),
            "no type",
        ),
        (
            json!({"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer", "format": "uint"}}}}),
            "format",
        ),
        (
            json!({"allOf": [{"if": {"properties": {"t": {"const": 1}}}}]}),
            "no type",
        ),
    ];
    for (schema, what) in cases {
        let found = problems(&schema, "#");
        assert!(
            found.iter().any(|p| p.contains(what)),
            "{schema}: {found:?}"
        );
    }
    let portable = json!({
        "type": "object",
        "properties": {
            "n": {"description": "optional", "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
            "at": {"type": "string", "format": "date-time"},
            "r": {"$ref": "#/components/schemas/X"}
        },
        "additionalProperties": false
    });
    assert_eq!(problems(&portable, "#"), Vec::<String>::new());
}

#[tokio::test]
async fn every_listed_tool_schema_is_portable_on_every_surface() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let key = full_key(&db).await;
    let mut found = Vec::new();
    let mut checked = 0;
    for version in VERSIONS {
        let r = tools_list(&st, version, Some(&key)).await;
        for tool in r.result()["tools"].as_array().expect("tools") {
            let name = tool["name"].as_str().unwrap();
            for field in ["inputSchema", "outputSchema"] {
                assert!(tool[field].is_object(), "{version} {name}: no {field}");
                found.extend(problems(&tool[field], &format!("{version} {name} {field}")));
                checked += 1;
            }
        }
    }
    let listed = rest(&st, "/api/tools/list", Some(&key), json!({})).await;
    for tool in output(&listed.body)["tools"].as_array().expect("tools") {
        let name = tool["name"].as_str().unwrap();
        found.extend(problems(&tool["input_schema"], &format!("REST {name}")));
        checked += 1;
    }
    assert!(checked > 50, "only {checked} schemas were listed");
    assert!(
        found.is_empty(),
        "{} problems:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[tokio::test]
async fn every_schema_of_the_openapi_document_is_portable() {
    let db = TestDatabase::new().await;
    let st = state(&db);
    let r = send(
        &st,
        Request::get("/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let doc = r.body;
    let mut found = Vec::new();
    let mut checked = 0;
    for (name, schema) in doc["components"]["schemas"]
        .as_object()
        .expect("components")
    {
        found.extend(problems(schema, &format!("components {name}")));
        checked += 1;
    }
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().unwrap() {
            let bodies = std::iter::once(("request", &op["requestBody"])).chain(
                op["responses"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(status, response)| (status.as_str(), response)),
            );
            for (what, body) in bodies {
                for (media, content) in body["content"].as_object().into_iter().flatten() {
                    found.extend(problems(
                        &content["schema"],
                        &format!("{method} {path} {what} {media}"),
                    ));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} schemas in the document");
    assert!(
        found.is_empty(),
        "{} problems:\n{}",
        found.len(),
        found.join("\n")
    );
}
