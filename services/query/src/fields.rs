//! What a query may name: the fields of an index, each with the kind that decides which node kinds
//! can use it and how its values are typed.

use std::fmt;

/// How a field is indexed, and so how a query may use it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// Exact strings (names, slugs, MIME types): matched whole, case-sensitively.
    Keyword,
    /// Analyzed text: words, lower-cased and stemmed as the index analyzes them.
    FullText,
    /// Numbers.
    Numeric,
    /// Instants, written as ISO 8601 dates or date-times.
    Date,
    Bool,
}

impl FieldKind {
    pub const ALL: [FieldKind; 5] = [
        FieldKind::Keyword,
        FieldKind::FullText,
        FieldKind::Numeric,
        FieldKind::Date,
        FieldKind::Bool,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FieldKind::Keyword => "keyword",
            FieldKind::FullText => "full text",
            FieldKind::Numeric => "numeric",
            FieldKind::Date => "date",
            FieldKind::Bool => "boolean",
        }
    }

    /// The kind a sync declares a metadata field with: keyword, text, numeric, date or bool.
    pub fn from_declared(kind: &str) -> Option<FieldKind> {
        Some(match kind {
            "keyword" => FieldKind::Keyword,
            "text" => FieldKind::FullText,
            "numeric" => FieldKind::Numeric,
            "date" => FieldKind::Date,
            "bool" => FieldKind::Bool,
            _ => return None,
        })
    }

    /// The name a declaration gives this kind ([`FieldKind::from_declared`]).
    pub fn declared_name(self) -> &'static str {
        match self {
            FieldKind::Keyword => "keyword",
            FieldKind::FullText => "text",
            FieldKind::Numeric => "numeric",
            FieldKind::Date => "date",
            FieldKind::Bool => "bool",
        }
    }

    /// The text kinds: usable by `phrase`, `prefix`, `fuzzy`, `regex` and `multiFieldTerm`.
    pub fn is_text(self) -> bool {
        matches!(self, FieldKind::Keyword | FieldKind::FullText)
    }

    /// Usable by `range`.
    pub fn is_rangeable(self) -> bool {
        matches!(
            self,
            FieldKind::Keyword | FieldKind::Numeric | FieldKind::Date
        )
    }

    /// Usable by `fieldValueFactor`.
    pub fn has_value_factor(self) -> bool {
        matches!(self, FieldKind::Numeric | FieldKind::Date | FieldKind::Bool)
    }

    /// Usable by the decay functions (`gauss`, `exp`, `linear`).
    pub fn decays(self) -> bool {
        matches!(self, FieldKind::Numeric | FieldKind::Date)
    }
}

impl fmt::Display for FieldKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One field a query may name.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldDef {
    pub name: String,
    pub kind: FieldKind,
    /// One line for the schema's description.
    pub description: String,
}

/// The fields of what is searched, and the bounds of its result window.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    /// What is searched, for titles and messages ("tools", "content").
    pub subject: String,
    pub fields: Vec<FieldDef>,
    /// Largest `limit`.
    pub max_limit: u32,
    /// Largest `offset`.
    pub max_offset: u32,
}

impl Catalog {
    pub fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Names of the fields for which `usable` holds, in catalog order.
    pub fn names(&self, usable: impl Fn(FieldKind) -> bool) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|f| usable(f.kind))
            .map(|f| f.name.as_str())
            .collect()
    }

    /// The fields of a tool catalog (built once).
    pub fn tools() -> &'static Catalog {
        static TOOLS: std::sync::LazyLock<Catalog> = std::sync::LazyLock::new(Catalog::build_tools);
        &TOOLS
    }

    /// The fields of synced content: each record's own, then `metadata` (fields its syncs
    /// declare), in that order. Metadata never replaces a record field of the same name.
    pub fn content(metadata: &[FieldDef]) -> Catalog {
        static BUILT_IN: std::sync::LazyLock<Vec<FieldDef>> =
            std::sync::LazyLock::new(content_fields);
        let mut fields = BUILT_IN.clone();
        for extra in metadata {
            if !fields.iter().any(|f| f.name == extra.name) {
                fields.push(extra.clone());
            }
        }
        Catalog {
            subject: "content".into(),
            fields,
            max_limit: 50,
            max_offset: 50,
        }
    }

    /// Whether `name` is one of the fields every record has (a sync may not declare it).
    pub fn is_content_field(name: &str) -> bool {
        CONTENT_FIELDS.iter().any(|(n, _, _)| *n == name)
    }

    fn build_tools() -> Catalog {
        let field = |name: &str, kind, description: &str| FieldDef {
            name: name.to_string(),
            kind,
            description: description.to_string(),
        };
        Catalog {
            subject: "tools".into(),
            fields: vec![
                field(
                    "name",
                    FieldKind::Keyword,
                    "the tool's exact name, e.g. SLACK_SEND_MESSAGE",
                ),
                field(
                    "integration",
                    FieldKind::Keyword,
                    "the integration (toolkit) slug, e.g. slack",
                ),
                field("category", FieldKind::Keyword, "the tool's category"),
                field(
                    "sideEffect",
                    FieldKind::Keyword,
                    "what calling the tool does: unknown, read, write, delete or send",
                ),
                field(
                    "description",
                    FieldKind::FullText,
                    "what the tool does, in words",
                ),
                field(
                    "parameters",
                    FieldKind::FullText,
                    "the names and descriptions of the tool's parameters",
                ),
            ],
            max_limit: 50,
            max_offset: 50,
        }
    }
}

/// The fields every synced record has: name, kind, description.
const CONTENT_FIELDS: [(&str, FieldKind, &str); 10] = [
    (
        "title",
        FieldKind::FullText,
        "the record's display name (file or page title)",
    ),
    ("text", FieldKind::FullText, "the passage's text"),
    (
        "source",
        FieldKind::Keyword,
        "where the record was synced from: onedrive, sharepoint, dropbox, box, confluence or googledrive",
    ),
    (
        "syncId",
        FieldKind::Keyword,
        "the id of the sync that delivered the record",
    ),
    (
        "mime",
        FieldKind::Keyword,
        "the record's media type, e.g. application/pdf",
    ),
    (
        "author",
        FieldKind::Keyword,
        "who created or owns the record, as the source names them",
    ),
    (
        "url",
        FieldKind::Keyword,
        "the record's address in its source",
    ),
    (
        "path",
        FieldKind::Keyword,
        "the record's folder path in its source, e.g. /Finance/2026",
    ),
    (
        "modifiedAt",
        FieldKind::Date,
        "when the record was last modified",
    ),
    ("createdAt", FieldKind::Date, "when the record was created"),
];

fn content_fields() -> Vec<FieldDef> {
    CONTENT_FIELDS
        .iter()
        .map(|(name, kind, description)| FieldDef {
            name: (*name).to_string(),
            kind: *kind,
            description: (*description).to_string(),
        })
        .collect()
}
