//! What the query tests share.

/// Messages of the checks a JSON Schema cannot state: a document the schema accepts may still be
/// refused by the parser with one of these.
pub const PARSER_ONLY: &[&str] = &[
    "not a date that exists",
    "not a time that exists",
    "impossible UTC offset",
    "not a usable regular expression",
    "limit + offset",
    "nested at most",
    "at most 256 nodes",
    "at most 16 regex, fuzzy and prefix nodes",
];
