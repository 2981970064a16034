//! Argument validation against a tool's input schema, with errors that name the field (as a
//! JSON pointer) and the rule it broke. Messages never echo the offending value: it may be a
//! secret.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use crate::result::{ErrorKind, ToolError};

/// Rewrites every number with a zero fractional part (`284.0`, `1e2`) as the integer it is.
///
/// JSON Schema counts such numbers as integers, and so must we: a client may send `284.0` for
/// an `integer` argument (JavaScript and Python serializers do). Without this, a validator may
/// refuse them where a field also allows `null`, and serde refuses them for every integer
/// field (`invalid type: floating point`), so a request the published schema allows would
/// fail. Numbers outside the 64-bit integer range are left alone.
pub fn normalize_integers(value: &mut Value) {
    match value {
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            let Some(f) = n.as_f64() else { return };
            if !f.is_finite() || f.fract() != 0.0 {
                return;
            }
            // 2^63 and 2^64 are exact in f64; every integral f64 below them converts exactly.
            const I64_END: f64 = 9_223_372_036_854_775_808.0;
            const U64_END: f64 = 18_446_744_073_709_551_616.0;
            if (-I64_END..I64_END).contains(&f) {
                *value = Value::from(f as i64);
            } else if (0.0..U64_END).contains(&f) {
                *value = Value::from(f as u64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize_integers),
        Value::Object(map) => map.values_mut().for_each(normalize_integers),
        _ => {}
    }
}

/// Validates `args` and returns the first violation as an `invalid_arguments` error with
/// `pointer` and `rule` details.
pub fn validate(
    validator: &jsonschema::Validator,
    schema: &Value,
    args: &Value,
) -> Result<(), ToolError> {
    let Some(Violation {
        pointer,
        rule,
        detail,
    }) = first_violation(validator, schema, args)
    else {
        return Ok(());
    };
    let shown = if pointer.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("argument {pointer}")
    };
    Err(
        ToolError::new(ErrorKind::InvalidArguments, format!("{shown}: {detail}"))
            .with("pointer", pointer)
            .with("rule", rule),
    )
}

/// One broken rule: where (a JSON pointer into the arguments), which rule, and what it asks.
struct Violation {
    pointer: String,
    rule: &'static str,
    detail: String,
}

fn first_violation(
    validator: &jsonschema::Validator,
    schema: &Value,
    args: &Value,
) -> Option<Violation> {
    let error = validator.iter_errors(args).next()?;
    let mut pointer = error.instance_path.to_string();
    let (mut rule, mut detail) = describe(&error.kind);
    if matches!(error.kind, ValidationErrorKind::AnyOf { .. }) {
        // An optional argument is published as anyOf [its schema, null]: a value that is not
        // null broke a rule of its schema, so name that rule, where it was broken.
        if let Some(branch) = nullable_branch(schema, error.schema_path.as_str())
            && let Some(value) = args.pointer(&pointer)
            && !value.is_null()
            && let Ok(branch_validator) = jsonschema::validator_for(branch)
            && let Some(inner) = first_violation(&branch_validator, branch, value)
        {
            return Some(Violation {
                pointer: format!("{pointer}{}", inner.pointer),
                ..inner
            });
        }
        // "One of these arguments is required" is written as anyOf over `required` lists: name
        // the first as the missing field and the others as alternatives.
        if let Some(alternatives) = required_alternatives(schema, error.schema_path.as_str())
            && let Some((first, others)) = alternatives.split_first()
        {
            pointer = format!("{pointer}/{}", escape(first));
            detail = format!(
                "is required unless one of these is given: {}",
                others.join(", ")
            );
            rule = "required";
        }
    }
    // A pattern's owner says in the schema what a value breaking it got wrong.
    if matches!(
        error.kind,
        ValidationErrorKind::Pattern { .. } | ValidationErrorKind::Not { .. }
    ) && let Some(problem) = problem_at(schema, error.schema_path.as_str())
    {
        detail = problem.to_owned();
    }
    // Missing or unexpected properties are about a child of the object the validator points at.
    match &error.kind {
        // `additionalProperties: false` on an object without `properties` (a tool that takes
        // no arguments) is reported as a false schema at the object: name the unexpected key.
        ValidationErrorKind::FalseSchema
            if error
                .schema_path
                .as_str()
                .ends_with("/additionalProperties") =>
        {
            (rule, detail) = describe(&ValidationErrorKind::AdditionalProperties {
                unexpected: Vec::new(),
            });
            if let Some(Value::Object(object)) = args.pointer(&pointer)
                && let Some(key) = object.keys().next()
            {
                pointer = format!("{pointer}/{}", escape(key));
            }
        }
        ValidationErrorKind::Required { property } => {
            if let Some(p) = property.as_str() {
                pointer = format!("{pointer}/{}", escape(p));
            }
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            if let Some(p) = unexpected.first() {
                pointer = format!("{pointer}/{}", escape(p));
            }
            let known = known_properties(schema, error.schema_path.as_str());
            detail = unknown_arguments(unexpected, &known);
        }
        _ => {}
    }
    Some(Violation {
        pointer,
        rule,
        detail,
    })
}

/// The schema node that holds the keyword at `schema_path` (a JSON pointer ending in the
/// keyword).
fn keyword_owner<'s>(schema: &'s Value, schema_path: &str) -> Option<&'s Value> {
    let (owner, _keyword) = schema_path.rsplit_once('/')?;
    schema.pointer(owner)
}

/// The sentence the owner of the pattern (or `not`) at `schema_path` gives a value that
/// breaks it ([`wc_domain::text::PROBLEM_KEYWORD`]).
fn problem_at<'s>(schema: &'s Value, schema_path: &str) -> Option<&'s str> {
    keyword_owner(schema, schema_path)?
        .get(wc_domain::text::PROBLEM_KEYWORD)?
        .as_str()
}

/// The property names of the object whose `additionalProperties` is at `schema_path`.
fn known_properties<'s>(schema: &'s Value, schema_path: &str) -> Vec<&'s str> {
    keyword_owner(schema, schema_path)
        .and_then(|o| o.get("properties"))
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Most accepted names a refusal lists.
const MAX_LISTED: usize = 16;

/// What a caller reads for `unexpected` argument names where `known` are accepted: the
/// accepted name each probably meant, else the accepted names.
fn unknown_arguments(unexpected: &[String], known: &[&str]) -> String {
    let mut detail = "is not a known argument".to_owned();
    if let [_, others @ ..] = unexpected
        && !others.is_empty()
    {
        let others: Vec<String> = others.iter().map(|o| format!("`{o}`")).collect();
        detail.push_str(&format!(", nor is {}", others.join(", ")));
    }
    let meant: Vec<Option<&str>> = unexpected.iter().map(|u| closest(u, known)).collect();
    if meant.iter().all(Option::is_some) && !meant.is_empty() {
        let meant: Vec<String> = meant.iter().flatten().map(|m| format!("`{m}`")).collect();
        detail.push_str(&format!(": did you mean {}?", meant.join(" and ")));
    } else if known.is_empty() {
        detail.push_str(": this takes no arguments here");
    } else {
        let listed: Vec<String> = known
            .iter()
            .take(MAX_LISTED)
            .map(|k| format!("`{k}`"))
            .collect();
        let more = if known.len() > MAX_LISTED {
            ", …"
        } else {
            ""
        };
        detail.push_str(&format!("; accepted here: {}{more}", listed.join(", ")));
    }
    detail
}

/// The accepted name `unknown` most likely meant: one it begins or ends, or one a few
/// edits away.
fn closest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    let unknown = unknown.to_ascii_lowercase();
    let words = |name: &str| name.split('_').map(str::to_owned).collect::<Vec<_>>();
    let affix = known.iter().copied().find(|k| {
        unknown.len() >= 2
            && (k.starts_with(&unknown)
                || k.ends_with(&unknown)
                || words(k).contains(&unknown)
                || unknown.starts_with(*k))
    });
    affix.or_else(|| {
        let allowed = (unknown.chars().count() / 3).max(1);
        known
            .iter()
            .copied()
            .map(|k| (edit_distance(&unknown, k), k))
            .filter(|(d, _)| *d <= allowed)
            .min_by_key(|(d, _)| *d)
            .map(|(_, k)| k)
    })
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The branch of a nullable `anyOf` (`[schema, {"type": "null"}]`, either order) that is not
/// the null one.
fn nullable_branch<'s>(schema: &'s Value, schema_path: &str) -> Option<&'s Value> {
    let branches = schema.pointer(schema_path)?.as_array()?;
    let is_null = |b: &Value| {
        b.as_object()
            .is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::from("null")))
    };
    match branches.as_slice() {
        [a, b] if is_null(b) && !is_null(a) => Some(a),
        [a, b] if is_null(a) && !is_null(b) => Some(b),
        _ => None,
    }
}

/// The names of an `anyOf` whose branches each require arguments:
/// `{"type": "object", "required": [name, …], "properties": {…}}` (`type` optional); a branch
/// that requires several names them joined with `+` (`client_id+path`).
fn required_alternatives(schema: &Value, schema_path: &str) -> Option<Vec<String>> {
    let branches = schema.pointer(schema_path)?.as_array()?;
    branches
        .iter()
        .map(|b| {
            let obj = b.as_object()?;
            let req = obj.get("required")?.as_array()?;
            let only_that = obj.iter().all(|(k, v)| {
                k == "required" || k == "properties" || (k == "type" && v == "object")
            });
            let names: Option<Vec<&str>> = req.iter().map(Value::as_str).collect();
            (only_that && !req.is_empty()).then(|| names.map(|n| n.join("+")))?
        })
        .collect()
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn type_name(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => format!("{t:?}").to_lowercase(),
        TypeKind::Multiple(ts) => {
            let names: Vec<String> = ts.iter().map(|t| format!("{t:?}").to_lowercase()).collect();
            names.join(" or ")
        }
    }
}

fn describe(kind: &ValidationErrorKind) -> (&'static str, String) {
    use ValidationErrorKind as K;
    match kind {
        K::Required { .. } => ("required", "is required".into()),
        K::AdditionalProperties { .. } | K::UnevaluatedProperties { .. } => {
            ("additionalProperties", "is not a known argument".into())
        }
        K::Type { kind } => ("type", format!("must be of type {}", type_name(kind))),
        K::MaxLength { limit } => ("maxLength", format!("must be at most {limit} characters")),
        K::MinLength { limit } => ("minLength", format!("must be at least {limit} characters")),
        K::MaxItems { limit } => ("maxItems", format!("must have at most {limit} items")),
        K::MinItems { limit } => ("minItems", format!("must have at least {limit} items")),
        K::Maximum { limit } => ("maximum", format!("must be at most {limit}")),
        K::Minimum { limit } => ("minimum", format!("must be at least {limit}")),
        K::ExclusiveMaximum { limit } => ("exclusiveMaximum", format!("must be less than {limit}")),
        K::ExclusiveMinimum { limit } => {
            ("exclusiveMinimum", format!("must be greater than {limit}"))
        }
        K::Pattern { pattern } => ("pattern", format!("must match the pattern {pattern}")),
        K::Not { .. } => ("not", "is a form this argument refuses".into()),
        K::Enum { options } => ("enum", format!("must be one of {options}")),
        K::Constant { expected_value } => ("const", format!("must be {expected_value}")),
        K::UniqueItems => ("uniqueItems", "must not repeat items".into()),
        K::Format { format } => ("format", format!("must be a valid {format}")),
        K::MultipleOf { multiple_of } => {
            ("multipleOf", format!("must be a multiple of {multiple_of}"))
        }
        K::MaxProperties { limit } => (
            "maxProperties",
            format!("must have at most {limit} properties"),
        ),
        K::MinProperties { limit } => (
            "minProperties",
            format!("must have at least {limit} properties"),
        ),
        K::AnyOf { .. } | K::OneOfNotValid { .. } => {
            ("anyOf", "matches none of the allowed shapes".into())
        }
        K::OneOfMultipleValid { .. } => (
            "oneOf",
            "matches more than one of the allowed shapes".into(),
        ),
        _ => ("schema", "does not match the schema".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value, args: Value) -> Option<(String, String, String)> {
        let v = jsonschema::validator_for(&schema).unwrap();
        validate(&v, &schema, &args).err().map(|e| {
            (
                e.details["pointer"].as_str().unwrap().to_owned(),
                e.details["rule"].as_str().unwrap().to_owned(),
                e.message,
            )
        })
    }

    #[test]
    fn integral_floats_become_integers_and_pass_integer_schemas() {
        let schema = json!({
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 500},
                "n": {"type": "integer"},
                "x": {"type": "number"}
            },
            "additionalProperties": false
        });
        let mut args = json!({"limit": 284.0, "n": -3.0, "x": 2.5});
        normalize_integers(&mut args);
        assert_eq!(args, json!({"limit": 284, "n": -3, "x": 2.5}));
        assert!(check(schema.clone(), args).is_none());

        let mut nested = json!([1.0, {"a": [0.0, -0.0, 1e3, 1.5]}, 1e19, 1e20, "2.0"]);
        normalize_integers(&mut nested);
        assert_eq!(
            nested,
            json!([1, {"a": [0, 0, 1000, 1.5]}, 10_000_000_000_000_000_000u64, 1e20, "2.0"])
        );
        let (_, rule, _) = check(schema, json!({"limit": 284.5})).unwrap();
        assert_eq!(rule, "type");
    }

    #[test]
    fn violations_name_the_field_and_the_rule_without_the_value() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 5},
                "n": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
                "a/b": {"type": "string"}
            },
            "required": ["name"],
            "additionalProperties": false
        });
        let cases = [
            (json!({}), "/name", "required"),
            (
                json!({"name": "secret-value-too-long"}),
                "/name",
                "maxLength",
            ),
            (json!({"name": "x", "n": 0}), "/n", "minimum"),
            (json!({"name": "x", "n": "1"}), "/n", "type"),
            (json!({"name": "x", "tags": ["a", 1]}), "/tags/1", "type"),
            (
                json!({"name": "x", "tags": ["a", "b"]}),
                "/tags",
                "maxItems",
            ),
            (
                json!({"name": "x", "bogus": 1}),
                "/bogus",
                "additionalProperties",
            ),
            (json!({"name": "x", "a/b": 1}), "/a~1b", "type"),
            (json!([1]), "", "type"),
        ];
        for (args, pointer, rule) in cases {
            let (p, r, msg) =
                check(schema.clone(), args.clone()).unwrap_or_else(|| panic!("{args} passed"));
            assert_eq!((p.as_str(), r.as_str()), (pointer, rule), "{args}: {msg}");
            assert!(
                !msg.contains("secret-value"),
                "message echoes the value: {msg}"
            );
        }
        assert!(check(schema, json!({"name": "ok", "n": 3})).is_none());
    }

    #[test]
    fn a_nullable_argument_names_the_rule_its_own_schema_breaks() {
        let schema = json!({
            "type": "object",
            "properties": {
                "limit": {"description": "How many.", "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 500},
                    {"type": "null"}
                ]},
                "opts": {"anyOf": [
                    {"type": "null"},
                    {"type": "object", "properties": {"depth": {"anyOf": [
                        {"type": "integer", "minimum": 0}, {"type": "null"}
                    ]}}, "additionalProperties": false}
                ]}
            },
            "additionalProperties": false
        });
        let cases = [
            (json!({"limit": 0}), "/limit", "minimum"),
            (json!({"limit": 501}), "/limit", "maximum"),
            (json!({"limit": "x"}), "/limit", "type"),
            (json!({"limit": 2.5}), "/limit", "type"),
            (json!({"opts": {"depth": -1}}), "/opts/depth", "minimum"),
            (
                json!({"opts": {"bogus": 1}}),
                "/opts/bogus",
                "additionalProperties",
            ),
            (json!({"opts": 3}), "/opts", "type"),
        ];
        for (args, pointer, rule) in cases {
            let (p, r, msg) =
                check(schema.clone(), args.clone()).unwrap_or_else(|| panic!("{args} passed"));
            assert_eq!((p.as_str(), r.as_str()), (pointer, rule), "{args}: {msg}");
            assert!(msg.starts_with(&format!("argument {pointer}: ")), "{msg}");
        }
        for ok in [
            json!({"limit": null, "opts": null}),
            json!({"limit": 3, "opts": {"depth": null}}),
        ] {
            assert!(check(schema.clone(), ok.clone()).is_none(), "{ok}");
        }
    }

    #[test]
    fn unknown_arguments_of_a_tool_without_arguments_are_named() {
        let schema = json!({"type": "object", "additionalProperties": false});
        let (p, r, _) = check(schema.clone(), json!({"bogus": 1})).unwrap();
        assert_eq!((p.as_str(), r.as_str()), ("/bogus", "additionalProperties"));
        let nested = json!({
            "type": "object",
            "properties": {"inner": {"type": "object", "additionalProperties": false}}
        });
        let (p, r, _) = check(nested, json!({"inner": {"a~b": 1}})).unwrap();
        assert_eq!(
            (p.as_str(), r.as_str()),
            ("/inner/a~0b", "additionalProperties")
        );
        assert!(check(schema, json!({})).is_none());
    }

    #[test]
    fn one_of_several_required_arguments_is_named() {
        let schema = json!({
            "type": "object",
            "properties": {"project": {"type": "string"}, "session_id": {"type": "string"}},
            "anyOf": [
                {"type": "object", "required": ["project"], "properties": {"project": {"type": "string"}}},
                {"required": ["session_id"], "properties": {"session_id": {"type": "string"}}}
            ]
        });
        let (pointer, rule, message) = check(schema.clone(), json!({})).unwrap();
        assert_eq!((pointer.as_str(), rule.as_str()), ("/project", "required"));
        assert!(
            message.contains("unless one of these is given: session_id"),
            "{message}"
        );
        assert!(check(schema.clone(), json!({"session_id": "x"})).is_none());
        // Present but null does not count.
        assert!(check(schema, json!({"session_id": null})).is_some());
    }
    #[test]
    fn a_pattern_owner_says_what_was_wrong_in_its_own_words() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "pattern": "^[^/]", "x-problem": "must be relative",
                         "not": {"type": "string", "pattern": "\\.\\."}},
                "tag": {"type": "string", "pattern": "^[a-z]+$"}
            },
            "additionalProperties": false
        });
        let (pointer, rule, msg) = check(schema.clone(), json!({"path": "/etc"})).unwrap();
        assert_eq!((pointer.as_str(), rule.as_str()), ("/path", "pattern"));
        assert_eq!(msg, "argument /path: must be relative");
        let (_, rule, msg) = check(schema.clone(), json!({"path": "a/../b"})).unwrap();
        assert_eq!(
            (rule.as_str(), msg.as_str()),
            ("not", "argument /path: must be relative")
        );
        // Without an owner's sentence the rule is named as it stands.
        let (_, _, msg) = check(schema, json!({"tag": "A"})).unwrap();
        assert_eq!(msg, "argument /tag: must match the pattern ^[a-z]+$");
    }

    #[test]
    fn an_unknown_argument_is_told_what_it_probably_meant_or_what_is_accepted() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "edits": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"old_text": {"type": "string"}, "new_text": {"type": "string"}},
                    "additionalProperties": false
                }},
                "expected_sha256": {"type": "string"}
            },
            "additionalProperties": false
        });
        let edits = json!({"path": "a", "edits": [{"old": "x", "new": "y"}]});
        let (pointer, rule, msg) = check(schema.clone(), edits).unwrap();
        assert_eq!(
            (pointer.as_str(), rule.as_str()),
            ("/edits/0/new", "additionalProperties")
        );
        assert_eq!(
            msg,
            "argument /edits/0/new: is not a known argument, nor is `old`: did you mean `new_text` and `old_text`?"
        );
        let (_, _, msg) = check(schema.clone(), json!({"pth": "a"})).unwrap();
        assert_eq!(
            msg,
            "argument /pth: is not a known argument: did you mean `path`?"
        );
        let (_, _, msg) = check(schema.clone(), json!({"sha256": "a"})).unwrap();
        assert!(msg.ends_with("did you mean `expected_sha256`?"), "{msg}");
        let (_, _, msg) = check(schema, json!({"zzzzzz": 1})).unwrap();
        assert_eq!(
            msg,
            "argument /zzzzzz: is not a known argument; accepted here: `edits`, `expected_sha256`, `path`"
        );
    }
}
