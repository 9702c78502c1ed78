//! Vectors as 8-bit codes, for scanning many rows with a quarter of the bytes of `f32`: each row
//! is scaled by its own largest magnitude (`code = round(x / scale)`, `scale = max |x| / 127`), so
//! `scale_q * scale_r * (codes_q . codes_r)` approximates `q . r`. With each row's error norm
//! beside its codes, a scan of the codes also bounds every row's exact inner product from both
//! sides ([`QueryCode::bounds`]), so a search can find the exact best rows by rescoring with their
//! `f32` vectors only the rows whose upper bound reaches the best lower bounds.

use crate::tool_slice::Bounded;

/// Largest code magnitude (-128 is never used, so a code's sign can be moved to the other side
/// of a product).
const MAX_CODE: f32 = 127.0;

/// What a row's codes need beside them: its scale, and the norms that bound their error.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RowCode {
    pub(crate) scale: f32,
    /// `|r - scale * codes|` (infinite for a row that is not finite).
    pub(crate) error: f32,
    /// `|r|` (0 for a row that is not finite).
    pub(crate) norm: f32,
    /// The sum of the row's codes (for products taken against the query's codes offset by 128).
    pub(crate) sum: i32,
}

/// A row (or query) whose largest magnitude is outside this range has no useful bounds (its
/// products are always scored with the vectors): inside it, nothing the bounds compute can
/// overflow, nor lose to underflow more than the rounding allowance covers.
const CODED_MAGNITUDES: std::ops::RangeInclusive<f32> = 1e-15..=1e15;

/// Appends `x`'s codes to `out` and returns their scale and the norms of `x` and of its error.
/// A row of zeros has scale 0 and codes 0; a row with a component that is not finite, or whose
/// magnitude is out of [`CODED_MAGNITUDES`], has codes 0 and an infinite error (its bounds are
/// unbounded: nothing is known of its products).
pub(crate) fn encode(x: &[f32], out: &mut Vec<i8>) -> RowCode {
    let largest = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if !largest.is_finite()
        || x.iter().any(|v| v.is_nan())
        || (largest != 0.0 && !CODED_MAGNITUDES.contains(&largest))
    {
        out.extend(std::iter::repeat_n(0, x.len()));
        return RowCode {
            scale: 0.0,
            error: f32::INFINITY,
            norm: 0.0,
            sum: 0,
        };
    }
    if largest == 0.0 {
        out.extend(std::iter::repeat_n(0, x.len()));
        return RowCode::default();
    }
    let scale = largest / MAX_CODE;
    let (mut error, mut norm, mut sum) = (0.0f64, 0.0f64, 0i32);
    out.extend(x.iter().map(|&v| {
        let code = (v / scale).round().clamp(-MAX_CODE, MAX_CODE);
        let e = f64::from(v) - f64::from(code) * f64::from(scale);
        error += e * e;
        norm += f64::from(v) * f64::from(v);
        sum += code as i32;
        code as i8
    }));
    RowCode {
        scale,
        error: error.sqrt() as f32,
        norm: norm.sqrt() as f32,
        sum,
    }
}

/// A query's codes, as each kernel reads them, with what bounds the error of its products with
/// rows' codes.
pub(crate) struct QueryCode {
    codes: Vec<i8>,
    /// `|codes|`, for the AVX2 kernel.
    magnitudes: Vec<i8>,
    /// `codes + 128`, for the VNNI kernel.
    shifted: Vec<u8>,
    kernel: Kernel,
    row: RowCode,
    /// Allowance for the rounding of `f32` arithmetic (the products, the exact scores the bounds
    /// are compared with, the norms), per unit of a row's norm.
    slack: f32,
}

impl QueryCode {
    pub(crate) fn new(query: &[f32]) -> Self {
        let mut codes = Vec::with_capacity(query.len());
        let row = encode(query, &mut codes);
        Self::from_codes(codes, row)
    }

    fn from_codes(codes: Vec<i8>, row: RowCode) -> Self {
        let slack = row.norm * (1e-4 + 2.4e-7 * codes.len() as f32);
        Self {
            magnitudes: codes.iter().map(|c| c.wrapping_abs()).collect(),
            shifted: codes.iter().map(|&c| (i16::from(c) + 128) as u8).collect(),
            codes,
            kernel: Kernel::chosen(),
            row,
            slack,
        }
    }

    /// `out[r] = codes . codes[r]` in exact integer arithmetic, for every row of `codes` (rows of
    /// the query's dimension, described by `rows`), on the process's [`Kernel`].
    pub(crate) fn products(&self, codes: &[i8], rows: &[RowCode], out: &mut Vec<i32>) {
        out.clear();
        if self.codes.is_empty() {
            return;
        }
        out.reserve(codes.len() / self.codes.len());
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            // SAFETY: `Kernel::chosen` gives `Vnni` only where the CPU has AVX-512F, BW and VNNI,
            // the features the function is compiled with.
            Kernel::Vnni => unsafe { products_vnni(&self.codes, &self.shifted, codes, rows, out) },
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            // SAFETY: `Kernel::chosen` gives `Avx2` only where the CPU has AVX2, the only feature
            // the function is compiled with.
            Kernel::Avx2 => unsafe { products_avx2(&self.codes, &self.magnitudes, codes, out) },
            _ => products_plain(&self.codes, codes, out),
        }
    }

    /// Lower and upper bounds of the query's inner product with a row, from the product of their
    /// codes (`product`, [`QueryCode::products`]) and the row's [`RowCode`]. With `q = q' + e_q` and
    /// `r = r' + e_r` (codes times scale, plus error): `q.r - q'.r' = q.e_r + e_q.r'`, at most
    /// `|q| |e_r| + |e_q| (|r| + |e_r|)` in magnitude.
    /// A row or query without codes ([`encode`]) is bounded by the infinities.
    #[inline]
    pub(crate) fn bounds(&self, product: i32, row: &RowCode) -> (f32, f32) {
        if row.error == f32::INFINITY || self.row.error == f32::INFINITY {
            return (f32::NEG_INFINITY, f32::INFINITY);
        }
        let estimate = product as f32 * (row.scale * self.row.scale);
        let bound = self.row.norm * row.error
            + self.row.error * (row.norm + row.error)
            + self.slack * row.norm;
        (estimate - bound, estimate + bound)
    }
}

/// Rows found by their bounds ([`QueryCode::bounds`]) that may be among the best `limit`: every
/// row whose upper bound reaches the `limit`-th best lower bound offered, which holds every row of
/// the exact best (ties included), to be scored again with its vector.
pub(crate) struct Candidates<T> {
    lower: Bounded<()>,
    items: Vec<(f32, T)>,
    compact_at: usize,
}

impl<T> Default for Candidates<T> {
    fn default() -> Self {
        Self {
            lower: Bounded::default(),
            items: Vec::new(),
            compact_at: 0,
        }
    }
}

impl<T> Candidates<T> {
    /// Whether a row with upper bound `high` may be among the best (checked before a costly
    /// admission test).
    #[inline]
    pub(crate) fn takes(&self, high: f32) -> bool {
        self.lower.takes(high)
    }

    /// Offers a row with bounds `(low, high)`.
    #[inline]
    pub(crate) fn offer(&mut self, (low, high): (f32, f32), item: T, limit: usize) {
        if !self.lower.takes(high) {
            return;
        }
        self.lower.offer(low, (), limit);
        self.items.push((high, item));
        if self.items.len() >= self.compact_at.max(4 * limit.max(64)) {
            let floor = self.lower.floor();
            self.items.retain(|c| c.0 >= floor);
            self.compact_at = 2 * self.items.len();
        }
    }

    /// The rows that may be among the best `limit` offered, in no order.
    pub(crate) fn into_items(self) -> impl Iterator<Item = T> {
        let floor = self.lower.floor();
        self.items
            .into_iter()
            .filter(move |c| c.0 >= floor)
            .map(|c| c.1)
    }
}

/// The product of codes this process runs: with 512-bit multiply-accumulates of bytes (AVX-512
/// VNNI) where the CPU has them, else 256-bit integer products where it has AVX2, unless the
/// process's build ([`agentsearch_common::simd::build`]) is the portable one. Decided once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Portable,
    Avx2,
    Vnni,
}

impl Kernel {
    fn chosen() -> Kernel {
        static CHOSEN: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                use agentsearch_common::simd::{Build, build};
                if build() == Build::Avx512
                    && std::is_x86_feature_detected!("avx512bw")
                    && std::is_x86_feature_detected!("avx512vnni")
                {
                    return Kernel::Vnni;
                }
                if build() != Build::Portable && std::is_x86_feature_detected!("avx2") {
                    return Kernel::Avx2;
                }
            }
            Kernel::Portable
        })
    }
}

/// [`QueryCode::products`] with AVX-512 VNNI: 64 codes per instruction, the query's offset by 128
/// to make them unsigned (`shifted`: `(q + 128) . r = q . r + 128 sum(r)`, the row's sum kept in
/// its [`RowCode`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn products_vnni(query: &[i8], shifted: &[u8], codes: &[i8], rows: &[RowCode], out: &mut Vec<i32>) {
    use std::arch::x86_64::{
        __m512i, _mm512_add_epi32, _mm512_dpbusd_epi32, _mm512_loadu_si512,
        _mm512_reduce_add_epi32, _mm512_setzero_si512,
    };
    const STEP: usize = 64;
    let dim = query.len();
    let split = dim - dim % STEP;
    let load = |values: &[u8], at: usize| -> __m512i {
        let lanes: &[u8; STEP] = values[at..at + STEP].try_into().unwrap_or(&[0; STEP]);
        #[allow(unsafe_code)]
        // SAFETY: `lanes` is 64 readable bytes; the load has no alignment requirement.
        unsafe {
            _mm512_loadu_si512(lanes.as_ptr().cast())
        }
    };
    let steps = split / STEP;
    for (row, code) in codes.chunks_exact(dim).zip(rows) {
        #[allow(unsafe_code)]
        // SAFETY: `i8` and `u8` have the same layout; the codes are only loaded as bytes.
        let bytes: &[u8] = unsafe { std::slice::from_raw_parts(row.as_ptr().cast(), row.len()) };
        let (mut even, mut odd) = (_mm512_setzero_si512(), _mm512_setzero_si512());
        let mut k = 0;
        while k + 1 < steps {
            let (at, next) = (k * STEP, (k + 1) * STEP);
            even = _mm512_dpbusd_epi32(even, load(shifted, at), load(bytes, at));
            odd = _mm512_dpbusd_epi32(odd, load(shifted, next), load(bytes, next));
            k += 2;
        }
        if k < steps {
            let at = k * STEP;
            even = _mm512_dpbusd_epi32(even, load(shifted, at), load(bytes, at));
        }
        let rest: i32 = query[split..]
            .iter()
            .zip(&row[split..])
            .map(|(&a, &b)| i32::from(a) * i32::from(b))
            .sum();
        // The sum over the steps only: the rest was multiplied without the offset.
        let offset: i32 = row[split..].iter().map(|&b| i32::from(b)).sum();
        // (Wrapping as the instructions do: the result is exact while it fits in 32 bits, up to
        // about 133,000 dimensions; the router takes query vectors of at most 4,096.)
        out.push(
            _mm512_reduce_add_epi32(_mm512_add_epi32(even, odd))
                .wrapping_sub(128i32.wrapping_mul(code.sum - offset))
                .wrapping_add(rest),
        );
    }
}

/// [`QueryCode::products`] on 256-bit registers: 32 codes per step, multiplied in pairs into
/// 16-bit sums (`|q| * (r with q's sign)`, `magnitudes` being `|q|`: at most 2 x 127 x 127, no
/// saturation) and widened to 32 bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn products_avx2(query: &[i8], magnitudes: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    use std::arch::x86_64::{
        __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_shuffle_epi32, _mm256_add_epi32,
        _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_madd_epi16,
        _mm256_maddubs_epi16, _mm256_set1_epi16, _mm256_setzero_si256, _mm256_sign_epi8,
    };
    const STEP: usize = 32;
    let dim = query.len();
    let split = dim - dim % STEP;
    let load = |values: &[i8], at: usize| -> __m256i {
        let lanes: &[i8; STEP] = values[at..at + STEP].try_into().unwrap_or(&[0; STEP]);
        #[allow(unsafe_code)]
        // SAFETY: `lanes` is 32 readable bytes; the load has no alignment requirement.
        unsafe {
            _mm256_loadu_si256(lanes.as_ptr().cast())
        }
    };
    let ones = _mm256_set1_epi16(1);
    for row in codes.chunks_exact(dim) {
        let mut acc = _mm256_setzero_si256();
        for at in (0..split).step_by(STEP) {
            let r = _mm256_sign_epi8(load(row, at), load(query, at));
            let pairs = _mm256_maddubs_epi16(load(magnitudes, at), r);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
        }
        let half = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        let quarter = _mm_add_epi32(half, _mm_shuffle_epi32::<0b01_00_11_10>(half));
        let total = _mm_cvtsi128_si32(_mm_add_epi32(
            quarter,
            _mm_shuffle_epi32::<0b10_11_00_01>(quarter),
        ));
        let rest: i32 = query[split..]
            .iter()
            .zip(&row[split..])
            .map(|(&a, &b)| i32::from(a) * i32::from(b))
            .sum();
        out.push(total + rest);
    }
}

/// The portable [`QueryCode::products`].
fn products_plain(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    for row in codes.chunks_exact(query.len()) {
        out.push(
            query
                .iter()
                .zip(row)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum(),
        );
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn reference(query: &[i8], codes: &[i8]) -> Vec<i32> {
        codes
            .chunks_exact(query.len())
            .map(|row| {
                row.iter()
                    .zip(query)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum()
            })
            .collect()
    }

    proptest! {
        /// Every build the CPU runs gives the exact integer products, whatever the dimension
        /// (steps of 32 and a remainder) and the codes (both extremes included).
        #[test]
        fn code_products_are_exact(
            dim in 1usize..200,
            rows in 0usize..6,
            seed in any::<u64>(),
        ) {
            let mut state = seed | 1;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                match state % 7 {
                    0 => 127,
                    1 => -127,
                    _ => (((state >> 20) % 255) as i32 - 127) as i8,
                }
            };
            let query: Vec<i8> = (0..dim).map(|_| next()).collect();
            let codes: Vec<i8> = (0..dim * rows).map(|_| next()).collect();
            let expected = reference(&query, &codes);
            let rows: Vec<RowCode> = codes
                .chunks_exact(dim)
                .map(|row| RowCode { sum: row.iter().map(|&c| i32::from(c)).sum(), ..RowCode::default() })
                .collect();
            let coded = QueryCode::from_codes(query.clone(), RowCode::default());
            let mut got = Vec::new();
            coded.products(&codes, &rows, &mut got);
            prop_assert_eq!(&got, &expected);
            let mut plain = Vec::new();
            products_plain(&query, &codes, &mut plain);
            prop_assert_eq!(&plain, &expected);
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                let mut wide = Vec::new();
                #[allow(unsafe_code)]
                // SAFETY: the CPU has AVX2, checked just above.
                unsafe { products_avx2(&query, &coded.magnitudes, &codes, &mut wide) };
                prop_assert_eq!(&wide, &expected);
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vnni")
            {
                let mut wide = Vec::new();
                #[allow(unsafe_code)]
                // SAFETY: the CPU has AVX-512F, BW and VNNI, checked just above.
                unsafe { products_vnni(&query, &coded.shifted, &codes, &rows, &mut wide) };
                prop_assert_eq!(&wide, &expected);
            }
        }

        /// Decoded, a row is within half a step of its scale of the original, and the exact
        /// inner product of two vectors (as the shard computes it, in `f32`) lies within the
        /// bounds found from their codes, whatever their shape (unit, long, sparse, one large
        /// component, along the query's own error).
        #[test]
        fn the_bounds_hold_the_exact_inner_product(
            a in prop::collection::vec(-1.0f32..1.0, 1..400),
            b_seed in any::<u64>(),
            shape in 0u8..5,
            scale in prop::sample::select(vec![1e-3f32, 1.0, 37.0]),
        ) {
            let dim = a.len();
            let mut b = crate::segment_vectors::tests::unit(b_seed, dim);
            match shape {
                0 => {}
                1 => b.iter_mut().step_by(3).for_each(|x| *x = 0.0),
                2 => b[dim / 2] = 50.0,
                3 => b.iter_mut().for_each(|x| *x *= scale),
                _ => {
                    // The query's own rounding error: where the query's codes are furthest off.
                    let mut codes = Vec::new();
                    let row = encode(&a, &mut codes);
                    b = a.iter().zip(&codes).map(|(x, &c)| x - f32::from(c) * row.scale).collect();
                }
            }
            let (mut ca, mut cb) = (Vec::new(), Vec::new());
            let ra = encode(&a, &mut ca);
            let rb = encode(&b, &mut cb);
            for (x, &c) in a.iter().zip(&ca) {
                prop_assert!((x - f32::from(c) * ra.scale).abs() <= 0.5 * ra.scale + 1e-7);
            }
            let query = QueryCode::new(&a);
            prop_assert_eq!(&query.codes, &ca);
            let mut product = Vec::new();
            query.products(&cb, &[rb], &mut product);
            let mut exact = Vec::new();
            crate::tool_slice::inner_products(&a, &b, &mut exact);
            let (low, high) = query.bounds(product[0], &rb);
            prop_assert!(low <= exact[0] && exact[0] <= high, "{} <= {} <= {}", low, exact[0], high);
        }
    }

    /// For unit vectors of 384 dimensions, the bounds are a few hundredths apart.
    #[test]
    fn the_bounds_of_unit_vectors_are_close() {
        use crate::segment_vectors::tests::unit;
        let (a, b) = (unit(1, 384), unit(2, 384));
        let query = QueryCode::new(&a);
        let mut codes = Vec::new();
        let row = encode(&b, &mut codes);
        let mut product = Vec::new();
        query.products(&codes, &[row], &mut product);
        let (low, high) = query.bounds(product[0], &row);
        assert!(high - low < 0.05, "{low} .. {high}");
    }

    /// Rows and queries far from unit length, or not finite: the bounds still hold the `f32`
    /// score (here unbounded, so such a row is always scored with its vector).
    #[test]
    fn extreme_rows_and_queries_are_bounded() {
        let dim = 384;
        let unit = crate::segment_vectors::tests::unit(5, dim);
        let scaled = |by: f32| unit.iter().map(|x| x * by).collect::<Vec<f32>>();
        let mut tiny_one = vec![0.0f32; dim];
        tiny_one[3] = 1e-44;
        let mut not_finite = unit.clone();
        not_finite[7] = f32::INFINITY;
        let rows = [
            tiny_one.clone(),
            scaled(3e-23),
            scaled(1e18),
            scaled(1e-14),
            scaled(1e14),
            not_finite,
            vec![0.0; dim],
        ];
        let queries = [
            unit.clone(),
            scaled(3e-23),
            scaled(1e18),
            tiny_one,
            vec![0.0; dim],
        ];
        let mut exact = Vec::new();
        let mut product = Vec::new();
        for query in &queries {
            let coded = QueryCode::new(query);
            for row in &rows {
                let mut codes = Vec::new();
                let code = encode(row, &mut codes);
                coded.products(&codes, &[code], &mut product);
                crate::tool_slice::inner_products(query, row, &mut exact);
                let (low, high) = coded.bounds(product[0], &code);
                if exact[0].is_nan() {
                    assert_eq!((low, high), (f32::NEG_INFINITY, f32::INFINITY));
                } else {
                    assert!(
                        low <= exact[0] && exact[0] <= high,
                        "{low} <= {} <= {high}",
                        exact[0]
                    );
                }
            }
        }
    }

    #[test]
    fn a_row_of_zeros_or_of_non_finite_values_encodes_to_zeros() {
        let mut out = Vec::new();
        assert_eq!(encode(&[0.0; 5], &mut out), RowCode::default());
        assert_eq!(out, vec![0; 5]);
        out.clear();
        let row = encode(&[2.0, -1.0, 0.5], &mut out);
        assert_eq!(row.scale, 2.0 / 127.0);
        assert_eq!(out, vec![127, -64, 32]);
        out.clear();
        let row = encode(&[f32::NAN, 2.0, f32::INFINITY], &mut out);
        assert_eq!(out, vec![0, 0, 0]);
        assert_eq!(row.error, f32::INFINITY);
    }
}
