//! The tool model shared by every crate: side effects, the definition a catalog ingests, the record a
//! shard stores, and the text pieces both lexical and dense retrieval are built from.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::FieldViolation;

/// The integration of a request's standalone inline custom tools. It starts with `_`, which no
/// catalog integration slug may (they start with a letter or digit), so a catalog can hold an
/// integration named `local` and the two never meet.
pub const INLINE_INTEGRATION: &str = "_local";

/// What running a tool does in the connected app, ordered `read < write < delete < send`.
/// `unknown` is outside the order: it is excluded whenever a ceiling is set.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SideEffect {
    Read,
    Write,
    Delete,
    Send,
    Unknown,
}

impl SideEffect {
    pub const ALL: [SideEffect; 5] = [
        SideEffect::Read,
        SideEffect::Write,
        SideEffect::Delete,
        SideEffect::Send,
        SideEffect::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::Read => "read",
            SideEffect::Write => "write",
            SideEffect::Delete => "delete",
            SideEffect::Send => "send",
            SideEffect::Unknown => "unknown",
        }
    }

    /// Whether a tool with this side effect may be returned under `ceiling`.
    pub fn allowed_under(self, ceiling: Option<SideEffect>) -> bool {
        match ceiling {
            None => true,
            Some(ceiling) => self != SideEffect::Unknown && self <= ceiling,
        }
    }

    /// Only `read` tools run without the user's approval.
    pub fn approval_required(self) -> bool {
        self != SideEffect::Read
    }

    /// A stable small integer (stored in index fast fields).
    pub fn rank(self) -> u64 {
        self as u64
    }

    pub fn from_rank(rank: u64) -> Option<SideEffect> {
        SideEffect::ALL.get(rank as usize).copied()
    }
}

impl fmt::Display for SideEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SideEffect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SideEffect::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown side effect `{s}`: expected one of read, write, delete, send, unknown"
                )
            })
    }
}

/// Limits on ingested tools.
pub const MAX_NAME_CHARS: usize = 256;
pub const MAX_SLUG_CHARS: usize = 64;
pub const MAX_DESCRIPTION_CHARS: usize = 16_384;
pub const MAX_PARAMETERS_BYTES: usize = 256 * 1024;

/// A tool as a catalog delivers it (one line of a catalog JSONL file, one item of an upsert).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDefinition {
    /// Unique within a project; the function name handed to the LLM.
    pub name: String,
    /// Lowercase slug of the app the tool belongs to (`slack`).
    pub integration: String,
    /// Lowercase slug of the integration's category (`messaging`); `general` when absent.
    #[serde(default)]
    pub category: Option<String>,
    /// Defaults to `unknown`.
    #[serde(default)]
    pub side_effect: Option<SideEffect>,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments; must be an object schema. Defaults to an empty object schema.
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
}

/// A validated tool as a shard stores it. `parameters` is compact JSON text, kept verbatim.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRecord {
    pub name: String,
    pub integration: String,
    pub category: String,
    pub side_effect: SideEffect,
    pub description: String,
    pub parameters: String,
    /// BPE tokens of the tool's LLM definition, computed at ingest.
    pub tokens: u32,
}

impl ToolDefinition {
    /// Checks every field; `path` prefixes the field names in violations (e.g. `tools[3]`).
    pub fn validate(&self, path: &str) -> Result<(), Vec<FieldViolation>> {
        let mut violations = Vec::new();
        let field = |name: &str| {
            if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}.{name}")
            }
        };
        let name = &self.name;
        if name.trim().is_empty() {
            violations.push(FieldViolation::new(field("name"), "must not be empty"));
        } else if name.chars().count() > MAX_NAME_CHARS {
            violations.push(FieldViolation::new(
                field("name"),
                format!("must be at most {MAX_NAME_CHARS} characters"),
            ));
        } else if name.trim() != name || name.chars().any(char::is_control) {
            violations.push(FieldViolation::new(
                field("name"),
                "must not have leading or trailing spaces or control characters",
            ));
        }
        if let Err(issue) = check_slug(&self.integration) {
            violations.push(FieldViolation::new(field("integration"), issue));
        }
        if let Some(category) = &self.category
            && let Err(issue) = check_slug(category)
        {
            violations.push(FieldViolation::new(field("category"), issue));
        }
        if self.description.chars().count() > MAX_DESCRIPTION_CHARS {
            violations.push(FieldViolation::new(
                field("description"),
                format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
            ));
        }
        if let Some(parameters) = &self.parameters {
            match parameters {
                serde_json::Value::Object(map) => {
                    if let Some(kind) = map.get("type")
                        && kind != "object"
                    {
                        violations.push(FieldViolation::new(
                            field("parameters.type"),
                            "must be \"object\"",
                        ));
                    }
                    if let Some(props) = map.get("properties")
                        && !props.is_object()
                    {
                        violations.push(FieldViolation::new(
                            field("parameters.properties"),
                            "must be an object",
                        ));
                    }
                    if serde_json::to_vec(parameters)
                        .map(|v| v.len())
                        .unwrap_or(usize::MAX)
                        > MAX_PARAMETERS_BYTES
                    {
                        violations.push(FieldViolation::new(
                            field("parameters"),
                            format!("must be at most {MAX_PARAMETERS_BYTES} bytes of JSON"),
                        ));
                    }
                }
                _ => violations.push(FieldViolation::new(
                    field("parameters"),
                    "must be a JSON Schema object",
                )),
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    /// The record a shard stores, once validated; `tokens` is filled in by the caller.
    pub fn to_record(&self) -> ToolRecord {
        let parameters = match &self.parameters {
            Some(p) => serde_json::to_string(p).unwrap_or_else(|_| "{}".into()),
            None => r#"{"type":"object","properties":{}}"#.to_string(),
        };
        ToolRecord {
            name: self.name.clone(),
            integration: self.integration.clone(),
            category: self
                .category
                .clone()
                .unwrap_or_else(|| "general".to_string()),
            side_effect: self.side_effect.unwrap_or(SideEffect::Unknown),
            description: self.description.clone(),
            parameters,
            tokens: 0,
        }
    }
}

/// Checks an integration or category slug: the issue, naming the value, when it is not one.
pub fn check_slug(slug: &str) -> Result<(), String> {
    let valid = !slug.is_empty()
        && slug.len() <= MAX_SLUG_CHARS
        && slug
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "must be a lowercase slug of 1 to {MAX_SLUG_CHARS} characters [a-z0-9_-], got `{}`",
            crate::ids::truncate(slug, 128)
        ))
    }
}

impl ToolRecord {
    /// The tool as an LLM function definition: `{type: "function", function: {name, description, parameters}}`.
    /// Its compact JSON is what token counts measure.
    pub fn llm_definition_json(&self) -> String {
        format!(
            r#"{{"type":"function","function":{{"name":{},"description":{},"parameters":{}}}}}"#,
            serde_json::Value::String(self.name.clone()),
            serde_json::Value::String(self.description.clone()),
            self.parameters
        )
    }

    /// Top-level parameters in schema order: name, description, and whether the schema lists it as
    /// required (`None` when the schema has no `required` list).
    fn parameter_list(&self) -> Vec<(String, Option<String>, Option<bool>)> {
        let Ok(serde_json::Value::Object(schema)) =
            serde_json::from_str::<serde_json::Value>(&self.parameters)
        else {
            return Vec::new();
        };
        let Some(serde_json::Value::Object(props)) = schema.get("properties") else {
            return Vec::new();
        };
        let required = schema.get("required").and_then(|r| r.as_array());
        props
            .iter()
            .map(|(name, prop)| {
                let description = prop.get("description").and_then(|d| d.as_str());
                let is_required = required.map(|r| r.iter().any(|v| v.as_str() == Some(name)));
                (name.clone(), description.map(str::to_string), is_required)
            })
            .collect()
    }

    /// Top-level parameter names and descriptions (`name: description` lines), as text for the
    /// lexical index.
    pub fn parameter_text(&self) -> String {
        let mut text = String::new();
        for (name, description, _) in self.parameter_list() {
            push_parameter_line(&mut text, &name, description.as_deref());
        }
        text
    }

    /// The words of the tool's name, preceded by its integration's unless the name starts with
    /// them (`slack` + `SLACK_POST_MESSAGE` -> `slack post message`; `github` + `create_issue`
    /// -> `github create issue`): the name field of the lexical index.
    pub fn name_text(&self) -> String {
        let name_words = identifier_pieces(&self.name).join(" ");
        let integration_words = identifier_pieces(&self.integration).join(" ");
        if name_words.starts_with(&integration_words) {
            name_words
        } else {
            format!("{integration_words} {name_words}")
        }
    }

    /// The text the dense retriever embeds for this tool: integration and name words and the
    /// description, then one line per required parameter (`name: description`), then the names of
    /// the optional ones. A schema without a `required` list has every parameter on its own line.
    /// Optional parameters (often dozens of formatting flags) are named only: their descriptions
    /// would dilute a mean-pooled embedding of what the tool does, and the model reads at most 256
    /// word pieces.
    pub fn embedding_text(&self) -> String {
        let mut text = self.name_text();
        if !self.description.is_empty() {
            text.push_str(": ");
            text.push_str(&self.description);
        }
        let mut lines = String::new();
        let mut optional = Vec::new();
        for (name, description, required) in self.parameter_list() {
            if required == Some(false) {
                optional.push(name);
            } else {
                push_parameter_line(&mut lines, &name, description.as_deref());
            }
        }
        if !lines.is_empty() {
            text.push('\n');
            text.push_str(lines.trim_end());
        }
        if !optional.is_empty() {
            text.push_str("\nOptional: ");
            text.push_str(&optional.join(", "));
        }
        text
    }
}

/// Appends `name: description` (or `name`) and a newline.
fn push_parameter_line(text: &mut String, name: &str, description: Option<&str>) {
    text.push_str(name);
    if let Some(description) = description {
        text.push_str(": ");
        text.push_str(description);
    }
    text.push('\n');
}

/// English function words left out of lexical matching (tool and passage indexes, recorded
/// plans' use cases): pronouns, auxiliaries, determiners, conjunctions, most prepositions,
/// question words, and the fragments contractions split into (`i'm` -> `i`, `m`). Words that name
/// actions or directions in tool names (`get`, `list`, `up`, `off`, `out`, `over`) are kept.
pub const STOP_WORDS: &[&str] = &[
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

/// Splits an identifier or free text into lowercase alphanumeric pieces: on every character that is
/// not a letter or digit, and inside words at camelCase boundaries (`getHTTPResponse` -> `get`,
/// `http`, `response`; `SLACK_POST_MESSAGE` -> `slack`, `post`, `message`).
pub fn identifier_pieces(text: &str) -> Vec<String> {
    piece_bounds(text)
        .into_iter()
        .map(|(start, end)| text[start..end].to_lowercase())
        .collect()
}

/// Byte ranges of the pieces of `text`; see [`identifier_pieces`].
pub fn piece_bounds(text: &str) -> Vec<(usize, usize)> {
    let mut bounds = Vec::new();
    each_piece(text, |start, end| bounds.push((start, end)));
    bounds
}

/// Calls `piece` with the byte range of each piece of `text`, in order, without allocating; see
/// [`identifier_pieces`].
pub fn each_piece(text: &str, mut piece: impl FnMut(usize, usize)) {
    let mut start: Option<usize> = None;
    // The character before the current one (inside the current piece when `start` is set).
    let mut prev = '\0';
    let mut chars = text.char_indices().peekable();
    while let Some((pos, c)) = chars.next() {
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                piece(s, pos);
            }
            prev = c;
            continue;
        }
        if let Some(s) = start {
            let next = chars.peek().map(|&(_, n)| n);
            // lower/digit -> Upper: `getWeather`; Upper -> Upper+lower: the `R` of `HTTPResponse`.
            let boundary = (c.is_uppercase() && (prev.is_lowercase() || prev.is_ascii_digit()))
                || (c.is_uppercase()
                    && prev.is_uppercase()
                    && next.is_some_and(|n| n.is_lowercase()));
            if boundary {
                piece(s, pos);
                start = Some(pos);
            }
        } else {
            start = Some(pos);
        }
        prev = c;
    }
    if let Some(s) = start {
        piece(s, text.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pieces_split_snake_dots_and_camel_case() {
        assert_eq!(
            identifier_pieces("SLACK_POST_MESSAGE"),
            ["slack", "post", "message"]
        );
        assert_eq!(identifier_pieces("math.factorial"), ["math", "factorial"]);
        assert_eq!(
            identifier_pieces("getHTTPResponse"),
            ["get", "http", "response"]
        );
        assert_eq!(
            identifier_pieces("getWeather2Day"),
            ["get", "weather2", "day"]
        );
        assert_eq!(identifier_pieces("/v1/nutrition"), ["v1", "nutrition"]);
        assert_eq!(identifier_pieces("  "), Vec::<String>::new());
        assert_eq!(identifier_pieces("Crème brûlée"), ["crème", "brûlée"]);
    }

    #[test]
    fn side_effect_ceiling_excludes_unknown_and_higher_levels() {
        let ceiling = Some(SideEffect::Write);
        assert!(SideEffect::Read.allowed_under(ceiling));
        assert!(SideEffect::Write.allowed_under(ceiling));
        assert!(!SideEffect::Delete.allowed_under(ceiling));
        assert!(!SideEffect::Send.allowed_under(ceiling));
        assert!(!SideEffect::Unknown.allowed_under(ceiling));
        assert!(SideEffect::Unknown.allowed_under(None));
        assert!(!SideEffect::Read.approval_required());
        assert!(SideEffect::Unknown.approval_required());
    }

    #[test]
    fn validation_names_each_bad_field() {
        let def = ToolDefinition {
            name: " x".into(),
            integration: "Slack".into(),
            category: Some("ok".into()),
            side_effect: None,
            description: String::new(),
            parameters: Some(serde_json::json!({"type": "string"})),
        };
        let fields: Vec<String> = def
            .validate("tools[2]")
            .unwrap_err()
            .into_iter()
            .map(|v| v.field)
            .collect();
        assert_eq!(
            fields,
            [
                "tools[2].name",
                "tools[2].integration",
                "tools[2].parameters.type"
            ]
        );
    }

    #[test]
    fn name_and_embedding_texts() {
        let record = |name: &str, parameters: serde_json::Value| {
            ToolDefinition {
                name: name.into(),
                integration: "github".into(),
                category: None,
                side_effect: None,
                description: "Opens an issue.".into(),
                parameters: Some(parameters),
            }
            .to_record()
        };
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "repo": {"type": "string", "description": "owner/name"},
                "title": {"type": "string"},
                "labels": {"type": "array", "description": "label names"},
                "assignee": {"type": "string", "description": "login"}
            },
            "required": ["repo", "title"]
        });
        let r = record("create_issue", schema.clone());
        assert_eq!(r.name_text(), "github create issue");
        assert_eq!(
            r.embedding_text(),
            "github create issue: Opens an issue.\nrepo: owner/name\ntitle\nOptional: assignee, labels"
        );
        // The name already starts with the integration: no repetition.
        assert_eq!(
            record("GITHUB_CREATE_ISSUE", schema).name_text(),
            "github create issue"
        );
        // No `required` list: every parameter on its own line.
        let r = record(
            "create_issue",
            serde_json::json!({"type": "object", "properties": {"repo": {"description": "owner/name"}}}),
        );
        assert_eq!(
            r.embedding_text(),
            "github create issue: Opens an issue.\nrepo: owner/name"
        );
    }

    #[test]
    fn llm_definition_is_valid_json() {
        let rec = ToolDefinition {
            name: "A_\"B".into(),
            integration: "a".into(),
            category: None,
            side_effect: Some(SideEffect::Read),
            description: "line\nbreak".into(),
            parameters: None,
        }
        .to_record();
        let v: serde_json::Value = serde_json::from_str(&rec.llm_definition_json()).unwrap();
        assert_eq!(v["function"]["name"], "A_\"B");
        assert_eq!(v["function"]["parameters"]["type"], "object");
    }

    proptest! {
        #[test]
        fn pieces_are_lowercase_alphanumeric_and_cover_every_alphanumeric_char(text in "\\PC{0,40}") {
            let pieces = identifier_pieces(&text);
            let joined: String = pieces.concat();
            for p in &pieces {
                prop_assert!(!p.is_empty());
                prop_assert!(p.chars().all(char::is_alphanumeric));
            }
            let expected: String = text.chars().filter(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
            prop_assert_eq!(joined, expected);
        }
    }
}
