//! The dense side of a segment index: its vectors, held once (with 8-bit codes of them beside),
//! in lists by their nearest k-means
//! centroid (an inverted file). A small index is one list and every search reads all of it; once
//! an index holds more than [`DenseConfig::approximate_above`] vectors it is clustered
//! (`sqrt(2n)` lists for the `n` vectors it holds then, the square root of what it will hold when
//! clustered again, [`list_count_for`]) and a search reads only the [`DenseConfig::probes`] lists
//! whose centroids are nearest the query.
//!
//! Beside its vectors a list holds them as 8-bit codes ([`crate::codes`], a quarter of the
//! bytes), which is what a search reads: the codes bound each row's inner product with the query
//! from both sides, and only the rows whose upper bound reaches the best lower bounds are scored
//! with their vectors, so the result is the vectors' exact best among the lists read.
//!
//! The caller's filter (the permission check, and a typed query's allowed set) is applied while
//! the lists are read, never after a cut: once `limit` rows have been admitted, a row is checked
//! only if it could score at least the lowest of the best so far, so an exact search needs one pass
//! whatever the share of visible rows (a caller who may read few rows has every row read checked).
//! Each row carries a tag beside its id, the owner's number for what the filter decides on (the
//! segment index tags a row with its record's principal set), so that the check of a row reads
//! the list it is scanning rather than a map of every id.
//!
//! Vectors join the list of their nearest centroid as they are written; the centroids are trained
//! again once the index has doubled since they were.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use agentsearch_common::config::ContextConfig;
use faiss::cluster::{Clustering, ClusteringParameters};
use faiss::index::flat::FlatIndexImpl;
use faiss::{ConcurrentIndex, Index as _};

use crate::codes::{self, Candidates, QueryCode, RowCode};
use crate::error::{IndexError, Result};
use crate::tool_index::IdMapOf;
use crate::tool_slice::{check_query_dim, inner_products, keep_best};

/// How the dense side of a segment index is searched (`[context]` settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseConfig {
    /// An index holding more vectors than this is clustered and searched by probing its lists;
    /// up to this, every search compares the query with every vector.
    pub approximate_above: usize,
    /// Lists read per search of a clustered index (all of them if it has fewer).
    pub probes: usize,
}

impl Default for DenseConfig {
    fn default() -> Self {
        Self::from(&ContextConfig::default())
    }
}

impl From<&ContextConfig> for DenseConfig {
    fn from(config: &ContextConfig) -> Self {
        Self {
            approximate_above: config.dense_approximate_above as usize,
            probes: config.dense_probes.max(1) as usize,
        }
    }
}

/// The lists of an index clustered while it holds `n` vectors: `sqrt(2n)`, the square root of
/// what it holds when it is next clustered (once doubled, [`Vectors::needs_training`]). A list
/// then averages at most `sqrt(N)` rows for the `N` vectors the index holds until then; with
/// `sqrt(n)` lists it averaged up to `sqrt(2N)`, and a search reading a fixed number of lists
/// read up to twice the rows by the next clustering, through coarser lists. Just after a
/// clustering, the lists are smaller than `sqrt(n)` would make them, and a search reading as many
/// reads fewer rows (BENCHMARKS.md has the recall of both ends with the default probes).
fn list_count_for(n: usize) -> usize {
    ((2.0 * n as f64).sqrt().round() as usize).clamp(1, 65_536)
}

/// Rows of a clustering sample per centroid.
const SAMPLE_PER_LIST: usize = 64;
/// k-means iterations when centroids are trained.
const TRAIN_ITERATIONS: u32 = 12;
/// Vectors assigned to centroids per call when an index is reorganized.
const ASSIGN_BATCH: usize = 8192;
/// Snapshot file format, first eight bytes.
const MAGIC: &[u8; 8] = b"ASIVF002";
/// The tag of a row read from a snapshot or built from rows, until [`Vectors::retag`]: no
/// owner's number, so a filter deciding by tag admits nothing rather than the wrong rows.
pub(crate) const UNTAGGED: u32 = u32::MAX;

#[derive(Default)]
struct List {
    ids: Vec<u64>,
    /// Each row's tag ([`UNTAGGED`] until [`Vectors::retag`] gives it one).
    tags: Vec<u32>,
    /// `ids.len() x dim`, row-major.
    data: Vec<f32>,
    /// The rows as 8-bit codes (`ids.len() x dim`), what a search scans.
    codes: Vec<i8>,
    /// Each row's scale and error bounds ([`crate::codes`]).
    rows: Vec<RowCode>,
}

impl List {
    /// A list of `ids` with their vectors (`data`, rows of `dim`), encoded.
    fn new(ids: Vec<u64>, data: Vec<f32>, dim: usize) -> Self {
        let mut codes = Vec::with_capacity(data.len());
        let mut rows = Vec::with_capacity(ids.len());
        for row in data.chunks_exact(dim) {
            rows.push(codes::encode(row, &mut codes));
        }
        Self {
            tags: vec![UNTAGGED; ids.len()],
            ids,
            data,
            codes,
            rows,
        }
    }
}

/// See the module documentation.
pub(crate) struct Vectors {
    dim: usize,
    /// One row per list; empty while the index is one list.
    centroids: Vec<f32>,
    /// The centroids as a FAISS inner-product index, for assigning many vectors at once and for
    /// choosing the lists of a query.
    quantizer: Option<FlatIndexImpl>,
    lists: Vec<List>,
    /// Id -> (list, position in it).
    place: IdMapOf<(u32, u32)>,
    /// Vectors held when the centroids were trained (0: never).
    trained_at: usize,
}

impl Vectors {
    pub(crate) fn new(dim: usize) -> Self {
        Self {
            dim,
            centroids: Vec::new(),
            quantizer: None,
            lists: vec![List::default()],
            place: IdMapOf::default(),
            trained_at: 0,
        }
    }

    /// One list holding `ids` with their vectors (`data`, rows of `dim`, kept as they are).
    pub(crate) fn from_rows(dim: usize, ids: Vec<u64>, mut data: Vec<f32>) -> Result<Self> {
        if dim == 0 || ids.len() * dim != data.len() {
            return Err(IndexError::Corrupt("vectors do not match their ids".into()));
        }
        let mut place = IdMapOf::default();
        place.reserve(ids.len());
        for (position, &id) in ids.iter().enumerate() {
            if place.insert(id, (0, position as u32)).is_some() {
                return Err(IndexError::Corrupt(format!(
                    "vector id {id} is stored twice"
                )));
            }
        }
        data.shrink_to_fit();
        Ok(Self {
            dim,
            centroids: Vec::new(),
            quantizer: None,
            lists: vec![List::new(ids, data, dim)],
            place,
            trained_at: 0,
        })
    }

    pub(crate) fn dim(&self) -> usize {
        self.dim
    }

    pub(crate) fn len(&self) -> usize {
        self.place.len()
    }

    /// Lists held (1 until the index is clustered).
    pub(crate) fn list_count(&self) -> usize {
        self.lists.len()
    }

    /// The ids held, in no particular order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.place.keys().copied()
    }

    /// The list each of `flat`'s vectors (rows of `dim`) joins: its nearest centroid's.
    pub(crate) fn assign(&self, flat: &[f32]) -> Result<Vec<u32>> {
        let rows = flat.len() / self.dim.max(1);
        let Some(quantizer) = &self.quantizer else {
            return Ok(vec![0; rows]);
        };
        let mut lists = Vec::with_capacity(rows);
        for batch in flat.chunks(ASSIGN_BATCH * self.dim) {
            let found = quantizer.search(batch, 1)?;
            lists.extend(found.labels.iter().map(|label| {
                label
                    .get()
                    .map_or(0, |l| (l as usize).min(self.lists.len() - 1) as u32)
            }));
        }
        Ok(lists)
    }

    /// Adds each id's vector (rows of `flat`) to its list (`lists`, from [`Vectors::assign`]) with
    /// its tag (`tags`), replacing the vector an id already has.
    /// Refused, with nothing added, unless every id has a vector, a list and a tag.
    pub(crate) fn add(
        &mut self,
        ids: &[u64],
        flat: &[f32],
        lists: &[u32],
        tags: &[u32],
    ) -> Result<()> {
        if ids.len() * self.dim != flat.len() || ids.len() != lists.len() || ids.len() != tags.len()
        {
            return Err(IndexError::Corrupt(
                "vectors added without a vector, list or tag each".into(),
            ));
        }
        for (((&id, row), &list), &tag) in ids
            .iter()
            .zip(flat.chunks_exact(self.dim))
            .zip(lists)
            .zip(tags)
        {
            if self.place.contains_key(&id) {
                self.remove(&[id]);
            }
            let list_no = (list as usize).min(self.lists.len() - 1);
            let list = &mut self.lists[list_no];
            let position = list.ids.len();
            if list.data.capacity() < list.data.len() + self.dim {
                // Grow by an eighth: lists are many and long-lived, doubling would hold up to
                // twice the vectors' memory.
                let extra = (list.data.len() / 8).max(8 * self.dim);
                list.data.reserve_exact(extra);
                list.ids.reserve_exact(extra / self.dim);
                list.tags.reserve_exact(extra / self.dim);
            }
            list.ids.push(id);
            list.tags.push(tag);
            list.data.extend_from_slice(row);
            if list.codes.capacity() < list.codes.len() + self.dim {
                list.codes
                    .reserve_exact(list.data.capacity() - list.codes.len());
                list.rows
                    .reserve_exact(list.ids.capacity() - list.rows.len());
            }
            list.rows.push(codes::encode(row, &mut list.codes));
            self.place.insert(id, (list_no as u32, position as u32));
        }
        Ok(())
    }

    /// Removes the vectors of `ids` (ids not held are ignored).
    pub(crate) fn remove(&mut self, ids: &[u64]) {
        let dim = self.dim;
        for id in ids {
            let Some((list_no, position)) = self.place.remove(id) else {
                continue;
            };
            let list = &mut self.lists[list_no as usize];
            let position = position as usize;
            let last = list.ids.len() - 1;
            if position != last {
                let moved = list.ids[last];
                list.ids[position] = moved;
                list.tags[position] = list.tags[last];
                list.data
                    .copy_within(last * dim..(last + 1) * dim, position * dim);
                list.codes
                    .copy_within(last * dim..(last + 1) * dim, position * dim);
                list.rows[position] = list.rows[last];
                self.place.insert(moved, (list_no, position as u32));
            }
            list.ids.pop();
            list.tags.pop();
            list.data.truncate(last * dim);
            list.codes.truncate(last * dim);
            list.rows.truncate(last);
        }
    }

    /// Gives every row the tag `tag_of` its id (after [`Vectors::read`] or [`Vectors::from_rows`],
    /// whose rows are [`UNTAGGED`]); an id without one is an error and leaves the index unchanged.
    pub(crate) fn retag(&mut self, tag_of: impl Fn(u64) -> Option<u32>) -> Result<()> {
        let mut tags: Vec<Vec<u32>> = Vec::with_capacity(self.lists.len());
        for list in &self.lists {
            let list_tags = list
                .ids
                .iter()
                .map(|&id| {
                    tag_of(id).ok_or_else(|| {
                        IndexError::Corrupt(format!("vector id {id} belongs to no record"))
                    })
                })
                .collect::<Result<_>>()?;
            tags.push(list_tags);
        }
        for (list, tags) in self.lists.iter_mut().zip(tags) {
            list.tags = tags;
        }
        Ok(())
    }

    /// Whether the index should be clustered (again) under `config`: it holds more than
    /// `approximate_above` vectors and at least twice as many as when it last was.
    /// Also once clustered into fewer lists than a clustering makes now (a snapshot written by
    /// an earlier build, whose lists were sized for `n` rather than `2n`).
    pub(crate) fn needs_training(&self, config: &DenseConfig) -> bool {
        let n = self.len();
        let too_few_lists =
            self.trained_at > 0 && self.lists.len() * 10 < list_count_for(self.trained_at) * 9;
        n > config.approximate_above
            && n >= 2
            && (n >= self.trained_at.max(1).saturating_mul(2) || too_few_lists)
    }

    /// [`Vectors::search_above`] without a floor.
    #[cfg(test)]
    pub(crate) fn search(
        &self,
        query: &[f32],
        limit: usize,
        config: &DenseConfig,
        admit: impl FnMut(u64, u32) -> bool,
    ) -> Result<Vec<(f32, u64)>> {
        self.search_above(query, limit, None, config, admit)
    }

    /// The best `limit` rows (at least; ties with the last are kept) that `admit` accepts (asked
    /// with each row's id and tag), as `(score, id)`. Exact (every list read) while the index
    /// holds at most `config.approximate_above` vectors, otherwise over the `config.probes` lists
    /// nearest the query, and further lists, nearest first, until `limit` rows are admitted or
    /// none is left. `admit` is asked only about rows that could enter the best so far (by the
    /// bounds of their codes' products); scores are the vectors' own inner products with the
    /// query.
    ///
    /// With a `floor`, the caller already holds `limit` rows scoring at least that (from other
    /// indexes): rows whose upper bound is below it are not candidates (asked of `admit` only
    /// while fewer than `limit` rows were admitted, to decide the lists read as without a
    /// floor). The same lists are read as without it, and every row of their best `limit` that
    /// scores at least `floor` is in the answer, which may also hold rows below it.
    pub(crate) fn search_above(
        &self,
        query: &[f32],
        limit: usize,
        floor: Option<f32>,
        config: &DenseConfig,
        mut admit: impl FnMut(u64, u32) -> bool,
    ) -> Result<Vec<(f32, u64)>> {
        check_query_dim(query, self.dim)?;
        if let Some(at) = query.iter().position(|x| !x.is_finite()) {
            return Err(IndexError::invalid(
                "vector",
                format!("query vector component {at} is not a finite number"),
            ));
        }
        if limit == 0 || self.place.is_empty() {
            return Ok(Vec::new());
        }
        // Lists nearest the query first; read `probes` of them, and more while fewer than `limit`
        // rows have been admitted (a caller who may read little of the index still gets as many
        // results as it can read, at worst from an exact scan).
        let (order, probes): (Vec<usize>, usize) = match &self.quantizer {
            Some(quantizer) if self.len() > config.approximate_above => {
                let found = quantizer.search(query, self.lists.len())?;
                let mut order: Vec<usize> = found
                    .labels
                    .iter()
                    .filter_map(|l| l.get().map(|l| l as usize))
                    .filter(|&l| l < self.lists.len())
                    .collect();
                if order.len() < self.lists.len() {
                    // Not expected of FAISS; then every list, in its order.
                    order = (0..self.lists.len()).collect();
                }
                (order, config.probes)
            }
            _ => ((0..self.lists.len()).collect(), self.lists.len()),
        };
        // The codes are scanned: a row is a candidate if its upper bound reaches the `limit`-th
        // best lower bound of the rows admitted so far (so every row of the exact best is one,
        // ties included), and only candidates are scored with their vectors.
        let query_code = QueryCode::new(query);
        let floor_bound = floor.unwrap_or(f32::NEG_INFINITY);
        let mut candidates: Candidates<(u32, u32)> = Candidates::default();
        // Admitted rows read, counted up to `limit` whatever their score (below the floor too),
        // so that a floor never changes which lists are read.
        let mut admitted = 0usize;
        let mut products = Vec::new();
        for (read, list_no) in order.into_iter().enumerate() {
            if read >= probes && admitted >= limit {
                break;
            }
            let list = &self.lists[list_no];
            if list.ids.is_empty() {
                continue;
            }
            query_code.products(&list.codes, &list.rows, &mut products);
            for (position, (&product, row)) in products.iter().zip(&list.rows).enumerate() {
                let bounds = query_code.bounds(product, row);
                if bounds.1 >= floor_bound && candidates.takes(bounds.1) {
                    if admit(list.ids[position], list.tags[position]) {
                        admitted += 1;
                        candidates.offer(bounds, (list_no as u32, position as u32), limit);
                    }
                } else if admitted < limit && admit(list.ids[position], list.tags[position]) {
                    admitted += 1;
                }
            }
        }
        let mut scores = Vec::new();
        let mut found: Vec<(f32, u64)> = candidates
            .into_items()
            .filter_map(|(list_no, position)| {
                let list = &self.lists[list_no as usize];
                let at = position as usize * self.dim;
                inner_products(query, &list.data[at..at + self.dim], &mut scores);
                let score = scores[0];
                (!score.is_nan()).then(|| (score, list.ids[position as usize]))
            })
            .collect();
        keep_best(&mut found, limit, |c| c.0);
        Ok(found)
    }

    /// Up to `count` vectors spread evenly over the index, row-major.
    fn sample(&self, count: usize) -> Vec<f32> {
        let n = self.len();
        let step = n.div_ceil(count.max(1)).max(1);
        let mut out = Vec::with_capacity(count.min(n) * self.dim);
        let mut seen = 0usize;
        for list in &self.lists {
            for row in list.data.chunks_exact(self.dim) {
                if seen % step == 0 {
                    out.extend_from_slice(row);
                }
                seen += 1;
            }
        }
        out
    }

    /// The index clustered anew: [`list_count_for`] its `n` vectors (about `sqrt(2n)`) centroids
    /// trained (spherical k-means) on a sample, and every vector moved to its nearest centroid's
    /// list. Built beside `self` (which stays searchable meanwhile); the caller swaps it in.
    pub(crate) fn clustered(&self) -> Result<Vectors> {
        self.clustered_into(list_count_for(self.len()))
    }

    /// [`Vectors::clustered`] into `nlist` lists.
    fn clustered_into(&self, nlist: usize) -> Result<Vectors> {
        let n = self.len();
        let sample = self.sample(nlist * SAMPLE_PER_LIST);
        let centroids = train(self.dim, &sample, nlist)?;
        let mut quantizer = FlatIndexImpl::new_ip(self.dim as u32)?;
        quantizer.add(&centroids)?;
        let mut next = Vectors {
            dim: self.dim,
            lists: (0..centroids.len() / self.dim)
                .map(|_| List::default())
                .collect(),
            centroids,
            quantizer: Some(quantizer),
            place: IdMapOf::default(),
            trained_at: n,
        };
        let assigned: Vec<Vec<u32>> = self
            .lists
            .iter()
            .map(|list| next.assign(&list.data))
            .collect::<Result<_>>()?;
        // Sized once: the lists then hold exactly their vectors.
        let mut sizes = vec![0usize; next.lists.len()];
        for &list in assigned.iter().flatten() {
            sizes[list as usize] += 1;
        }
        for (list, size) in next.lists.iter_mut().zip(sizes) {
            list.ids.reserve_exact(size);
            list.tags.reserve_exact(size);
            list.data.reserve_exact(size * self.dim);
            list.codes.reserve_exact(size * self.dim);
            list.rows.reserve_exact(size);
        }
        next.place.reserve(n);
        for (list, assigned) in self.lists.iter().zip(&assigned) {
            next.add(&list.ids, &list.data, assigned, &list.tags)?;
        }
        Ok(next)
    }

    /// Writes the index to `path` (replaced atomically): the generation it was taken at, the
    /// dimension, the centroids, then every list's ids and vectors, little-endian.
    pub(crate) fn write(&self, path: &Path, generation: u64) -> Result<()> {
        replace_file(path, |out| {
            out.write_all(MAGIC)?;
            out.write_all(&generation.to_le_bytes())?;
            out.write_all(&(self.dim as u64).to_le_bytes())?;
            out.write_all(&(self.trained_at as u64).to_le_bytes())?;
            out.write_all(&((self.centroids.len() / self.dim.max(1)) as u64).to_le_bytes())?;
            write_floats(out, &self.centroids)?;
            out.write_all(&(self.lists.len() as u64).to_le_bytes())?;
            for list in &self.lists {
                out.write_all(&(list.ids.len() as u64).to_le_bytes())?;
                for id in &list.ids {
                    out.write_all(&id.to_le_bytes())?;
                }
                write_floats(out, &list.data)?;
            }
            Ok(())
        })
    }

    /// Reads an index written by [`Vectors::write`], with the generation it was written at.
    pub(crate) fn read(path: &Path) -> Result<(Vectors, u64)> {
        let bytes = fs::read(path)?;
        let mut input = Reader {
            bytes: &bytes,
            at: 0,
        };
        if input.take(8)? != MAGIC {
            return Err(IndexError::Corrupt(format!(
                "{}: not a vector snapshot",
                path.display()
            )));
        }
        let generation = u64::from_le_bytes(input.take(8)?.try_into().unwrap_or([0; 8]));
        let dim = input.count()?;
        if dim == 0 {
            return Err(IndexError::Corrupt("vector snapshot of dimension 0".into()));
        }
        let trained_at = input.count()?;
        let centroid_count = input.count()?;
        let centroids = input.floats(centroid_count.saturating_mul(dim))?;
        let list_count = input.count()?;
        if list_count == 0 || (centroid_count > 0 && centroid_count != list_count) {
            return Err(IndexError::Corrupt(
                "vector snapshot lists do not match".into(),
            ));
        }
        let quantizer = if centroid_count > 0 {
            let mut quantizer = FlatIndexImpl::new_ip(dim as u32)?;
            quantizer.add(&centroids)?;
            Some(quantizer)
        } else {
            None
        };
        // (Counts are checked against the bytes left before anything is sized by them.)
        let mut lists = Vec::with_capacity(list_count.min(input.left() / 8));
        let mut place = IdMapOf::default();
        for list_no in 0..list_count {
            let n = input.count()?;
            let mut ids = Vec::with_capacity(n.min(input.left() / 8));
            for position in 0..n {
                let id = u64::from_le_bytes(input.take(8)?.try_into().unwrap_or([0; 8]));
                if place
                    .insert(id, (list_no as u32, position as u32))
                    .is_some()
                {
                    return Err(IndexError::Corrupt("vector snapshot repeats an id".into()));
                }
                ids.push(id);
            }
            let data = input.floats(n.saturating_mul(dim))?;
            lists.push(List::new(ids, data, dim));
        }
        if input.at != bytes.len() {
            return Err(IndexError::Corrupt(
                "vector snapshot has trailing bytes".into(),
            ));
        }
        let vectors = Vectors {
            dim,
            centroids,
            quantizer,
            lists,
            place,
            trained_at,
        };
        Ok((vectors, generation))
    }
}

/// Spherical k-means (FAISS's, inner product) of `sample` (rows of `dim`) into `k` centroids, or
/// fewer if the sample has fewer rows.
fn train(dim: usize, sample: &[f32], k: usize) -> Result<Vec<f32>> {
    let rows = sample.len() / dim;
    let k = k.min(rows).max(1);
    let mut params = ClusteringParameters::new();
    params.set_niter(TRAIN_ITERATIONS);
    params.set_spherical(true);
    params.set_seed(1234);
    params.set_min_points_per_centroid(1);
    params.set_max_points_per_centroid(SAMPLE_PER_LIST as u32);
    let mut clustering = Clustering::new_with_params(dim as u32, k as u32, &params)?;
    let mut assigner = FlatIndexImpl::new_ip(dim as u32)?;
    clustering.train(sample, &mut assigner)?;
    Ok(clustering.centroids()?.concat())
}

/// Replaces `path` atomically and durably: `write` fills a temporary file beside it, which is
/// synced, renamed over `path`, and the directory synced.
pub(crate) fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<fs::File>) -> Result<()>,
) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut out = BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
        write(&mut out)?;
        out.flush()?;
        out.get_ref().sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn write_floats(out: &mut impl Write, values: &[f32]) -> Result<()> {
    for value in values {
        out.write_all(&value.to_le_bytes())?;
    }
    Ok(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| IndexError::Corrupt("vector snapshot is truncated".into()))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn count(&mut self) -> Result<usize> {
        let value = u64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8]));
        usize::try_from(value).map_err(|_| IndexError::Corrupt("vector snapshot count".into()))
    }

    fn floats(&mut self, n: usize) -> Result<Vec<f32>> {
        let bytes = self.take(
            n.checked_mul(4)
                .ok_or_else(|| IndexError::Corrupt("vector snapshot count".into()))?,
        )?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A deterministic pseudo-random unit vector.
    pub(crate) fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.into_iter().map(|x| x / norm).collect()
    }

    /// Every id's place names a row holding that id, and every row is placed.
    fn check_places(v: &Vectors) {
        let rows: usize = v.lists.iter().map(|l| l.ids.len()).sum();
        assert_eq!(rows, v.place.len());
        for (&id, &(list, position)) in &v.place {
            let list = &v.lists[list as usize];
            assert_eq!(list.ids[position as usize], id);
            assert_eq!(list.data.len(), list.ids.len() * v.dim);
            assert_eq!(list.codes.len(), list.ids.len() * v.dim);
            assert_eq!(list.rows.len(), list.ids.len());
            assert_eq!(list.tags.len(), list.ids.len());
            let mut codes = Vec::new();
            let row = codes::encode(&list.data[position as usize * v.dim..][..v.dim], &mut codes);
            assert_eq!(list.rows[position as usize], row);
            assert_eq!(
                &list.codes[position as usize * v.dim..][..v.dim],
                &codes[..]
            );
        }
    }

    /// The best `limit` admitted rows by a scan of everything, best first, ids breaking ties.
    fn brute_force(
        held: &std::collections::BTreeMap<u64, (Vec<f32>, u32)>,
        query: &[f32],
        limit: usize,
        admit: impl Fn(u64, u32) -> bool,
    ) -> Vec<(f32, u64)> {
        let mut out = Vec::new();
        let mut scores = Vec::new();
        for (&id, (vector, tag)) in held {
            if admit(id, *tag) {
                inner_products(query, vector, &mut scores);
                out.push((scores[0], id));
            }
        }
        sorted(out, limit)
    }

    fn sorted(mut hits: Vec<(f32, u64)>, limit: usize) -> Vec<(f32, u64)> {
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        hits.truncate(limit);
        hits
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<u64>),
        Remove(Vec<u64>),
        Cluster,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => proptest::collection::vec(0u64..300, 1..60).prop_map(Op::Add),
            2 => proptest::collection::vec(0u64..300, 1..40).prop_map(Op::Remove),
            1 => Just(Op::Cluster),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Adds (replacing), removes and reclusterings in any order: an exact search (every list
        /// read) finds what a scan of everything finds, under any filter of ids and tags (a row
        /// keeps the tag it was added with, through removals of others and reclustering).
        #[test]
        fn exact_search_is_a_filtered_scan(
            ops in proptest::collection::vec(op(), 1..12),
            dim in 1usize..40,
            limit in 0usize..30,
            modulus in 1u64..5,
            salt in 0u64..1000,
        ) {
            let mut v = Vectors::new(dim);
            let mut held = std::collections::BTreeMap::new();
            for (step, op) in ops.iter().enumerate() {
                match op {
                    Op::Add(ids) => {
                        let mut ids = ids.clone();
                        ids.sort_unstable();
                        ids.dedup();
                        let flat: Vec<f32> = ids
                            .iter()
                            .flat_map(|&id| unit(id * 31 + step as u64 + salt, dim))
                            .collect();
                        let lists = v.assign(&flat).unwrap();
                        let tags: Vec<u32> =
                            ids.iter().map(|&id| ((id + step as u64) % 5) as u32).collect();
                        v.add(&ids, &flat, &lists, &tags).unwrap();
                        for ((id, row), tag) in ids.iter().zip(flat.chunks_exact(dim)).zip(tags) {
                            held.insert(*id, (row.to_vec(), tag));
                        }
                    }
                    Op::Remove(ids) => {
                        v.remove(ids);
                        for id in ids {
                            held.remove(id);
                        }
                    }
                    Op::Cluster => {
                        if v.len() >= 2 {
                            v = v.clustered().unwrap();
                        }
                    }
                }
                check_places(&v);
            }
            let query = unit(salt + 7, dim);
            let admit = |id: u64, tag: u32| (id % modulus != 0 || modulus == 1) && tag != 0;
            // Exact: everything below the threshold.
            let exact = DenseConfig { approximate_above: usize::MAX, probes: 1 };
            let found = sorted(v.search(&query, limit, &exact, admit).unwrap(), limit);
            prop_assert_eq!(&found, &brute_force(&held, &query, limit, admit));
            // Every list probed is exact too.
            let all = DenseConfig { approximate_above: 0, probes: v.list_count() };
            let found = sorted(v.search(&query, limit, &all, admit).unwrap(), limit);
            prop_assert_eq!(&found, &brute_force(&held, &query, limit, admit));
            // The filter is never asked to let anything else through.
            // Probing one list: only admitted rows, and as many as the caller may read.
            let some = DenseConfig { approximate_above: 0, probes: 1 };
            // (Each comes back with its vector's own score, not its codes' estimate.)
            let probed = v.search(&query, limit, &some, admit).unwrap();
            let mut scores = Vec::new();
            for (score, id) in &probed {
                prop_assert!(held.contains_key(id));
                prop_assert!(admit(*id, held[id].1));
                inner_products(&query, &held[id].0, &mut scores);
                prop_assert_eq!(*score, scores[0]);
            }
            let readable = held.iter().filter(|(id, (_, tag))| admit(**id, *tag)).count();
            prop_assert_eq!(sorted(probed, limit).len(), readable.min(limit));
            // With a floor (a score of the exact best): every row of the best at or above it,
            // whatever else comes back.
            let truth = brute_force(&held, &query, limit, admit);
            if let Some(&(floor, _)) = truth.get(limit / 2) {
                let above = |hits: Vec<(f32, u64)>| -> Vec<(f32, u64)> {
                    hits.into_iter().filter(|h| h.0 >= floor).collect()
                };
                let found = v.search_above(&query, limit, Some(floor), &exact, admit).unwrap();
                prop_assert_eq!(above(sorted(found, limit)), above(truth.clone()));
                // Probing one list, a floor reads the same lists: the same rows above it.
                let without = v.search(&query, limit, &some, admit).unwrap();
                let with = v.search_above(&query, limit, Some(floor), &some, admit).unwrap();
                prop_assert_eq!(above(sorted(with, limit)), above(sorted(without, limit)));
            }
        }
    }

    #[test]
    fn a_snapshot_reads_back_as_written_and_a_damaged_one_is_refused() {
        let dim = 24;
        let ids: Vec<u64> = (0..500).map(|i| i * 7 + 3).collect();
        let flat: Vec<f32> = ids.iter().flat_map(|&id| unit(id, dim)).collect();
        let tag_of = |id: u64| Some((id % 3) as u32);
        let tags: Vec<u32> = ids.iter().map(|&id| (id % 3) as u32).collect();
        let mut v = Vectors::new(dim);
        v.add(&ids, &flat, &vec![0; ids.len()], &tags).unwrap();
        let v = v.clustered().unwrap();
        assert!(v.list_count() > 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.ivf");
        v.write(&path, 17).unwrap();
        let (mut back, generation) = Vectors::read(&path).unwrap();
        assert_eq!(generation, 17);
        // Rows read back are untagged (tags are not stored) until retagged; an id the tagging
        // does not know is refused.
        let config = DenseConfig {
            approximate_above: 0,
            probes: 3,
        };
        let tagged = |_: u64, tag: u32| tag != UNTAGGED;
        assert!(
            back.search(&unit(1, dim), 10, &config, tagged)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            back.retag(|id| (id != 10).then_some(0)),
            Err(IndexError::Corrupt(_))
        ));
        assert!(
            back.search(&unit(1, dim), 10, &config, tagged)
                .unwrap()
                .is_empty()
        );
        back.retag(tag_of).unwrap();
        check_places(&back);
        assert_eq!(back.len(), v.len());
        assert_eq!(back.list_count(), v.list_count());
        assert_eq!(back.centroids, v.centroids);
        assert_eq!(back.trained_at, v.trained_at);
        let odd = |_: u64, tag: u32| tag == 1;
        for seed in 0..20 {
            let query = unit(10_000 + seed, dim);
            let found = sorted(v.search(&query, 10, &config, odd).unwrap(), 10);
            assert!(!found.is_empty());
            assert_eq!(
                found,
                sorted(back.search(&query, 10, &config, odd).unwrap(), 10)
            );
        }
        // A new vector joins the list of its nearest centroid in the copy as in the original.
        let extra = unit(99_999, dim);
        assert_eq!(v.assign(&extra).unwrap(), back.assign(&extra).unwrap());

        let bytes = fs::read(&path).unwrap();
        for cut in [0, 7, 8, 30, bytes.len() / 2, bytes.len() - 1] {
            fs::write(&path, &bytes[..cut]).unwrap();
            assert!(
                matches!(Vectors::read(&path), Err(IndexError::Corrupt(_))),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        fs::write(&path, &longer).unwrap();
        assert!(matches!(Vectors::read(&path), Err(IndexError::Corrupt(_))));
        let mut wrong = bytes;
        wrong[0] = b'X';
        fs::write(&path, &wrong).unwrap();
        assert!(matches!(Vectors::read(&path), Err(IndexError::Corrupt(_))));
    }

    #[test]
    fn training_is_due_past_the_threshold_and_again_once_doubled() {
        let dim = 8;
        let config = DenseConfig {
            approximate_above: 100,
            probes: 4,
        };
        let mut v = Vectors::new(dim);
        let add = |v: &mut Vectors, from: u64, to: u64| {
            let ids: Vec<u64> = (from..to).collect();
            let flat: Vec<f32> = ids.iter().flat_map(|&id| unit(id, dim)).collect();
            let lists = v.assign(&flat).unwrap();
            v.add(&ids, &flat, &lists, &vec![0; ids.len()]).unwrap();
        };
        add(&mut v, 0, 100);
        assert!(!v.needs_training(&config));
        add(&mut v, 100, 101);
        assert!(v.needs_training(&config));
        v = v.clustered().unwrap();
        assert_eq!(v.list_count(), 14);
        assert!(!v.needs_training(&config));
        add(&mut v, 101, 201);
        assert!(!v.needs_training(&config));
        add(&mut v, 201, 202);
        assert!(v.needs_training(&config));
        check_places(&v);
        // Lists sized for `n` (an earlier build's snapshot) are clustered again at once.
        let old = v
            .clustered_into((v.len() as f64).sqrt().round() as usize)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors.ivf");
        old.write(&path, 1).unwrap();
        let back = Vectors::read(&path).unwrap().0;
        assert_eq!(back.list_count(), 14);
        assert!(back.needs_training(&config));
        let again = back.clustered().unwrap();
        assert_eq!(again.list_count(), 20);
        assert!(!again.needs_training(&config));
    }

    /// Gaussian noise of `dim` components with standard deviation `sd` (Box-Muller).
    fn gaussian(
        rng: &mut agentsearch_common::splitmix::SplitMix64,
        dim: usize,
        sd: f64,
    ) -> Vec<f32> {
        (0..dim)
            .map(|_| {
                let (u, v) = (rng.unit().max(1e-300), rng.unit());
                (sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            })
            .collect()
    }

    fn normalised(v: Vec<f32>) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.into_iter().map(|x| x / norm).collect()
    }

    /// Vectors clustered loosely around topics (each a topic's centroid plus Gaussian noise of
    /// about its norm, as the load driver's context set has them) and queries in random
    /// directions, the hard case for an inverted file (no list holds a query's answers): with half
    /// the rows filtered out, the default probes find at least 95% of the exact best 10.
    #[test]
    fn probing_recalls_the_exact_best_of_clustered_vectors() {
        use agentsearch_common::splitmix::SplitMix64;
        let dim = 384;
        let mut rng = SplitMix64(42);
        let topics: Vec<Vec<f32>> = (0..256)
            .map(|_| normalised(gaussian(&mut rng, dim, 1.0)))
            .collect();
        let n = 60_000u64;
        let ids: Vec<u64> = (0..n).collect();
        let mut flat = Vec::with_capacity(n as usize * dim);
        for _ in 0..n {
            let topic = &topics[(rng.next_u64() % 256) as usize];
            let noise = gaussian(&mut rng, dim, 0.06);
            flat.extend(normalised(
                topic.iter().zip(&noise).map(|(t, e)| t + e).collect(),
            ));
        }
        let config = DenseConfig::default();
        let v = Vectors::from_rows(dim, ids, flat).unwrap();
        assert!(v.needs_training(&config));
        let v = v.clustered().unwrap();
        let exact = DenseConfig {
            approximate_above: usize::MAX,
            probes: 1,
        };
        let admit = |id: u64, _: u32| id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 63 == 0;
        let (mut found, mut wanted) = (0usize, 0usize);
        for _ in 0..50 {
            let query = normalised(gaussian(&mut rng, dim, 1.0));
            let truth = sorted(v.search(&query, 100, &exact, admit).unwrap(), 10);
            let probed = sorted(v.search(&query, 100, &config, admit).unwrap(), 10);
            wanted += truth.len();
            found += probed.iter().filter(|hit| truth.contains(hit)).count();
        }
        let recall = found as f64 / wanted as f64;
        eprintln!("recall@10 {recall}");
        assert!(recall >= 0.95, "recall@10 {recall}");
    }
}
