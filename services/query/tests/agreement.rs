//! The parser and the generated schema agree: random documents (every node kind, every field kind)
//! and structurally invalid mutations of them are accepted by the parser exactly when a draft
//! 2020-12 validator accepts them against the schema. Generated documents stay inside the
//! parser-only checks (real dates, well-formed regular expressions, depth and size), which a
//! schema cannot state.
//!
//! With `AGENTSEARCH_QUERY_CORPUS=<dir>`, the schemas and the documents with their verdicts are
//! written there, for an independent validator (`scripts/check-query-schema.py`).

mod common;
use common::PARSER_ONLY;

use std::io::Write;

use agentsearch_query::{Catalog, FieldDef, FieldKind, parse, schema};
use serde_json::{Value, json};

/// A small deterministic generator (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The content catalog with metadata of every kind a sync may declare.
fn content() -> Catalog {
    let f = |name: &str, kind| FieldDef {
        name: name.into(),
        kind,
        description: format!("the {name}"),
    };
    Catalog::content(&[
        f("size", FieldKind::Numeric),
        f("starred", FieldKind::Bool),
        f("reviewedAt", FieldKind::Date),
        f("team", FieldKind::Keyword),
        f("summary", FieldKind::FullText),
    ])
}

const WORDS: &[&str] = &[
    "send",
    "message",
    "channel",
    "pull",
    "request",
    "invoice",
    "café",
    "日本語",
    "x",
    "Report-Q3",
];
const REGEXES: &[&str] = &[
    "sen.*",
    "[a-z]+",
    "mess(age|enger)",
    "inv[0-9]?oice",
    "a|b|c",
];
const DATES: &[&str] = &[
    "2026-03-01",
    "2024-02-29T09:30",
    "2025-12-31T23:59:59Z",
    "2026-01-15T08:00:00.250+02:00",
    "1999-07-04T12:00:00-05:30",
];

struct Gen<'c> {
    rng: Rng,
    catalog: &'c Catalog,
    nodes: usize,
    /// `regex`, `fuzzy` and `prefix` nodes of the document being generated.
    automata: usize,
}

impl<'c> Gen<'c> {
    fn fields(&self, usable: impl Fn(FieldKind) -> bool) -> Vec<&'c FieldDef> {
        self.catalog
            .fields
            .iter()
            .filter(|f| usable(f.kind))
            .collect()
    }

    fn text(&mut self) -> Value {
        let n = 1 + self.rng.below(3);
        let words: Vec<&str> = (0..n).map(|_| *self.rng.pick(WORDS)).collect();
        let mut s = words.join(" ");
        if self.rng.chance(3) {
            s = "w".repeat(256);
        }
        json!(s)
    }

    fn number(&mut self) -> Value {
        match self.rng.below(3) {
            0 => json!(self.rng.below(1000) as i64 - 500),
            1 => json!((self.rng.below(10_000) as f64) / 7.0),
            _ => json!(self.rng.below(5)),
        }
    }

    fn value(&mut self, kind: FieldKind) -> Value {
        match kind {
            FieldKind::Keyword | FieldKind::FullText => self.text(),
            FieldKind::Numeric => self.number(),
            FieldKind::Date => json!(*self.rng.pick(DATES)),
            FieldKind::Bool => json!(self.rng.chance(50)),
        }
    }

    fn boost(&mut self, node: &mut Value) {
        if self.rng.chance(30) {
            node["boost"] = json!(self.rng.below(40) as f64 / 4.0);
        }
    }

    fn node(&mut self, depth: usize) -> Value {
        self.nodes += 1;
        let leaf = depth >= 4 || self.nodes > 40 || self.rng.chance(55);
        let kinds: &[&str] = if leaf {
            &[
                "term",
                "phrase",
                "prefix",
                "fuzzy",
                "regex",
                "multiFieldTerm",
                "range",
                "exists",
            ]
        } else {
            &["boolean", "functionScore"]
        };
        let mut node = loop {
            let kind = *self.rng.pick(kinds);
            if matches!(kind, "regex" | "fuzzy" | "prefix") {
                if self.automata >= agentsearch_query::limits::MAX_AUTOMATA {
                    continue;
                }
                self.automata += 1;
            }
            if let Some(node) = self.kind(kind, depth) {
                break node;
            }
        };
        self.boost(&mut node);
        node
    }

    fn kind(&mut self, kind: &str, depth: usize) -> Option<Value> {
        let text_fields: Vec<String> = self
            .fields(FieldKind::is_text)
            .iter()
            .map(|f| f.name.clone())
            .collect();
        Some(match kind {
            "term" => {
                let f = (*self.rng.pick(&self.fields(|_| true))).clone();
                json!({"type": "term", "field": f.name, "value": self.value(f.kind)})
            }
            "phrase" => {
                let field = self.rng.pick(&text_fields).clone();
                let n = 1 + self.rng.below(4);
                let terms: Vec<&str> = (0..n).map(|_| *self.rng.pick(WORDS)).collect();
                let mut node = json!({"type": "phrase", "field": field, "terms": terms});
                if self.rng.chance(40) {
                    node["slop"] = json!(self.rng.below(1001));
                }
                node
            }
            "prefix" => {
                json!({"type": "prefix", "field": self.rng.pick(&text_fields).clone(), "value": self.text()})
            }
            "fuzzy" => {
                let mut node = json!({"type": "fuzzy", "field": self.rng.pick(&text_fields).clone(), "value": self.text()});
                if self.rng.chance(50) {
                    node["maxEdits"] = json!(self.rng.below(3));
                }
                node
            }
            "regex" => {
                json!({"type": "regex", "field": self.rng.pick(&text_fields).clone(), "pattern": *self.rng.pick(REGEXES)})
            }
            "multiFieldTerm" => {
                let mut fields = text_fields.clone();
                let keep = 1 + self.rng.below(fields.len());
                fields.truncate(keep);
                json!({"type": "multiFieldTerm", "fields": fields, "value": self.text()})
            }
            "range" => {
                let usable = self.fields(FieldKind::is_rangeable);
                let f = (*self.rng.pick(&usable)).clone();
                let mut node = json!({"type": "range", "field": f.name});
                let lower = *self.rng.pick(&[None, Some("gt"), Some("gte")]);
                let mut upper = *self.rng.pick(&[None, Some("lt"), Some("lte")]);
                if lower.is_none() && upper.is_none() {
                    upper = Some("lte");
                }
                for bound in [lower, upper].into_iter().flatten() {
                    node[bound] = self.value(f.kind);
                }
                node
            }
            "exists" => {
                json!({"type": "exists", "field": self.rng.pick(&self.fields(|_| true)).name.clone()})
            }
            "boolean" => {
                let mut node = json!({"type": "boolean"});
                let mut any = false;
                for list in ["must", "should", "mustNot", "filter"] {
                    if self.rng.chance(45) || (!any && list == "filter") {
                        let n = 1 + self.rng.below(3);
                        let items: Vec<Value> = (0..n).map(|_| self.node(depth + 1)).collect();
                        node[list] = json!(items);
                        any = true;
                    }
                }
                if self.rng.chance(25) {
                    node["minimumShouldMatch"] = json!(self.rng.below(3));
                }
                node
            }
            "functionScore" => {
                let n = 1 + self.rng.below(3);
                let functions: Vec<Value> = (0..n).map(|_| self.function()).collect();
                let mut node = json!({"type": "functionScore", "query": self.node(depth + 1), "functions": functions});
                if self.rng.chance(50) {
                    node["scoreMode"] = json!(
                        *self
                            .rng
                            .pick(&["multiply", "sum", "avg", "max", "min", "first"])
                    );
                }
                if self.rng.chance(50) {
                    node["boostMode"] = json!(
                        *self
                            .rng
                            .pick(&["multiply", "replace", "sum", "avg", "max", "min"])
                    );
                }
                node
            }
            _ => return None,
        })
    }

    fn function(&mut self) -> Value {
        self.nodes += 1;
        let factor = self.fields(FieldKind::has_value_factor);
        let decays = self.fields(FieldKind::decays);
        loop {
            match self.rng.below(3) {
                0 => return json!({"type": "weight", "weight": self.rng.below(100) as f64 / 8.0}),
                1 if !factor.is_empty() => {
                    let f = self.rng.pick(&factor);
                    let mut node = json!({"type": "fieldValueFactor", "field": f.name});
                    if self.rng.chance(50) {
                        node["factor"] = json!(self.rng.below(30) as f64 / 3.0);
                    }
                    if self.rng.chance(50) {
                        node["modifier"] = json!(*self.rng.pick(&[
                            "none",
                            "log1p",
                            "ln1p",
                            "sqrt",
                            "square",
                            "reciprocal"
                        ]));
                    }
                    if self.rng.chance(30) {
                        node["missing"] = self.number();
                    }
                    return node;
                }
                2 if !decays.is_empty() => {
                    let f = (*self.rng.pick(&decays)).clone();
                    let curve = *self.rng.pick(&["gauss", "exp", "linear"]);
                    let mut node = if f.kind == FieldKind::Date {
                        let origin = if self.rng.chance(30) {
                            "now"
                        } else {
                            *self.rng.pick(DATES)
                        };
                        let mut node = json!({"type": curve, "field": f.name, "origin": origin,
                                              "scale": *self.rng.pick(&["7d", "12h", "90s", "500ms", "30m"])});
                        if self.rng.chance(40) {
                            node["offset"] = json!(*self.rng.pick(&["0d", "1d", "15m"]));
                        }
                        node
                    } else {
                        let mut node = json!({"type": curve, "field": f.name, "origin": self.number(),
                                              "scale": 1 + self.rng.below(100)});
                        if self.rng.chance(40) {
                            node["offset"] = json!(self.rng.below(10));
                        }
                        node
                    };
                    if self.rng.chance(40) {
                        node["decay"] = json!(0.05 + self.rng.below(90) as f64 / 100.0);
                    }
                    return node;
                }
                _ => {}
            }
        }
    }

    fn document(&mut self) -> Value {
        self.nodes = 0;
        self.automata = 0;
        let mut doc = json!({"v": 1});
        if self.rng.chance(70) {
            doc["q"] = self.text();
        }
        if self.rng.chance(80) {
            doc["query"] = self.node(1);
        }
        if self.rng.chance(35) {
            doc["filter"] = self.node(1);
        }
        if self.rng.chance(40) {
            doc["limit"] = json!(1 + self.rng.below(self.catalog.max_limit as usize));
        }
        if self.rng.chance(30) {
            doc["offset"] = json!(self.rng.below(self.catalog.max_offset as usize / 2));
        }
        for flag in ["countExactly", "highlight"] {
            if self.rng.chance(30) {
                doc[flag] = json!(self.rng.chance(50));
            }
        }
        doc
    }

    /// A structurally invalid variant of `doc`: one of the mutations a schema must refuse.
    fn mutate(&mut self, doc: &Value) -> (Value, &'static str) {
        let mut doc = doc.clone();
        let which = self.rng.below(8);
        let name = match which {
            0 => {
                let target = self.some_node(&mut doc);
                let key = *self.rng.pick(&["colour", "feild", "boots", "Type"]);
                target[key] = json!(1);
                "unknown property"
            }
            1 => {
                doc["v"] = json!(*self.rng.pick(&[2, 0, 11]));
                "wrong version"
            }
            2 => {
                let target = self.some_node(&mut doc);
                target["type"] = json!(*self.rng.pick(&["termz", "Term", "match", "bool"]));
                "unknown type"
            }
            3 => {
                let field = json!(*self.rng.pick(&["titel", "nosuch", "Name", "desc"]));
                doc["query"] = json!({"type": "boolean", "must": [
                    self.node(2), {"type": "term", "field": field, "value": "x"}]});
                "unknown field"
            }
            4 => {
                let target = self.some_node(&mut doc);
                target["boost"] = json!(-1.5);
                "negative boost"
            }
            5 => {
                doc.as_object_mut().unwrap().remove("v");
                "missing v"
            }
            6 => {
                let f = (*self.rng.pick(&self.fields(FieldKind::is_rangeable))).clone();
                let wrong = match f.kind {
                    FieldKind::Numeric => json!("ten"),
                    FieldKind::Date => json!(20260301),
                    _ => json!(42),
                };
                doc["filter"] = json!({"type": "range", "field": f.name, "gte": wrong});
                "bound of the wrong type"
            }
            _ => {
                let f = (*self.rng.pick(&self.fields(FieldKind::is_rangeable))).clone();
                let (a, b) = (self.value(f.kind), self.value(f.kind));
                doc["filter"] = json!({"type": "boolean", "should": [
                    {"type": "range", "field": f.name, "gt": a, "gte": b}]});
                "both gt and gte"
            }
        };
        (doc, name)
    }

    /// `doc` with one value somewhere replaced by another of any type, or one property removed:
    /// the result may be valid or not.
    fn perturb(&mut self, doc: &Value) -> Value {
        let mut doc = doc.clone();
        let mut at = &mut doc;
        loop {
            let keys: Vec<String> = match at {
                Value::Object(map) => map.keys().cloned().collect(),
                Value::Array(items) => (0..items.len()).map(|i| i.to_string()).collect(),
                _ => Vec::new(),
            };
            let descend = !keys.is_empty() && self.rng.chance(70);
            if !descend {
                break;
            }
            let key = self.rng.pick(&keys).clone();
            let child_is_container = match &*at {
                Value::Object(map) => map[&key].is_object() || map[&key].is_array(),
                Value::Array(items) => {
                    let i: usize = key.parse().unwrap();
                    items[i].is_object() || items[i].is_array()
                }
                _ => false,
            };
            if !child_is_container || self.rng.chance(30) {
                let replacement = match self.rng.below(16) {
                    0 => json!(null),
                    1 => json!(true),
                    2 => json!(0),
                    3 => json!(-1),
                    4 => json!(1.5),
                    5 => json!(""),
                    6 => json!("x"),
                    7 => json!([]),
                    8 => json!({}),
                    9 => json!(100_000),
                    10 => json!("2026-02-30"),
                    11 => json!(2.0),
                    12 => json!(["title", "title"]),
                    13 => json!("now"),
                    14 => json!("7d"),
                    _ => Value::Null,
                };
                match at {
                    Value::Object(map) if self.rng.chance(25) => {
                        map.remove(&key);
                    }
                    Value::Object(map) => {
                        map.insert(key, replacement);
                    }
                    Value::Array(items) => {
                        let i: usize = key.parse().unwrap();
                        items[i] = replacement;
                    }
                    _ => {}
                }
                return doc;
            }
            at = match at {
                Value::Object(map) => map.get_mut(&key).unwrap(),
                Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
                _ => unreachable!(),
            };
        }
        doc
    }

    /// Some node of `doc` (creating a `query` if it has none), chosen at random along one path.
    fn some_node<'d>(&mut self, doc: &'d mut Value) -> &'d mut Value {
        if doc.get("query").is_none() {
            doc["query"] = self.node(1);
        }
        let mut node = &mut doc["query"];
        loop {
            let children: Vec<(String, Option<usize>)> = match node["type"].as_str() {
                Some("boolean") => ["must", "should", "mustNot", "filter"]
                    .iter()
                    .filter_map(|k| node.get(*k).and_then(Value::as_array).map(|a| (k, a.len())))
                    .flat_map(|(k, n)| (0..n).map(move |i| (k.to_string(), Some(i))))
                    .collect(),
                Some("functionScore") => vec![("query".to_string(), None)],
                _ => Vec::new(),
            };
            if children.is_empty() || self.rng.chance(40) {
                return node;
            }
            let (key, index) = self.rng.pick(&children).clone();
            node = match index {
                Some(i) => &mut node[key.as_str()][i],
                None => &mut node[key.as_str()],
            };
        }
    }
}

fn check(catalog: &Catalog, seed: u64, documents: usize) -> Vec<(Value, bool)> {
    let schema = schema(catalog);
    let validator = jsonschema::draft202012::new(&schema).expect("the generated schema compiles");
    let mut generator = Gen {
        rng: Rng(seed),
        catalog,
        nodes: 0,
        automata: 0,
    };
    let mut corpus = Vec::new();
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..documents {
        let doc = generator.document();
        let parsed = parse(catalog, &doc, "");
        assert!(
            validator.is_valid(&doc),
            "a generated document fails the schema: {doc}\n{:?}",
            validator
                .iter_errors(&doc)
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        );
        assert!(
            parsed.is_ok(),
            "the parser refuses {doc}: {}",
            parsed.unwrap_err()
        );
        valid += 1;
        corpus.push((doc.clone(), true));
        let (mutated, mutation) = generator.mutate(&doc);
        let schema_ok = validator.is_valid(&mutated);
        let parser = parse(catalog, &mutated, "");
        assert!(
            !schema_ok,
            "the schema accepts a mutation ({mutation}): {mutated}"
        );
        assert!(
            parser.is_err(),
            "the parser accepts a mutation ({mutation}): {mutated}"
        );
        let e = parser.unwrap_err();
        assert!(!e.path.is_empty() && !e.message.is_empty());
        invalid += 1;
        corpus.push((mutated, false));
        // Any change at all: the two verdicts agree, unless the parser refuses for a reason the
        // schema cannot state.
        let perturbed = generator.perturb(&doc);
        let schema_ok = validator.is_valid(&perturbed);
        match parse(catalog, &perturbed, "") {
            Ok(_) => assert!(schema_ok, "only the parser accepts {perturbed}"),
            Err(e) if schema_ok => assert!(
                PARSER_ONLY.iter().any(|p| e.message.contains(p)),
                "only the schema accepts {perturbed}: {e}"
            ),
            Err(_) => {}
        }
        corpus.push((perturbed, schema_ok));
    }
    assert!(valid >= documents && invalid >= documents);
    corpus
}

#[test]
fn the_parser_accepts_exactly_what_the_schema_accepts() {
    let out = std::env::var_os("AGENTSEARCH_QUERY_CORPUS").map(std::path::PathBuf::from);
    for (name, catalog, seed) in [
        ("content", content(), 0x5eed_0001),
        ("tools", Catalog::tools().clone(), 0x5eed_0002),
    ] {
        let corpus = check(&catalog, seed, 1_200);
        if let Some(dir) = &out {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(
                dir.join(format!("{name}.schema.json")),
                serde_json::to_vec_pretty(&schema(&catalog)).unwrap(),
            )
            .unwrap();
            let mut file =
                std::fs::File::create(dir.join(format!("{name}.documents.jsonl"))).unwrap();
            for (doc, valid) in corpus {
                writeln!(file, "{}", json!({"document": doc, "valid": valid})).unwrap();
            }
        }
    }
}

#[test]
fn a_catalog_without_numbers_or_dates_offers_no_node_kind_it_cannot_use() {
    let tools = schema(&Catalog::tools());
    let defs = tools["$defs"].as_object().unwrap();
    for absent in [
        "term_number",
        "term_date",
        "term_bool",
        "range_number",
        "range_date",
        "fn_fieldValueFactor",
        "fn_decay_number",
        "fn_decay_date",
    ] {
        assert!(!defs.contains_key(absent), "{absent} is offered");
    }
    assert!(defs.contains_key("range_keyword") && defs.contains_key("phrase"));
    assert_eq!(tools["required"], json!(["v"]));
    assert_eq!(tools["additionalProperties"], json!(false));
    let description = tools["description"].as_str().unwrap();
    assert!(
        description.contains("description (full text)"),
        "{description}"
    );
    // A numeric term is refused by both, for want of a numeric field.
    let doc = json!({"v": 1, "query": {"type": "term", "field": "name", "value": 3}});
    assert!(!jsonschema::draft202012::new(&tools).unwrap().is_valid(&doc));
    let e = parse(&Catalog::tools(), &doc, "").unwrap_err();
    assert_eq!(e.path, "query.term.value");
    assert!(e.message.contains("keyword field `name`"), "{}", e.message);
}

#[test]
fn parser_only_checks_are_the_documented_ones() {
    // A window deeper than the services' (offset 0..50), to reach the `limit + offset` check.
    let catalog = Catalog {
        max_offset: 10_000,
        ..content()
    };
    let validator = jsonschema::draft202012::new(&schema(&catalog)).unwrap();
    for (doc, path) in [
        (
            json!({"v": 1, "query": {"type": "term", "field": "modifiedAt", "value": "2023-02-30"}}),
            "query.term.value",
        ),
        (
            json!({"v": 1, "query": {"type": "regex", "field": "text", "pattern": "(unclosed"}}),
            "query.regex.pattern",
        ),
        (
            json!({"v": 1, "query": {"type": "regex", "field": "text", "pattern": "^anchored$"}}),
            "query.regex.pattern",
        ),
        (json!({"v": 1, "limit": 50, "offset": 9_990}), "offset"),
    ] {
        assert!(validator.is_valid(&doc), "{doc}");
        assert_eq!(parse(&catalog, &doc, "").unwrap_err().path, path, "{doc}");
    }
}
