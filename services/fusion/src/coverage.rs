//! How much of a query a candidate contains: the fraction of the query's terms (identifier pieces,
//! lowercased, without English stop words, stemmed, as the lexical indexes analyze text) that
//! occur in the candidate's text. Adaptive fusion compares it between the two lists' best
//! candidates ([`crate::adaptive`]).
//!
//! Computed on a few candidates per query, so it avoids stemming every word of a candidate: a word
//! is stemmed only when it starts with some query term less that term's last letter (an English
//! (Snowball) stem is a prefix of its word but for a final `i` made of `y`, and for three irregular
//! forms, `dying`, `lying` and `tying`, which are missed).

use std::borrow::Cow;

use agentsearch_common::tool::{STOP_WORDS, ToolRecord, each_piece};

/// How many of each list's best candidates adaptive fusion reads the coverage of (it takes the
/// best of them).
pub const COVERAGE_DEPTH: usize = 3;

/// Queries longer than this many distinct terms are measured on their first ones.
const MAX_TERMS: usize = 64;

/// A query's distinct analyzed terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryTerms {
    terms: Vec<String>,
}

impl QueryTerms {
    pub fn new(text: &str) -> Self {
        let stemmer = stemmer();
        let mut terms: Vec<String> = Vec::new();
        let mut word = String::new();
        each_piece(text, |start, end| {
            if terms.len() >= MAX_TERMS {
                return;
            }
            lowercase_into(&text[start..end], &mut word);
            if STOP_WORDS.contains(&word.as_str()) {
                return;
            }
            let stem = stemmer.stem(&word);
            if !terms.iter().any(|t| *t == *stem) {
                terms.push(stem.into_owned());
            }
        });
        Self { terms }
    }

    pub fn len(&self) -> usize {
        self.terms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms, in first-seen order.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The fraction (0 to 1) of the query's terms that occur in any of `fields` (one candidate's
    /// text); 0 for a query without terms. Fields are read in order and only until every term is
    /// found, so a field that is costly to produce can come last, lazily.
    pub fn coverage<I, S>(&self, fields: I) -> f64
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if self.terms.is_empty() {
            return 0.0;
        }
        let stemmer = stemmer();
        let mut found = [false; MAX_TERMS];
        let mut missing = self.terms.len();
        let mut word = String::new();
        let mut fields = fields.into_iter();
        while missing > 0 {
            let Some(field) = fields.next() else {
                break;
            };
            let text = field.as_ref();
            each_piece(text, |start, end| {
                if missing == 0 {
                    return;
                }
                lowercase_into(&text[start..end], &mut word);
                if !self
                    .terms
                    .iter()
                    .zip(&found)
                    .any(|(t, seen)| !seen && word.as_bytes().starts_with(head(t)))
                {
                    return;
                }
                let stem = stemmer.stem(&word);
                for (t, seen) in self.terms.iter().zip(found.iter_mut()) {
                    if !*seen && *t == *stem {
                        *seen = true;
                        missing -= 1;
                    }
                }
            });
        }
        (self.terms.len() - missing) as f64 / self.terms.len() as f64
    }
}

/// What a word must start with to stem to `term`: the term less its last byte (all of a
/// one-byte term).
fn head(term: &str) -> &[u8] {
    &term.as_bytes()[..term.len().saturating_sub(1).max(1).min(term.len())]
}

fn stemmer() -> frostem::Stemmer {
    frostem::Stemmer::new(frostem::Algorithm::English)
}

fn lowercase_into(piece: &str, out: &mut String) {
    out.clear();
    if piece.is_ascii() {
        out.push_str(piece);
        out.make_ascii_lowercase();
    } else {
        out.extend(piece.chars().flat_map(char::to_lowercase));
    }
}

/// A tool's coverage: its name (and integration) words, description and parameter names and
/// descriptions, the fields BM25 searches. The parameter text (the schema parsed) is produced only
/// if the others leave terms missing.
pub fn tool_coverage(query: &QueryTerms, tool: &ToolRecord) -> f64 {
    let fields = [
        Cow::Owned(tool.name_text()),
        Cow::Borrowed(tool.description.as_str()),
    ]
    .into_iter()
    .chain(std::iter::once_with(|| Cow::Owned(tool.parameter_text())));
    query.coverage(fields)
}

/// The coverage pair adaptive fusion reads: for the lexical and the dense list, the best
/// `measure` among its first [`COVERAGE_DEPTH`] candidates (`None`: a candidate whose text is not
/// at hand, counted as containing nothing); 0 for a list without any.
pub fn coverage_pair<T>(lists: [&[T]; 2], mut measure: impl FnMut(&T) -> Option<f64>) -> [f64; 2] {
    lists.map(|list| {
        list.iter()
            .take(COVERAGE_DEPTH)
            .filter_map(&mut measure)
            .fold(0.0, f64::max)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terms_are_analyzed_like_the_lexical_index() {
        let q = QueryTerms::new("Send the weeklyReports to my_team, sending again");
        assert_eq!(q.terms, ["send", "week", "report", "team"]);
        assert!(QueryTerms::new("the of and").is_empty());
        assert_eq!(QueryTerms::new("").coverage(["anything"]), 0.0);
    }

    #[test]
    fn coverage_counts_each_query_term_once_across_fields() {
        let q = QueryTerms::new("send weekly reports to the team");
        assert_eq!(q.len(), 4);
        assert_eq!(q.coverage(["sends a report"]), 0.5);
        assert_eq!(q.coverage(["report", "REPORTS", "Team"]), 0.5);
        assert_eq!(q.coverage(["sendReport", "weekly team"]), 1.0);
        assert_eq!(q.coverage(["nothing related"]), 0.0);
        assert_eq!(q.coverage(Vec::<&str>::new()), 0.0);
        // Every term found: later fields are not produced.
        let lazy = ["send weekly reports", "team"]
            .into_iter()
            .map(String::from)
            .chain(std::iter::once_with(|| panic!("read past the last term")));
        assert_eq!(q.coverage(lazy), 1.0);
    }

    #[test]
    fn the_pair_takes_each_list_s_best_of_its_first_candidates() {
        let q = QueryTerms::new("create calendar event");
        let texts = [
            "calendar",
            "create_event in a calendar",
            "nothing",
            "event",
            "dance",
        ];
        let measure = |i: &usize| Some(q.coverage([texts[*i]]));
        // The fourth lexical candidate is past the depth; a candidate not at hand counts 0.
        assert_eq!(
            coverage_pair([&[0, 2, 4, 1], &[3]], measure),
            [1.0 / 3.0, 1.0 / 3.0]
        );
        assert_eq!(coverage_pair([&[0, 1], &[]], measure), [1.0, 0.0]);
        assert_eq!(
            coverage_pair::<usize>([&[0, 1], &[3]], |_| None),
            [0.0, 0.0]
        );
    }

    proptest! {
        #[test]
        fn coverage_is_a_fraction_and_grows_with_more_text(
            query in "[a-zA-Z _]{0,60}",
            a in "[a-zA-Z _.]{0,80}",
            b in "[a-zA-Z _.]{0,80}",
        ) {
            let q = QueryTerms::new(&query);
            let one = q.coverage([&a]);
            let both = q.coverage([&a, &b]);
            prop_assert!((0.0..=1.0).contains(&one));
            prop_assert!(both >= one);
            // The query's own text contains all of its terms.
            prop_assert!(q.is_empty() || q.coverage([&query]) == 1.0);
        }
    }
}
