//! The JSON Schema (draft 2020-12) of the query JSON documents a catalog accepts: a model given it
//! cannot name a field that is not indexed or give a value of the wrong type.

use serde_json::{Map, Value, json};

use crate::fields::{Catalog, FieldKind};
use crate::limits::*;

/// The node kinds of the language, in schema order.
pub const NODE_KINDS: [&str; 10] = [
    "term",
    "phrase",
    "prefix",
    "fuzzy",
    "regex",
    "multiFieldTerm",
    "range",
    "exists",
    "boolean",
    "functionScore",
];

/// The function kinds of a `functionScore` node.
pub const FUNCTION_KINDS: [&str; 5] = ["weight", "fieldValueFactor", "gauss", "exp", "linear"];

pub const ROOT_PROPERTIES: [&str; 8] = [
    "v",
    "q",
    "query",
    "filter",
    "limit",
    "offset",
    "countExactly",
    "highlight",
];

/// The schema of `catalog`'s documents.
pub fn schema(catalog: &Catalog) -> Value {
    let mut defs = Map::new();
    let mut nodes = Vec::new();
    let mut add = |defs: &mut Map<String, Value>, name: &str, def: Value| {
        defs.insert(name.to_string(), def);
        nodes.push(json!({"$ref": format!("#/$defs/{name}")}));
    };
    let text = catalog.names(|k| k == FieldKind::Keyword || k == FieldKind::FullText);
    let keyword = catalog.names(|k| k == FieldKind::Keyword);
    let numeric = catalog.names(|k| k == FieldKind::Numeric);
    let date = catalog.names(|k| k == FieldKind::Date);
    let boolean = catalog.names(|k| k == FieldKind::Bool);
    let all = catalog.names(|_| true);
    let string_value = json!({"type": "string", "minLength": 1, "maxLength": MAX_VALUE_CHARS});
    let date_value = json!({"$ref": "#/$defs/date"});
    let number = json!({"type": "number"});

    for (name, fields, value) in [
        ("term_text", &text, string_value.clone()),
        ("term_number", &numeric, number.clone()),
        ("term_date", &date, date_value.clone()),
        ("term_bool", &boolean, json!({"type": "boolean"})),
    ] {
        if !fields.is_empty() {
            add(
                &mut defs,
                name,
                node(
                    "term",
                    &[("field", field_enum(fields)), ("value", value)],
                    &["field", "value"],
                ),
            );
        }
    }
    if !text.is_empty() {
        let e = field_enum(&text);
        add(
            &mut defs,
            "phrase",
            node(
                "phrase",
                &[
                    ("field", e.clone()),
                    (
                        "terms",
                        json!({"type": "array", "minItems": 1, "maxItems": MAX_PHRASE_TERMS,
                               "items": string_value.clone()}),
                    ),
                    (
                        "slop",
                        json!({"type": "integer", "minimum": 0, "maximum": MAX_SLOP}),
                    ),
                ],
                &["field", "terms"],
            ),
        );
        add(
            &mut defs,
            "prefix",
            node(
                "prefix",
                &[("field", e.clone()), ("value", string_value.clone())],
                &["field", "value"],
            ),
        );
        add(
            &mut defs,
            "fuzzy",
            node(
                "fuzzy",
                &[
                    ("field", e.clone()),
                    ("value", string_value.clone()),
                    (
                        "maxEdits",
                        json!({"type": "integer", "minimum": 0, "maximum": MAX_EDITS}),
                    ),
                ],
                &["field", "value"],
            ),
        );
        add(
            &mut defs,
            "regex",
            node(
                "regex",
                &[
                    ("field", e.clone()),
                    (
                        "pattern",
                        json!({"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS}),
                    ),
                ],
                &["field", "pattern"],
            ),
        );
        add(
            &mut defs,
            "multiFieldTerm",
            node(
                "multiFieldTerm",
                &[
                    (
                        "fields",
                        json!({"type": "array", "minItems": 1, "maxItems": MAX_FIELDS,
                               "uniqueItems": true, "items": e}),
                    ),
                    ("value", string_value.clone()),
                ],
                &["fields", "value"],
            ),
        );
    }
    for (name, fields, bound) in [
        ("range_number", &numeric, number.clone()),
        ("range_date", &date, date_value.clone()),
        ("range_keyword", &keyword, string_value.clone()),
    ] {
        if fields.is_empty() {
            continue;
        }
        let mut def = node(
            "range",
            &[
                ("field", field_enum(fields)),
                ("gt", bound.clone()),
                ("gte", bound.clone()),
                ("lt", bound.clone()),
                ("lte", bound),
            ],
            &["field"],
        );
        def["allOf"] = json!([
            {"anyOf": [{"required": ["gt"]}, {"required": ["gte"]},
                       {"required": ["lt"]}, {"required": ["lte"]}]},
            {"not": {"required": ["gt", "gte"]}},
            {"not": {"required": ["lt", "lte"]}}
        ]);
        add(&mut defs, name, def);
    }
    if !all.is_empty() {
        add(
            &mut defs,
            "exists",
            node("exists", &[("field", field_enum(&all))], &["field"]),
        );
    }
    let clauses = json!({"type": "array", "minItems": 1, "maxItems": MAX_CLAUSES,
                         "items": {"$ref": "#/$defs/node"}});
    let mut boolean_def = node(
        "boolean",
        &[
            ("must", clauses.clone()),
            ("should", clauses.clone()),
            ("mustNot", clauses.clone()),
            ("filter", clauses),
            (
                "minimumShouldMatch",
                json!({"type": "integer", "minimum": 0, "maximum": MAX_CLAUSES}),
            ),
        ],
        &[],
    );
    boolean_def["anyOf"] = json!([
        {"required": ["must"]}, {"required": ["should"]},
        {"required": ["mustNot"]}, {"required": ["filter"]}
    ]);
    add(&mut defs, "boolean", boolean_def);
    add(
        &mut defs,
        "functionScore",
        node(
            "functionScore",
            &[
                ("query", json!({"$ref": "#/$defs/node"})),
                (
                    "functions",
                    json!({"type": "array", "minItems": 1, "maxItems": MAX_FUNCTIONS,
                           "items": {"$ref": "#/$defs/function"}}),
                ),
                (
                    "scoreMode",
                    json!({"enum": ["multiply", "sum", "avg", "max", "min", "first"]}),
                ),
                (
                    "boostMode",
                    json!({"enum": ["multiply", "replace", "sum", "avg", "max", "min"]}),
                ),
            ],
            &["query", "functions"],
        ),
    );

    let mut functions = vec![json!({"$ref": "#/$defs/fn_weight"})];
    defs.insert(
        "fn_weight".into(),
        function(
            json!({"const": "weight"}),
            &[(
                "weight",
                json!({"type": "number", "minimum": 0, "maximum": MAX_BOOST}),
            )],
            &["weight"],
        ),
    );
    let factor_fields = catalog.names(FieldKind::has_value_factor);
    if !factor_fields.is_empty() {
        defs.insert(
            "fn_fieldValueFactor".into(),
            function(
                json!({"const": "fieldValueFactor"}),
                &[
                    ("field", field_enum(&factor_fields)),
                    (
                        "factor",
                        json!({"type": "number", "minimum": 0, "maximum": MAX_BOOST}),
                    ),
                    (
                        "modifier",
                        json!({"enum": ["none", "log1p", "ln1p", "sqrt", "square", "reciprocal"]}),
                    ),
                    ("missing", number.clone()),
                ],
                &["field"],
            ),
        );
        functions.push(json!({"$ref": "#/$defs/fn_fieldValueFactor"}));
    }
    let curves = json!({"enum": ["gauss", "exp", "linear"]});
    let decay = json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1});
    if !numeric.is_empty() {
        defs.insert(
            "fn_decay_number".into(),
            function(
                curves.clone(),
                &[
                    ("field", field_enum(&numeric)),
                    ("origin", number.clone()),
                    ("scale", json!({"type": "number", "exclusiveMinimum": 0})),
                    ("offset", json!({"type": "number", "minimum": 0})),
                    ("decay", decay.clone()),
                ],
                &["field", "origin", "scale"],
            ),
        );
        functions.push(json!({"$ref": "#/$defs/fn_decay_number"}));
    }
    if !date.is_empty() {
        defs.insert(
            "fn_decay_date".into(),
            function(
                curves,
                &[
                    ("field", field_enum(&date)),
                    (
                        "origin",
                        json!({"type": "string", "pattern": ORIGIN_PATTERN}),
                    ),
                    ("scale", json!({"type": "string", "pattern": SCALE_PATTERN})),
                    (
                        "offset",
                        json!({"type": "string", "pattern": OFFSET_PATTERN}),
                    ),
                    ("decay", decay),
                ],
                &["field", "origin", "scale"],
            ),
        );
        functions.push(json!({"$ref": "#/$defs/fn_decay_date"}));
    }
    defs.insert("function".into(), json!({"oneOf": functions}));
    defs.insert("node".into(), json!({"oneOf": nodes}));
    defs.insert(
        "boost".into(),
        json!({"type": "number", "minimum": 0, "maximum": MAX_BOOST}),
    );
    defs.insert(
        "date".into(),
        json!({"type": "string", "pattern": DATE_PATTERN}),
    );

    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("agentsearch query over {}", catalog.subject),
        "description": description(catalog),
        "type": "object",
        "properties": {
            "v": {"const": VERSION, "description": "The language version: 1."},
            "q": {"type": "string", "minLength": 1, "maxLength": MAX_Q_CHARS,
                  "description": "Free text, searched by meaning and by words."},
            "query": {"$ref": "#/$defs/node",
                      "description": "Every result matches it; its score ranks with `q`'s."},
            "filter": {"$ref": "#/$defs/node",
                       "description": "Every result matches it; it does not score."},
            "limit": {"type": "integer", "minimum": 1, "maximum": catalog.max_limit},
            "offset": {"type": "integer", "minimum": 0, "maximum": catalog.max_offset},
            "countExactly": {"type": "boolean",
                             "description": "Count every match exactly (usage.matched)."},
            "highlight": {"type": "boolean",
                          "description": "Return the matched fragments of each result."}
        },
        "required": ["v"],
        "additionalProperties": false,
        "$defs": defs,
    })
}

/// The schema's description: the language in one line and the fields with their kinds.
pub fn description(catalog: &Catalog) -> String {
    let mut out = format!(
        "A search over {}: `q` is free text; `query` and `filter` are query nodes over these fields:",
        catalog.subject
    );
    for f in &catalog.fields {
        out.push_str(&format!("\n- {} ({}): {}", f.name, f.kind, f.description));
    }
    out
}

fn field_enum(names: &[&str]) -> Value {
    json!({"enum": names})
}

/// A node definition: `type` fixed to `kind`, `boost` allowed, nothing else than `properties`.
fn node(kind: &str, properties: &[(&str, Value)], required: &[&str]) -> Value {
    object(json!({"const": kind}), properties, required, true)
}

fn function(kind: Value, properties: &[(&str, Value)], required: &[&str]) -> Value {
    object(kind, properties, required, false)
}

fn object(kind: Value, properties: &[(&str, Value)], required: &[&str], boost: bool) -> Value {
    let mut props = Map::new();
    props.insert("type".into(), kind);
    for (name, def) in properties {
        props.insert((*name).into(), def.clone());
    }
    if boost {
        props.insert("boost".into(), json!({"$ref": "#/$defs/boost"}));
    }
    let mut req = vec!["type"];
    req.extend_from_slice(required);
    json!({
        "type": "object",
        "properties": props,
        "required": req,
        "additionalProperties": false,
    })
}
