//! `src/types.rs` is generated from the OpenAPI document (`crates/redial-server/src/openapi.json`)
//! by this test: it fails when the two drift, and `REDIAL_BLESS=1 cargo test -p redial-api`
//! rewrites the file. The document is what the server is checked against (its route test, the
//! API fuzzing), so the Rust client's types come from the same place as the TypeScript client's.
//!
//! Mapping: a schema is a struct; a property the schema requires is a field of its type (an
//! `Option` when it may be null), one it does not require an `Option` left out when absent
//! (in an input, a closed schema, that may also be null, an `Option<Option<_>>`: absent, null and
//! a value are three things, as in a replay's patch; a free-form field of an input reads `null` as
//! `Some(Value::Null)`); an input refuses unknown fields;
//! a string of several values (`enum`) is a Rust enum, named in [`ENUMS`] by its values (a set
//! not named there fails the test), with an `Other` variant that a value this build does not know
//! reads as (a newer server's: a client keeps working); a date-time is a `redial_time::Timestamp`
//! (RFC 3339 on the wire); other strings are `String`, integers `i64`, numbers `f64`; an inline
//! object
//! with properties is a struct named after its parent and field; one schema or null is an `Option`
//! of it; one of several objects is one struct with all their properties, each optional; anything
//! else (free-form objects) is a `serde_json::Value`.

use serde_json::{Map, Value};
use std::fmt::Write;

const DOCUMENT: &str = include_str!("../../redial-server/src/openapi.json");

fn camel(snake: &str) -> String {
    snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn field_name(name: &str) -> String {
    match name {
        "type" | "for" | "move" | "ref" | "match" | "loop" | "in" | "fn" => format!("r#{name}"),
        _ => name.to_owned(),
    }
}

/// Writes `///` lines for a description, wrapped at about 96 columns.
fn doc(out: &mut String, indent: &str, text: Option<&str>) {
    let Some(text) = text else {
        return;
    };
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + 4 + line.len() + 1 + word.len() > 96 {
            let _ = writeln!(out, "{indent}/// {line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{indent}/// {line}");
    }
}

/// The enums' names, by their first value. The error code is not here: it is
/// `redial_api::ErrorCode`, written by hand (with each code's meaning) and checked against the
/// document by the server's tests; the error's `code` stays a string.
const ENUMS: &[(&str, &str)] = &[
    ("scheduled", "JobState"),
    ("permanent", "DeadCategory"),
    ("running", "OperationState"),
    ("keep", "KeyChoice"),
    ("closed", "BreakerState"),
    ("block", "OrderingOnDead"),
    ("skip", "Missed"),
    ("api", "ScheduleSource"),
    ("completed", "CallbackOn"),
    ("job.completed", "EventType"),
    ("replay", "OperationKind"),
    ("bearer", "CredentialsKind"),
];

/// `snake_case`, `dotted.name`: `SnakeCase`, `DottedName`.
fn variant(value: &str) -> String {
    camel(&value.replace('.', "_"))
}

struct Generator {
    /// The enums met so far: name, values.
    enums: std::collections::BTreeMap<String, Vec<String>>,
    /// Structs still to write: (name, schema).
    pending: Vec<(String, Value)>,
    /// Every struct name given so far (the schemas' first).
    names: std::collections::BTreeSet<String>,
    /// Every type written, in order: the crates re-export them by name.
    written: Vec<String>,
    out: String,
}

impl Generator {
    /// The Rust type of a property (without the `Option` its being optional adds), and whether it
    /// may be null.
    fn type_of(&mut self, parent: &str, field: &str, p: &Value) -> (String, bool) {
        if let Some(r) = p["$ref"].as_str() {
            let name = r.rsplit('/').next().unwrap_or(r);
            return (name.to_owned(), false);
        }
        // One schema or null: an `Option` of it.
        if let Some(alternatives) = p["oneOf"].as_array().or(p["anyOf"].as_array()) {
            let (nulls, others): (Vec<&Value>, Vec<&Value>) =
                alternatives.iter().partition(|a| a["type"] == "null");
            if let ([_], [one]) = (nulls.as_slice(), others.as_slice()) {
                let (ty, _) = self.type_of(parent, field, one);
                return (ty, true);
            }
            // One of several objects (`{"cron": ...}` or `{"every": ...}`): one struct with
            // every alternative's properties, none required.
            if nulls.is_empty() && others.iter().all(|o| o["properties"].is_object()) {
                let mut merged = Map::new();
                for o in &others {
                    if let Some(props) = o["properties"].as_object() {
                        merged.extend(props.clone());
                    }
                }
                let mut one = serde_json::json!({ "type": "object", "properties": merged });
                if let Some(d) = p["description"].as_str() {
                    one["description"] = d.into();
                }
                return self.type_of(parent, field, &one);
            }
        }
        let (kind, nullable) = match &p["type"] {
            Value::String(t) => (t.as_str(), false),
            Value::Array(ts) => {
                let nullable = ts.iter().any(|t| t == "null");
                let kind = ts
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|t| *t != "null")
                    .unwrap_or("object");
                (kind, nullable)
            }
            _ => return ("serde_json::Value".into(), false),
        };
        let values: Vec<&str> = p["enum"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let ty = match kind {
            "string" if values.len() > 1 && values[0] != "backup_in_progress" => {
                let name = ENUMS
                    .iter()
                    .find(|(first, _)| *first == values[0])
                    .map(|(_, name)| (*name).to_owned())
                    .unwrap_or_else(|| {
                        panic!("{parent}.{field}: name the enum of {values:?} in ENUMS")
                    });
                let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
                let known = self.enums.entry(name.clone()).or_insert(values.clone());
                assert_eq!(
                    *known, values,
                    "{parent}.{field}: {name} has other values elsewhere"
                );
                name
            }
            "string" if p["format"] == "date-time" => "redial_time::Timestamp".to_owned(),
            "string" => "String".to_owned(),
            "integer" => "i64".to_owned(),
            "number" => "f64".to_owned(),
            "boolean" => "bool".to_owned(),
            "array" => {
                let (inner, inner_null) = self.type_of(parent, field, &p["items"]);
                if inner_null {
                    format!("Vec<Option<{inner}>>")
                } else {
                    format!("Vec<{inner}>")
                }
            }
            "object" if p["properties"].is_object() => {
                // Named after its parent and field; "Inline" added should a schema have that name.
                let mut name = format!("{parent}{}", camel(field));
                while !self.names.insert(name.clone()) {
                    name.push_str("Inline");
                }
                self.pending.push((name.clone(), p.clone()));
                name
            }
            _ => "serde_json::Value".to_owned(),
        };
        (ty, nullable)
    }

    fn write_struct(&mut self, name: &str, schema: &Value) {
        let empty = Map::new();
        let props = schema["properties"].as_object().unwrap_or(&empty);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut body = String::new();
        doc(&mut body, "", schema["description"].as_str());
        let _ = writeln!(
            body,
            "#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]"
        );
        // A closed schema is an input (the server refuses a field it does not know): read so.
        let input = schema["additionalProperties"] == Value::Bool(false);
        if input {
            let _ = writeln!(body, "#[serde(deny_unknown_fields)]");
        }
        let _ = writeln!(body, "pub struct {name} {{");
        self.written.push(name.to_owned());
        for (field, p) in props {
            let (ty, nullable) = self.type_of(name, field, p);
            doc(&mut body, "    ", p["description"].as_str());
            let value = ty == "serde_json::Value";
            if !required.contains(&field.as_str()) && input && value {
                // A free-form field of an input: `null` is a value (`Some(Value::Null)`: a
                // replay's patch clears the body), absent is `None`.
                let _ = writeln!(
                    body,
                    "    #[serde(default, skip_serializing_if = \"Option::is_none\", deserialize_with = \"crate::present\")]"
                );
                let _ = writeln!(body, "    pub {}: Option<{ty}>,", field_name(field));
            } else if !required.contains(&field.as_str()) && nullable && input {
                // Absent, null and a value mean three things in an input (a replay's patch:
                // leave it, clear it, set it): `Option<Option<_>>`.
                let _ = writeln!(
                    body,
                    "    #[serde(default, skip_serializing_if = \"Option::is_none\", with = \"crate::double_option\")]"
                );
                let _ = writeln!(body, "    pub {}: Option<Option<{ty}>>,", field_name(field));
            } else if !required.contains(&field.as_str()) {
                let _ = writeln!(
                    body,
                    "    #[serde(default, skip_serializing_if = \"Option::is_none\")]"
                );
                let _ = writeln!(body, "    pub {}: Option<{ty}>,", field_name(field));
            } else if nullable {
                let _ = writeln!(body, "    pub {}: Option<{ty}>,", field_name(field));
            } else {
                let _ = writeln!(body, "    pub {}: {ty},", field_name(field));
            }
        }
        body.push_str("}\n\n");
        self.out.push_str(&body);
    }

    fn write_enum(&mut self, name: &str, values: &[String]) {
        self.written.push(name.to_owned());
        let out = &mut self.out;
        let _ = writeln!(
            out,
            "/// One of the API's values. `Other`: one this build does not know (a newer server's).\n\
             #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]\n\
             pub enum {name} {{"
        );
        for v in values {
            let _ = writeln!(out, "    #[serde(rename = \"{v}\")]\n    {},", variant(v));
        }
        let _ = writeln!(
            out,
            "    #[default]\n    #[serde(other, rename = \"other\")]\n    Other,\n}}\n"
        );
        let _ = writeln!(
            out,
            "impl {name} {{\n    /// Every value this build knows, in the document's order.\n    pub const ALL: &'static [{name}] = &["
        );
        for v in values {
            let _ = writeln!(out, "        {name}::{},", variant(v));
        }
        let _ = writeln!(
            out,
            "    ];\n\n    /// The value as the API writes it (`other` for one this build does not know).\n    pub const fn as_str(self) -> &'static str {{\n        match self {{"
        );
        for v in values {
            let _ = writeln!(out, "            {name}::{} => \"{v}\",", variant(v));
        }
        let _ = writeln!(
            out,
            "            {name}::Other => \"other\",\n        }}\n    }}\n\n    /// The value the API writes as `value`; `Other` for one this build does not know.\n    pub fn parse(value: &str) -> {name} {{\n        {name}::ALL\n            .iter()\n            .copied()\n            .find(|v| v.as_str() == value)\n            .unwrap_or({name}::Other)\n    }}\n}}\n\n\
             impl std::fmt::Display for {name} {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{\n        f.write_str(self.as_str())\n    }}\n}}\n"
        );
    }
}

/// The generated file, and the names of its types.
fn generate() -> (String, Vec<String>) {
    let document: Value = serde_json::from_str(DOCUMENT).expect("the OpenAPI document is JSON");
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("components.schemas");
    let mut g = Generator {
        enums: Default::default(),
        pending: Vec::new(),
        names: schemas.keys().cloned().collect(),
        written: Vec::new(),
        out: String::from(
            "//! Every schema of the OpenAPI document (`crates/redial-server/src/openapi.json`), as Rust\n\
             //! types. Generated by `tests/types.rs` (`REDIAL_BLESS=1 cargo test -p redial-api --test\n\
             //! types`): do not edit by hand. Over 600 lines: one type per schema, and the\n\
             //! document has about a hundred.\n\n\
             #![allow(clippy::doc_markdown)]\n\n\
             use serde::{Deserialize, Serialize};\n\n",
        ),
    };
    for (name, schema) in schemas {
        g.write_struct(name, schema);
        while let Some((nested, schema)) = g.pending.pop() {
            g.write_struct(&nested, &schema);
        }
    }
    for (name, values) in std::mem::take(&mut g.enums) {
        g.write_enum(&name, &values);
    }
    let mut names = g.written;
    names.sort();
    (formatted(g.out.trim_end().to_owned() + "\n"), names)
}

/// Where a crate re-exports the generated types by name, between these two lines.
const EXPORTS_BEGIN: &str =
    "// The generated types, by name: written by `tests/types.rs` in redial-api.\n";
const EXPORTS_END: &str = "// End of the generated types.\n";

/// `lib` with its re-export of the generated types (`pub use {from}::{...};`) rewritten to name
/// every one of `names`; `None` when it has no such block.
fn with_exports(lib: &str, from: &str, names: &[String]) -> Option<String> {
    let start = lib.find(EXPORTS_BEGIN)? + EXPORTS_BEGIN.len();
    let end = start + lib[start..].find(EXPORTS_END)?;
    let block = formatted(format!("pub use {from}::{{{}}};\n", names.join(", ")));
    Some(format!("{}{block}{}", &lib[..start], &lib[end..]))
}

/// `code` as `cargo fmt` leaves it (rustfmt, reading it on its standard input), so that the
/// committed file is both the generator's and formatted.
fn formatted(code: String) -> String {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut rustfmt = Command::new("rustfmt")
        .args(["--edition", "2021", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("rustfmt runs (rustup component add rustfmt)");
    rustfmt
        .stdin
        .take()
        .expect("stdin")
        .write_all(code.as_bytes())
        .expect("write to rustfmt");
    let out = rustfmt.wait_with_output().expect("rustfmt ends");
    assert!(out.status.success(), "rustfmt refused the generated code");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_types_are_the_documents() {
    let (types, names) = generate();
    let dir = env!("CARGO_MANIFEST_DIR");
    // The types, and their re-exports by name (no glob: a file's head says what it takes) from
    // this crate's root and the Rust client's.
    let mut files = vec![(format!("{dir}/src/types.rs"), types)];
    // The client's own `Error` (a failed call) takes the name; the API's error body stays
    // `redial_api::Error` there.
    for (lib, from, own) in [
        (format!("{dir}/src/lib.rs"), "types", &[][..]),
        (
            format!("{dir}/../redial-client/src/lib.rs"),
            "redial_api",
            &["Error"][..],
        ),
    ] {
        let written = std::fs::read_to_string(&lib).expect("reading a lib.rs");
        let names: Vec<String> = names
            .iter()
            .filter(|n| !own.contains(&n.as_str()))
            .cloned()
            .collect();
        let now = with_exports(&written, from, &names)
            .unwrap_or_else(|| panic!("{lib} has no block of generated re-exports"));
        files.push((lib, now));
    }
    let mut stale = Vec::new();
    for (path, now) in files {
        if std::fs::read_to_string(&path).unwrap_or_default() == now {
            continue;
        }
        if std::env::var_os("REDIAL_BLESS").is_some() {
            std::fs::write(&path, &now).expect("writing a generated file");
        } else {
            stale.push(path);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from what the OpenAPI document gives: run \
         `REDIAL_BLESS=1 cargo test -p redial-api --test types` and commit the result"
    );
}
