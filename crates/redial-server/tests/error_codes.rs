//! Error codes come from one enum, `ErrorCode` (issue 32): the OpenAPI document's enum, the codes
//! its responses name, and the TypeScript and Python clients' error code types are all checked
//! against `ErrorCode::ALL`, so that adding or renaming a code without them fails here.

use redial_server::{ErrorCode, OPENAPI};
use serde_json::Value;
use std::collections::BTreeSet;

fn all() -> Vec<&'static str> {
    ErrorCode::ALL.iter().map(|c| c.as_str()).collect()
}

fn repo_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The quoted strings of `text` between `start` and the first `end` after it.
fn quoted_between(text: &str, start: &str, end: &str) -> Vec<String> {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} is not there"));
    let rest = &text[from + start.len()..];
    let to = rest.find(end).unwrap_or(rest.len());
    rest[..to]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn codes_are_unique_snake_case_and_described() {
    let codes = all();
    let unique: BTreeSet<_> = codes.iter().collect();
    assert_eq!(unique.len(), codes.len(), "a code is listed twice");
    for code in ErrorCode::ALL {
        let s = code.as_str();
        assert!(
            !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{s} is not snake_case"
        );
        assert!(code.describe().ends_with('.'), "{s} says what it means");
        assert_eq!(code.to_string(), s);
    }
}

#[test]
fn the_openapi_document_lists_every_code_and_names_no_other() {
    let doc: Value = serde_json::from_str(OPENAPI).expect("valid JSON");
    let listed: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_array()
        .expect("Error.error.code has an enum")
        .iter()
        .map(|v| v.as_str().expect("a string"))
        .collect();
    assert_eq!(
        listed,
        all(),
        "openapi.json's Error code enum differs from ErrorCode::ALL: paste {}",
        serde_json::to_string(&all()).expect("JSON")
    );
    // Every "Code: x" a response's description names is a code.
    let named: BTreeSet<String> = OPENAPI
        .split("Code: ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect()
        })
        .collect();
    assert!(!named.is_empty(), "the responses name their codes");
    for code in &named {
        assert!(
            all().contains(&code.as_str()),
            "openapi.json names code {code:?}, which ErrorCode does not have"
        );
    }
}

#[test]
fn the_typescript_client_types_every_code() {
    let types = repo_file("clients/typescript/src/api-types.ts");
    // The generated union: `code: "bad_request" | ... ;`.
    let mut found = quoted_between(&types, "code: ", ";");
    let mut expected: Vec<String> = all().into_iter().map(str::to_owned).collect();
    found.sort();
    expected.sort();
    assert_eq!(
        found, expected,
        "clients/typescript/src/api-types.ts is stale: run `cd clients/typescript && npm run generate-types`"
    );
    let errors = repo_file("clients/typescript/src/errors.ts");
    assert!(
        errors.contains(
            r#"export type ErrorCode = components["schemas"]["Error"]["error"]["code"];"#
        ),
        "the TypeScript client's ErrorCode comes from the generated types"
    );
}

#[test]
fn the_python_client_lists_every_code() {
    let errors = repo_file("clients/python/src/redial_client/errors.py");
    let listed = quoted_between(&errors, "ErrorCode = Literal[", "]");
    assert_eq!(
        listed,
        all(),
        "clients/python/src/redial_client/errors.py's ErrorCode differs from the server's"
    );
}

/// The event kinds, like the codes: `Event.type`'s enum and the `kind` filter's description on
/// both event routes name every kind there is (`EventKind::ALL`), and no other.
#[test]
fn the_openapi_document_names_every_event_kind() {
    let doc: Value = serde_json::from_str(OPENAPI).expect("valid JSON");
    let kinds: Vec<&str> = redial_store::EventKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    let listed: Vec<&str> = doc["components"]["schemas"]["Event"]["properties"]["type"]["enum"]
        .as_array()
        .expect("Event.type has an enum")
        .iter()
        .map(|v| v.as_str().expect("a string"))
        .collect();
    assert_eq!(listed, kinds);
    for route in ["/v1/events", "/v1/events/stream"] {
        let params = doc["paths"][route]["get"]["parameters"]
            .as_array()
            .expect("parameters");
        let kind = params
            .iter()
            .find(|p| p["name"] == "kind")
            .expect("a kind parameter");
        let described = kind["description"].as_str().expect("described");
        let named: Vec<&str> = described
            .split(&[':', ',', '('][..])
            .map(str::trim)
            .filter(|w| w.starts_with("job.") || w.starts_with("endpoint."))
            .collect();
        assert_eq!(named, kinds, "{route}'s kind filter: {described}");
    }
}
