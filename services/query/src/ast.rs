//! A parsed query JSON document. Every field named here exists in the catalog it was parsed
//! against, with a value of its kind.

/// A field value, typed by the field's kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// A keyword or full-text value.
    Text(String),
    Number(f64),
    /// Milliseconds since the Unix epoch (UTC).
    Date(i64),
    Bool(bool),
}

/// A query JSON document.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryDoc {
    /// Free text for both retrievers.
    pub q: Option<String>,
    /// The structured part: every result matches it, and its score ranks.
    pub query: Option<Node>,
    /// Every result matches it; it does not score.
    pub filter: Option<Node>,
    pub limit: Option<u32>,
    pub offset: u32,
    pub count_exactly: bool,
    pub highlight: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Term {
        field: String,
        value: Scalar,
        boost: f32,
    },
    Phrase {
        field: String,
        terms: Vec<String>,
        slop: u32,
        boost: f32,
    },
    Prefix {
        field: String,
        value: String,
        boost: f32,
    },
    Fuzzy {
        field: String,
        value: String,
        max_edits: u8,
        boost: f32,
    },
    Regex {
        field: String,
        pattern: String,
        boost: f32,
    },
    MultiFieldTerm {
        fields: Vec<String>,
        value: String,
        boost: f32,
    },
    Range {
        field: String,
        lower: Bound,
        upper: Bound,
        boost: f32,
    },
    Exists {
        field: String,
        boost: f32,
    },
    Boolean {
        must: Vec<Node>,
        should: Vec<Node>,
        must_not: Vec<Node>,
        filter: Vec<Node>,
        /// Of `should`; 1 when only `should` clauses are given, else 0.
        minimum_should_match: u32,
        boost: f32,
    },
    FunctionScore {
        query: Box<Node>,
        functions: Vec<Function>,
        score_mode: ScoreMode,
        boost_mode: BoostMode,
        boost: f32,
    },
}

/// One end of a range.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Unbounded,
    Included(Scalar),
    Excluded(Scalar),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Function {
    Weight(f64),
    FieldValueFactor {
        field: String,
        factor: f64,
        modifier: Modifier,
        /// Used for a document without the field; without it such a document's factor is 1.
        missing: Option<f64>,
    },
    Decay {
        curve: Curve,
        field: String,
        /// Numbers, or milliseconds for dates.
        origin: f64,
        scale: f64,
        offset: f64,
        decay: f64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    Gauss,
    Exp,
    Linear,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modifier {
    None,
    Log1p,
    Ln1p,
    Sqrt,
    Square,
    Reciprocal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreMode {
    Multiply,
    Sum,
    Avg,
    Max,
    Min,
    First,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoostMode {
    Multiply,
    Replace,
    Sum,
    Avg,
    Max,
    Min,
}

impl Node {
    pub fn boost(&self) -> f32 {
        match self {
            Node::Term { boost, .. }
            | Node::Phrase { boost, .. }
            | Node::Prefix { boost, .. }
            | Node::Fuzzy { boost, .. }
            | Node::Regex { boost, .. }
            | Node::MultiFieldTerm { boost, .. }
            | Node::Range { boost, .. }
            | Node::Exists { boost, .. }
            | Node::Boolean { boost, .. }
            | Node::FunctionScore { boost, .. } => *boost,
        }
    }
}

impl Modifier {
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Modifier::None => x,
            Modifier::Log1p => (1.0 + x.max(0.0)).log10(),
            Modifier::Ln1p => (1.0 + x.max(0.0)).ln(),
            Modifier::Sqrt => x.max(0.0).sqrt(),
            Modifier::Square => x * x,
            Modifier::Reciprocal => {
                if x == 0.0 {
                    0.0
                } else {
                    1.0 / x
                }
            }
        }
    }
}

impl Function {
    /// The function's value for a document whose field holds `value` (`None`: no value).
    pub fn value(&self, value: Option<f64>) -> f64 {
        match self {
            Function::Weight(w) => *w,
            Function::FieldValueFactor {
                factor,
                modifier,
                missing,
                ..
            } => match value.or(*missing) {
                Some(x) => modifier.apply(factor * x),
                None => 1.0,
            },
            Function::Decay {
                curve,
                origin,
                scale,
                offset,
                decay,
                ..
            } => {
                let Some(x) = value else { return 1.0 };
                let distance = ((x - origin).abs() - offset).max(0.0);
                match curve {
                    Curve::Gauss => {
                        let sigma2 = -scale * scale / (2.0 * decay.ln());
                        (-(distance * distance) / (2.0 * sigma2)).exp()
                    }
                    Curve::Exp => (decay.ln() / scale * distance).exp(),
                    Curve::Linear => {
                        let s = scale / (1.0 - decay);
                        ((s - distance) / s).max(0.0)
                    }
                }
            }
        }
    }

    /// The field the function reads, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Function::Weight(_) => None,
            Function::FieldValueFactor { field, .. } | Function::Decay { field, .. } => Some(field),
        }
    }
}

impl ScoreMode {
    /// Combines the values of a document's functions (at least one).
    pub fn combine(self, values: &[f64]) -> f64 {
        let n = values.len().max(1) as f64;
        match self {
            ScoreMode::Multiply => values.iter().product(),
            ScoreMode::Sum => values.iter().sum(),
            ScoreMode::Avg => values.iter().sum::<f64>() / n,
            ScoreMode::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ScoreMode::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
            ScoreMode::First => values.first().copied().unwrap_or(1.0),
        }
    }
}

impl BoostMode {
    /// Combines the query's score with the functions' value.
    pub fn combine(self, query: f64, functions: f64) -> f64 {
        match self {
            BoostMode::Multiply => query * functions,
            BoostMode::Replace => functions,
            BoostMode::Sum => query + functions,
            BoostMode::Avg => (query + functions) / 2.0,
            BoostMode::Max => query.max(functions),
            BoostMode::Min => query.min(functions),
        }
    }
}
