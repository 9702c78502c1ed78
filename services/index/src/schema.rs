//! The tantivy schema of a tool index.

use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};

use agentsearch_common::config::LexicalConfig;

use crate::analyzer::ANALYZER;

/// Full-text fields searched by the lexical retriever.
pub const TEXT_FIELDS: [&str; 3] = ["name", "description", "params"];

#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// The tool name split into pieces (`SLACK_POST_MESSAGE` -> slack, post, message).
    pub name: Field,
    pub description: Field,
    /// Top-level parameter names and descriptions.
    pub params: Field,
    /// The exact name: replace and delete by name.
    pub name_exact: Field,
    pub category: Field,
    pub side_effect: Field,
    /// The vector id in the FAISS index.
    pub id: Field,
    /// The stored `ToolRecord` as JSON.
    pub record: Field,
    /// The stored embedding (little-endian f32), to rebuild the vector index if needed.
    pub vector: Field,
}

impl Fields {
    pub fn text_field(&self, name: &str) -> Option<Field> {
        match name {
            "name" => Some(self.name),
            "description" => Some(self.description),
            "params" => Some(self.params),
            _ => None,
        }
    }

    /// The full-text fields, in [`TEXT_FIELDS`] order.
    pub fn text_fields(&self) -> [Field; 3] {
        [self.name, self.description, self.params]
    }

    /// The full-text fields with their names, in [`TEXT_FIELDS`] order.
    pub fn named_text_fields(&self) -> [(&'static str, Field); 3] {
        let [name, description, params] = TEXT_FIELDS;
        [
            (name, self.name),
            (description, self.description),
            (params, self.params),
        ]
    }
}

/// The BM25F fields of a tool query and their weights, in [`TEXT_FIELDS`] order.
pub fn weighted_fields(params: &LexicalConfig) -> [(&'static str, f32); 3] {
    let [name, description, text] = TEXT_FIELDS;
    [
        (name, params.name_weight),
        (description, params.description_weight),
        (text, params.params_weight),
    ]
}

pub fn build_schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        name: builder.add_text_field("name", text.clone()),
        description: builder.add_text_field("description", text.clone()),
        params: builder.add_text_field("params", text),
        name_exact: builder.add_text_field("name_exact", STRING),
        category: builder.add_text_field("category", STRING),
        side_effect: builder.add_text_field("side_effect", STRING),
        id: builder.add_u64_field("id", INDEXED | FAST | STORED),
        record: builder.add_text_field("record", STORED),
        vector: builder.add_bytes_field("vector", STORED),
    };
    (builder.build(), fields)
}

/// Whether the text fields of an opened index record positions (phrase queries need them; indexes
/// written before they did are rebuilt on open).
pub fn has_positions(schema: &Schema, fields: &Fields) -> bool {
    fields.text_fields().iter().all(|f| {
        matches!(
            schema.get_field_entry(*f).field_type(),
            tantivy::schema::FieldType::Str(options)
                if options.get_indexing_options().is_some_and(|o| o.index_option().has_positions())
        )
    })
}

/// Resolves the fields of an opened index, checking it has this schema.
pub fn resolve(schema: &Schema) -> Option<Fields> {
    let f = |name| schema.get_field(name).ok();
    Some(Fields {
        name: f("name")?,
        description: f("description")?,
        params: f("params")?,
        name_exact: f("name_exact")?,
        category: f("category")?,
        side_effect: f("side_effect")?,
        id: f("id")?,
        record: f("record")?,
        vector: f("vector")?,
    })
}
