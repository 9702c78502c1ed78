//! Executes the structured part of a query JSON document (its `query` and `filter` nodes, parsed by
//! `agentsearch-query`) on one index. Leaves run as tantivy queries over the index's fields (BM25
//! on this index's statistics for analyzed text, a constant per match for keywords); a field that
//! is not indexed per document (a tool's integration, the same for a whole index) is decided from
//! the records. Boolean composition and function scores combine the leaves' matches in memory,
//! which a per-integration or per-sync index keeps small.

use agentsearch_query::ast::{Bound, Function, Node, Scalar};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::query::{
    BooleanQuery, EmptyQuery, ExistsQuery, FuzzyTermQuery, Occur, PhraseQuery, Query, RangeQuery,
    RegexQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, Score, Searcher, SegmentReader, Term};
use tantivy_fst::Automaton;

use agentsearch_common::shard::DATE_MS_RANGE;

use crate::analyzer::{analyze, analyze_positions};
use crate::error::{IndexError, Result};
use crate::tool_index::IdMapOf;

/// Where a field's values live.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Analyzed text in a tantivy field.
    Text(Field),
    /// Whole strings in a tantivy field.
    Keyword(Field),
    /// A string every document of the index has (a tool's integration, a passage's sync and
    /// source): decided once per index, not indexed per document.
    Constant,
    /// Numbers, dates or booleans in a fast tantivy field (matched on its column, exactly).
    Typed(Field),
}

/// An index as the structured query sees it.
pub(crate) trait Source {
    fn searcher(&self) -> &Searcher;
    /// The target of a field of the query language; `None`: the index does not have it.
    fn target(&self, field: &str) -> Option<Target>;
    /// The value of a [`Target::Constant`] field (`None`: the index is empty).
    fn constant(&self, field: &str) -> Option<&str>;
    /// Every live document's id.
    fn ids(&self) -> Vec<u64>;
    /// A document's numeric value of a field (dates in milliseconds), for function scores.
    fn number(&self, field: &str, id: u64) -> Option<f64>;
}

/// The documents a node matches, with their scores.
pub(crate) type Matches = IdMapOf<f32>;

/// What the structured part of a query allows in one index: every document matching `query` and
/// `filter`, with `query`'s score (`None` when there is no `query`).
pub(crate) fn allowed(
    source: &dyn Source,
    query: Option<&Node>,
    filter: Option<&Node>,
) -> Result<IdMapOf<Option<f32>>> {
    let scored = query.map(|q| evaluate(source, q)).transpose()?;
    let filtered = filter.map(|f| evaluate(source, f)).transpose()?;
    Ok(match (scored, filtered) {
        (Some(scored), Some(filtered)) => scored
            .into_iter()
            .filter(|(id, _)| filtered.contains_key(id))
            .map(|(id, s)| (id, Some(s)))
            .collect(),
        (Some(scored), None) => scored.into_iter().map(|(id, s)| (id, Some(s))).collect(),
        (None, Some(filtered)) => filtered.into_keys().map(|id| (id, None)).collect(),
        (None, None) => source.ids().into_iter().map(|id| (id, None)).collect(),
    })
}

pub(crate) fn evaluate(source: &dyn Source, node: &Node) -> Result<Matches> {
    let boost = node.boost();
    let mut matches = match node {
        Node::Term {
            field,
            value: Scalar::Text(text),
            ..
        } => leaf(
            source,
            field,
            |target| match target {
                Target::Text(f) => Ok(all_words(f, text)),
                Target::Keyword(f) => Ok(term(f, text)),
                _ => Err(unsupported(field, &Scalar::Text(text.clone()))),
            },
            |v| v == text.as_str(),
        )?,
        Node::Term { field, value, .. } => leaf(
            source,
            field,
            |target| match target {
                Target::Typed(f) => typed_range(
                    f,
                    field,
                    &Bound::Included(value.clone()),
                    &Bound::Included(value.clone()),
                ),
                _ => Err(unsupported(field, value)),
            },
            |_| false,
        )?,
        Node::Phrase {
            field, terms, slop, ..
        } => {
            let joined = terms.join(" ");
            leaf(
                source,
                field,
                |target| match target {
                    Target::Text(f) => {
                        let words = analyze_positions(&joined);
                        let first = words.first().map_or(0, |(p, _)| *p);
                        Ok(match words.len() {
                            0 => Box::new(EmptyQuery),
                            1 => text_term(f, &words[0].1),
                            _ => Box::new(PhraseQuery::new_with_offset_and_slop(
                                words
                                    .iter()
                                    .map(|(p, w)| (p - first, Term::from_field_text(f, w)))
                                    .collect(),
                                *slop,
                            )),
                        })
                    }
                    Target::Keyword(f) => Ok(term(f, &joined)),
                    _ => Err(not_text(field)),
                },
                |v| v == joined,
            )?
        }
        Node::Prefix { field, value, .. } => leaf(
            source,
            field,
            |target| {
                let (f, prefix) = match target {
                    Target::Text(f) => (f, value.to_lowercase()),
                    Target::Keyword(f) => (f, value.clone()),
                    _ => return Err(not_text(field)),
                };
                Ok(prefix_query(f, &prefix))
            },
            |v| v.starts_with(value.as_str()),
        )?,
        Node::Fuzzy {
            field,
            value,
            max_edits,
            ..
        } => leaf(
            source,
            field,
            |target| match target {
                Target::Text(f) => {
                    let words = analyze(value);
                    Ok(match words.len() {
                        0 => Box::new(EmptyQuery),
                        _ => all_of(words.iter().map(|w| fuzzy(f, w, *max_edits)).collect()),
                    })
                }
                Target::Keyword(f) => Ok(fuzzy(f, value, *max_edits)),
                _ => Err(not_text(field)),
            },
            |v| edit_distance(v, value) <= usize::from(*max_edits),
        )?,
        Node::Regex { field, pattern, .. } => {
            let automaton = std::sync::Arc::new(
                tantivy_fst::Regex::new(pattern)
                    .map_err(|e| IndexError::invalid("query", e.to_string()))?,
            );
            leaf(
                source,
                field,
                |target| match target {
                    Target::Text(f) | Target::Keyword(f) => {
                        Ok(Box::new(RegexQuery::from_regex(automaton.clone(), f))
                            as Box<dyn Query>)
                    }
                    _ => Err(not_text(field)),
                },
                |v| full_match(&automaton, v),
            )?
        }
        Node::MultiFieldTerm { fields, value, .. } => {
            let mut union = Matches::default();
            for field in fields {
                let one = Node::Term {
                    field: field.clone(),
                    value: Scalar::Text(value.clone()),
                    boost: 1.0,
                };
                for (id, score) in evaluate(source, &one)? {
                    *union.entry(id).or_default() += score;
                }
            }
            union
        }
        Node::Range {
            field,
            lower,
            upper,
            ..
        } if matches!(source.target(field), Some(Target::Typed(_))) => leaf(
            source,
            field,
            |target| match target {
                Target::Typed(f) => typed_range(f, field, lower, upper),
                _ => unreachable!("matched as typed"),
            },
            |_| false,
        )?,
        Node::Range {
            field,
            lower,
            upper,
            ..
        } => {
            let text = |b: &Bound| -> Result<std::ops::Bound<String>> {
                Ok(match b {
                    Bound::Unbounded => std::ops::Bound::Unbounded,
                    Bound::Included(Scalar::Text(t)) => std::ops::Bound::Included(t.clone()),
                    Bound::Excluded(Scalar::Text(t)) => std::ops::Bound::Excluded(t.clone()),
                    Bound::Included(other) | Bound::Excluded(other) => {
                        return Err(unsupported(field, other));
                    }
                })
            };
            let (lo, hi) = (text(lower)?, text(upper)?);
            let in_range = |v: &str| {
                let above = match &lo {
                    std::ops::Bound::Unbounded => true,
                    std::ops::Bound::Included(b) => v >= b.as_str(),
                    std::ops::Bound::Excluded(b) => v > b.as_str(),
                };
                let below = match &hi {
                    std::ops::Bound::Unbounded => true,
                    std::ops::Bound::Included(b) => v <= b.as_str(),
                    std::ops::Bound::Excluded(b) => v < b.as_str(),
                };
                above && below
            };
            leaf(
                source,
                field,
                |target| match target {
                    Target::Text(f) | Target::Keyword(f) => {
                        let to_term = |b: &std::ops::Bound<String>| match b {
                            std::ops::Bound::Unbounded => std::ops::Bound::Unbounded,
                            std::ops::Bound::Included(s) => {
                                std::ops::Bound::Included(Term::from_field_text(f, s))
                            }
                            std::ops::Bound::Excluded(s) => {
                                std::ops::Bound::Excluded(Term::from_field_text(f, s))
                            }
                        };
                        Ok(Box::new(RangeQuery::new(to_term(&lo), to_term(&hi))) as Box<dyn Query>)
                    }
                    _ => unreachable!("typed ranges are matched above"),
                },
                in_range,
            )?
        }
        Node::Exists { field, .. } => leaf(
            source,
            field,
            |target| match target {
                Target::Text(f) | Target::Keyword(f) => regex(f, ".+"),
                Target::Typed(f) => Ok(Box::new(ExistsQuery::new(
                    source.searcher().schema().get_field_name(f).to_string(),
                    false,
                )) as Box<dyn Query>),
                Target::Constant => unreachable!(),
            },
            |v| !v.is_empty(),
        )?,
        Node::Boolean {
            must,
            should,
            must_not,
            filter,
            minimum_should_match,
            ..
        } => {
            let mut current: Option<Matches> = None;
            for clause in must {
                let m = evaluate(source, clause)?;
                current = Some(match current {
                    None => m,
                    Some(c) => c
                        .into_iter()
                        .filter_map(|(id, s)| m.get(&id).map(|t| (id, s + t)))
                        .collect(),
                });
            }
            for clause in filter {
                let m = evaluate(source, clause)?;
                current = Some(match current {
                    None => m.into_keys().map(|id| (id, 0.0)).collect(),
                    Some(c) => c.into_iter().filter(|(id, _)| m.contains_key(id)).collect(),
                });
            }
            let mut should_hits: IdMapOf<(u32, f32)> = IdMapOf::default();
            for clause in should {
                for (id, s) in evaluate(source, clause)? {
                    let e = should_hits.entry(id).or_default();
                    e.0 += 1;
                    e.1 += s;
                }
            }
            let required = *minimum_should_match;
            let mut out: Matches = match current {
                Some(c) => c
                    .into_iter()
                    .filter_map(|(id, s)| {
                        let (n, extra) = should_hits.get(&id).copied().unwrap_or_default();
                        (n >= required).then_some((id, s + extra))
                    })
                    .collect(),
                None if !should.is_empty() => should_hits
                    .into_iter()
                    .filter(|(_, (n, _))| *n >= required.max(1))
                    .map(|(id, (_, s))| (id, s))
                    .collect(),
                // Only `mustNot`: every document, as a match of everything scores.
                None => source.ids().into_iter().map(|id| (id, 1.0)).collect(),
            };
            for clause in must_not {
                for id in evaluate(source, clause)?.into_keys() {
                    out.remove(&id);
                }
            }
            out
        }
        Node::FunctionScore {
            query,
            functions,
            score_mode,
            boost_mode,
            ..
        } => {
            let mut m = evaluate(source, query)?;
            let mut values = Vec::with_capacity(functions.len());
            for (id, score) in m.iter_mut() {
                values.clear();
                for f in functions {
                    let x = match f {
                        Function::Weight(_) => None,
                        _ => f.field().and_then(|field| source.number(field, *id)),
                    };
                    values.push(f.value(x));
                }
                let combined = boost_mode.combine(f64::from(*score), score_mode.combine(&values));
                *score = if combined.is_finite() {
                    combined as f32
                } else {
                    0.0
                };
            }
            m
        }
    };
    if boost != 1.0 {
        for score in matches.values_mut() {
            *score *= boost;
        }
    }
    Ok(matches)
}

/// A leaf over `field`: a tantivy query built by `query` for indexed fields, `predicate` on the
/// index's value of a [`Target::Constant`] field. Matches score 1, but BM25 for analyzed text.
fn leaf(
    source: &dyn Source,
    field: &str,
    query: impl FnOnce(Target) -> Result<Box<dyn Query>>,
    predicate: impl Fn(&str) -> bool,
) -> Result<Matches> {
    // A field this index does not hold (metadata another sync declares) matches nothing here.
    let Some(target) = source.target(field) else {
        return Ok(Matches::default());
    };
    match target {
        // One decision for the whole index.
        Target::Constant => Ok(match source.constant(field) {
            Some(value) if predicate(value) => {
                source.ids().into_iter().map(|id| (id, 1.0)).collect()
            }
            _ => Matches::default(),
        }),
        Target::Keyword(_) | Target::Typed(_) => {
            let q = query(target)?;
            Ok(collect(source.searcher(), q.as_ref())?
                .into_iter()
                .map(|(id, _)| (id, 1.0))
                .collect())
        }
        Target::Text(_) => {
            let q = query(target)?;
            Ok(collect(source.searcher(), q.as_ref())?
                .into_iter()
                .collect())
        }
    }
}

fn collect(searcher: &Searcher, query: &dyn Query) -> Result<Vec<(u64, f32)>> {
    Ok(searcher.search(query, &IdScores)?)
}

/// Collects `(id, score)` of every match, the id read from the `id` fast field.
struct IdScores;

struct SegmentIdScores {
    ids: Column<u64>,
    out: Vec<(u64, f32)>,
}

impl Collector for IdScores {
    type Fruit = Vec<(u64, f32)>;
    type Child = SegmentIdScores;

    fn for_segment(&self, _ord: u32, segment: &SegmentReader) -> tantivy::Result<SegmentIdScores> {
        Ok(SegmentIdScores {
            ids: segment.fast_fields().u64("id")?,
            out: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u64, f32)>>) -> tantivy::Result<Vec<(u64, f32)>> {
        Ok(fruits.concat())
    }
}

impl SegmentCollector for SegmentIdScores {
    type Fruit = Vec<(u64, f32)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if let Some(id) = self.ids.first(doc) {
            self.out.push((id, score));
        }
    }

    fn harvest(self) -> Vec<(u64, f32)> {
        self.out
    }
}

fn term(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::Basic,
    ))
}

fn text_term(field: Field, word: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, word),
        IndexRecordOption::WithFreqs,
    ))
}

/// Every word of `text`, analyzed as the field is: all must occur.
fn all_words(field: Field, text: &str) -> Box<dyn Query> {
    let words = analyze(text);
    match words.len() {
        0 => Box::new(EmptyQuery),
        1 => text_term(field, &words[0]),
        _ => all_of(words.iter().map(|w| text_term(field, w)).collect()),
    }
}

fn all_of(queries: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    Box::new(BooleanQuery::new(
        queries.into_iter().map(|q| (Occur::Must, q)).collect(),
    ))
}

fn fuzzy(field: Field, text: &str, max_edits: u8) -> Box<dyn Query> {
    Box::new(FuzzyTermQuery::new(
        Term::from_field_text(field, text),
        max_edits,
        true,
    ))
}

fn regex(field: Field, pattern: &str) -> Result<Box<dyn Query>> {
    RegexQuery::from_pattern(pattern, field)
        .map(|q| Box::new(q) as Box<dyn Query>)
        .map_err(|e| IndexError::invalid("query", e.to_string()))
}

/// Terms starting with `prefix`: a range of the term dictionary (no automaton, whatever the
/// prefix's length). Terms continuing with U+10FFFF itself are left out.
fn prefix_query(field: Field, prefix: &str) -> Box<dyn Query> {
    Box::new(RangeQuery::new(
        std::ops::Bound::Included(Term::from_field_text(field, prefix)),
        std::ops::Bound::Excluded(Term::from_field_text(field, &format!("{prefix}\u{10FFFF}"))),
    ))
}

fn full_match(regex: &tantivy_fst::Regex, text: &str) -> bool {
    let mut state = regex.start();
    for b in text.bytes() {
        state = regex.accept(&state, b);
        if !regex.can_match(&state) {
            return false;
        }
    }
    regex.is_match(&state)
}

/// Levenshtein distance with adjacent transpositions counted as one edit, as the fuzzy query does.
fn edit_distance(a: &str, b: &str) -> usize {
    strsim::damerau_levenshtein(a, b)
}

/// Values of a fast field between two bounds (a `term` is the range of one value), on the
/// field's column: dates at millisecond precision, numbers exactly.
fn typed_range(field: Field, name: &str, lower: &Bound, upper: &Bound) -> Result<Box<dyn Query>> {
    // Booleans have no range: a `term` on one is its indexed term.
    if let Bound::Included(Scalar::Bool(b)) = lower {
        return Ok(Box::new(TermQuery::new(
            Term::from_field_bool(field, *b),
            IndexRecordOption::Basic,
        )));
    }
    // No indexed date lies outside DATE_MS_RANGE: a term there matches nothing, and a bound
    // there means the same as the range's end.
    if let (Bound::Included(Scalar::Date(ms)), Bound::Included(Scalar::Date(same))) = (lower, upper)
        && ms == same
        && !DATE_MS_RANGE.contains(ms)
    {
        return Ok(Box::new(EmptyQuery));
    }
    let to_term = |b: &Bound| -> Result<std::ops::Bound<Term>> {
        let term = |v: &Scalar| -> Result<Term> {
            Ok(match v {
                Scalar::Number(x) => Term::from_field_f64(field, *x),
                Scalar::Date(ms) => {
                    let ms = (*ms).clamp(*DATE_MS_RANGE.start(), *DATE_MS_RANGE.end());
                    Term::from_field_date(field, tantivy::DateTime::from_timestamp_millis(ms))
                }
                Scalar::Bool(b) => Term::from_field_bool(field, *b),
                other => return Err(unsupported(name, other)),
            })
        };
        Ok(match b {
            Bound::Unbounded => std::ops::Bound::Unbounded,
            Bound::Included(v) => std::ops::Bound::Included(term(v)?),
            Bound::Excluded(v) => std::ops::Bound::Excluded(term(v)?),
        })
    };
    let (lo, hi) = (to_term(lower)?, to_term(upper)?);
    if matches!(
        (&lo, &hi),
        (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
    ) {
        return Ok(Box::new(EmptyQuery));
    }
    Ok(Box::new(RangeQuery::new(lo, hi)))
}

fn not_text(field: &str) -> IndexError {
    IndexError::invalid(
        "query",
        format!("field `{field}` of this index holds no text"),
    )
}

fn unsupported(field: &str, value: &Scalar) -> IndexError {
    IndexError::invalid(
        "query",
        format!("field `{field}` of this index takes no {value:?} values"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automata_match_whole_strings() {
        let re = tantivy_fst::Regex::new("sla[a-z]k").unwrap();
        assert!(full_match(&re, "slack"));
        assert!(!full_match(&re, "slacks"));
    }
}

/// Marks the words of a text that a query matched: its free-text terms and the terms of its
/// full-text leaves (`term`, `phrase`, `multiFieldTerm` words, `prefix`, `fuzzy` and `regex`
/// patterns), outside `mustNot` clauses.
#[derive(Default)]
pub(crate) struct Highlighter {
    terms: std::collections::HashSet<String>,
    prefixes: Vec<String>,
    fuzzy: Vec<(String, usize)>,
    regexes: Vec<tantivy_fst::Regex>,
}

/// Characters of a fragment around its first match.
const FRAGMENT_CHARS: usize = 160;
/// Fragments per text.
const MAX_FRAGMENTS: usize = 3;

impl Highlighter {
    /// For the analyzed free-text `terms` and the structured nodes, on the full-text fields
    /// `text_fields`.
    pub(crate) fn new(terms: &[String], nodes: &[&Node], text_fields: &[&str]) -> Self {
        let mut h = Highlighter {
            terms: terms.iter().cloned().collect(),
            ..Highlighter::default()
        };
        for node in nodes {
            h.add(node, text_fields);
        }
        h
    }

    fn add(&mut self, node: &Node, text_fields: &[&str]) {
        let on = |field: &str| text_fields.contains(&field);
        match node {
            Node::Term {
                field,
                value: Scalar::Text(text),
                ..
            } if on(field) => self.terms.extend(analyze(text)),
            Node::Phrase { field, terms, .. } if on(field) => {
                self.terms.extend(analyze(&terms.join(" ")))
            }
            Node::MultiFieldTerm { fields, value, .. } if fields.iter().any(|f| on(f)) => {
                self.terms.extend(analyze(value))
            }
            Node::Prefix { field, value, .. } if on(field) => {
                self.prefixes.push(value.to_lowercase())
            }
            Node::Fuzzy {
                field,
                value,
                max_edits,
                ..
            } if on(field) => {
                for word in analyze(value) {
                    self.fuzzy.push((word, usize::from(*max_edits)));
                }
            }
            Node::Regex { field, pattern, .. } if on(field) => {
                if let Ok(regex) = tantivy_fst::Regex::new(pattern) {
                    self.regexes.push(regex);
                }
            }
            Node::Boolean {
                must,
                should,
                filter,
                ..
            } => {
                for child in must.iter().chain(should).chain(filter) {
                    self.add(child, text_fields);
                }
            }
            Node::FunctionScore { query, .. } => self.add(query, text_fields),
            _ => {}
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
            && self.prefixes.is_empty()
            && self.fuzzy.is_empty()
            && self.regexes.is_empty()
    }

    fn matches(&self, word: &str) -> bool {
        self.terms.contains(word)
            || self.prefixes.iter().any(|p| word.starts_with(p.as_str()))
            || self
                .fuzzy
                .iter()
                .any(|(w, edits)| edit_distance(w, word) <= *edits)
            || self.regexes.iter().any(|r| full_match(r, word))
    }

    /// Up to three fragments of `text` around matched words, each word wrapped in `<em>`..`</em>`
    /// (the rest of the text as it is); empty when nothing matched.
    pub(crate) fn fragments(&self, text: &str) -> Vec<String> {
        use tantivy::tokenizer::TokenStream;
        if self.is_empty() {
            return Vec::new();
        }
        let mut analyzer = crate::analyzer::text_analyzer();
        let mut stream = analyzer.token_stream(text);
        let mut spans: Vec<(usize, usize)> = Vec::new();
        while stream.advance() {
            let token = stream.token();
            if self.matches(&token.text) {
                spans.push((token.offset_from, token.offset_to));
            }
        }
        let mut out = Vec::new();
        let mut i = 0;
        // Where the previous fragment ended: fragments never overlap.
        let mut done = 0;
        while i < spans.len() && out.len() < MAX_FRAGMENTS {
            let from = floor_char(text, spans[i].0.saturating_sub(FRAGMENT_CHARS / 4))
                .max(done)
                .min(spans[i].0);
            let mut to = floor_char(text, (from + FRAGMENT_CHARS).min(text.len()));
            // The fragment's first match is whole, however long.
            to = to.max(spans[i].1);
            let mut fragment = String::new();
            let mut at = from;
            while i < spans.len() && spans[i].1 <= to {
                let (start, end) = spans[i];
                fragment.push_str(&text[at..start]);
                fragment.push_str("<em>");
                fragment.push_str(&text[start..end]);
                fragment.push_str("</em>");
                at = end;
                i += 1;
            }
            fragment.push_str(&text[at..to.max(at)]);
            out.push(fragment.trim().to_string());
            // A match cut by this fragment's end starts the next one.
            done = to;
        }
        out
    }
}

/// The largest char boundary of `text` at or before `at`.
fn floor_char(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod highlight_tests {
    use super::*;

    #[test]
    fn matched_words_are_marked_in_the_original_text() {
        let h = Highlighter::new(&analyze("sending messages"), &[], &["description"]);
        assert_eq!(
            h.fragments("Send a Message to a channel; messages are kept."),
            vec!["<em>Send</em> a <em>Message</em> to a channel; <em>messages</em> are kept."]
        );
        let prefix = Node::Prefix {
            field: "description".into(),
            value: "Chan".into(),
            boost: 1.0,
        };
        let h = Highlighter::new(&[], &[&prefix], &["description"]);
        assert_eq!(
            h.fragments("Post to a channel"),
            vec!["Post to a <em>channel</em>"]
        );
        let elsewhere = Node::Prefix {
            field: "name".into(),
            value: "chan".into(),
            boost: 1.0,
        };
        assert!(Highlighter::new(&[], &[&elsewhere], &["description"]).is_empty());
        let long = format!("{} needle {}", "word ".repeat(100), "word ".repeat(100));
        let fragments =
            Highlighter::new(&analyze("needle"), &[], &["description"]).fragments(&long);
        assert_eq!(fragments.len(), 1);
        assert!(fragments[0].contains("<em>needle</em>") && fragments[0].len() < 200);
    }
}
