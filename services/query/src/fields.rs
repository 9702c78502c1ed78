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
