//! `src/types.rs` is generated from the OpenAPI document (`crates/redial-server/src/openapi.json`)
//! by this test: it fails when the two drift, and `REDIAL_BLESS=1 cargo test -p redial-api`
//! rewrites the file. The document is what the server is checked against (its route test, the
//! API fuzzing), so the Rust client's types come from the same place as the TypeScript client's.
//!
//! Mapping: a schema is a struct; a property the schema requires is a field of its type (an
//! `Option` when it may be null), one it does not require an `Option` left out when absent;
//! strings (date-times included) are `String`, integers `i64`, numbers `f64`; an inline object
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

struct Generator {
    /// Structs still to write: (name, schema).
    pending: Vec<(String, Value)>,
    /// Every struct name given so far (the schemas' first).
    names: std::collections::BTreeSet<String>,
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
        let ty = match kind {
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
            "#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]\npub struct {name} {{"
        );
        for (field, p) in props {
            let (ty, nullable) = self.type_of(name, field, p);
            doc(&mut body, "    ", p["description"].as_str());
            if !required.contains(&field.as_str()) {
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
}

fn generate() -> String {
    let document: Value = serde_json::from_str(DOCUMENT).expect("the OpenAPI document is JSON");
    let schemas = document["components"]["schemas"]
        .as_object()
        .expect("components.schemas");
    let mut g = Generator {
        pending: Vec::new(),
        names: schemas.keys().cloned().collect(),
        out: String::from(
            "//! Every schema of the OpenAPI document (`crates/redial-server/src/openapi.json`), as Rust\n\
             //! types. Generated by `tests/types.rs` (`REDIAL_BLESS=1 cargo test -p redial-api --test\n\
             //! types`): do not edit by hand.\n\n\
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
    g.out.trim_end().to_owned() + "\n"
}

#[test]
fn the_types_are_the_documents() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/types.rs");
    let now = generate();
    let written = std::fs::read_to_string(path).unwrap_or_default();
    if now == written {
        return;
    }
    if std::env::var_os("REDIAL_BLESS").is_some() {
        std::fs::write(path, &now).expect("writing src/types.rs");
        return;
    }
    panic!(
        "crates/redial-api/src/types.rs differs from what the OpenAPI document gives: run \
         `REDIAL_BLESS=1 cargo test -p redial-api --test types` and commit the result"
    );
}
