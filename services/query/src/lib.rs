//! The query JSON language of agentsearch: a typed query over the fields an index actually holds,
//! the JSON Schema (draft 2020-12) generated from those fields, and a parser whose errors name the
//! JSON path and the nearest valid name, so that a language model can call a search as a tool and
//! correct itself.
//!
//! A document: `{"v": 1, "q": "free text", "query": node, "filter": node, "limit": 5}`. Node
//! kinds: `term`, `phrase`, `prefix`, `fuzzy`, `regex`, `multiFieldTerm`, `range`, `exists`,
//! `boolean` and `functionScore` (with `weight`, `fieldValueFactor` and `gauss`/`exp`/`linear`
//! functions). The crate is pure: indexes execute the parsed [`ast::Node`]s.

pub mod ast;
pub mod fields;
pub mod limits;
pub mod parse;
pub mod schema;

pub use ast::{Node, QueryDoc, Scalar};
pub use fields::{Catalog, FieldDef, FieldKind};
pub use parse::{QueryError, parse};
pub use schema::schema;
