//! The parser of query JSON documents. It accepts exactly what the generated schema accepts, plus
//! the checks a schema cannot state (real dates, well-formed regular expressions, `limit + offset`,
//! nesting depth and node count). Its first error names the JSON path of the offending value and,
//! for a misspelt name, the nearest valid one, so that a model can correct its call.

use std::fmt;

use serde_json::{Map, Value};

use crate::ast::*;
use crate::fields::{Catalog, FieldKind};
use crate::limits::*;
use crate::schema::{FUNCTION_KINDS, NODE_KINDS, ROOT_PROPERTIES};

/// Why a document was refused: where, and what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryError {
    /// A JSON path: `query.boolean.must[2].range.field`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for QueryError {}

type Result<T> = std::result::Result<T, QueryError>;

/// Parses a document against `catalog`; paths start with `prefix` (empty: the document's own
/// properties, e.g. `query.term.field`; `query`: as a request's `query` property,
/// `query.query.term.field`).
pub fn parse(catalog: &Catalog, document: &Value, prefix: &str) -> Result<QueryDoc> {
    Parser {
        catalog,
        nodes: 0,
        automata: 0,
        now_ms: None,
    }
    .document(document, prefix)
}

/// Whether `value` is meant as a query JSON document rather than a plain query string.
pub fn is_document(value: &Value) -> bool {
    value.is_object()
}

/// The nearest of `candidates` to a misspelt `name`, if one is close enough to be meant.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // Names are short; a long one is compared by its start (bounded work).
    let lower: String = name.chars().take(64).collect::<String>().to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        let distance = strsim::damerau_levenshtein(&lower, &candidate.to_lowercase());
        let tolerated = (candidate.chars().count() / 3).max(2);
        if distance <= tolerated && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

fn err(path: &str, message: impl Into<String>) -> QueryError {
    QueryError {
        path: path.to_string(),
        message: message.into(),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn shorten(s: &str) -> String {
    const MAX: usize = 64;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(MAX).collect::<String>())
    }
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

struct Parser<'c> {
    catalog: &'c Catalog,
    nodes: usize,
    /// `regex`, `fuzzy` and `prefix` nodes so far.
    automata: usize,
    /// `now`, read once per document.
    now_ms: Option<i64>,
}

impl Parser<'_> {
    fn document(&mut self, value: &Value, prefix: &str) -> Result<QueryDoc> {
        let Value::Object(map) = value else {
            return Err(err(
                if prefix.is_empty() { "$" } else { prefix },
                format!("must be a query JSON object, got {}", kind_of(value)),
            ));
        };
        unknown_properties(map, &ROOT_PROPERTIES, prefix)?;
        let v = map
            .get("v")
            .ok_or_else(|| err(&join(prefix, "v"), "is required: the language version, 1"))?;
        if v.as_f64() != Some(VERSION as f64) {
            return Err(err(
                &join(prefix, "v"),
                format!("must be {VERSION}, the only version of the language"),
            ));
        }
        let mut doc = QueryDoc::default();
        if let Some(q) = map.get("q") {
            doc.q = Some(string(q, &join(prefix, "q"), MAX_Q_CHARS)?);
        }
        if let Some(node) = map.get("query") {
            doc.query = Some(self.node(node, &join(prefix, "query"), 1)?);
        }
        if let Some(node) = map.get("filter") {
            doc.filter = Some(self.node(node, &join(prefix, "filter"), 1)?);
        }
        if let Some(limit) = map.get("limit") {
            doc.limit = Some(integer(
                limit,
                &join(prefix, "limit"),
                1,
                u64::from(self.catalog.max_limit),
            )? as u32);
        }
        if let Some(offset) = map.get("offset") {
            doc.offset = integer(
                offset,
                &join(prefix, "offset"),
                0,
                u64::from(self.catalog.max_offset),
            )? as u32;
        }
        if let Some(count) = map.get("countExactly") {
            doc.count_exactly = boolean(count, &join(prefix, "countExactly"))?;
        }
        if let Some(highlight) = map.get("highlight") {
            doc.highlight = boolean(highlight, &join(prefix, "highlight"))?;
        }
        let window = u64::from(doc.limit.unwrap_or(0)) + u64::from(doc.offset);
        if window > MAX_WINDOW {
            return Err(err(
                &join(prefix, "offset"),
                format!("limit + offset must be at most {MAX_WINDOW}"),
            ));
        }
        Ok(doc)
    }

    /// The node kinds this catalog offers (a kind no field can use is left out).
    fn offered(&self) -> Vec<&'static str> {
        let has = |f: fn(FieldKind) -> bool| self.catalog.fields.iter().any(|d| f(d.kind));
        NODE_KINDS
            .iter()
            .copied()
            .filter(|kind| match *kind {
                "term" | "exists" => !self.catalog.fields.is_empty(),
                "phrase" | "prefix" | "fuzzy" | "regex" | "multiFieldTerm" => {
                    has(FieldKind::is_text)
                }
                "range" => has(FieldKind::is_rangeable),
                _ => true,
            })
            .collect()
    }

    fn node(&mut self, value: &Value, path: &str, depth: usize) -> Result<Node> {
        if depth > MAX_DEPTH {
            return Err(err(
                path,
                format!("query nodes may be nested at most {MAX_DEPTH} deep"),
            ));
        }
        let map = self.counted(value, path, "a query node")?;
        let offered = self.offered();
        let kind = node_type(map, path, &offered, "node type")?;
        let at = join(path, kind);
        unknown_properties(map, node_properties(kind), &at)?;
        let boost = match map.get("boost") {
            Some(b) => number_in(b, &join(&at, "boost"), 0.0, MAX_BOOST)? as f32,
            None => 1.0,
        };
        match kind {
            "term" => {
                let all = self.catalog.names(|_| true);
                let field = self.field(map, &at, "field", &all, "term")?;
                let value =
                    self.value(required(map, "value", &at)?, &join(&at, "value"), &field)?;
                Ok(Node::Term {
                    field,
                    value,
                    boost,
                })
            }
            "phrase" => {
                let field = self.text_field(map, &at, "phrase")?;
                let terms_path = join(&at, "terms");
                let terms = array(
                    required(map, "terms", &at)?,
                    &terms_path,
                    1,
                    MAX_PHRASE_TERMS,
                )?
                .iter()
                .enumerate()
                .map(|(i, t)| string(t, &format!("{terms_path}[{i}]"), MAX_VALUE_CHARS))
                .collect::<Result<Vec<_>>>()?;
                let slop = match map.get("slop") {
                    Some(s) => integer(s, &join(&at, "slop"), 0, MAX_SLOP)? as u32,
                    None => 0,
                };
                Ok(Node::Phrase {
                    field,
                    terms,
                    slop,
                    boost,
                })
            }
            "prefix" => {
                let field = self.text_field(map, &at, "prefix")?;
                self.automaton(&at)?;
                let value = required_string(map, "value", &at, MAX_VALUE_CHARS)?;
                Ok(Node::Prefix {
                    field,
                    value,
                    boost,
                })
            }
            "fuzzy" => {
                let field = self.text_field(map, &at, "fuzzy")?;
                self.automaton(&at)?;
                let value = required_string(map, "value", &at, MAX_VALUE_CHARS)?;
                let max_edits = match map.get("maxEdits") {
                    Some(m) => integer(m, &join(&at, "maxEdits"), 0, MAX_EDITS)? as u8,
                    None => 1,
                };
                Ok(Node::Fuzzy {
                    field,
                    value,
                    max_edits,
                    boost,
                })
            }
            "regex" => {
                let field = self.text_field(map, &at, "regex")?;
                let pattern_path = join(&at, "pattern");
                let pattern = required_string(map, "pattern", &at, MAX_PATTERN_CHARS)?;
                self.automaton(&pattern_path)?;
                if let Some(problem) = regex_problem(&pattern) {
                    return Err(err(
                        &pattern_path,
                        format!(
                            "is not a usable regular expression (matched against whole terms, \
                             without anchors or \\b): {problem}"
                        ),
                    ));
                }
                Ok(Node::Regex {
                    field,
                    pattern,
                    boost,
                })
            }
            "multiFieldTerm" => {
                let text = self.catalog.names(FieldKind::is_text);
                let fields_path = join(&at, "fields");
                let items = array(required(map, "fields", &at)?, &fields_path, 1, MAX_FIELDS)?;
                let mut fields: Vec<String> = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let at_i = format!("{fields_path}[{i}]");
                    let name = field_name(item, &at_i, &text, "multiFieldTerm", self.catalog)?;
                    if fields.contains(&name) {
                        return Err(err(&at_i, format!("`{name}` is listed twice")));
                    }
                    fields.push(name);
                }
                let value = required_string(map, "value", &at, MAX_VALUE_CHARS)?;
                Ok(Node::MultiFieldTerm {
                    fields,
                    value,
                    boost,
                })
            }
            "range" => {
                let usable = self.catalog.names(FieldKind::is_rangeable);
                let field = self.field(map, &at, "field", &usable, "range")?;
                let bound = |name: &str| -> Result<Option<Scalar>> {
                    map.get(name)
                        .map(|v| self.value(v, &join(&at, name), &field))
                        .transpose()
                };
                let (gt, gte, lt, lte) = (bound("gt")?, bound("gte")?, bound("lt")?, bound("lte")?);
                if gt.is_some() && gte.is_some() {
                    return Err(err(&join(&at, "gte"), "give `gt` or `gte`, not both"));
                }
                if lt.is_some() && lte.is_some() {
                    return Err(err(&join(&at, "lte"), "give `lt` or `lte`, not both"));
                }
                if gt.is_none() && gte.is_none() && lt.is_none() && lte.is_none() {
                    return Err(err(
                        &at,
                        "needs at least one bound: `gt`, `gte`, `lt` or `lte`",
                    ));
                }
                let lower = match (gt, gte) {
                    (Some(v), _) => Bound::Excluded(v),
                    (_, Some(v)) => Bound::Included(v),
                    _ => Bound::Unbounded,
                };
                let upper = match (lt, lte) {
                    (Some(v), _) => Bound::Excluded(v),
                    (_, Some(v)) => Bound::Included(v),
                    _ => Bound::Unbounded,
                };
                Ok(Node::Range {
                    field,
                    lower,
                    upper,
                    boost,
                })
            }
            "exists" => {
                let all = self.catalog.names(|_| true);
                let field = self.field(map, &at, "field", &all, "exists")?;
                Ok(Node::Exists { field, boost })
            }
            "boolean" => {
                let mut lists: [Vec<Node>; 4] = Default::default();
                for (slot, name) in lists
                    .iter_mut()
                    .zip(["must", "should", "mustNot", "filter"])
                {
                    if let Some(v) = map.get(name) {
                        let p = join(&at, name);
                        for (i, item) in array(v, &p, 1, MAX_CLAUSES)?.iter().enumerate() {
                            slot.push(self.node(item, &format!("{p}[{i}]"), depth + 1)?);
                        }
                    }
                }
                if lists.iter().all(Vec::is_empty) {
                    return Err(err(
                        &at,
                        "needs at least one of `must`, `should`, `mustNot` or `filter`",
                    ));
                }
                let [must, should, must_not, filter] = lists;
                let minimum_should_match = match map.get("minimumShouldMatch") {
                    Some(m) => {
                        integer(m, &join(&at, "minimumShouldMatch"), 0, MAX_CLAUSES as u64)? as u32
                    }
                    None => u32::from(must.is_empty() && filter.is_empty() && !should.is_empty()),
                };
                Ok(Node::Boolean {
                    must,
                    should,
                    must_not,
                    filter,
                    minimum_should_match,
                    boost,
                })
            }
            "functionScore" => {
                let query =
                    self.node(required(map, "query", &at)?, &join(&at, "query"), depth + 1)?;
                let functions_path = join(&at, "functions");
                let mut functions = Vec::new();
                for (i, f) in array(
                    required(map, "functions", &at)?,
                    &functions_path,
                    1,
                    MAX_FUNCTIONS,
                )?
                .iter()
                .enumerate()
                {
                    functions.push(self.function(f, &format!("{functions_path}[{i}]"))?);
                }
                let score_mode = match map.get("scoreMode") {
                    Some(v) => match one_of(
                        v,
                        &join(&at, "scoreMode"),
                        &["multiply", "sum", "avg", "max", "min", "first"],
                    )? {
                        "multiply" => ScoreMode::Multiply,
                        "sum" => ScoreMode::Sum,
                        "avg" => ScoreMode::Avg,
                        "max" => ScoreMode::Max,
                        "min" => ScoreMode::Min,
                        _ => ScoreMode::First,
                    },
                    None => ScoreMode::Multiply,
                };
                let boost_mode = match map.get("boostMode") {
                    Some(v) => match one_of(
                        v,
                        &join(&at, "boostMode"),
                        &["multiply", "replace", "sum", "avg", "max", "min"],
                    )? {
                        "multiply" => BoostMode::Multiply,
                        "replace" => BoostMode::Replace,
                        "sum" => BoostMode::Sum,
                        "avg" => BoostMode::Avg,
                        "max" => BoostMode::Max,
                        _ => BoostMode::Min,
                    },
                    None => BoostMode::Multiply,
                };
                Ok(Node::FunctionScore {
                    query: Box::new(query),
                    functions,
                    score_mode,
                    boost_mode,
                    boost,
                })
            }
            _ => unreachable!("node_type returns an offered kind"),
        }
    }

    /// Counts a node or function against [`MAX_NODES`] and checks it is an object (`what`, for
    /// the message).
    fn counted<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        what: &str,
    ) -> Result<&'v Map<String, Value>> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(err(
                path,
                format!("a query may hold at most {MAX_NODES} nodes and functions"),
            ));
        }
        match value {
            Value::Object(map) => Ok(map),
            _ => Err(err(
                path,
                format!(
                    "must be {what} (an object with `type`), got {}",
                    kind_of(value)
                ),
            )),
        }
    }

    fn function(&mut self, value: &Value, path: &str) -> Result<Function> {
        let map = self.counted(value, path, "a function")?;
        let factor_fields = self.catalog.names(FieldKind::has_value_factor);
        let decay_fields = self.catalog.names(FieldKind::decays);
        let offered: Vec<&str> = FUNCTION_KINDS
            .iter()
            .copied()
            .filter(|k| match *k {
                "weight" => true,
                "fieldValueFactor" => !factor_fields.is_empty(),
                _ => !decay_fields.is_empty(),
            })
            .collect();
        let kind = node_type(map, path, &offered, "function type")?;
        let at = join(path, kind);
        match kind {
            "weight" => {
                unknown_properties(map, &["type", "weight"], &at)?;
                Ok(Function::Weight(number_in(
                    required(map, "weight", &at)?,
                    &join(&at, "weight"),
                    0.0,
                    MAX_BOOST,
                )?))
            }
            "fieldValueFactor" => {
                unknown_properties(
                    map,
                    &["type", "field", "factor", "modifier", "missing"],
                    &at,
                )?;
                let field = self.field(map, &at, "field", &factor_fields, "fieldValueFactor")?;
                let factor = match map.get("factor") {
                    Some(f) => number_in(f, &join(&at, "factor"), 0.0, MAX_BOOST)?,
                    None => 1.0,
                };
                let modifier = match map.get("modifier") {
                    Some(m) => match one_of(
                        m,
                        &join(&at, "modifier"),
                        &["none", "log1p", "ln1p", "sqrt", "square", "reciprocal"],
                    )? {
                        "none" => Modifier::None,
                        "log1p" => Modifier::Log1p,
                        "ln1p" => Modifier::Ln1p,
                        "sqrt" => Modifier::Sqrt,
                        "square" => Modifier::Square,
                        _ => Modifier::Reciprocal,
                    },
                    None => Modifier::None,
                };
                let missing = match map.get("missing") {
                    Some(m) => Some(number(m, &join(&at, "missing"))?),
                    None => None,
                };
                Ok(Function::FieldValueFactor {
                    field,
                    factor,
                    modifier,
                    missing,
                })
            }
            curve => {
                let curve = match curve {
                    "gauss" => Curve::Gauss,
                    "exp" => Curve::Exp,
                    _ => Curve::Linear,
                };
                unknown_properties(
                    map,
                    &["type", "field", "origin", "scale", "offset", "decay"],
                    &at,
                )?;
                let field = self.field(map, &at, "field", &decay_fields, "decay function")?;
                let origin_v = required(map, "origin", &at)?;
                let scale_v = required(map, "scale", &at)?;
                let (origin, scale, offset) = if self.kind(&field) == FieldKind::Date {
                    let origin_path = join(&at, "origin");
                    let origin = match origin_v {
                        Value::String(s) if s == "now" => self.now(),
                        Value::String(_) => self.date(origin_v, &origin_path, &field)?,
                        _ => {
                            return Err(err(
                                &origin_path,
                                format!(
                                    "must be a date string or `now` for date field `{field}`, got {}",
                                    kind_of(origin_v)
                                ),
                            ));
                        }
                    };
                    let scale = duration(scale_v, &join(&at, "scale"), false)?;
                    let offset = match map.get("offset") {
                        Some(o) => duration(o, &join(&at, "offset"), true)?,
                        None => 0,
                    };
                    (origin as f64, scale as f64, offset as f64)
                } else {
                    let origin = number(origin_v, &join(&at, "origin"))?;
                    let scale_path = join(&at, "scale");
                    let scale = number(scale_v, &scale_path)?;
                    if scale <= 0.0 {
                        return Err(err(&scale_path, "must be above 0"));
                    }
                    let offset = match map.get("offset") {
                        Some(o) => number_in(o, &join(&at, "offset"), 0.0, f64::MAX)?,
                        None => 0.0,
                    };
                    (origin, scale, offset)
                };
                let decay = match map.get("decay") {
                    Some(d) => {
                        let p = join(&at, "decay");
                        let d = number(d, &p)?;
                        if d <= 0.0 || d >= 1.0 {
                            return Err(err(&p, "must be between 0 and 1, both excluded"));
                        }
                        d
                    }
                    None => 0.5,
                };
                Ok(Function::Decay {
                    curve,
                    field,
                    origin,
                    scale,
                    offset,
                    decay,
                })
            }
        }
    }

    /// Counts a node that compiles an automaton.
    fn automaton(&mut self, path: &str) -> Result<()> {
        self.automata += 1;
        if self.automata > MAX_AUTOMATA {
            return Err(err(
                path,
                format!("a query may hold at most {MAX_AUTOMATA} regex, fuzzy and prefix nodes"),
            ));
        }
        Ok(())
    }

    /// The `field` of a node over keyword and full-text fields.
    fn text_field(&self, map: &Map<String, Value>, at: &str, kind: &str) -> Result<String> {
        let text = self.catalog.names(FieldKind::is_text);
        self.field(map, at, "field", &text, kind)
    }

    /// A value of `field`, typed by its kind.
    fn value(&self, value: &Value, path: &str, field: &str) -> Result<Scalar> {
        let kind = self.kind(field);
        let wrong = |wanted: &str| {
            err(
                path,
                format!(
                    "must be {wanted} for {kind} field `{field}`, got {}",
                    kind_of(value)
                ),
            )
        };
        Ok(match kind {
            FieldKind::Keyword | FieldKind::FullText => match value {
                Value::String(_) => Scalar::Text(string(value, path, MAX_VALUE_CHARS)?),
                _ => return Err(wrong("a string")),
            },
            FieldKind::Numeric => Scalar::Number(value.as_f64().ok_or_else(|| wrong("a number"))?),
            FieldKind::Date => Scalar::Date(self.date(value, path, field)?),
            FieldKind::Bool => Scalar::Bool(value.as_bool().ok_or_else(|| wrong("a boolean"))?),
        })
    }

    fn kind(&self, field: &str) -> FieldKind {
        self.catalog
            .field(field)
            .map(|f| f.kind)
            .unwrap_or(FieldKind::Keyword)
    }

    fn field(
        &self,
        map: &Map<String, Value>,
        at: &str,
        key: &str,
        usable: &[&str],
        what: &str,
    ) -> Result<String> {
        let value = required(map, key, at)?;
        field_name(value, &join(at, key), usable, what, self.catalog)
    }

    fn date(&self, value: &Value, path: &str, field: &str) -> Result<i64> {
        let Value::String(s) = value else {
            return Err(err(
                path,
                format!(
                    "must be a date string (e.g. 2026-03-01 or 2026-03-01T09:30:00Z) for date field `{field}`, got {}",
                    kind_of(value)
                ),
            ));
        };
        parse_date(s).map_err(|problem| err(path, problem))
    }

    fn now(&mut self) -> i64 {
        *self.now_ms.get_or_insert_with(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        })
    }
}

/// The `type` of a node or function, one of `offered`.
fn node_type<'o>(
    map: &Map<String, Value>,
    path: &str,
    offered: &[&'o str],
    what: &str,
) -> Result<&'o str> {
    let type_path = join(path, "type");
    let Some(value) = map.get("type") else {
        return Err(err(
            &type_path,
            format!("is required: the {what}, one of {}", list(offered)),
        ));
    };
    let Value::String(name) = value else {
        return Err(err(
            &type_path,
            format!(
                "must be a string, one of {}, got {}",
                list(offered),
                kind_of(value)
            ),
        ));
    };
    if let Some(kind) = offered.iter().find(|k| **k == name) {
        return Ok(kind);
    }
    let message = match nearest(name, offered.iter().copied()) {
        Some(near) => format!(
            "unknown {what} `{}`; did you mean `{near}`? (one of {})",
            shorten(name),
            list(offered)
        ),
        None => format!(
            "unknown {what} `{}`; one of {}",
            shorten(name),
            list(offered)
        ),
    };
    Err(err(&type_path, message))
}

fn field_name(
    value: &Value,
    path: &str,
    usable: &[&str],
    what: &str,
    catalog: &Catalog,
) -> Result<String> {
    let Value::String(name) = value else {
        return Err(err(
            path,
            format!(
                "must be a field name, one of {}, got {}",
                list(usable),
                kind_of(value)
            ),
        ));
    };
    if usable.contains(&name.as_str()) {
        return Ok(name.clone());
    }
    let message = if let Some(f) = catalog.field(name) {
        format!(
            "`{}` is a {} field, which `{what}` cannot use; usable here: {}",
            f.name,
            f.kind,
            list(usable)
        )
    } else {
        match nearest(name, usable.iter().copied()) {
            Some(near) => format!(
                "unknown field `{}`; did you mean `{near}`? (usable here: {})",
                shorten(name),
                list(usable)
            ),
            None => format!(
                "unknown field `{}`; usable here: {}",
                shorten(name),
                list(usable)
            ),
        }
    };
    Err(err(path, message))
}

fn unknown_properties(map: &Map<String, Value>, known: &[&str], path: &str) -> Result<()> {
    for key in map.keys() {
        if !known.contains(&key.as_str()) {
            let at = join(path, &shorten(key));
            let message = match nearest(key, known.iter().copied().filter(|k| *k != "type")) {
                Some(near) => format!("unknown property; did you mean `{near}`?"),
                None => format!("unknown property; allowed here: {}", list(known)),
            };
            return Err(err(&at, message));
        }
    }
    Ok(())
}

/// The properties a node of `kind` may have.
fn node_properties(kind: &str) -> &'static [&'static str] {
    match kind {
        "term" | "prefix" => &["type", "field", "value", "boost"],
        "phrase" => &["type", "field", "terms", "slop", "boost"],
        "fuzzy" => &["type", "field", "value", "maxEdits", "boost"],
        "regex" => &["type", "field", "pattern", "boost"],
        "multiFieldTerm" => &["type", "fields", "value", "boost"],
        "range" => &["type", "field", "gt", "gte", "lt", "lte", "boost"],
        "exists" => &["type", "field", "boost"],
        "boolean" => &[
            "type",
            "must",
            "should",
            "mustNot",
            "filter",
            "minimumShouldMatch",
            "boost",
        ],
        _ => &[
            "type",
            "query",
            "functions",
            "scoreMode",
            "boostMode",
            "boost",
        ],
    }
}

/// A required string property of at most `max` characters.
fn required_string(map: &Map<String, Value>, key: &str, path: &str, max: usize) -> Result<String> {
    string(required(map, key, path)?, &join(path, key), max)
}

fn required<'v>(map: &'v Map<String, Value>, key: &str, path: &str) -> Result<&'v Value> {
    map.get(key)
        .ok_or_else(|| err(&join(path, key), "is required"))
}

fn string(value: &Value, path: &str, max: usize) -> Result<String> {
    match value {
        Value::String(s) => {
            let n = s.chars().count();
            if n == 0 {
                Err(err(path, "must not be empty"))
            } else if n > max {
                Err(err(
                    path,
                    format!("must be at most {max} characters, got {n}"),
                ))
            } else {
                Ok(s.clone())
            }
        }
        other => Err(err(
            path,
            format!("must be a string, got {}", kind_of(other)),
        )),
    }
}

fn number(value: &Value, path: &str) -> Result<f64> {
    value
        .as_f64()
        .filter(|_| value.is_number())
        .ok_or_else(|| err(path, format!("must be a number, got {}", kind_of(value))))
}

fn number_in(value: &Value, path: &str, min: f64, max: f64) -> Result<f64> {
    let n = number(value, path)?;
    if n < min || n > max {
        let range = if max == f64::MAX {
            format!("at least {min}")
        } else {
            format!("between {min} and {max}")
        };
        return Err(err(path, format!("must be {range}, got {n}")));
    }
    Ok(n)
}

/// An integer in `min..=max` (a number with no fractional part, as JSON Schema counts integers).
fn integer(value: &Value, path: &str, min: u64, max: u64) -> Result<u64> {
    let n = match value {
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        other => {
            return Err(err(
                path,
                format!("must be an integer, got {}", kind_of(other)),
            ));
        }
    };
    if n.fract() != 0.0 || !n.is_finite() {
        return Err(err(path, format!("must be an integer, got {n}")));
    }
    if n < min as f64 || n > max as f64 {
        return Err(err(
            path,
            format!("must be between {min} and {max}, got {n}"),
        ));
    }
    Ok(n as u64)
}

fn boolean(value: &Value, path: &str) -> Result<bool> {
    value.as_bool().ok_or_else(|| {
        err(
            path,
            format!("must be true or false, got {}", kind_of(value)),
        )
    })
}

fn array<'v>(value: &'v Value, path: &str, min: usize, max: usize) -> Result<&'v Vec<Value>> {
    let Value::Array(items) = value else {
        return Err(err(
            path,
            format!("must be an array, got {}", kind_of(value)),
        ));
    };
    if items.len() < min {
        return Err(err(path, format!("needs at least {min} item(s)")));
    }
    if items.len() > max {
        return Err(err(
            path,
            format!("may hold at most {max} items, got {}", items.len()),
        ));
    }
    Ok(items)
}

fn one_of<'a>(value: &Value, path: &str, allowed: &[&'a str]) -> Result<&'a str> {
    let Value::String(s) = value else {
        return Err(err(
            path,
            format!("must be one of {}, got {}", list(allowed), kind_of(value)),
        ));
    };
    if let Some(a) = allowed.iter().find(|a| **a == s) {
        return Ok(a);
    }
    Err(err(
        path,
        match nearest(s, allowed.iter().copied()) {
            Some(near) => format!("unknown value `{}`; did you mean `{near}`?", shorten(s)),
            None => format!("must be one of {}", list(allowed)),
        },
    ))
}

/// Why `pattern` cannot be a term automaton, if it cannot: syntax, or a shape whose automaton
/// would be too large to build in bounded time (Unicode-wide classes, long counted repetitions,
/// repetitions nested deeper than [`MAX_REGEX_NESTING`]).
pub fn regex_problem(pattern: &str) -> Option<String> {
    use regex_syntax::hir::{Class, Hir, HirKind};
    let hir = match regex_syntax::ParserBuilder::new()
        .nest_limit(32)
        .build()
        .parse(pattern)
    {
        Ok(hir) => hir,
        Err(e) => {
            let text = e.to_string();
            return Some(shorten(text.lines().last().unwrap_or(&text)));
        }
    };
    fn walk(hir: &Hir, depth: usize) -> Option<String> {
        match hir.kind() {
            HirKind::Class(Class::Unicode(class)) if class.ranges().len() > MAX_CLASS_RANGES => {
                Some(
                    "a character class this wide (\\w, \\d, \\s, \\p{..} or a negated class) is \
                 not allowed; list the characters, e.g. [a-z0-9_]"
                        .into(),
                )
            }
            HirKind::Class(Class::Bytes(class)) if class.ranges().len() > MAX_CLASS_RANGES => {
                Some("a character class this wide is not allowed; list the characters".into())
            }
            HirKind::Repetition(r) => {
                if r.max.unwrap_or(r.min) > MAX_REGEX_REPEAT {
                    return Some(format!(
                        "a counted repetition may repeat at most {MAX_REGEX_REPEAT} times"
                    ));
                }
                if depth >= MAX_REGEX_NESTING {
                    return Some(format!(
                        "repetitions may be nested at most {MAX_REGEX_NESTING} deep"
                    ));
                }
                walk(&r.sub, depth + 1)
            }
            HirKind::Capture(c) => walk(&c.sub, depth),
            HirKind::Concat(parts) | HirKind::Alternation(parts) => {
                parts.iter().find_map(|p| walk(p, depth))
            }
            HirKind::Look(_) => Some("anchors and \\b are not supported".into()),
            _ => None,
        }
    }
    if let Some(problem) = walk(&hir, 0) {
        return Some(problem);
    }
    tantivy_fst::Regex::new(pattern)
        .err()
        .map(|e| shorten(&e.to_string()))
}

/// A duration (`90s`, `12h`, `30d`, `500ms`) in milliseconds.
fn duration(value: &Value, path: &str, zero_allowed: bool) -> Result<i64> {
    let shape = if zero_allowed {
        "a duration such as 0d, 500ms, 90s, 15m, 12h or 30d"
    } else {
        "a positive duration such as 500ms, 90s, 15m, 12h or 30d"
    };
    let Value::String(s) = value else {
        return Err(err(
            path,
            format!("must be {shape}, got {}", kind_of(value)),
        ));
    };
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = s.split_at(digits);
    let unit_ms: i64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    if unit_ms == 0
        || number.is_empty()
        || number.len() > MAX_DURATION_DIGITS
        || (!zero_allowed && number.starts_with('0'))
    {
        return Err(err(path, format!("must be {shape}")));
    }
    let n: i64 = number
        .parse()
        .map_err(|_| err(path, format!("must be {shape}")))?;
    Ok(n * unit_ms)
}

/// Parses an ISO 8601 date or date-time ([`DATE_PATTERN`]) into milliseconds since the epoch.
/// The error says whether the shape is wrong or the date does not exist.
pub fn parse_date(s: &str) -> std::result::Result<i64, String> {
    const SHAPE: &str =
        "must be a date such as 2026-03-01, 2026-03-01T09:30 or 2026-03-01T09:30:00.250+02:00";
    let shape = || SHAPE.to_string();
    let b = s.as_bytes();
    let mut at = 0;
    let digits = |at: &mut usize, n: usize| -> Option<i64> {
        let part = b.get(*at..*at + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *at += n;
        Some(
            part.iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
        )
    };
    let byte = |at: &mut usize, c: u8| -> bool {
        if b.get(*at) == Some(&c) {
            *at += 1;
            true
        } else {
            false
        }
    };
    let year = digits(&mut at, 4).ok_or_else(shape)?;
    if !byte(&mut at, b'-') {
        return Err(shape());
    }
    let month = digits(&mut at, 2).ok_or_else(shape)?;
    if !byte(&mut at, b'-') {
        return Err(shape());
    }
    let day = digits(&mut at, 2).ok_or_else(shape)?;
    let (mut hour, mut minute, mut second, mut millis, mut offset_min) = (0, 0, 0, 0, 0);
    if byte(&mut at, b'T') {
        hour = digits(&mut at, 2).ok_or_else(shape)?;
        if !byte(&mut at, b':') {
            return Err(shape());
        }
        minute = digits(&mut at, 2).ok_or_else(shape)?;
        if byte(&mut at, b':') {
            second = digits(&mut at, 2).ok_or_else(shape)?;
            if byte(&mut at, b'.') {
                let start = at;
                while at < b.len() && b[at].is_ascii_digit() && at - start < 9 {
                    at += 1;
                }
                let fraction = &s[start..at];
                if fraction.is_empty() {
                    return Err(shape());
                }
                let padded = format!("{fraction:0<3}");
                millis = padded[..3].parse::<i64>().map_err(|_| shape())?;
            }
        }
        if byte(&mut at, b'Z') {
        } else if b.get(at) == Some(&b'+') || b.get(at) == Some(&b'-') {
            let sign = if b[at] == b'-' { -1 } else { 1 };
            at += 1;
            let h = digits(&mut at, 2).ok_or_else(shape)?;
            if !byte(&mut at, b':') {
                return Err(shape());
            }
            let m = digits(&mut at, 2).ok_or_else(shape)?;
            if h > 23 || m > 59 {
                return Err(format!("`{}` has an impossible UTC offset", shorten(s)));
            }
            offset_min = sign * (h * 60 + m);
        }
    }
    if at != b.len() {
        return Err(shape());
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    if days_in_month == 0 || day < 1 || day > days_in_month {
        return Err(format!("`{}` is not a date that exists", shorten(s)));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(format!("`{}` is not a time that exists", shorten(s)));
    }
    // Days from the civil date (proleptic Gregorian), after H. Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_min * 60;
    Ok(seconds * 1_000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> &'static Catalog {
        Catalog::tools()
    }

    fn parse_err(v: Value) -> QueryError {
        parse(tools(), &v, "query").unwrap_err()
    }

    #[test]
    fn a_misspelt_field_names_the_path_and_the_nearest_field() {
        let e = parse_err(json!({"v": 1, "query": {"type": "boolean", "must": [
            {"type": "term", "field": "integration", "value": "slack"},
            {"type": "exists", "field": "category"},
            {"type": "term", "field": "descripton", "value": "send"}
        ]}}));
        assert_eq!(e.path, "query.query.boolean.must[2].term.field");
        assert!(
            e.message.contains("did you mean `description`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn misspelt_types_and_properties_are_suggested() {
        let e =
            parse_err(json!({"v": 1, "query": {"type": "trem", "field": "name", "value": "x"}}));
        assert_eq!(e.path, "query.query.type");
        assert!(e.message.contains("did you mean `term`"), "{}", e.message);
        let e =
            parse_err(json!({"v": 1, "query": {"type": "term", "feild": "name", "value": "x"}}));
        assert_eq!(e.path, "query.query.term.feild");
        assert!(e.message.contains("did you mean `field`"), "{}", e.message);
        let e = parse_err(json!({"v": 1, "limt": 3}));
        assert_eq!(e.path, "query.limt");
        assert!(e.message.contains("did you mean `limit`"), "{}", e.message);
    }

    #[test]
    fn parser_only_checks_name_their_path() {
        let e = parse_err(
            json!({"v": 1, "query": {"type": "regex", "field": "name", "pattern": "a(b"}}),
        );
        assert_eq!(e.path, "query.query.regex.pattern");
        let mut deep = json!({"type": "exists", "field": "name"});
        for _ in 0..MAX_DEPTH {
            deep = json!({"type": "boolean", "must": [deep]});
        }
        let e = parse_err(json!({"v": 1, "query": deep}));
        assert!(e.message.contains("nested at most"), "{}", e.message);
    }

    #[test]
    fn costly_regular_expressions_are_refused_before_any_automaton_is_built() {
        for (pattern, why) in [
            ("(\\w*\\W*){30}", "at most 16 times"),
            ("\\w*\\W*", "this wide"),
            ("[^a]*\\d+", "this wide"),
            ("((a*)*)*", "nested"),
            ("^abc", "anchors"),
            ("a{1000}", "16 times"),
            // Within the shape limits, but more automaton states than the engine builds.
            ("(a|b)*a(a|b){15}", ""),
        ] {
            let problem = regex_problem(pattern).expect(pattern);
            assert!(problem.contains(why), "{pattern}: {problem}");
        }
        for pattern in [
            "sen.*",
            "[a-z]+",
            "mess(age|enger)",
            "(a|b)*a(a|b){3}",
            "caf\u{e9}.*",
        ] {
            assert_eq!(regex_problem(pattern), None, "{pattern}");
        }
    }

    #[test]
    fn dates_are_real_dates() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("1970-01-02T00:00:01.5Z"), Ok(86_401_500));
        assert_eq!(parse_date("1970-01-01T01:00+01:00"), Ok(0));
        assert_eq!(parse_date("2024-02-29"), Ok(1_709_164_800_000));
        assert!(parse_date("2023-02-29").unwrap_err().contains("exists"));
        assert!(parse_date("2023-13-01").unwrap_err().contains("exists"));
        assert!(parse_date("2023-1-01").unwrap_err().contains("such as"));
        assert!(parse_date("2023-01-01T25:00").unwrap_err().contains("time"));
    }

    #[test]
    fn near_names() {
        assert_eq!(
            nearest("descripton", ["name", "description"]),
            Some("description")
        );
        assert_eq!(nearest("Name", ["name", "description"]), Some("name"));
        assert_eq!(nearest("zzzzzz", ["name", "description"]), None);
    }
}
