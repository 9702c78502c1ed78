//! Context search on one shard: per project and sync, a tantivy index (BM25F over the record's
//! display name and the segment's text) and an inner-product index over the segments' embeddings,
//! exact while small and clustered once large ([`crate::segment_vectors`]), together a
//! [`SegmentIndex`]; and [`SegmentIndexes`], which routes writes to them and searches many of them
//! as one.
//!
//! Layout and durability are those of a tool index ([`crate::tool_index`]): under
//! `<root>/context/<project>/<sync>/`, `tantivy/` (every segment with its text, vector and its
//! record's metadata, the generation in the commit payload) is the durable write, and
//! `vectors.ivf` + `vectors.json` a snapshot of the vector index flushed later and rebuilt from the
//! stored vectors on open when stale.
//!
//! Memory: segment text stays on disk (read from the tantivy store only for returned segments);
//! in memory are, per vector id, its record and ordinal, and per record its id, display name,
//! generation, principal tokens (interned: records of one ACL share them, and each interned set
//! has a number) and its vector ids; beside each vector, the number of its record's set.
//!
//! Visibility is a security boundary: a segment is visible to a caller only if its record's
//! principal tokens share one with the caller's in that sync. Invisible segments are dropped before
//! any ranking cut, so they neither appear in an answer nor displace a visible segment.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agentsearch_common::config::ContextConfig;
use agentsearch_common::shard::{
    ContextSearchRequest, ContextSearchResponse, ContextStatsRequest, FieldData, FieldDecl,
    FieldValue, IndexedRecord, IndexedSegment, PartFailure, ReadSegmentsRequest,
    ReadSegmentsResponse, RecordDeleteRequest, RecordInfo, SegmentData, SegmentFetchRequest,
    SegmentFetchResponse, SegmentHit, SegmentIndexInfo, SegmentUpsertRequest, ShardTimings,
    TermStats,
};
use agentsearch_query::{FieldDef, FieldKind};
use parking_lot::{Mutex, RwLock};
use tantivy::index::SegmentId;
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, FieldType, INDEXED, IndexRecordOption, STORED,
    STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{
    DocAddress, DocSet, Index, IndexReader, Searcher, TERMINATED, TantivyDocument, Term,
};

use crate::analyzer::{self, ANALYZER};
use crate::check_path_component;
use crate::error::{IndexError, Result};
use crate::lexical::{self, LexicalQuery, ScoreBuffers};
use crate::segment_vectors::{DenseConfig, UNTAGGED, Vectors};
use crate::structured::{self, Highlighter, Source, Target};
use crate::tool_index::Structured;
use crate::tool_index::{
    IdMapOf, MERGE_INTO_ONE_BELOW, VectorsMeta, WRITER_MEMORY, commit, corrupt, decode_vector,
    encode_vector, finish_rebuild, meta_generation, stable_id, swap_rebuilt,
};

/// Full-text fields of a segment index, as named in [`TermStats`].
pub const SEGMENT_TEXT_FIELDS: [&str; 2] = ["title", "text"];

/// Longest record id accepted, in bytes (it is an exact-match term of the index).
pub const MAX_RECORD_ID_BYTES: usize = 2048;

/// The vector index snapshot of a sync's directory (with `vectors.json`, its generation).
const VECTORS_FILE: &str = "vectors.ivf";

#[derive(Clone, Debug)]
struct SegmentFields {
    /// The record's display name, analyzed (empty without one).
    title: Field,
    /// The segment's text, analyzed and stored.
    text: Field,
    /// The exact record id: replace and delete by record.
    record: Field,
    /// The segment's vector id ([`segment_id`]).
    id: Field,
    ordinal: Field,
    /// The record's display name as given (absent without one).
    display_name: Field,
    /// The record's generation (how often it was ingested).
    record_generation: Field,
    /// The record's principal tokens, one value each.
    principals: Field,
    /// The stored embedding (little-endian f32), to rebuild the vector index if needed.
    vector: Field,
    /// The record's fields a query may name besides title and text (mime, author, url, path,
    /// its dates, and the metadata the sync declares), one value per document.
    named: Vec<NamedField>,
}

/// A field of the query language held in the index.
#[derive(Clone, Debug)]
struct NamedField {
    name: String,
    kind: FieldKind,
    field: Field,
}

/// The record fields every index holds: query name, kind, tantivy name.
const RECORD_FIELDS: [(&str, FieldKind, &str); 6] = [
    ("mime", FieldKind::Keyword, "mime"),
    ("author", FieldKind::Keyword, "author"),
    ("url", FieldKind::Keyword, "url"),
    ("path", FieldKind::Keyword, "path"),
    ("modifiedAt", FieldKind::Date, "modified_at"),
    ("createdAt", FieldKind::Date, "created_at"),
];

/// Tantivy names of declared metadata fields start with this.
const DECLARED_PREFIX: &str = "meta_";

/// Longest keyword value accepted, in bytes (an exact-match term of the index).
pub const MAX_KEYWORD_BYTES: usize = 2048;

/// Metadata declarations as kinds; an unknown kind is refused naming `fields[i].kind`.
pub fn declared_kinds(fields: &[FieldDecl]) -> Result<Vec<(String, FieldKind)>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let kind = FieldKind::from_declared(&d.kind).ok_or_else(|| {
                IndexError::invalid(
                    format!("fields[{i}].kind"),
                    format!("`{}` is not a field kind", d.kind),
                )
            })?;
            Ok((d.name.clone(), kind))
        })
        .collect()
}

impl SegmentFields {
    fn text_fields(&self) -> [Field; 2] {
        [self.title, self.text]
    }

    fn named_text_fields(&self) -> [(&'static str, Field); 2] {
        [
            (SEGMENT_TEXT_FIELDS[0], self.title),
            (SEGMENT_TEXT_FIELDS[1], self.text),
        ]
    }
}

fn analyzed() -> TextOptions {
    TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    )
}

fn add_named(builder: &mut tantivy::schema::SchemaBuilder, name: &str, kind: FieldKind) {
    match kind {
        FieldKind::Keyword => {
            builder.add_text_field(name, STRING | STORED);
        }
        FieldKind::FullText => {
            builder.add_text_field(name, analyzed().set_stored());
        }
        FieldKind::Numeric => {
            builder.add_f64_field(name, INDEXED | FAST | STORED);
        }
        FieldKind::Date => {
            builder.add_date_field(
                name,
                DateOptions::default()
                    .set_indexed()
                    .set_fast()
                    .set_stored()
                    .set_precision(DateTimePrecision::Milliseconds),
            );
        }
        FieldKind::Bool => {
            builder.add_bool_field(name, INDEXED | FAST | STORED);
        }
    }
}

/// The kind of a named field as the schema holds it.
fn kind_of(field_type: &FieldType) -> Option<FieldKind> {
    Some(match field_type {
        FieldType::Str(options) => match options.get_indexing_options()?.tokenizer() {
            "raw" => FieldKind::Keyword,
            _ => FieldKind::FullText,
        },
        FieldType::F64(_) => FieldKind::Numeric,
        FieldType::Date(_) => FieldKind::Date,
        FieldType::Bool(_) => FieldKind::Bool,
        _ => return None,
    })
}

/// The metadata fields a schema holds, by their query names.
fn declared_of(schema: &Schema) -> Vec<(String, FieldKind)> {
    schema
        .fields()
        .filter_map(|(_, entry)| {
            let name = entry.name().strip_prefix(DECLARED_PREFIX)?;
            Some((name.to_string(), kind_of(entry.field_type())?))
        })
        .collect()
}

fn build_schema(declared: &[(String, FieldKind)]) -> Schema {
    let mut builder = Schema::builder();
    builder.add_text_field("title", analyzed());
    builder.add_text_field("text", analyzed().set_stored());
    builder.add_text_field("record", STRING | STORED);
    builder.add_u64_field("id", INDEXED | FAST | STORED);
    builder.add_u64_field("ordinal", STORED);
    builder.add_text_field("display_name", STORED);
    builder.add_u64_field("record_generation", STORED);
    builder.add_text_field("principals", STORED);
    builder.add_bytes_field("vector", STORED);
    for (_, kind, name) in RECORD_FIELDS {
        add_named(&mut builder, name, kind);
    }
    for (name, kind) in declared {
        add_named(&mut builder, &format!("{DECLARED_PREFIX}{name}"), *kind);
    }
    builder.build()
}

/// Whether the index records term positions of its analyzed text (older ones did not).
fn has_positions(schema: &Schema, fields: &SegmentFields) -> bool {
    [fields.title, fields.text]
        .iter()
        .all(|f| match schema.get_field_entry(*f).field_type() {
            FieldType::Str(options) => options
                .get_indexing_options()
                .is_some_and(|i| i.index_option() == IndexRecordOption::WithFreqsAndPositions),
            _ => false,
        })
}

fn resolve(schema: &Schema) -> Option<SegmentFields> {
    let f = |name: &str| schema.get_field(name).ok();
    Some(SegmentFields {
        title: f("title")?,
        text: f("text")?,
        record: f("record")?,
        id: f("id")?,
        ordinal: f("ordinal")?,
        display_name: f("display_name")?,
        record_generation: f("record_generation")?,
        principals: f("principals")?,
        vector: f("vector")?,
        named: {
            let mut named = Vec::new();
            for (name, kind, tantivy_name) in RECORD_FIELDS {
                let field = f(tantivy_name)?;
                (kind_of(schema.get_field_entry(field).field_type()) == Some(kind)).then_some(())?;
                named.push(NamedField {
                    name: name.to_string(),
                    kind,
                    field,
                });
            }
            for (name, kind) in declared_of(schema) {
                let tantivy_name = format!("{DECLARED_PREFIX}{name}");
                named.push(NamedField {
                    field: f(&tantivy_name)?,
                    name,
                    kind,
                });
            }
            named
        },
    })
}

impl SegmentFields {
    fn named(&self, name: &str) -> Option<(usize, &NamedField)> {
        self.named.iter().enumerate().find(|(_, f)| f.name == name)
    }

    /// The metadata fields the sync declares.
    fn declared(&self) -> impl Iterator<Item = &NamedField> {
        self.named.iter().skip(RECORD_FIELDS.len())
    }
}

/// Principal tokens of a record, sorted and deduplicated; records with the same tokens share one.
type Principals = Arc<[Box<str>]>;

/// By document of a tantivy segment, the record slot and ordinal of the segment it stores.
type DocPlaces = Arc<[(u32, u32)]>;

struct Record {
    id: Arc<str>,
    display_name: Option<Box<str>>,
    generation: u64,
    principals: Principals,
    /// The number of `principals` ([`State::sets`]), which also tags the record's vectors.
    set: u32,
    /// The vector ids of its segments, by ordinal.
    vector_ids: Box<[u64]>,
    /// Its numeric, date (milliseconds) and boolean (0 or 1) values, by position in
    /// [`SegmentFields::named`], for function scores.
    numbers: Box<[(u16, f64)]>,
}

struct State {
    /// The searcher of the committed generation `generation`, published with the maps below.
    searcher: Searcher,
    /// The `id` fast-field column of each of the searcher's segments.
    id_columns: Vec<tantivy::columnar::Column<u64>>,
    /// Each of the searcher's segments with, by document, the record slot and ordinal of the
    /// segment it stores (slot [`UNTAGGED`]: its id names no segment held; a deleted document may
    /// name any, and is never read: the alive bitset is checked first), what the lexical
    /// retriever reads instead of the vector id and the map of every id. Kept for a tantivy segment from
    /// one publication to the next: its live documents keep their records and slots (a replaced
    /// record's documents are deleted, and a slot is reused only once its record is gone).
    doc_places: Vec<(SegmentId, DocPlaces)>,
    /// Records by slot (`None`: a free slot, listed in `free`).
    records: Vec<Option<Record>>,
    /// Each slot's record's principal set number ([`UNTAGGED`] for a free slot): what the
    /// lexical retriever's permission check reads, 4 bytes per record rather than the record.
    record_sets: Vec<u32>,
    free: Vec<u32>,
    slots: HashMap<Arc<str>, u32>,
    /// Vector id -> (record slot, ordinal).
    segments: IdMapOf<(u32, u32)>,
    /// Every principal set in use by its number (`None`: a free number, listed in `free_sets`),
    /// with the sum of the generations of the records that use it (what
    /// [`SegmentIndex::visible_generation`] adds up, per set rather than per record).
    sets: Vec<Option<(Principals, u64)>>,
    free_sets: Vec<u32>,
    /// The number of each set in use.
    interned: HashMap<Principals, u32>,
    /// The numbers of the sets holding each token.
    by_token: HashMap<Box<str>, Vec<u32>>,
    vectors: Option<Vectors>,
    generation: u64,
}

impl State {
    fn empty(searcher: Searcher, generation: u64) -> Result<Self> {
        Ok(State {
            id_columns: id_columns(&searcher)?,
            doc_places: Vec::new(),
            searcher,
            records: Vec::new(),
            record_sets: Vec::new(),
            free: Vec::new(),
            slots: HashMap::new(),
            segments: IdMapOf::default(),
            sets: Vec::new(),
            free_sets: Vec::new(),
            interned: HashMap::new(),
            by_token: HashMap::new(),
            vectors: None,
            generation,
        })
    }

    /// Brings [`State::doc_places`] up to the searcher and the records: computed for the segments
    /// not seen before, the others' kept.
    fn refresh_places(&mut self) {
        let previous = std::mem::take(&mut self.doc_places);
        let readers = self.searcher.segment_readers();
        let mut next = Vec::with_capacity(readers.len());
        for (reader, ids) in readers.iter().zip(&self.id_columns) {
            let segment = reader.segment_id();
            let places = match previous.iter().find(|(s, _)| *s == segment) {
                Some((_, places)) => places.clone(),
                None => (0..reader.max_doc())
                    .map(|doc| {
                        ids.first(doc)
                            .and_then(|id| self.segments.get(&id).copied())
                            .unwrap_or((UNTAGGED, 0))
                    })
                    .collect(),
            };
            next.push((segment, places));
        }
        self.doc_places = next;
    }

    /// The interned set of `principals` and its number (a new number if no record uses it yet).
    fn intern(&mut self, principals: &[String]) -> (Principals, u32) {
        let mut tokens: Vec<&str> = principals.iter().map(String::as_str).collect();
        tokens.sort_unstable();
        tokens.dedup();
        let tokens: Box<[Box<str>]> = tokens.into_iter().map(Box::from).collect();
        if let Some((shared, &number)) = self.interned.get_key_value(&*tokens) {
            return (shared.clone(), number);
        }
        let shared: Principals = Arc::from(tokens);
        let entry = Some((shared.clone(), 0));
        let number = match self.free_sets.pop() {
            Some(number) => {
                self.sets[number as usize] = entry;
                number
            }
            None => {
                // (Numbers stay below `UNTAGGED`: four billion sets would not fit in memory.)
                self.sets.push(entry);
                (self.sets.len() - 1) as u32
            }
        };
        self.interned.insert(shared.clone(), number);
        for token in shared.iter() {
            self.by_token.entry(token.clone()).or_default().push(number);
        }
        (shared, number)
    }

    /// Drops interned principal sets no record uses any more; their numbers are free again (no
    /// vector is tagged with them: a record's vectors leave with it).
    fn prune_interned(&mut self) {
        // Held by `sets` and `interned` alone.
        let gone: Vec<u32> = self
            .sets
            .iter()
            .enumerate()
            .filter(|(_, set)| set.as_ref().is_some_and(|(p, _)| Arc::strong_count(p) == 2))
            .map(|(number, _)| number as u32)
            .collect();
        if gone.is_empty() {
            return;
        }
        let numbers: HashSet<u32> = gone.iter().copied().collect();
        let mut tokens: HashSet<Box<str>> = HashSet::new();
        for &number in &gone {
            if let Some((set, _)) = self.sets[number as usize].take() {
                tokens.extend(set.iter().cloned());
                self.interned.remove(&set);
            }
            self.free_sets.push(number);
        }
        // One pass per token concerned, however many of its sets go.
        for token in tokens {
            if let Some(sets) = self.by_token.get_mut(&token) {
                sets.retain(|n| !numbers.contains(n));
                if sets.is_empty() {
                    self.by_token.remove(&token);
                }
            }
        }
    }

    /// Sum of the generations of the records whose principal sets share a token with `caller`.
    fn visible_generation(&self, caller: &[String]) -> u64 {
        let mut seen: HashSet<u32, foldhash::fast::RandomState> = HashSet::default();
        let mut total = 0u64;
        for token in caller {
            for &number in self.by_token.get(token.as_str()).into_iter().flatten() {
                if seen.insert(number)
                    && let Some(Some((_, sum))) = self.sets.get(number as usize)
                {
                    total = total.wrapping_add(*sum);
                }
            }
        }
        total
    }

    fn record(&self, record_id: &str) -> Option<&Record> {
        let slot = *self.slots.get(record_id)?;
        self.records[slot as usize].as_ref()
    }

    /// The record and ordinal of a vector id.
    fn segment(&self, id: u64) -> Option<(&Record, u32)> {
        let &(slot, ordinal) = self.segments.get(&id)?;
        Some((self.records[slot as usize].as_ref()?, ordinal))
    }

    fn insert(&mut self, record: Record) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.records.push(None);
                self.record_sets.push(UNTAGGED);
                (self.records.len() - 1) as u32
            }
        };
        self.record_sets[slot as usize] = record.set;
        for (ordinal, &id) in record.vector_ids.iter().enumerate() {
            self.segments.insert(id, (slot, ordinal as u32));
        }
        self.slots.insert(record.id.clone(), slot);
        if let Some(Some((_, sum))) = self.sets.get_mut(record.set as usize) {
            *sum = sum.wrapping_add(record.generation);
        }
        self.records[slot as usize] = Some(record);
    }

    fn remove(&mut self, record_id: &str) -> Option<Record> {
        let slot = self.slots.remove(record_id)?;
        let record = self.records[slot as usize].take()?;
        self.record_sets[slot as usize] = UNTAGGED;
        self.free.push(slot);
        for id in record.vector_ids.iter() {
            self.segments.remove(id);
        }
        if let Some(Some((_, sum))) = self.sets.get_mut(record.set as usize) {
            *sum = sum.wrapping_sub(record.generation);
        }
        Some(record)
    }

    fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

/// The principal sets a caller's tokens open in one state of a sync, by number: a record (and each
/// of its vectors) is visible if its set is one of them. Lives no longer than the state lock it
/// was made under: a set's number is reused once no record uses it.
struct Visibility {
    /// Bit `n` set: set number `n` holds one of the caller's tokens.
    open: Vec<u64>,
}

impl Visibility {
    fn new(state: &State, principals: &[String]) -> Self {
        let mut open = vec![0u64; state.sets.len().div_ceil(64)];
        for token in principals {
            for &number in state.by_token.get(token.as_str()).into_iter().flatten() {
                open[number as usize / 64] |= 1 << (number % 64);
            }
        }
        Visibility { open }
    }

    /// Whether set number `set` is open to the caller (a number no set has is not).
    fn sees_set(&self, set: u32) -> bool {
        self.open
            .get(set as usize / 64)
            .is_some_and(|word| word >> (set % 64) & 1 == 1)
    }

    fn sees(&self, record: &Record) -> bool {
        self.sees_set(record.set)
    }
}

/// The record of segment `ordinal` of record `record_id` (vector id `id`), if it still has it and
/// is visible to `principals`.
fn live_segment<'s>(
    state: &'s State,
    id: u64,
    record_id: &str,
    ordinal: u32,
    principals: &[String],
) -> Option<&'s Record> {
    state
        .segment(id)
        .filter(|&(record, o)| {
            o == ordinal && *record.id == *record_id && visible_to(record, principals)
        })
        .map(|(record, _)| record)
}

/// Whether `record` is visible to a caller holding `principals`: for a few records, where
/// [`Visibility`] (every set the caller opens) would cost more than it saves.
fn visible_to(record: &Record, principals: &[String]) -> bool {
    record
        .principals
        .iter()
        .any(|token| principals.iter().any(|p| **token == **p))
}

/// One ranked segment of one index.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub score: f32,
    pub vector_id: u64,
    pub record_id: Arc<str>,
    pub ordinal: u32,
}

/// What [`SegmentIndex::search_structured`] found.
pub struct StructuredAnswer {
    /// Candidates and matches of the lexical retriever (`None`: not run).
    pub lexical: Option<Result<(Vec<Candidate>, u64)>>,
    pub dense: Option<Result<Vec<Candidate>>>,
    /// With `countExactly`: visible records with an allowed segment.
    pub matched: Option<u64>,
}

/// One state of a sync's index as the structured query sees it.
struct View<'a> {
    state: &'a State,
    fields: &'a SegmentFields,
    sync_id: &'a str,
    source: &'a str,
}

impl Source for View<'_> {
    fn searcher(&self) -> &Searcher {
        &self.state.searcher
    }

    fn target(&self, field: &str) -> Option<Target> {
        Some(match field {
            "title" => Target::Text(self.fields.title),
            "text" => Target::Text(self.fields.text),
            "syncId" | "source" => Target::Constant,
            _ => {
                let (_, named) = self.fields.named(field)?;
                match named.kind {
                    FieldKind::Keyword => Target::Keyword(named.field),
                    FieldKind::FullText => Target::Text(named.field),
                    FieldKind::Numeric | FieldKind::Date | FieldKind::Bool => {
                        Target::Typed(named.field)
                    }
                }
            }
        })
    }

    fn constant(&self, field: &str) -> Option<&str> {
        match field {
            "syncId" => Some(self.sync_id),
            "source" => Some(self.source),
            _ => None,
        }
    }

    fn ids(&self) -> Vec<u64> {
        self.state.segments.keys().copied().collect()
    }

    fn number(&self, field: &str, id: u64) -> Option<f64> {
        let (position, _) = self.fields.named(field)?;
        let (record, _) = self.state.segment(id)?;
        record
            .numbers
            .iter()
            .find(|(p, _)| usize::from(*p) == position)
            .map(|(_, x)| *x)
    }
}

/// A record's numeric, date and boolean values as [`Record::numbers`] holds them.
fn numbers_of<'v>(
    fields: &SegmentFields,
    values: impl Iterator<Item = (&'v str, Option<f64>)>,
) -> Box<[(u16, f64)]> {
    values
        .filter_map(|(name, x)| {
            let (position, _) = fields.named(name)?;
            Some((u16::try_from(position).ok()?, x?))
        })
        .collect()
}

/// The number a function score reads from a value, if it has one.
fn number_of(value: &FieldData) -> Option<f64> {
    match value {
        FieldData::Number(x) => Some(*x),
        FieldData::Date(ms) => Some(*ms as f64),
        FieldData::Flag(b) => Some(if *b { 1.0 } else { 0.0 }),
        FieldData::Keyword(_) | FieldData::Text(_) => None,
    }
}

/// Checks a record's field values against the index's fields: known names, one value each,
/// values of the field's kind, keywords of 1 to [`MAX_KEYWORD_BYTES`] bytes, finite numbers.
fn check_fields(fields: &SegmentFields, records: &[IndexedRecord]) -> Result<()> {
    for (i, record) in records.iter().enumerate() {
        let mut seen: HashSet<&str> = HashSet::new();
        for value in &record.fields {
            let at = format!("records[{i}].fields.{}", value.name);
            let Some((_, named)) = fields.named(&value.name) else {
                return Err(IndexError::invalid(
                    at,
                    "this sync's index holds no such field",
                ));
            };
            if !seen.insert(value.name.as_str()) {
                return Err(IndexError::invalid(at, "has more than one value"));
            }
            let fits = match (&value.value, named.kind) {
                (FieldData::Keyword(s), FieldKind::Keyword) => {
                    !s.is_empty() && s.len() <= MAX_KEYWORD_BYTES
                }
                (FieldData::Text(_), FieldKind::FullText) => true,
                (FieldData::Number(x), FieldKind::Numeric) => x.is_finite(),
                (FieldData::Date(ms), FieldKind::Date) => {
                    agentsearch_common::shard::DATE_MS_RANGE.contains(ms)
                }
                (FieldData::Flag(_), FieldKind::Bool) => true,
                _ => false,
            };
            if !fits {
                return Err(IndexError::invalid(
                    at,
                    format!(
                        "must be a {} value (keywords 1 to {MAX_KEYWORD_BYTES} bytes, numbers \
                         finite, dates in the years 1678 to 2261)",
                        named.kind
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn add_value(doc: &mut TantivyDocument, field: Field, value: &FieldData) {
    match value {
        FieldData::Keyword(s) | FieldData::Text(s) => doc.add_text(field, s),
        FieldData::Number(x) => doc.add_f64(field, *x),
        FieldData::Date(ms) => doc.add_date(field, tantivy::DateTime::from_timestamp_millis(*ms)),
        FieldData::Flag(b) => doc.add_bool(field, *b),
    }
}

/// Order of candidates within one index: score descending, then record and ordinal ascending
/// (the order of [`segment_hit_order`](agentsearch_common::shard::segment_hit_order) within a sync).
fn candidate_order(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    (b.score + 0.0)
        .total_cmp(&(a.score + 0.0))
        .then_with(|| a.record_id.cmp(&b.record_id))
        .then_with(|| a.ordinal.cmp(&b.ordinal))
}

/// Keeps, in no particular order, the items of `items` scoring at least its `limit`-th best score
/// (every item if there are no more than `limit`; none if `limit` is 0): the best `limit` and
/// every tie of the last, for a full order to decide.
fn keep_to_cut<T>(items: &mut Vec<T>, limit: usize, score: impl Fn(&T) -> f32) {
    if limit == 0 {
        items.clear();
    } else if items.len() > limit {
        items.select_nth_unstable_by(limit - 1, |a, b| {
            (score(b) + 0.0).total_cmp(&(score(a) + 0.0))
        });
        let cut = score(&items[limit - 1]);
        items.retain(|item| score(item) >= cut);
    }
}

/// The best `limit` candidates in [`candidate_order`] (ties at the cut decided by the full order).
fn best(mut candidates: Vec<Candidate>, limit: usize) -> Vec<Candidate> {
    keep_to_cut(&mut candidates, limit, |c| c.score);
    candidates.sort_by(candidate_order);
    candidates.truncate(limit);
    candidates
}

/// A segment that matched, before its record is read: the record's slot instead of its id.
struct Matched {
    score: f32,
    slot: u32,
    ordinal: u32,
}

/// [`best`] of `matched`, whose records are read only for the best `limit` (and ties at the cut).
fn best_matched(state: &State, mut matched: Vec<Matched>, limit: usize) -> Vec<Candidate> {
    keep_to_cut(&mut matched, limit, |m| m.score);
    let candidates = matched
        .into_iter()
        .filter_map(|m| {
            let record = state.records.get(m.slot as usize)?.as_ref()?;
            Some(Candidate {
                score: m.score,
                vector_id: *record.vector_ids.get(m.ordinal as usize)?,
                record_id: record.id.clone(),
                ordinal: m.ordinal,
            })
        })
        .collect();
    best(candidates, limit)
}

/// One sync's segments on one shard.
pub struct SegmentIndex {
    dir: PathBuf,
    sync_id: String,
    index: Index,
    reader: IndexReader,
    fields: SegmentFields,
    state: RwLock<State>,
    write_lock: Mutex<()>,
    dense: DenseConfig,
}

impl SegmentIndex {
    /// Opens the index in `dir`, creating an empty one if the directory holds none. It holds a
    /// field for each of `declared` (metadata fields the sync declares) besides those it already
    /// has; an index without one of them, or written before term positions and record fields
    /// were indexed, is rebuilt from its stored documents first.
    pub fn open(dir: &Path, sync_id: &str, declared: &[(String, FieldKind)]) -> Result<Self> {
        Self::open_with(dir, sync_id, declared, DenseConfig::default())
    }

    /// [`SegmentIndex::open`] with the dense retriever searched as `dense` says.
    pub fn open_with(
        dir: &Path,
        sync_id: &str,
        declared: &[(String, FieldKind)],
        dense: DenseConfig,
    ) -> Result<Self> {
        finish_rebuild(dir)?;
        // Written by versions that kept the vectors in FAISS: rebuilt from the stored vectors.
        let obsolete = dir.join("vectors.faiss");
        if obsolete.exists() {
            fs::remove_file(&obsolete)?;
        }
        let open = |declared: &[(String, FieldKind)]| {
            crate::tool_index::open_tantivy(dir, build_schema(declared))
        };
        let (mut index, mut reader, mut generation) = open(declared)?;
        let schema = index.schema();
        let mut wanted = declared_of(&schema);
        for (name, kind) in declared {
            match wanted.iter().find(|(n, _)| n == name) {
                Some((_, held)) if held != kind => {
                    return Err(IndexError::invalid(
                        "fields",
                        format!("field `{name}` is held as {held}, not {kind}"),
                    ));
                }
                Some(_) => {}
                None => wanted.push((name.clone(), *kind)),
            }
        }
        let current = resolve(&schema)
            .filter(|f| has_positions(&schema, f) && f.declared().count() == wanted.len());
        let unexpected = || IndexError::Corrupt(format!("{}: unexpected schema", dir.display()));
        let fields = match current {
            Some(fields) => fields,
            None => {
                let documents = rebuild_into(dir, &index, &build_schema(&wanted), generation)?;
                drop((index, reader));
                swap_rebuilt(dir)?;
                tracing::info!(
                    sync = sync_id,
                    documents,
                    "segment index rebuilt with positions and record fields"
                );
                (index, reader, generation) = open(&wanted)?;
                resolve(&index.schema()).ok_or_else(unexpected)?
            }
        };
        let state = load_state(reader.searcher(), &fields, generation, Some(dir))?;
        let this = Self {
            dir: dir.to_path_buf(),
            sync_id: sync_id.to_string(),
            index,
            reader,
            fields,
            state: RwLock::new(state),
            write_lock: Mutex::new(()),
            dense,
        };
        {
            let _write = this.write_lock.lock();
            if let Err(err) = this.cluster_if_due() {
                tracing::error!(sync = %sync_id, error = %err, "clustering the vector index failed; its lists are searched as they are");
            }
        }
        this.flush_vectors()?;
        Ok(this)
    }

    pub fn sync_id(&self) -> &str {
        &self.sync_id
    }

    /// Records held.
    pub fn records(&self) -> usize {
        self.state.read().slots.len()
    }

    /// Segments held.
    pub fn len(&self) -> usize {
        self.state.read().segment_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn generation(&self) -> u64 {
        self.state.read().generation
    }

    /// Lists of the vector index: 1 until it is clustered ([`crate::segment_vectors`]), 0 while it
    /// holds no vector.
    pub fn dense_lists(&self) -> usize {
        self.state
            .read()
            .vectors
            .as_ref()
            .map_or(0, Vectors::list_count)
    }

    pub fn info(&self) -> SegmentIndexInfo {
        let state = self.state.read();
        SegmentIndexInfo {
            records: state.slots.len() as u64,
            segments: state.segment_count() as u64,
            generation: state.generation,
        }
    }

    /// Sum of the generations of the records `principals` may read: what a caller may know of
    /// the index's version, without learning of writes to records it cannot read.
    pub fn visible_generation(&self, principals: &[String]) -> u64 {
        self.state.read().visible_generation(principals)
    }

    /// Makes a durable commit visible: the new searcher and the in-memory state are published
    /// together, under the state lock. If the in-memory update fails, everything is reloaded from
    /// the committed index instead: the write is durable either way.
    fn publish(
        &self,
        generation: u64,
        update: impl FnOnce(&mut State) -> Result<()>,
    ) -> Result<()> {
        let reloaded = self.reader.reload();
        let mut state = self.state.write();
        state.searcher = self.reader.searcher();
        state.generation = generation;
        let columns = id_columns(&state.searcher);
        let applied = reloaded
            .map_err(IndexError::from)
            .and(columns)
            .and_then(|columns| {
                state.id_columns = columns;
                update(&mut state)?;
                state.refresh_places();
                Ok(())
            });
        if let Err(err) = applied {
            tracing::error!(sync = %self.sync_id, error = %err, "in-memory update after a commit failed; reloading");
            self.reader.reload()?;
            *state = load_state(self.reader.searcher(), &self.fields, generation, None)?;
        }
        Ok(())
    }

    /// A one-thread writer whose merges are ours ([`commit`]) while the index is small.
    fn writer(&self) -> Result<tantivy::IndexWriter<TantivyDocument>> {
        let writer = self
            .index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
        if self.len() as u64 <= MERGE_INTO_ONE_BELOW {
            writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        }
        Ok(writer)
    }

    /// Inserts or replaces records: each replaces every segment the index held for its id (a
    /// record without segments is removed). The last of duplicate ids in one call wins. Nothing is
    /// written if any record is invalid. Returns the segments written and the new generation.
    pub fn upsert(&self, records: &[IndexedRecord]) -> Result<(u64, u64)> {
        let _write = self.write_lock.lock();
        let held = self.state.read().vectors.as_ref().map_or(0, Vectors::dim);
        let dim = validate_records(records, held)?;
        check_fields(&self.fields, records)?;
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, record) in records.iter().enumerate() {
            last.insert(record.record_id.as_str(), i);
        }
        let mut batch: Vec<(usize, Vec<(u64, usize)>)> = Vec::new();
        {
            let state = self.state.read();
            let mut ids: HashMap<u64, (usize, u32)> = HashMap::new();
            for (i, record) in records.iter().enumerate() {
                if last[record.record_id.as_str()] != i {
                    continue;
                }
                // Segments by ordinal (validated to be 0..n): (vector id, index in the request).
                let mut segments: Vec<(u64, usize)> = vec![(0, 0); record.segments.len()];
                for (j, segment) in record.segments.iter().enumerate() {
                    let id = segment_id(&record.record_id, segment.ordinal);
                    let key = (i, segment.ordinal);
                    let collides_in_batch = ids.insert(id, key).is_some();
                    let collides_in_index = state.segment(id).is_some_and(|(other, ordinal)| {
                        *other.id != *record.record_id || ordinal != segment.ordinal
                    });
                    if collides_in_batch || collides_in_index {
                        return Err(IndexError::Corrupt(format!(
                            "vector id collision for segment {} of record `{}`",
                            segment.ordinal, record.record_id
                        )));
                    }
                    segments[segment.ordinal as usize] = (id, j);
                }
                batch.push((i, segments));
            }
        }
        if batch.is_empty() {
            return Ok((0, self.generation()));
        }
        let generation = self.generation() + 1;
        let writer = self.writer()?;
        let mut written = 0u64;
        for (i, segments) in &batch {
            let record = &records[*i];
            writer.delete_term(Term::from_field_text(self.fields.record, &record.record_id));
            for (id, j) in segments {
                let segment = &record.segments[*j];
                let mut doc = TantivyDocument::new();
                doc.add_text(
                    self.fields.title,
                    record.display_name.as_deref().unwrap_or(""),
                );
                doc.add_text(self.fields.text, &segment.text);
                doc.add_text(self.fields.record, &record.record_id);
                doc.add_u64(self.fields.id, *id);
                doc.add_u64(self.fields.ordinal, u64::from(segment.ordinal));
                if let Some(name) = &record.display_name {
                    doc.add_text(self.fields.display_name, name);
                }
                doc.add_u64(self.fields.record_generation, record.generation);
                for token in &record.principals {
                    doc.add_text(self.fields.principals, token);
                }
                doc.add_bytes(self.fields.vector, &encode_vector(&segment.vector));
                for value in &record.fields {
                    if let Some((_, named)) = self.fields.named(&value.name) {
                        add_value(&mut doc, named.field, &value.value);
                    }
                }
                writer.add_document(doc)?;
                written += 1;
            }
        }
        // The new vectors and the list each joins, decided before the commit (nothing can fail
        // for want of them afterwards) and outside the state lock (searches go on meanwhile; the
        // lists cannot change, this call holds the write lock). The first vectors of the index
        // decide its dimension.
        let mut labels: Vec<u64> = Vec::new();
        let mut flat: Vec<f32> = Vec::new();
        for (i, segments) in &batch {
            for (id, j) in segments {
                labels.push(*id);
                flat.extend_from_slice(&records[*i].segments[*j].vector);
            }
        }
        let (fresh_vectors, lists) = {
            let state = self.state.read();
            match &state.vectors {
                Some(vectors) => (None, vectors.assign(&flat)?),
                None if written > 0 => {
                    let vectors = Vectors::new(dim);
                    let lists = vectors.assign(&flat)?;
                    (Some(vectors), lists)
                }
                None => (None, Vec::new()),
            }
        };
        commit(&self.index, writer, generation)?;
        let fields = &self.fields;
        self.publish(generation, move |state| {
            if let Some(v) = fresh_vectors {
                state.vectors = Some(v);
            }
            let mut removed: Vec<u64> = Vec::new();
            // Each new vector's tag: its record's principal set (`labels` is in batch order).
            let mut tags: Vec<u32> = Vec::with_capacity(labels.len());
            for (i, segments) in &batch {
                let record = &records[*i];
                if let Some(old) = state.remove(&record.record_id) {
                    removed.extend(old.vector_ids.iter().copied());
                }
                if segments.is_empty() {
                    continue;
                }
                let (principals, set) = state.intern(&record.principals);
                tags.extend(std::iter::repeat_n(set, segments.len()));
                state.insert(Record {
                    id: Arc::from(record.record_id.as_str()),
                    display_name: record.display_name.as_deref().map(Box::from),
                    generation: record.generation,
                    principals,
                    set,
                    vector_ids: segments.iter().map(|(id, _)| *id).collect(),
                    numbers: numbers_of(
                        fields,
                        record
                            .fields
                            .iter()
                            .map(|v| (v.name.as_str(), number_of(&v.value))),
                    ),
                });
            }
            if let Some(vectors) = state.vectors.as_mut() {
                vectors.remove(&removed);
                vectors.add(&labels, &flat, &lists, &tags)?;
            } else if !labels.is_empty() {
                return Err(IndexError::Corrupt("no vector index".into()));
            }
            // (After the vectors: no row is tagged with a number this frees.)
            state.prune_interned();
            Ok(())
        })?;
        // Acknowledged either way: the write is committed and searchable.
        if let Err(err) = self.cluster_if_due() {
            tracing::error!(sync = %self.sync_id, error = %err, "clustering the vector index or writing its snapshot failed; the write is kept and searchable");
        }
        Ok((written, generation))
    }

    /// Deletes records (every segment); returns how many existed and the new generation.
    pub fn delete(&self, record_ids: &[String]) -> Result<(u64, u64)> {
        let _write = self.write_lock.lock();
        let present: Vec<String> = {
            let state = self.state.read();
            let mut seen = HashSet::new();
            record_ids
                .iter()
                .filter(|id| {
                    let id = String::as_str(id);
                    state.slots.contains_key(id) && seen.insert(id)
                })
                .cloned()
                .collect()
        };
        if present.is_empty() {
            return Ok((0, self.generation()));
        }
        let generation = self.generation() + 1;
        let writer = self.writer()?;
        for id in &present {
            writer.delete_term(Term::from_field_text(self.fields.record, id));
        }
        commit(&self.index, writer, generation)?;
        self.publish(generation, |state| {
            let mut removed = Vec::new();
            for id in &present {
                if let Some(old) = state.remove(id) {
                    removed.extend(old.vector_ids.iter().copied());
                }
            }
            if let Some(vectors) = state.vectors.as_mut() {
                vectors.remove(&removed);
            }
            state.prune_interned();
            Ok(())
        })?;
        Ok((present.len() as u64, generation))
    }

    /// Adds this index's BM25 statistics for `terms` (analyzed query terms) to `stats`, over
    /// [`SEGMENT_TEXT_FIELDS`] and every segment (visible to anyone or not).
    pub fn add_term_stats(&self, terms: &[String], stats: &mut TermStats) -> Result<()> {
        let searcher = self.state.read().searcher.clone();
        lexical::add_term_stats(&searcher, &self.fields.named_text_fields(), terms, stats)
    }

    /// BM25F for a prepared [`LexicalQuery`] (built over [`SEGMENT_TEXT_FIELDS`]), term-at-a-time
    /// over the postings, keeping only segments visible to `principals`. Returns the best `limit`
    /// visible segments in [`segment_hit_order`](agentsearch_common::shard::segment_hit_order) and the number of visible segments matched.
    pub fn search_lexical(
        &self,
        query: &LexicalQuery,
        principals: &[String],
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<(Vec<Candidate>, u64)> {
        let state = self.state.read();
        self.lexical_in(&state, query, principals, limit, buffers, None)
    }

    /// [`SegmentIndex::search_lexical`] on `state`; with `allowed` (a structured query's matches
    /// and scores), only allowed segments rank, each by its structured score plus its BM25F. A
    /// segment only a filter allows must then hold a query word, unless the query has none.
    fn lexical_in(
        &self,
        state: &State,
        query: &LexicalQuery,
        principals: &[String],
        limit: usize,
        buffers: &mut ScoreBuffers,
        allowed: Option<&IdMapOf<Option<f32>>>,
    ) -> Result<(Vec<Candidate>, u64)> {
        let by_words = !query.is_empty();
        if principals.is_empty() || (!by_words && allowed.is_none()) {
            return Ok((Vec::new(), 0));
        }
        let visibility = Visibility::new(state, principals);
        let fields = self.fields.text_fields();
        let mut candidates = Vec::new();
        // With `allowed`, every document of a segment (a node may allow what holds no word).
        let mut every: Vec<u32> = Vec::new();
        let readers = state.searcher.segment_readers();
        if readers.len() != state.doc_places.len() {
            // Not expected (the arrays follow every searcher published); never guess.
            return Err(IndexError::Corrupt(format!(
                "sync {}: document places do not match the searcher",
                self.sync_id
            )));
        }
        for ((segment, ids), (places_of, places)) in
            readers.iter().zip(&state.id_columns).zip(&state.doc_places)
        {
            if *places_of != segment.segment_id() {
                return Err(IndexError::Corrupt(format!(
                    "sync {}: document places do not match the searcher",
                    self.sync_id
                )));
            }
            query.score_segment(segment, &fields, buffers)?;
            let docs: &[u32] = match allowed {
                None => &buffers.matched,
                Some(_) => {
                    every.clear();
                    every.extend(0..segment.max_doc());
                    &every
                }
            };
            let alive = segment.alive_bitset();
            for &doc in docs {
                if alive.is_some_and(|a| a.is_deleted(doc)) {
                    continue;
                }
                // (A slot past the records: no record, as `UNTAGGED`.)
                let Some(&(slot, ordinal)) = places.get(doc as usize) else {
                    continue;
                };
                let Some(&set) = state.record_sets.get(slot as usize) else {
                    continue;
                };
                let words = buffers.scores[doc as usize];
                let score = match allowed {
                    None => words,
                    Some(allowed) => match ids.first(doc).and_then(|id| allowed.get(&id)) {
                        None => continue,
                        Some(None) if by_words && words == 0.0 => continue,
                        Some(structured) => words + structured.unwrap_or(0.0),
                    },
                };
                if !visibility.sees_set(set) {
                    continue;
                }
                candidates.push(Matched {
                    score,
                    slot,
                    ordinal,
                });
            }
        }
        let matched = candidates.len() as u64;
        Ok((best_matched(state, candidates, limit), matched))
    }

    /// Both retrievers restricted by a structured query, on one state: what it allows
    /// ([`structured::allowed`]) ranks in each, the lexical one adding its score to BM25F's.
    /// `source` is the sync's source, a field of the query. With `count_exactly`, also the
    /// number of records visible to `principals` with an allowed segment.
    #[allow(clippy::too_many_arguments)]
    pub fn search_structured(
        &self,
        structured: &Structured,
        source: &str,
        lexical: Option<&LexicalQuery>,
        vector: Option<&[f32]>,
        principals: &[String],
        limit: usize,
        buffers: &mut ScoreBuffers,
    ) -> Result<StructuredAnswer> {
        let state = self.state.read();
        let view = View {
            state: &state,
            fields: &self.fields,
            sync_id: &self.sync_id,
            source,
        };
        let allowed =
            structured::allowed(&view, structured.query.as_ref(), structured.filter.as_ref())?;
        let empty = LexicalQuery::default();
        let lexical = lexical.map(|query| {
            self.lexical_in(&state, query, principals, limit, buffers, Some(&allowed))
        });
        let lexical = match lexical {
            Some(answer) => Some(answer),
            // No words and no lexical retriever: the nodes alone still rank when there is no
            // vector either (a filter-only or node-only query).
            None if vector.is_none() => {
                Some(self.lexical_in(&state, &empty, principals, limit, buffers, Some(&allowed)))
            }
            None => None,
        };
        let dense = vector
            .map(|vector| self.dense_in(&state, vector, principals, limit, Some(&allowed), None));
        let matched = structured.count_exactly.then(|| {
            let visibility = Visibility::new(&state, principals);
            let mut records: HashSet<*const Record> = HashSet::new();
            for id in allowed.keys() {
                if let Some((record, _)) = state.segment(*id)
                    && visibility.sees(record)
                {
                    records.insert(record as *const Record);
                }
            }
            records.len() as u64
        });
        Ok(StructuredAnswer {
            lexical,
            dense,
            matched,
        })
    }

    /// Inner-product nearest neighbours of `query` among the segments visible to `principals`:
    /// exactly the best `limit` while the sync is small, over the lists nearest the query once it
    /// is clustered ([`Vectors::search_above`]); visibility is checked while the vectors are read.
    pub fn search_dense(
        &self,
        query: &[f32],
        principals: &[String],
        limit: usize,
    ) -> Result<Vec<Candidate>> {
        self.search_dense_above(query, principals, limit, None)
    }

    /// [`SegmentIndex::search_dense`] for a caller already holding `limit` segments that score
    /// at least `floor` (from other syncs): the same lists are read as without it, and every
    /// segment of their best `limit` scoring at least `floor` is in the answer
    /// ([`Vectors::search_above`]), which may hold others below it.
    pub fn search_dense_above(
        &self,
        query: &[f32],
        principals: &[String],
        limit: usize,
        floor: Option<f32>,
    ) -> Result<Vec<Candidate>> {
        let state = self.state.read();
        self.dense_in(&state, query, principals, limit, None, floor)
    }

    /// [`SegmentIndex::search_dense`] on `state`, among the `allowed` segments if given.
    fn dense_in(
        &self,
        state: &State,
        query: &[f32],
        principals: &[String],
        limit: usize,
        allowed: Option<&IdMapOf<Option<f32>>>,
        floor: Option<f32>,
    ) -> Result<Vec<Candidate>> {
        if principals.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let Some(vectors) = &state.vectors else {
            return Ok(Vec::new());
        };
        if !principals
            .iter()
            .any(|t| state.by_token.contains_key(t.as_str()))
        {
            // Nothing here is readable by the caller: no scan.
            return Ok(Vec::new());
        }
        let visibility = Visibility::new(state, principals);
        // Asked only of rows that could enter the best so far: the filter is exact (nothing
        // invisible is ranked or displaces a visible segment). A row's tag is its record's set,
        // so the permission check reads the list being scanned and a bit of the caller's sets.
        let admitted = vectors.search_above(query, limit, floor, &self.dense, |id, set| {
            visibility.sees_set(set) && allowed.is_none_or(|a| a.contains_key(&id))
        })?;
        let found = admitted
            .into_iter()
            .filter_map(|(score, id)| {
                let (record, ordinal) = state.segment(id)?;
                Some(Candidate {
                    score,
                    vector_id: id,
                    record_id: record.id.clone(),
                    ordinal,
                })
            })
            .collect();
        Ok(best(found, limit))
    }

    /// The text and record of segments named by search: each `(vector id, record id, ordinal)` is
    /// checked again against the current state (it may have changed since the search) and
    /// `None` unless it still names that segment and is visible to `principals`.
    pub fn fetch(
        &self,
        segments: &[(u64, &str, u32)],
        principals: &[String],
    ) -> Result<Vec<Option<(SegmentData, RecordInfo)>>> {
        let state = self.state.read();
        let mut out = Vec::with_capacity(segments.len());
        for &(id, record_id, ordinal) in segments {
            let found = match live_segment(&state, id, record_id, ordinal, principals) {
                Some(record) => self.segment_text(&state.searcher, id)?.map(|text| {
                    (
                        SegmentData {
                            sync_id: self.sync_id.clone(),
                            record_id: record_id.to_string(),
                            ordinal,
                            text,
                            highlights: Vec::new(),
                        },
                        self.record_info(record),
                    )
                }),
                None => None,
            };
            out.push(found);
        }
        Ok(out)
    }

    /// The record of segments named by search, checked as [`SegmentIndex::fetch`] checks them,
    /// without reading their texts.
    pub fn records_of(
        &self,
        segments: &[(u64, &str, u32)],
        principals: &[String],
    ) -> Vec<Option<RecordInfo>> {
        let state = self.state.read();
        segments
            .iter()
            .map(|&(id, record_id, ordinal)| {
                live_segment(&state, id, record_id, ordinal, principals)
                    .map(|record| self.record_info(record))
            })
            .collect()
    }

    /// The record's info and its segments `ordinal - before ..= ordinal + after` (clamped), if the
    /// record has segment `ordinal` and is visible to `principals`.
    pub fn read(
        &self,
        record_id: &str,
        ordinal: u32,
        before: u32,
        after: u32,
        principals: &[String],
    ) -> Result<Option<ReadSegmentsResponse>> {
        let state = self.state.read();
        let Some(record) = state.record(record_id) else {
            return Ok(None);
        };
        let count = record.vector_ids.len() as u32;
        if ordinal >= count || !visible_to(record, principals) {
            return Ok(None);
        }
        let from = ordinal.saturating_sub(before);
        let to = ordinal.saturating_add(after).min(count - 1);
        let mut segments = Vec::with_capacity((to - from + 1) as usize);
        for o in from..=to {
            let text = self
                .segment_text(&state.searcher, record.vector_ids[o as usize])?
                .ok_or_else(|| {
                    IndexError::Corrupt(format!("segment {o} of `{record_id}` is not stored"))
                })?;
            segments.push(SegmentData {
                sync_id: self.sync_id.clone(),
                record_id: record_id.to_string(),
                ordinal: o,
                text,
                highlights: Vec::new(),
            });
        }
        Ok(Some(ReadSegmentsResponse {
            record: self.record_info(record),
            segments,
        }))
    }

    /// Records held and their generations, in id order: the first `limit` ids after `after`.
    pub fn list(&self, after: &str, limit: usize) -> Vec<(String, u64)> {
        let state = self.state.read();
        let mut held: Vec<(&str, u64)> = state
            .records
            .iter()
            .flatten()
            .filter(|r| &*r.id > after)
            .map(|r| (&*r.id, r.generation))
            .collect();
        if held.len() > limit {
            held.select_nth_unstable(limit);
            held.truncate(limit);
        }
        held.sort_unstable();
        held.into_iter()
            .map(|(id, g)| (id.to_string(), g))
            .collect()
    }

    /// Records as they were written (every segment with its text and vector, the field
    /// values, the principals), to copy them to another replica; unknown ids are left out.
    pub fn export(&self, record_ids: &[String]) -> Result<Vec<IndexedRecord>> {
        let state = self.state.read();
        let mut out = Vec::with_capacity(record_ids.len());
        for record_id in record_ids {
            let Some(record) = state.record(record_id) else {
                continue;
            };
            let mut segments = Vec::with_capacity(record.vector_ids.len());
            let mut fields = Vec::new();
            for (ordinal, &id) in record.vector_ids.iter().enumerate() {
                let doc = self.stored(&state.searcher, id)?.ok_or_else(|| {
                    IndexError::Corrupt(format!("segment {ordinal} of `{record_id}` is not stored"))
                })?;
                if ordinal == 0 {
                    fields = self.field_values(&doc);
                }
                segments.push(IndexedSegment {
                    ordinal: ordinal as u32,
                    text: doc
                        .get_first(self.fields.text)
                        .and_then(|v| v.as_str())
                        .unwrap_or_default()
                        .to_string(),
                    vector: decode_vector(
                        doc.get_first(self.fields.vector)
                            .and_then(|v| v.as_bytes())
                            .ok_or_else(|| corrupt("vector"))?,
                    ),
                });
            }
            out.push(IndexedRecord {
                record_id: record.id.to_string(),
                display_name: record.display_name.as_deref().map(str::to_string),
                generation: record.generation,
                principals: record.principals.iter().map(|p| p.to_string()).collect(),
                segments,
                fields,
            });
        }
        Ok(out)
    }

    /// The record fields and declared metadata a stored document holds.
    fn field_values(&self, doc: &TantivyDocument) -> Vec<FieldValue> {
        let mut values = Vec::new();
        for named in &self.fields.named {
            let Some(v) = doc.get_first(named.field) else {
                continue;
            };
            let value = match named.kind {
                FieldKind::Keyword => v.as_str().map(|s| FieldData::Keyword(s.to_string())),
                FieldKind::FullText => v.as_str().map(|s| FieldData::Text(s.to_string())),
                FieldKind::Numeric => v.as_f64().map(FieldData::Number),
                FieldKind::Date => v
                    .as_datetime()
                    .map(|d| FieldData::Date(d.into_timestamp_millis())),
                FieldKind::Bool => v.as_bool().map(FieldData::Flag),
            };
            if let Some(value) = value {
                values.push(FieldValue {
                    name: named.name.clone(),
                    value,
                });
            }
        }
        values
    }

    fn record_info(&self, record: &Record) -> RecordInfo {
        RecordInfo {
            sync_id: self.sync_id.clone(),
            record_id: record.id.to_string(),
            display_name: record.display_name.as_deref().map(str::to_string),
            generation: record.generation,
            segments: record.vector_ids.len() as u32,
        }
    }

    /// The stored text of the live segment with vector id `id`.
    fn segment_text(&self, searcher: &Searcher, id: u64) -> Result<Option<String>> {
        Ok(self.stored(searcher, id)?.map(|doc| {
            doc.get_first(self.fields.text)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        }))
    }

    /// The stored document of the live segment with vector id `id`.
    fn stored(&self, searcher: &Searcher, id: u64) -> Result<Option<TantivyDocument>> {
        let term = Term::from_field_u64(self.fields.id, id);
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            let inverted = segment.inverted_index(self.fields.id)?;
            let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic)?
            else {
                continue;
            };
            let alive = segment.alive_bitset();
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    return Ok(Some(searcher.doc(DocAddress::new(ord as u32, doc))?));
                }
                doc = postings.advance();
            }
        }
        Ok(None)
    }

    /// Writes the dense index to disk if it is older there than in memory (see
    /// [`crate::IntegrationIndex::flush_vectors`]).
    pub fn flush_vectors(&self) -> Result<bool> {
        let _write = self.write_lock.lock();
        let state = self.state.read();
        let Some(vectors) = &state.vectors else {
            return Ok(false);
        };
        if meta_generation(&self.dir) == Some(state.generation) {
            return Ok(false);
        }
        write_vectors(&self.dir, vectors, state.generation)?;
        Ok(true)
    }

    /// Clusters the vector index (again) if it has grown enough ([`Vectors::needs_training`]),
    /// and writes its snapshot. The clustered index is built beside the current one, which serves
    /// searches meanwhile, then swapped in. The caller holds the write lock.
    fn cluster_if_due(&self) -> Result<()> {
        let clustered = {
            let state = self.state.read();
            match &state.vectors {
                Some(vectors) if vectors.needs_training(&self.dense) => {
                    let started = Instant::now();
                    let clustered = vectors.clustered()?;
                    tracing::info!(
                        sync = %self.sync_id,
                        vectors = clustered.len(),
                        lists = clustered.list_count(),
                        ms = started.elapsed().as_millis() as u64,
                        "vector index clustered"
                    );
                    clustered
                }
                _ => return Ok(()),
            }
        };
        let mut state = self.state.write();
        state.vectors = Some(clustered);
        let state = parking_lot::RwLockWriteGuard::downgrade(state);
        if let Some(vectors) = &state.vectors {
            write_vectors(&self.dir, vectors, state.generation)?;
        }
        Ok(())
    }
}

/// Writes the vector index snapshot of `generation` to `dir` ([`VECTORS_FILE`], then
/// `vectors.json`), each file replaced atomically.
fn write_vectors(dir: &Path, vectors: &Vectors, generation: u64) -> Result<()> {
    vectors.write(&dir.join(VECTORS_FILE), generation)?;
    let meta = serde_json::to_vec(&VectorsMeta {
        generation,
        dim: vectors.dim(),
    })
    .map_err(|e| IndexError::Corrupt(e.to_string()))?;
    crate::segment_vectors::replace_file(&dir.join("vectors.json"), |out| {
        std::io::Write::write_all(out, &meta).map_err(IndexError::from)
    })
}

/// The vector index snapshot in `dir`, if it was written at `generation` (an unreadable one is
/// logged and rebuilt by the caller).
fn read_vectors(dir: &Path, generation: u64) -> Option<Vectors> {
    if meta_generation(dir) != Some(generation) {
        return None;
    }
    let path = dir.join(VECTORS_FILE);
    match Vectors::read(&path) {
        // The generation is in the snapshot itself too: a crash between the two files' renames
        // cannot pair a new `vectors.json` with old vectors.
        Ok((vectors, written_at)) if written_at == generation => Some(vectors),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "vector snapshot unreadable; rebuilding it");
            None
        }
    }
}

/// Checks every record of an upsert; `dim` is the index's vector dimension (0: not yet decided,
/// the first vector decides). Returns the dimension of the request's vectors.
fn validate_records(records: &[IndexedRecord], mut dim: usize) -> Result<usize> {
    for (i, record) in records.iter().enumerate() {
        let at = |what: &str| format!("records[{i}].{what}");
        let id = &record.record_id;
        if id.is_empty() || id.len() > MAX_RECORD_ID_BYTES || id.contains('\n') {
            return Err(IndexError::invalid(
                at("recordId"),
                format!(
                    "must be 1 to {MAX_RECORD_ID_BYTES} bytes without a newline, got {} bytes",
                    id.len()
                ),
            ));
        }
        let mut seen = vec![false; record.segments.len()];
        for (j, segment) in record.segments.iter().enumerate() {
            let at = |what: &str| format!("records[{i}].segments[{j}].{what}");
            let ordinal = segment.ordinal as usize;
            if ordinal >= seen.len() || std::mem::replace(&mut seen[ordinal], true) {
                return Err(IndexError::invalid(
                    at("ordinal"),
                    format!(
                        "ordinals of a record's {} segments must be 0 to {} without repeats, got {ordinal}",
                        seen.len(),
                        seen.len().saturating_sub(1)
                    ),
                ));
            }
            let vector = &segment.vector;
            if vector.is_empty() || vector.iter().any(|x| !x.is_finite()) {
                return Err(IndexError::invalid(
                    at("vector"),
                    "must be a non-empty vector of finite numbers",
                ));
            }
            if dim == 0 {
                dim = vector.len();
            } else if vector.len() != dim {
                return Err(IndexError::invalid(
                    at("vector"),
                    format!(
                        "has {} dimensions, the index holds {dim}-d vectors",
                        vector.len()
                    ),
                ));
            }
        }
    }
    Ok(dim)
}

/// The vector id of a segment: [`stable_id`] of `record id \n ordinal`.
pub fn segment_id(record_id: &str, ordinal: u32) -> u64 {
    stable_id(&format!("{record_id}\n{ordinal}"))
}

/// Reads the record metadata of every stored segment of the committed index. The vector index
/// comes from the snapshot in `dir` when it matches the generation and the segments, otherwise it
/// is rebuilt from the stored vectors (read again, only then).
fn load_state(
    searcher: Searcher,
    fields: &SegmentFields,
    generation: u64,
    dir: Option<&Path>,
) -> Result<State> {
    struct Loading {
        display_name: Option<String>,
        generation: u64,
        principals: Vec<String>,
        segments: Vec<(u32, u64)>,
        numbers: Box<[(u16, f64)]>,
    }
    let mut loading: HashMap<String, Loading> = HashMap::new();
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        for doc_id in segment.doc_ids_alive() {
            let doc: TantivyDocument = searcher.doc(DocAddress::new(segment_ord as u32, doc_id))?;
            let u64_of = |field, what| {
                doc.get_first(field)
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| corrupt(what))
            };
            let id = u64_of(fields.id, "id")?;
            let ordinal = u32::try_from(u64_of(fields.ordinal, "ordinal")?)
                .map_err(|_| corrupt("ordinal"))?;
            let record_id = doc
                .get_first(fields.record)
                .and_then(|v| v.as_str())
                .ok_or_else(|| corrupt("record"))?;
            let entry = match loading.entry(record_id.to_string()) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(Loading {
                    display_name: doc
                        .get_first(fields.display_name)
                        .and_then(|v| v.as_str())
                        .map(str::to_string),
                    generation: u64_of(fields.record_generation, "record generation")?,
                    principals: doc
                        .get_all(fields.principals)
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect(),
                    segments: Vec::new(),
                    numbers: numbers_of(
                        fields,
                        fields.named.iter().map(|named| {
                            let value = doc.get_first(named.field);
                            let x = match named.kind {
                                FieldKind::Numeric => value.and_then(|v| v.as_f64()),
                                FieldKind::Date => value
                                    .and_then(|v| v.as_datetime())
                                    .map(|d| d.into_timestamp_millis() as f64),
                                FieldKind::Bool => value
                                    .and_then(|v| v.as_bool())
                                    .map(|b| if b { 1.0 } else { 0.0 }),
                                FieldKind::Keyword | FieldKind::FullText => None,
                            };
                            (named.name.as_str(), x)
                        }),
                    ),
                }),
            };
            entry.segments.push((ordinal, id));
        }
    }
    let mut state = State::empty(searcher, generation)?;
    for (record_id, mut record) in loading {
        record.segments.sort_unstable();
        if record
            .segments
            .iter()
            .enumerate()
            .any(|(i, (ordinal, _))| *ordinal as usize != i)
        {
            return Err(IndexError::Corrupt(format!(
                "record `{record_id}` has segment ordinals with gaps or repeats"
            )));
        }
        let (principals, set) = state.intern(&record.principals);
        state.insert(Record {
            id: Arc::from(record_id.as_str()),
            display_name: record.display_name.map(Box::from),
            generation: record.generation,
            principals,
            set,
            vector_ids: record.segments.iter().map(|(_, id)| *id).collect(),
            numbers: record.numbers,
        });
    }
    let snapshot = dir.and_then(|dir| read_vectors(dir, generation));
    let mut vectors = match snapshot {
        Some(loaded)
            if loaded.len() == state.segment_count()
                && loaded.ids().all(|id| state.segments.contains_key(&id)) =>
        {
            Some(loaded)
        }
        _ => rebuild(&state.searcher, fields)?,
    };
    if let Some(vectors) = vectors.as_mut() {
        vectors.retag(|id| state.segment(id).map(|(record, _)| record.set))?;
    }
    state.vectors = vectors;
    state.refresh_places();
    Ok(state)
}

/// Writes every live stored document of `index` into a new index of `schema` in
/// `dir/tantivy.rebuild`, committed at `generation`: stored values are copied by field name, the
/// analyzed title is taken from the stored display name. Returns the documents written.
fn rebuild_into(dir: &Path, index: &Index, schema: &Schema, generation: u64) -> Result<u64> {
    let next = dir.join("tantivy.rebuild");
    if next.exists() {
        fs::remove_dir_all(&next)?;
    }
    fs::create_dir_all(&next)?;
    let rebuilt = Index::create_in_dir(&next, schema.clone())?;
    rebuilt
        .tokenizers()
        .register(ANALYZER, analyzer::text_analyzer());
    let writer = rebuilt.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)?;
    let old = index.schema();
    let searcher = index.reader()?.searcher();
    let title = schema.get_field("title")?;
    let display_name = old.get_field("display_name")?;
    let mut written = 0u64;
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        for doc_id in segment.doc_ids_alive() {
            let doc: TantivyDocument = searcher.doc(DocAddress::new(segment_ord as u32, doc_id))?;
            let mut copy = TantivyDocument::new();
            for (field, value) in doc.field_values() {
                if let Ok(to) = schema.get_field(old.get_field_name(field)) {
                    copy.add_field_value(to, value);
                }
            }
            let name = doc
                .get_first(display_name)
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            copy.add_text(title, name);
            writer.add_document(copy)?;
            written += 1;
        }
    }
    commit(&rebuilt, writer, generation)?;
    Ok(written)
}

/// A vector index of every live stored vector (one list; clustered afterwards if due).
fn rebuild(searcher: &Searcher, fields: &SegmentFields) -> Result<Option<Vectors>> {
    let mut dim = 0;
    let mut labels: Vec<u64> = Vec::new();
    let mut flat: Vec<f32> = Vec::new();
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        for doc_id in segment.doc_ids_alive() {
            let doc: TantivyDocument = searcher.doc(DocAddress::new(segment_ord as u32, doc_id))?;
            let id = doc
                .get_first(fields.id)
                .and_then(|v| v.as_u64())
                .ok_or_else(|| corrupt("id"))?;
            let vector = decode_vector(
                doc.get_first(fields.vector)
                    .and_then(|v| v.as_bytes())
                    .ok_or_else(|| corrupt("vector"))?,
            );
            if labels.is_empty() {
                dim = vector.len();
            }
            if vector.len() != dim || dim == 0 {
                return Err(IndexError::Corrupt(
                    "stored vectors of different dimensions".into(),
                ));
            }
            labels.push(id);
            flat.extend_from_slice(&vector);
        }
    }
    if labels.is_empty() {
        return Ok(None);
    }
    Ok(Some(Vectors::from_rows(dim, labels, flat)?))
}

fn id_columns(searcher: &Searcher) -> Result<Vec<tantivy::columnar::Column<u64>>> {
    searcher
        .segment_readers()
        .iter()
        .map(|s| Ok(s.fast_fields().u64("id")?))
        .collect()
}

/// The structured part of a query JSON document, parsed against the content fields and the
/// metadata the searched syncs declare.
fn parse_structured(json: &str, declared: &[FieldDecl]) -> Result<Structured> {
    let metadata: Vec<FieldDef> = declared_kinds(declared)?
        .into_iter()
        .map(|(name, kind)| FieldDef {
            name,
            kind,
            description: String::new(),
        })
        .collect();
    Structured::parse(json, &agentsearch_query::Catalog::content(&metadata))
}

type Key = (String, String);

/// Every segment index of a shard, keyed by (project, sync).
pub struct SegmentIndexes {
    root: PathBuf,
    config: ContextConfig,
    indexes: RwLock<HashMap<Key, Arc<SegmentIndex>>>,
}

impl SegmentIndexes {
    /// Opens every index under `root/context/<project>/<sync>`.
    pub fn open(root: &Path, config: ContextConfig) -> Result<Self> {
        let context_dir = root.join("context");
        fs::create_dir_all(&context_dir)?;
        let mut indexes = HashMap::new();
        for project in fs::read_dir(&context_dir)? {
            let project = project?;
            if !project.file_type()?.is_dir() {
                continue;
            }
            let project_id = project.file_name().to_string_lossy().to_string();
            for sync in fs::read_dir(project.path())? {
                let sync = sync?;
                if !sync.file_type()?.is_dir() {
                    continue;
                }
                let sync_id = sync.file_name().to_string_lossy().to_string();
                let index = SegmentIndex::open_with(
                    &sync.path(),
                    &sync_id,
                    &[],
                    DenseConfig::from(&config),
                )?;
                indexes.insert((project_id.clone(), sync_id), Arc::new(index));
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
            config,
            indexes: RwLock::new(indexes),
        })
    }

    /// Number of indexes and of segments held.
    pub fn counts(&self) -> (u64, u64) {
        let indexes = self.indexes.read();
        (
            indexes.len() as u64,
            indexes.values().map(|i| i.len() as u64).sum(),
        )
    }

    /// Sum of the generations of every index (grows with every write).
    pub fn generations(&self) -> u64 {
        self.indexes.read().values().map(|i| i.generation()).sum()
    }

    pub fn get(&self, project: &str, sync: &str) -> Option<Arc<SegmentIndex>> {
        self.indexes
            .read()
            .get(&(project.to_string(), sync.to_string()))
            .cloned()
    }

    /// The index of `sync` in `project`, created empty if it does not exist.
    /// The index of a sync, created (with fields for `declared`) if there is none.
    pub fn get_or_create(
        &self,
        project: &str,
        sync: &str,
        declared: &[(String, FieldKind)],
    ) -> Result<Arc<SegmentIndex>> {
        check_path_component("projectId", project)?;
        check_path_component("syncId", sync)?;
        if let Some(index) = self.get(project, sync) {
            return Ok(index);
        }
        let mut indexes = self.indexes.write();
        let key = (project.to_string(), sync.to_string());
        if let Some(index) = indexes.get(&key) {
            return Ok(index.clone());
        }
        let dir = self.root.join("context").join(project).join(sync);
        let index = Arc::new(SegmentIndex::open_with(
            &dir,
            sync,
            declared,
            DenseConfig::from(&self.config),
        )?);
        indexes.insert(key, index.clone());
        Ok(index)
    }

    pub fn info(&self, project: &str, sync: &str) -> Option<SegmentIndexInfo> {
        self.get(project, sync).map(|i| i.info())
    }

    /// Writes every dense-index snapshot that is older on disk than in memory; returns how many.
    pub fn flush(&self) -> Result<usize> {
        let indexes: Vec<Arc<SegmentIndex>> = self.indexes.read().values().cloned().collect();
        let mut flushed = 0;
        for index in indexes {
            if index.flush_vectors()? {
                flushed += 1;
            }
        }
        Ok(flushed)
    }

    /// Inserts or replaces records in the sync's index (created if needed). Returns the segments
    /// written and the index's new generation.
    pub fn upsert(&self, request: &SegmentUpsertRequest) -> Result<(u64, u64)> {
        check_path_component("projectId", &request.project_id)?;
        check_path_component("syncId", &request.sync_id)?;
        // Checked before an index is created for it; the index checks again under its write lock.
        validate_records(&request.records, 0)?;
        let declared = declared_kinds(&request.fields)?;
        if request.records.is_empty() {
            let generation = self
                .get(&request.project_id, &request.sync_id)
                .map_or(0, |i| i.generation());
            return Ok((0, generation));
        }
        self.get_or_create(&request.project_id, &request.sync_id, &declared)?
            .upsert(&request.records)
    }

    /// Deletes records; returns how many existed and the new generation (0 without an index).
    pub fn delete(&self, request: &RecordDeleteRequest) -> Result<(u64, u64)> {
        check_path_component("projectId", &request.project_id)?;
        check_path_component("syncId", &request.sync_id)?;
        match self.get(&request.project_id, &request.sync_id) {
            Some(index) => index.delete(&request.record_ids),
            None => Ok((0, 0)),
        }
    }

    fn scoped<'a>(
        &self,
        project: &str,
        syncs: impl IntoIterator<Item = &'a str>,
    ) -> Vec<Arc<SegmentIndex>> {
        let indexes = self.indexes.read();
        let mut seen = HashSet::new();
        syncs
            .into_iter()
            .filter(|s| seen.insert(*s))
            .filter_map(|s| indexes.get(&(project.to_string(), s.to_string())).cloned())
            .collect()
    }

    /// BM25 statistics of the query over the named syncs' indexes (unknown syncs are skipped).
    pub fn term_stats(&self, request: &ContextStatsRequest) -> Result<TermStats> {
        let terms = analyzer::analyze(&request.query);
        let scoped = self.scoped(
            &request.project_id,
            request.sync_ids.iter().map(String::as_str),
        );
        Ok(scoped_stats(&scoped, &terms))
    }

    /// The lexical query of `terms` under `stats` with this shard's context weights.
    fn lexical_query(&self, terms: &[String], stats: &TermStats) -> LexicalQuery {
        let c = &self.config;
        LexicalQuery::new(
            terms,
            stats,
            &[
                (SEGMENT_TEXT_FIELDS[0], c.title_weight),
                (SEGMENT_TEXT_FIELDS[1], c.text_weight),
            ],
            c.k1,
            c.b,
        )
    }

    /// Searches the named syncs with both retrievers, each sync only over the segments its scope's
    /// principals may see. An index that fails is reported in `failures` (the sync id in
    /// `integration`) and the others still answer; unknown syncs are skipped.
    pub fn search(&self, request: &ContextSearchRequest) -> ContextSearchResponse {
        let _span = tracing::info_span!("segment_search", syncs = request.syncs.len()).entered();
        let prepare_started = Instant::now();
        let limit = request.limit as usize;
        // One scope per sync; a sync named twice gets the union of its principals.
        let mut principals: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut order: Vec<&str> = Vec::new();
        for scope in &request.syncs {
            let entry = principals.entry(scope.sync_id.as_str()).or_insert_with(|| {
                order.push(scope.sync_id.as_str());
                Vec::new()
            });
            entry.extend(scope.principals.iter().cloned());
        }
        let scoped = self.scoped(&request.project_id, order.iter().copied());
        let structured = match request
            .structured
            .as_deref()
            .map(|json| parse_structured(json, &request.fields))
        {
            None => None,
            Some(Ok(structured)) => Some(structured),
            Some(Err(err)) => {
                return ContextSearchResponse {
                    failures: scoped
                        .iter()
                        .map(|index| PartFailure {
                            integration: index.sync_id().to_string(),
                            retriever: String::new(),
                            message: err.to_string(),
                        })
                        .collect(),
                    // Understood, and refused: not the answer of a shard that predates typed
                    // queries.
                    structured: true,
                    ..ContextSearchResponse::default()
                };
            }
        };
        let terms = if request.lexical {
            analyzer::analyze(&request.query)
        } else {
            Vec::new()
        };
        let lexical = if terms.is_empty() {
            LexicalQuery::default()
        } else {
            match &request.stats {
                Some(stats) => self.lexical_query(&terms, stats),
                None => self.lexical_query(&terms, &scoped_stats(&scoped, &terms)),
            }
        };
        let mut failures = Vec::new();
        let failure = |index: &SegmentIndex, retriever: &str, err: &IndexError| {
            tracing::warn!(sync = index.sync_id(), retriever, error = %err, "segment index search failed");
            PartFailure {
                integration: index.sync_id().to_string(),
                retriever: retriever.to_string(),
                message: err.to_string(),
            }
        };

        let lexical_started = Instant::now();
        let mut lexical_pool: Vec<(usize, Candidate)> = Vec::new();
        let mut lexical_matched = 0u64;
        let mut dense_pool: Vec<(usize, Candidate)> = Vec::new();
        let mut matched: Option<u64> = None;
        // Nodes (or a count) restrict; a document with `q` alone ranks as the plain query does,
        // over postings rather than every segment.
        let restricting = structured
            .as_ref()
            .filter(|s| s.query.is_some() || s.filter.is_some() || s.count_exactly);
        if let Some(structured) = restricting {
            // Both retrievers run per index under one state; timed as lexical.
            let mut buffers = ScoreBuffers::default();
            for (n, index) in scoped.iter().enumerate() {
                let source = request
                    .syncs
                    .iter()
                    .find(|s| s.sync_id == index.sync_id())
                    .map_or("", |s| s.source.as_str());
                let answer = index.search_structured(
                    structured,
                    source,
                    request.lexical.then_some(&lexical),
                    request.vector.as_deref(),
                    &principals[index.sync_id()],
                    limit,
                    &mut buffers,
                );
                let answer = match answer {
                    Ok(answer) => answer,
                    Err(err) => {
                        failures.push(failure(index, "", &err));
                        continue;
                    }
                };
                match answer.lexical {
                    Some(Ok((candidates, m))) => {
                        lexical_matched += m;
                        lexical_pool.extend(candidates.into_iter().map(|c| (n, c)));
                    }
                    Some(Err(err)) => failures.push(failure(index, "lexical", &err)),
                    None => {}
                }
                match answer.dense {
                    Some(Ok(candidates)) => {
                        dense_pool.extend(candidates.into_iter().map(|c| (n, c)));
                    }
                    Some(Err(err)) => failures.push(failure(index, "dense", &err)),
                    None => {}
                }
                if let Some(m) = answer.matched {
                    *matched.get_or_insert(0) += m;
                }
            }
        } else if !lexical.is_empty() {
            let mut buffers = ScoreBuffers::default();
            for (n, index) in scoped.iter().enumerate() {
                let principals = &principals[index.sync_id()];
                match index.search_lexical(&lexical, principals, limit, &mut buffers) {
                    Ok((candidates, matched)) => {
                        lexical_matched += matched;
                        lexical_pool.extend(candidates.into_iter().map(|c| (n, c)));
                    }
                    Err(err) => failures.push(failure(index, "lexical", &err)),
                }
            }
        }
        let dense_started = Instant::now();
        if let Some(vector) = request.vector.as_ref().filter(|_| restricting.is_none()) {
            // Once `limit` segments are pooled, the next syncs look only at what could join them.
            let mut floor: Option<f32> = None;
            let mut scores: Vec<f32> = Vec::new();
            for (n, index) in scoped.iter().enumerate() {
                let principals = &principals[index.sync_id()];
                match index.search_dense_above(vector, principals, limit, floor) {
                    Ok(candidates) => {
                        dense_pool.extend(candidates.into_iter().map(|c| (n, c)));
                        floor = limit_th_best(&dense_pool, limit, &mut scores);
                    }
                    Err(err) => failures.push(failure(index, "dense", &err)),
                }
            }
        }
        let assemble_started = Instant::now();
        let lexical_best = best_pooled(&scoped, lexical_pool, limit);
        let dense_best = best_pooled(&scoped, dense_pool, limit);

        // Fetch each index's winners once, checked again against its current state.
        let mut wanted: Vec<Vec<(u64, Arc<str>, u32)>> = vec![Vec::new(); scoped.len()];
        let mut seen: HashSet<(usize, u64)> = HashSet::new();
        for (n, c) in lexical_best.iter().chain(&dense_best) {
            if seen.insert((*n, c.vector_id)) {
                wanted[*n].push((c.vector_id, c.record_id.clone(), c.ordinal));
            }
        }
        // Highlights are made here, from the texts: a search asking for them gets its texts.
        let highlight = structured.as_ref().is_some_and(|s| s.highlight);
        let texts = !request.defer_texts || highlight;
        // Deferring, the texts of each list's first hits are sent all the same.
        let head: HashSet<(usize, u64)> = if texts {
            HashSet::new()
        } else {
            let n = request.texts_head as usize;
            lexical_best
                .iter()
                .take(n)
                .chain(dense_best.iter().take(n))
                .map(|(n, c)| (*n, c.vector_id))
                .collect()
        };
        let mut fetched: HashSet<(usize, u64)> = HashSet::new();
        let mut segments = Vec::new();
        let mut records = Vec::new();
        let mut seen_records: HashSet<(usize, Arc<str>)> = HashSet::new();
        for (n, want) in wanted.iter().enumerate() {
            if want.is_empty() {
                continue;
            }
            let index = &scoped[n];
            let keys: Vec<(u64, &str, u32)> = want
                .iter()
                .map(|(id, record, ordinal)| (*id, &**record, *ordinal))
                .collect();
            let found: Vec<Option<(Option<SegmentData>, RecordInfo)>> = if texts {
                match index.fetch(&keys, &principals[index.sync_id()]) {
                    Ok(found) => found
                        .into_iter()
                        .map(|f| f.map(|(segment, record)| (Some(segment), record)))
                        .collect(),
                    Err(err) => {
                        failures.push(failure(index, "", &err));
                        continue;
                    }
                }
            } else {
                // Records only, but for the first hits: their texts too, read with their records.
                let principals = &principals[index.sync_id()];
                let mut found: Vec<Option<(Option<SegmentData>, RecordInfo)>> =
                    keys.iter().map(|_| None).collect();
                let (head_at, mut rest_at): (Vec<usize>, Vec<usize>) =
                    (0..keys.len()).partition(|&i| head.contains(&(n, keys[i].0)));
                if !head_at.is_empty() {
                    let head_keys: Vec<(u64, &str, u32)> =
                        head_at.iter().map(|&i| keys[i]).collect();
                    match index.fetch(&head_keys, principals) {
                        Ok(texts) => {
                            for (&i, f) in head_at.iter().zip(texts) {
                                found[i] = f.map(|(segment, record)| (Some(segment), record));
                            }
                        }
                        // The router then fuses without measuring them: not a failure.
                        Err(err) => {
                            tracing::debug!(error = %err, "reading the first hits' texts");
                            rest_at.extend(head_at);
                        }
                    }
                }
                let rest_keys: Vec<(u64, &str, u32)> = rest_at.iter().map(|&i| keys[i]).collect();
                for (&i, f) in rest_at.iter().zip(index.records_of(&rest_keys, principals)) {
                    found[i] = f.map(|record| (None, record));
                }
                found
            };
            for ((id, record_id, _), found) in want.iter().zip(found) {
                let Some((segment, record)) = found else {
                    continue;
                };
                fetched.insert((n, *id));
                segments.extend(segment);
                if seen_records.insert((n, record_id.clone())) {
                    records.push(record);
                }
            }
        }
        let hits = |best: Vec<(usize, Candidate)>| -> Vec<SegmentHit> {
            best.into_iter()
                .filter(|(n, c)| fetched.contains(&(*n, c.vector_id)))
                .map(|(n, c)| SegmentHit {
                    sync_id: scoped[n].sync_id().to_string(),
                    record_id: c.record_id.to_string(),
                    ordinal: c.ordinal,
                    score: c.score,
                })
                .collect()
        };
        let lexical = hits(lexical_best);
        let dense = hits(dense_best);
        if let Some(structured) = structured.as_ref().filter(|_| highlight) {
            let nodes: Vec<&agentsearch_query::Node> =
                structured.query.iter().chain(&structured.filter).collect();
            let highlighter =
                Highlighter::new(&analyzer::analyze(&request.query), &nodes, &["text"]);
            for segment in &mut segments {
                segment.highlights = highlighter.fragments(&segment.text);
            }
        }
        let visible_generation = scoped
            .iter()
            .map(|index| index.visible_generation(&principals[index.sync_id()]))
            .sum();
        ContextSearchResponse {
            lexical,
            dense,
            lexical_matched,
            segments,
            records,
            failures,
            visible_generation,
            timings: ShardTimings {
                prepare_ms: (lexical_started - prepare_started).as_secs_f64() * 1e3,
                lexical_ms: (dense_started - lexical_started).as_secs_f64() * 1e3,
                dense_ms: (assemble_started - dense_started).as_secs_f64() * 1e3,
                assemble_ms: assemble_started.elapsed().as_secs_f64() * 1e3,
            },
            structured: structured.is_some(),
            matched,
        }
    }

    /// The texts of the requested segments that exist (in the record generation named, if one
    /// is) and that the caller's principals in their sync may read, in request order (a segment
    /// of a sync the request gives no principals for is not readable); syncs whose store could
    /// not be read are failures.
    pub fn fetch(&self, request: &SegmentFetchRequest) -> SegmentFetchResponse {
        let mut principals: HashMap<&str, Vec<String>> = HashMap::new();
        for scope in &request.syncs {
            principals
                .entry(scope.sync_id.as_str())
                .or_default()
                .extend(scope.principals.iter().cloned());
        }
        let scoped = self.scoped(
            &request.project_id,
            request.syncs.iter().map(|s| s.sync_id.as_str()),
        );
        let mut found: Vec<Option<SegmentData>> = vec![None; request.segments.len()];
        let mut failures = Vec::new();
        for index in &scoped {
            let positions: Vec<usize> = (0..request.segments.len())
                .filter(|&i| request.segments[i].sync_id == index.sync_id())
                .collect();
            if positions.is_empty() {
                continue;
            }
            let keys: Vec<(u64, &str, u32)> = positions
                .iter()
                .map(|&i| {
                    let s = &request.segments[i];
                    (
                        segment_id(&s.record_id, s.ordinal),
                        s.record_id.as_str(),
                        s.ordinal,
                    )
                })
                .collect();
            match index.fetch(&keys, &principals[index.sync_id()]) {
                Ok(texts) => {
                    for (&i, text) in positions.iter().zip(texts) {
                        let generation = request.segments[i].generation;
                        found[i] = text
                            .filter(|(_, record)| {
                                generation == 0 || record.generation == generation
                            })
                            .map(|(segment, _)| segment);
                    }
                }
                Err(err) => {
                    tracing::warn!(sync = index.sync_id(), error = %err, "reading segment texts failed");
                    failures.push(PartFailure {
                        integration: index.sync_id().to_string(),
                        retriever: String::new(),
                        message: err.to_string(),
                    });
                }
            }
        }
        SegmentFetchResponse {
            segments: found.into_iter().flatten().collect(),
            failures,
        }
    }

    /// A segment and its neighbours, if the record has that segment and `principals` may read it.
    pub fn read(&self, request: &ReadSegmentsRequest) -> Result<Option<ReadSegmentsResponse>> {
        match self.get(&request.project_id, &request.sync_id) {
            Some(index) => index.read(
                &request.record_id,
                request.ordinal,
                request.before,
                request.after,
                &request.principals,
            ),
            None => Ok(None),
        }
    }
}

/// The `limit`-th best score of `pool` (`None` while it holds fewer); `scores` is scratch.
fn limit_th_best(pool: &[(usize, Candidate)], limit: usize, scores: &mut Vec<f32>) -> Option<f32> {
    if limit == 0 || pool.len() < limit {
        return None;
    }
    scores.clear();
    scores.extend(pool.iter().map(|(_, c)| c.score));
    let (_, cut, _) =
        scores.select_nth_unstable_by(limit - 1, |a, b| (b + 0.0).total_cmp(&(a + 0.0)));
    Some(*cut)
}

/// The best `limit` pooled candidates of several indexes in [`segment_hit_order`](agentsearch_common::shard::segment_hit_order).
fn best_pooled(
    scoped: &[Arc<SegmentIndex>],
    mut pool: Vec<(usize, Candidate)>,
    limit: usize,
) -> Vec<(usize, Candidate)> {
    keep_to_cut(&mut pool, limit, |(_, c)| c.score);
    pool.sort_by(|(na, a), (nb, b)| {
        (b.score + 0.0)
            .total_cmp(&(a.score + 0.0))
            .then_with(|| scoped[*na].sync_id().cmp(scoped[*nb].sync_id()))
            .then_with(|| a.record_id.cmp(&b.record_id))
            .then_with(|| a.ordinal.cmp(&b.ordinal))
    });
    pool.truncate(limit);
    pool
}

fn scoped_stats(indexes: &[Arc<SegmentIndex>], terms: &[String]) -> TermStats {
    let mut stats = TermStats::default();
    for index in indexes {
        if let Err(err) = index.add_term_stats(terms, &mut stats) {
            tracing::warn!(sync = index.sync_id(), error = %err, "term statistics failed");
        }
    }
    stats
}

impl Drop for SegmentIndexes {
    fn drop(&mut self) {
        if let Err(err) = self.flush() {
            tracing::warn!(error = %err, "flushing vector snapshots on close failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentsearch_common::shard::{FieldValue, IndexedSegment};

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; 4];
        v[i % 4] = 1.0;
        v
    }

    fn record(id: &str, text: &str, fields: Vec<FieldValue>) -> IndexedRecord {
        IndexedRecord {
            record_id: id.into(),
            display_name: Some(format!("{id} title")),
            generation: 1,
            principals: vec!["anyone".into()],
            segments: vec![IndexedSegment {
                ordinal: 0,
                text: text.into(),
                vector: unit(id.len()),
            }],
            fields,
        }
    }

    fn value(name: &str, value: FieldData) -> FieldValue {
        FieldValue {
            name: name.into(),
            value,
        }
    }

    fn structured(json: serde_json::Value, declared: &[FieldDecl]) -> Structured {
        parse_structured(&json.to_string(), declared).unwrap()
    }

    /// The lexical candidates of a structured query without words, for anyone.
    fn ranked(index: &SegmentIndex, s: &Structured) -> Vec<Candidate> {
        let mut buffers = ScoreBuffers::default();
        let answer = index
            .search_structured(
                s,
                "box",
                Some(&LexicalQuery::default()),
                None,
                &["anyone".to_string()],
                50,
                &mut buffers,
            )
            .unwrap();
        answer.lexical.unwrap().unwrap().0
    }

    fn allowed_ids(index: &SegmentIndex, s: &Structured) -> Vec<String> {
        let candidates = ranked(index, s);
        let mut ids: Vec<String> = candidates.iter().map(|c| c.record_id.to_string()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn record_fields_and_declared_metadata_are_queried_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let declared = vec![
            FieldDecl {
                name: "size".into(),
                kind: "numeric".into(),
            },
            FieldDecl {
                name: "team".into(),
                kind: "keyword".into(),
            },
            FieldDecl {
                name: "done".into(),
                kind: "bool".into(),
            },
        ];
        let kinds = declared_kinds(&declared).unwrap();
        let index = SegmentIndex::open(dir.path(), "s1", &kinds).unwrap();
        let day = 86_400_000;
        index
            .upsert(&[
                record(
                    "a",
                    "quarterly budget review",
                    vec![
                        value("path", FieldData::Keyword("/Finance/2026".into())),
                        value("modifiedAt", FieldData::Date(20_000 * day + 1)),
                        value("size", FieldData::Number(12.5)),
                        value("team", FieldData::Keyword("finance".into())),
                        value("done", FieldData::Flag(true)),
                    ],
                ),
                record(
                    "bb",
                    "budget of the review board",
                    vec![
                        value("path", FieldData::Keyword("/Product".into())),
                        value("modifiedAt", FieldData::Date(20_000 * day)),
                        value("size", FieldData::Number(3.0)),
                    ],
                ),
            ])
            .unwrap();
        let q = |json| allowed_ids(&index, &structured(json, &declared));
        use serde_json::json;
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "prefix", "field": "path", "value": "/Fin"}})),
            ["a"]
        );
        // Millisecond precision: one millisecond apart.
        assert_eq!(
            q(
                json!({"v": 1, "filter": {"type": "range", "field": "modifiedAt",
                                       "gt": "2024-10-04T00:00:00Z"}})
            ),
            ["a"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "range", "field": "size", "gte": 3, "lt": 12.5}})),
            ["bb"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "term", "field": "size", "value": 12.5}})),
            ["a"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "term", "field": "done", "value": true}})),
            ["a"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "exists", "field": "team"}})),
            ["a"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "boolean",
                                       "mustNot": [{"type": "exists", "field": "done"}]}})),
            ["bb"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "phrase", "field": "text",
                                       "terms": ["budget", "review"]}})),
            ["a"]
        );
        assert_eq!(
            q(json!({"v": 1, "filter": {"type": "term", "field": "source", "value": "box"}})),
            ["a", "bb"]
        );
        // A function score over a numeric field orders by it.
        let s = structured(
            json!({"v": 1, "query": {"type": "functionScore",
                "query": {"type": "exists", "field": "size"},
                "functions": [{"type": "fieldValueFactor", "field": "size"}],
                "boostMode": "replace"}}),
            &declared,
        );
        let ranked = ranked(&index, &s);
        assert_eq!(&*ranked[0].record_id, "a");
        assert!((ranked[0].score - 12.5).abs() < 1e-4, "{}", ranked[0].score);

        // Values are checked against the index's fields.
        let err = index
            .upsert(&[record(
                "c",
                "x",
                vec![value("size", FieldData::Keyword("big".into()))],
            )])
            .unwrap_err();
        assert!(matches!(err, IndexError::InvalidArgument { .. }), "{err}");
        let err = index
            .upsert(&[record(
                "c",
                "x",
                vec![value("colour", FieldData::Keyword("red".into()))],
            )])
            .unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        assert_eq!(index.records(), 2);

        // Reopened: the declared fields and the values for function scores are read back.
        drop(index);
        let index = SegmentIndex::open(dir.path(), "s1", &[]).unwrap();
        assert_eq!(index.fields.declared().count(), 3);
        assert_eq!(
            allowed_ids(
                &index,
                &structured(
                    json!({"v": 1, "filter": {"type": "range", "field": "size", "gt": 10}}),
                    &declared
                )
            ),
            ["a"]
        );
    }

    #[test]
    fn an_index_without_positions_or_record_fields_is_rebuilt_on_open() {
        let dir = tempfile::tempdir().unwrap();
        // The schema indexes were written with before record fields and positions.
        let mut builder = Schema::builder();
        let freqs = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let title = builder.add_text_field("title", freqs.clone());
        let text = builder.add_text_field("text", freqs.set_stored());
        let record_f = builder.add_text_field("record", STRING | STORED);
        let id = builder.add_u64_field("id", INDEXED | FAST | STORED);
        let ordinal = builder.add_u64_field("ordinal", STORED);
        let display_name = builder.add_text_field("display_name", STORED);
        let generation = builder.add_u64_field("record_generation", STORED);
        let principals = builder.add_text_field("principals", STORED);
        let vector = builder.add_bytes_field("vector", STORED);
        let (index, _, _) = crate::tool_index::open_tantivy(dir.path(), builder.build()).unwrap();
        let writer = index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY)
            .unwrap();
        let mut doc = TantivyDocument::new();
        doc.add_text(title, "Old plan");
        doc.add_text(text, "the old quarterly plan");
        doc.add_text(record_f, "old");
        doc.add_u64(id, segment_id("old", 0));
        doc.add_u64(ordinal, 0);
        doc.add_text(display_name, "Old plan");
        doc.add_u64(generation, 4);
        doc.add_text(principals, "anyone");
        doc.add_bytes(vector, &encode_vector(&unit(1)));
        writer.add_document(doc).unwrap();
        commit(&index, writer, 9).unwrap();
        drop(index);

        let declared = vec![FieldDecl {
            name: "team".into(),
            kind: "keyword".into(),
        }];
        let reopened =
            SegmentIndex::open(dir.path(), "s1", &declared_kinds(&declared).unwrap()).unwrap();
        assert_eq!((reopened.records(), reopened.generation()), (1, 9));
        assert!(!dir.path().join("tantivy.rebuild").exists());
        let ids = allowed_ids(
            &reopened,
            &structured(
                serde_json::json!({"v": 1, "filter": {"type": "phrase", "field": "title",
                                                      "terms": ["old", "plan"]}}),
                &declared,
            ),
        );
        assert_eq!(ids, ["old"]);
        // New writes carry the new fields.
        reopened
            .upsert(&[record(
                "new",
                "a new plan",
                vec![value("team", FieldData::Keyword("ops".into()))],
            )])
            .unwrap();
        assert_eq!(reopened.records(), 2);
    }

    #[test]
    fn segment_ids_are_stable_and_distinct_per_ordinal() {
        assert_eq!(segment_id("doc-1", 0), segment_id("doc-1", 0));
        assert_ne!(segment_id("doc-1", 0), segment_id("doc-1", 1));
        assert_ne!(segment_id("doc-1", 1), segment_id("doc-11", 0));
        assert!(segment_id("x", 3) < 1 << 62);
    }

    #[test]
    fn best_breaks_ties_by_record_then_ordinal() {
        let c = |score, record: &str, ordinal| Candidate {
            score,
            vector_id: 0,
            record_id: Arc::from(record),
            ordinal,
        };
        let got = best(
            vec![
                c(1.0, "b", 0),
                c(2.0, "z", 0),
                c(1.0, "a", 1),
                c(1.0, "a", 0),
            ],
            3,
        );
        let got: Vec<(&str, u32)> = got.iter().map(|c| (&*c.record_id, c.ordinal)).collect();
        assert_eq!(got, [("z", 0), ("a", 0), ("a", 1)]);
    }
}
