//! The text analyzer of every full-text field and of queries: identifier-aware splitting (`_`, `.`,
//! camelCase and every non-alphanumeric character), lowercasing, English stop words removed, English
//! (Snowball) stemming.

use agentsearch_common::tool::piece_bounds;
use tantivy::tokenizer::{
    Language, LowerCaser, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Name the analyzer is registered under in every index.
pub const ANALYZER: &str = "agentsearch_text";

/// English function words (pronouns, auxiliaries, determiners, conjunctions, most prepositions,
/// question words) and the fragments contractions split into (`i'm` -> `i`, `m`). Words that name
/// actions or directions in tool names (`get`, `list`, `up`, `off`, `out`, `over`) are kept.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "again",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "being",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "me",
    "might",
    "more",
    "most",
    "must",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "own",
    "please",
    "re",
    "s",
    "same",
    "shall",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "until",
    "us",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// The analyzer: [`PiecesTokenizer`] -> lowercase -> stop words -> English stemmer.
pub fn text_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(PiecesTokenizer)
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| w.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Analyzes `text` into its distinct terms, in first-seen order.
pub fn analyze(text: &str) -> Vec<String> {
    let mut analyzer = text_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut terms: Vec<String> = Vec::new();
    while stream.advance() {
        let term = &stream.token().text;
        if !terms.iter().any(|t| t == term) {
            terms.push(term.clone());
        }
    }
    terms
}

/// Analyzes `text` into its terms with their positions (stop words leave gaps), as the index
/// records them: what a phrase is matched against.
pub fn analyze_positions(text: &str) -> Vec<(usize, String)> {
    let mut analyzer = text_analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut terms = Vec::new();
    while stream.advance() {
        let token = stream.token();
        terms.push((token.position, token.text.clone()));
    }
    terms
}

/// Splits text into alphanumeric pieces at identifier boundaries; see
/// [`agentsearch_common::tool::identifier_pieces`].
#[derive(Clone, Debug, Default)]
pub struct PiecesTokenizer;

pub struct PiecesStream<'a> {
    text: &'a str,
    bounds: std::vec::IntoIter<(usize, usize)>,
    token: Token,
}

impl Tokenizer for PiecesTokenizer {
    type TokenStream<'a> = PiecesStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PiecesStream<'a> {
        PiecesStream {
            text,
            bounds: piece_bounds(text).into_iter(),
            token: Token {
                position: usize::MAX,
                ..Token::default()
            },
        }
    }
}

impl TokenStream for PiecesStream<'_> {
    fn advance(&mut self) -> bool {
        let Some((from, to)) = self.bounds.next() else {
            return false;
        };
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.token.position.wrapping_add(1);
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzes_identifiers_and_sentences_alike() {
        assert_eq!(analyze("SLACK_POST_MESSAGE"), ["slack", "post", "messag"]);
        assert_eq!(
            analyze("post a message to a Slack channel"),
            ["post", "messag", "slack", "channel"]
        );
        assert_eq!(analyze("listOpenIssues"), ["list", "open", "issu"]);
        assert!(analyze("the a to").is_empty());
    }
}
