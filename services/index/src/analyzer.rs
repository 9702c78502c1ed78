//! The text analyzer of every full-text field and of queries: identifier-aware splitting (`_`, `.`,
//! camelCase and every non-alphanumeric character), lowercasing, English stop words removed, English
//! (Snowball) stemming.

use agentsearch_common::tool::{STOP_WORDS, piece_bounds};
use tantivy::tokenizer::{
    Language, LowerCaser, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// Name the analyzer is registered under in every index.
pub const ANALYZER: &str = "agentsearch_text";

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

    /// Adaptive fusion measures coverage in the router with its own analysis of the query: it
    /// must find the terms the index matches.
    #[test]
    fn the_router_s_coverage_terms_are_the_index_terms() {
        for text in [
            "Send the weeklyReports to my_team, sending again",
            "HTTPResponse parsing of the v2.Users endpoint in 2026",
            "running runs easily happily generously studies capabilities agreed hopping",
            "Créer un événement ÉTÉ straße",
            "the of and",
        ] {
            assert_eq!(
                agentsearch_fusion::QueryTerms::new(text).terms(),
                analyze(text),
                "{text}"
            );
        }
    }

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
