//! Any JSON at all, built from the language's own words so that it reaches deep into the parser:
//! the parser never panics, a refusal always names a path, and its verdict is the schema
//! validator's (accepting only what the schema accepts, refusing what it accepts only for the
//! documented checks a schema cannot state).

mod common;
use common::PARSER_ONLY;

use agentsearch_query::{Catalog, parse, schema};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const KEYS: &[&str] = &[
    "v",
    "q",
    "query",
    "filter",
    "limit",
    "offset",
    "countExactly",
    "highlight",
    "type",
    "field",
    "value",
    "boost",
    "terms",
    "slop",
    "maxEdits",
    "pattern",
    "fields",
    "gt",
    "gte",
    "lt",
    "lte",
    "must",
    "should",
    "mustNot",
    "minimumShouldMatch",
    "functions",
    "scoreMode",
    "boostMode",
    "weight",
    "factor",
];
const WORDS: &[&str] = &[
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
    "weight",
    "name",
    "integration",
    "category",
    "sideEffect",
    "description",
    "parameters",
    "send",
    "2026-01-01",
    "sen.*",
    "(a|b",
    "[a-z]+",
    "",
    " ",
    "multiply",
    "sum",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(WORDS).prop_map(str::to_string),
        "[a-zA-Z0-9_ .*()|é]{0,12}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..100).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        Just(json!(1)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(8, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// Objects shaped like nodes (a `type` and the properties of some kind, with values of any
/// type), nested through `boolean` and `functionScore`, with now and then a stray property.
fn node() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        text().prop_map(Value::from),
        (-3i64..100).prop_map(Value::from),
        (-10f64..10.0).prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::collection::vec(text().prop_map(Value::from), 0..4).prop_map(Value::Array),
    ];
    let leaf = (
        proptest::sample::select(&WORDS[..10]),
        proptest::sample::select(&WORDS[11..17]),
        prop::collection::vec((proptest::sample::select(KEYS), scalar), 0..4),
    )
        .prop_map(|(kind, field, extra)| {
            let mut map = Map::new();
            map.insert("type".into(), json!(kind));
            map.insert("field".into(), json!(field));
            for (k, v) in extra {
                if k != "type" && k != "field" {
                    map.insert(k.to_string(), v);
                }
            }
            Value::Object(map)
        });
    leaf.prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            (
                proptest::sample::select(&["must", "should", "mustNot", "filter"][..]),
                prop::collection::vec(inner.clone(), 0..4),
            )
                .prop_map(|(list, items)| json!({"type": "boolean", list: items})),
            (inner, (0.0f64..5.0)).prop_map(|(query, w)| json!({
                "type": "functionScore", "query": query,
                "functions": [{"type": "weight", "weight": w}]
            })),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn any_document_gets_the_schema_verdict_or_a_documented_refusal(
        mut doc in prop_oneof![
            json_value(),
            (node(), prop::option::of(node()), prop::option::of(text()))
                .prop_map(|(query, filter, q)| {
                    let mut doc = json!({"v": 1, "query": query});
                    if let Some(filter) = filter { doc["filter"] = filter; }
                    if let Some(q) = q { doc["q"] = json!(q); }
                    doc
                }),
        ],
        versioned in any::<bool>(),
    ) {
        if versioned && let Value::Object(map) = &mut doc {
            map.insert("v".into(), json!(1));
        }
        let catalog = Catalog::tools();
        let validator = jsonschema::draft202012::new(&schema(&catalog)).unwrap();
        let valid = validator.is_valid(&doc);
        match parse(&catalog, &doc, "query") {
            Ok(_) => prop_assert!(valid, "only the parser accepts {}", doc),
            Err(e) => {
                prop_assert!(e.path.starts_with("query"), "{:?}", e);
                prop_assert!(!e.message.is_empty());
                if valid {
                    prop_assert!(
                        PARSER_ONLY.iter().any(|p| e.message.contains(p)),
                        "only the schema accepts {}: {}", doc, e
                    );
                }
            }
        }
    }
}
