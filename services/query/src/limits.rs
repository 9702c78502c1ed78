//! Bounds of a query JSON document. Those a JSON Schema can state are in the generated schema;
//! the parser checks them all.

/// The only version of the language.
pub const VERSION: u64 = 1;
/// Characters of `q`.
pub const MAX_Q_CHARS: usize = 1024;
/// Characters of a value, a phrase term or a range bound.
pub const MAX_VALUE_CHARS: usize = 256;
/// Characters of a regular expression.
pub const MAX_PATTERN_CHARS: usize = 256;
/// Terms of a phrase.
pub const MAX_PHRASE_TERMS: usize = 256;
pub const MAX_SLOP: u64 = 1000;
pub const MAX_EDITS: u64 = 2;
/// Clauses in one list of a `boolean` node.
pub const MAX_CLAUSES: usize = 64;
/// Fields of a `multiFieldTerm` node.
pub const MAX_FIELDS: usize = 16;
/// Functions of a `functionScore` node.
pub const MAX_FUNCTIONS: usize = 16;
/// Largest boost or weight.
pub const MAX_BOOST: f64 = 1_000_000.0;
/// `limit + offset` (checked by the parser only).
pub const MAX_WINDOW: u64 = 10_000;
/// Nested nodes: `query` or `filter` is depth 1 (checked by the parser only).
pub const MAX_DEPTH: usize = 8;
/// Nodes and functions in one document (checked by the parser only).
pub const MAX_NODES: usize = 256;
/// `regex`, `fuzzy` and `prefix` nodes in one document: each compiles an automaton (checked by
/// the parser only).
pub const MAX_AUTOMATA: usize = 16;
/// Ranges of one character class of a regular expression: `\w`, `\d`, `\s`, `\p{..}` and wide
/// negated classes are Unicode-wide and make the term automaton huge; `[a-z0-9_]` is not.
pub const MAX_CLASS_RANGES: usize = 32;
/// Largest counted repetition (`{n}`, `{n,m}`) of a regular expression.
pub const MAX_REGEX_REPEAT: u32 = 16;
/// Repetitions nested in repetitions.
pub const MAX_REGEX_NESTING: usize = 2;
/// Digits of a duration.
pub const MAX_DURATION_DIGITS: usize = 9;

/// ISO 8601 dates and date-times: `2026-03-01`, `2026-03-01T09:30`, `2026-03-01T09:30:00Z`,
/// `2026-03-01T09:30:00.250+02:00`. Without an offset, UTC.
pub const DATE_PATTERN: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$";
/// A date or `now`.
pub const ORIGIN_PATTERN: &str = "^(now|[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?)$";
/// A positive duration: `90s`, `12h`, `30d`, `500ms`.
pub const SCALE_PATTERN: &str = "^[1-9][0-9]{0,8}(ms|s|m|h|d)$";
/// A duration that may be zero.
pub const OFFSET_PATTERN: &str = "^[0-9]{1,9}(ms|s|m|h|d)$";
