//! The f32 kernels of the encoder's forward pass: a matrix product against weights packed once at
//! load ([`Linear`]), attention over one text's rows, layer normalisation and GELU.
//!
//! Every kernel is written once, generic over how a multiply-add is done ([`Mad`]), and compiled
//! three times, the build chosen at run time ([`agentsearch_common::simd::build`]): with
//! 512-bit vectors for CPUs that have AVX-512, with fused multiply-adds on 256-bit vectors for CPUs
//! that have AVX and FMA, and plainly for the rest. The matrix product, which attention uses too,
//! is hand-written for the first two ([`wide`], [`narrow`]; the 256-bit one needs F16C too, and
//! without it the portable tiles run). Loops keep independent accumulators in fixed-size arrays so
//! the compiler turns them into vector instructions; nothing here needs a reordering of
//! floating-point sums that the compiler would not do on its own.

/// Columns of one packed weight panel: two 8-lane vectors.
const NR: usize = 16;
/// Output rows computed together against one panel: 12 accumulator vectors of the 16 registers.
const MR: usize = 6;
/// Floats of the input processed against every panel before the next rows (256 KiB: they stay in
/// the core's L2 while the weights stream past).
const ROW_BLOCK_FLOATS: usize = 64 * 1024;
/// Lanes of the accumulators of dot products and sums.
const LANES: usize = 8;

/// How one multiply-add `a * b + c` is computed, and the matrix product built on it.
pub(crate) trait Mad: Sized {
    fn mad(a: f32, b: f32, c: f32) -> f32;

    /// `out = x . Wᵀ + bias` for the rows of `x`: the portable tiled product unless the build has
    /// its own.
    #[inline(always)]
    fn linear(layer: &Linear, x: &[f32], out: &mut [f32]) {
        linear_tiled::<Self>(layer, x, out)
    }
}

/// One rounding: compiles to an FMA instruction where the target has it.
pub(crate) struct Fused;
/// Two roundings: a multiply and an add, for CPUs without FMA.
pub(crate) struct Plain;
/// One rounding, and the matrix product on 512-bit registers ([`wide::linear`]). Only used by
/// code compiled with (and run after checking for) the `avx512f` feature: see [`avx512`].
#[cfg(target_arch = "x86_64")]
pub(crate) struct Wide;

impl Mad for Fused {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }

    /// On x86-64 with AVX, FMA and F16C: the hand-written 256-bit product ([`narrow::linear`]).
    #[inline(always)]
    fn linear(layer: &Linear, x: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if vectorized() && agentsearch_common::simd::half_conversion() {
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX, FMA and F16C (checked just above), the features
            // `narrow::linear` is compiled with.
            unsafe {
                narrow::linear(layer, x, out)
            };
            return;
        }
        linear_tiled::<Self>(layer, x, out)
    }
}

impl Mad for Plain {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

#[cfg(target_arch = "x86_64")]
impl Mad for Wide {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }

    #[inline(always)]
    fn linear(layer: &Linear, x: &[f32], out: &mut [f32]) {
        // Checked on every call (a cached flag, next to nothing against a layer's product), so
        // that no safe caller can reach the 512-bit code on a CPU without it.
        assert!(avx512(), "the 512-bit product on a CPU without AVX-512");
        #[allow(unsafe_code)]
        // SAFETY: the CPU runs the 512-bit build (checked just above): AVX-512F, AVX and FMA, the
        // features `wide::linear` is compiled with.
        unsafe {
            wide::linear(layer, x, out)
        }
    }
}

/// Whether this CPU runs the 512-bit build of the kernels (AVX-512F, AVX, AVX2, FMA, F16C).
pub fn avx512() -> bool {
    agentsearch_common::simd::Build::Avx512.supported()
}

/// Whether this CPU runs the fused, 256-bit build of the kernels.
pub fn vectorized() -> bool {
    agentsearch_common::simd::Build::Fma256.supported()
}

/// A linear layer: `out = x . Wᵀ + bias` with `W` stored `outputs x inputs` (PyTorch's layout),
/// repacked at load as `ceil(outputs / 16)` panels of `inputs x 16` so that the product reads each
/// panel contiguously, once per block of rows, and never repacks anything per call (the model's
/// layers; attention's operands are packed per head into a reused layer by [`Linear::repack`]).
///
/// The panels are kept in one of two forms: f32, or IEEE half precision ([`Linear::half`]),
/// widened to f32 as the product reads them. A short input reads every weight once per layer, so
/// that pass costs what moving the weights from memory costs: half the bytes, half the time.
/// Products and sums stay f32.
pub(crate) struct Linear {
    inputs: usize,
    outputs: usize,
    panels: Panels,
    bias: Vec<f32>,
}

/// The packed panels of a [`Linear`], in one of its two forms.
enum Panels {
    F32(Vec<f32>),
    /// IEEE binary16 bit patterns.
    Half(Vec<u16>),
}

impl Linear {
    pub(crate) fn new(weight: &[f32], bias: &[f32], outputs: usize, inputs: usize) -> Self {
        assert_eq!(weight.len(), outputs * inputs, "weight shape");
        assert_eq!(bias.len(), outputs, "bias shape");
        let count = outputs.div_ceil(NR);
        let mut panels = vec![0.0; count * inputs * NR];
        for p in 0..count {
            for k in 0..inputs {
                for j in 0..NR {
                    let column = p * NR + j;
                    if column < outputs {
                        panels[(p * inputs + k) * NR + j] = weight[column * inputs + k];
                    }
                }
            }
        }
        Self {
            inputs,
            outputs,
            panels: Panels::F32(panels),
            bias: bias.to_vec(),
        }
    }

    /// [`Linear::new`] with the panels kept in half precision (rounded to nearest, ties to even).
    /// The hand-written products widen them in registers for a short block of rows and panel by
    /// panel into f32 scratch for a longer one; the portable product always into scratch.
    pub(crate) fn half(weight: &[f32], bias: &[f32], outputs: usize, inputs: usize) -> Self {
        let mut layer = Self::new(weight, bias, outputs, inputs);
        if let Panels::F32(full) = &layer.panels {
            layer.panels = Panels::Half(full.iter().map(|&w| f16_bits(w)).collect());
        }
        layer
    }

    /// Packs, in place of this layer's weights, `W` with `W[c][i] = weight(c, i)` for `outputs`
    /// columns of `inputs` each, f32 and with a zero bias: the operands of attention, which
    /// change with every head, reuse one layer's buffers.
    pub(crate) fn repack(
        &mut self,
        outputs: usize,
        inputs: usize,
        weight: impl Fn(usize, usize) -> f32,
    ) {
        assert!(inputs > 0, "a layer without inputs");
        let mut panels = match std::mem::replace(&mut self.panels, Panels::F32(Vec::new())) {
            Panels::F32(p) => p,
            Panels::Half(_) => Vec::new(),
        };
        panels.clear();
        panels.resize(outputs.div_ceil(NR) * inputs * NR, 0.0);
        for (p, panel) in panels.chunks_exact_mut(inputs * NR).enumerate() {
            let width = NR.min(outputs - p * NR);
            for (i, lane) in panel.chunks_exact_mut(NR).enumerate() {
                for (j, w) in lane[..width].iter_mut().enumerate() {
                    *w = weight(p * NR + j, i);
                }
            }
        }
        self.panels = Panels::F32(panels);
        self.bias.clear();
        self.bias.resize(outputs, 0.0);
        (self.inputs, self.outputs) = (inputs, outputs);
    }

    pub(crate) fn inputs(&self) -> usize {
        self.inputs
    }

    pub(crate) fn outputs(&self) -> usize {
        self.outputs
    }
}

/// `R` rows of the input against one panel: `out[r][j] = rows[r] . panel[., j] + bias[j]`.
#[inline(always)]
fn micro<M: Mad, const R: usize>(
    rows: [&[f32]; R],
    panel: &[f32],
    bias: &[f32; NR],
) -> [[f32; NR]; R] {
    let k = panel.len() / NR;
    for row in &rows {
        assert!(row.len() >= k);
    }
    let mut acc = [[0.0f32; NR]; R];
    for (kk, b) in panel.chunks_exact(NR).enumerate() {
        for r in 0..R {
            let x = rows[r][kk];
            for j in 0..NR {
                acc[r][j] = M::mad(x, b[j], acc[r][j]);
            }
        }
    }
    for row in &mut acc {
        for (o, b) in row.iter_mut().zip(bias) {
            *o += b;
        }
    }
    acc
}

/// Writes the first `rows` rows of a micro tile into `out` at column `c0`.
#[inline(always)]
fn store<const R: usize>(
    tile: [[f32; NR]; R],
    out: &mut [f32],
    width: usize,
    n: usize,
    r0: usize,
    c0: usize,
) {
    for (i, row) in tile.iter().enumerate() {
        let at = (r0 + i) * n + c0;
        out[at..at + width].copy_from_slice(&row[..width]);
    }
}

/// `out = x . Wᵀ + bias` for the rows of `x`, on the build's product.
#[inline(always)]
pub(crate) fn linear<M: Mad>(layer: &Linear, x: &[f32], out: &mut [f32]) {
    M::linear(layer, x, out)
}

/// The portable product: 6 rows x 16 columns of accumulators per step, left to the compiler to
/// put in vector registers.
#[inline(always)]
fn linear_tiled<M: Mad>(layer: &Linear, x: &[f32], out: &mut [f32]) {
    let (k, n) = (layer.inputs, layer.outputs);
    assert_eq!(x.len() % k, 0, "input width");
    let m = x.len() / k;
    assert_eq!(out.len(), m * n, "output shape");
    let block = (ROW_BLOCK_FLOATS / k).max(MR) / MR * MR;
    let mut start = 0;
    while start < m {
        let end = (start + block).min(m);
        linear_block::<M>(layer, &x[start * k..end * k], &mut out[start * n..end * n]);
        start = end;
    }
}

#[inline(always)]
fn linear_block<M: Mad>(layer: &Linear, x: &[f32], out: &mut [f32]) {
    let (k, n) = (layer.inputs, layer.outputs);
    let m = x.len() / k;
    let mut widened = Vec::new();
    for p in 0..n.div_ceil(NR) {
        let span = p * k * NR..(p + 1) * k * NR;
        let panel = match &layer.panels {
            Panels::F32(f) => &f[span],
            Panels::Half(h) => {
                widen(&h[span], &mut widened);
                &widened[..]
            }
        };
        let c0 = p * NR;
        let width = NR.min(n - c0);
        let bias: [f32; NR] =
            std::array::from_fn(|j| if j < width { layer.bias[c0 + j] } else { 0.0 });
        let row = |i: usize| &x[i * k..(i + 1) * k];
        let mut r0 = 0;
        while r0 + MR <= m {
            let tile = micro::<M, MR>(std::array::from_fn(|i| row(r0 + i)), panel, &bias);
            store(tile, out, width, n, r0, c0);
            r0 += MR;
        }
        macro_rules! rest {
            ($($r:literal)*) => {
                match m - r0 {
                    0 => {}
                    $($r => store(
                        micro::<M, $r>(std::array::from_fn(|i| row(r0 + i)), panel, &bias),
                        out,
                        width,
                        n,
                        r0,
                        c0,
                    ),)*
                    _ => unreachable!("fewer than {MR} rows are left"),
                }
            };
        }
        rest!(1 2 3 4 5);
    }
}

/// Half-precision weights into f32 `to` (resized to fit): by the CPU's conversion instruction
/// where it has one (F16C), else one by one.
fn widen(half: &[u16], to: &mut Vec<f32>) {
    // Every float is overwritten below: only growth needs filling.
    to.resize(half.len(), 0.0);
    #[cfg(target_arch = "x86_64")]
    if agentsearch_common::simd::half_conversion() {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has F16C and AVX, checked just above.
        unsafe {
            widen_f16c(half, to)
        };
        return;
    }
    for (h, f) in half.iter().zip(to.iter_mut()) {
        *f = f16_value(*h);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
fn widen_f16c(half: &[u16], to: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps, _mm256_storeu_ps};
    let (chunks, rest) = (half.chunks_exact(8), half.len() / 8 * 8);
    for (h, f) in chunks.zip(to.chunks_exact_mut(8)) {
        #[allow(unsafe_code)]
        // SAFETY: eight readable halves (16 bytes) and eight writable floats; no alignment
        // requirement; the CPU has F16C and AVX (this function's features).
        unsafe {
            _mm256_storeu_ps(
                f.as_mut_ptr(),
                _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast::<__m128i>())),
            )
        };
    }
    for (h, f) in half[rest..].iter().zip(&mut to[rest..]) {
        *f = f16_value(*h);
    }
}

/// Where a hand-written tile reads its panels from.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Source<'a> {
    /// f32 panels, the tile's first one at the slice's start.
    Full(&'a [f32]),
    /// Half-precision panels, likewise.
    Half(&'a [u16]),
}

/// A weight as the hand-written products' panels hold it: f32, or the bits of a binary16, read
/// as f32 vectors.
#[cfg(target_arch = "x86_64")]
trait Weight: Copy {
    /// Eight weights from `at` as f32.
    ///
    /// # Safety
    /// `at..at + 8` must be readable and the CPU must have AVX and F16C.
    #[allow(unsafe_code)]
    unsafe fn load8(at: *const Self) -> std::arch::x86_64::__m256;

    /// Sixteen weights from `at` as f32.
    ///
    /// # Safety
    /// `at..at + 16` must be readable and the CPU must have AVX-512F.
    #[allow(unsafe_code)]
    unsafe fn load16(at: *const Self) -> std::arch::x86_64::__m512;
}

#[cfg(target_arch = "x86_64")]
impl Weight for f32 {
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn load8(at: *const f32) -> std::arch::x86_64::__m256 {
        #[allow(unsafe_code)]
        // SAFETY: the caller's contract; no alignment requirement.
        unsafe {
            std::arch::x86_64::_mm256_loadu_ps(at)
        }
    }

    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn load16(at: *const f32) -> std::arch::x86_64::__m512 {
        #[allow(unsafe_code)]
        // SAFETY: the caller's contract; no alignment requirement.
        unsafe {
            std::arch::x86_64::_mm512_loadu_ps(at)
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Weight for u16 {
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn load8(at: *const u16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps};
        #[allow(unsafe_code)]
        // SAFETY: the caller's contract (eight halves are 16 bytes); no alignment requirement.
        unsafe {
            _mm256_cvtph_ps(_mm_loadu_si128(at.cast::<__m128i>()))
        }
    }

    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn load16(at: *const u16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm512_cvtph_ps};
        #[allow(unsafe_code)]
        // SAFETY: the caller's contract (sixteen halves are 32 bytes); no alignment requirement.
        unsafe {
            _mm512_cvtph_ps(_mm256_loadu_si256(at.cast::<__m256i>()))
        }
    }
}

/// The matrix product on 256-bit registers (AVX, FMA, F16C): tiles of up to 6 rows x 16 columns
/// (one packed panel) in 12 of the 16 vector registers, the panel's two vectors loaded once per
/// input column and each input value broadcast once.
///
/// What the portable tile compiles to keeps neither: it reloads the panel for every row and checks
/// each row's bounds per step. Half-precision panels are widened in registers by a short input and
/// once per panel into f32 scratch by a long one.
#[cfg(target_arch = "x86_64")]
mod narrow {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };

    use super::{Linear, MR, NR, Panels, ROW_BLOCK_FLOATS, Source, Weight, widen};

    /// Blocks of at most this many rows (two row tiles: a query) widen half-precision panels in
    /// registers, each tile on its own; longer ones widen each panel once into scratch, which
    /// costs a store and a load per weight and pays off only when more tiles share it.
    const HALF_IN_REGISTERS: usize = 2 * MR;

    #[target_feature(enable = "avx,fma,f16c")]
    pub(super) fn linear(layer: &Linear, x: &[f32], out: &mut [f32]) {
        let (k, n) = (layer.inputs, layer.outputs);
        assert_eq!(x.len() % k, 0, "input width");
        let m = x.len() / k;
        assert_eq!(out.len(), m * n, "output shape");
        let held = match &layer.panels {
            Panels::F32(f) => f.len(),
            Panels::Half(h) => h.len(),
        };
        assert_eq!(held, n.div_ceil(NR) * k * NR, "packed panels");
        let block = (ROW_BLOCK_FLOATS / k).max(MR) / MR * MR;
        let mut scratch = Vec::new();
        let mut start = 0;
        while start < m {
            let end = (start + block).min(m);
            let (x, out) = (&x[start * k..end * k], &mut out[start * n..end * n]);
            for p in 0..n.div_ceil(NR) {
                let span = p * k * NR..(p + 1) * k * NR;
                let source = match &layer.panels {
                    Panels::F32(f) => Source::Full(&f[span]),
                    Panels::Half(h) if end - start <= HALF_IN_REGISTERS => Source::Half(&h[span]),
                    Panels::Half(h) => {
                        widen(&h[span], &mut scratch);
                        Source::Full(&scratch)
                    }
                };
                let mut r0 = 0;
                while r0 < end - start {
                    let rows = (end - start - r0).min(MR);
                    macro_rules! dispatch {
                        ($($r:literal)*) => {
                            match (rows, source) {
                                $(($r, Source::Full(f)) => tile::<$r, f32>(layer, f, x, out, r0, p),
                                  ($r, Source::Half(h)) => tile::<$r, u16>(layer, h, x, out, r0, p),)*
                                _ => unreachable!("a tile has 1 to {MR} rows"),
                            }
                        };
                    }
                    dispatch!(1 2 3 4 5 6);
                    r0 += rows;
                }
            }
            start = end;
        }
    }

    /// Rows `r0..r0 + R` of `x` against panel `p` (`panel` is that panel), bias added, into `out`.
    #[inline]
    #[target_feature(enable = "avx,fma,f16c")]
    fn tile<const R: usize, W: Weight>(
        layer: &Linear,
        panel: &[W],
        x: &[f32],
        out: &mut [f32],
        r0: usize,
        p: usize,
    ) {
        let (k, n) = (layer.inputs, layer.outputs);
        // Every read below is inside these ranges; checked once here, not per multiply-add.
        assert!((r0 + R) * k <= x.len(), "tile rows");
        assert!(k * NR <= panel.len(), "tile panel");
        let weights = panel.as_ptr();
        let rows = x.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for kk in 0..k {
            #[allow(unsafe_code)]
            // SAFETY: `kk * NR + 16 <= k * NR <= panel.len()`, asserted above; the CPU has AVX and
            // F16C (this function's features).
            let b = unsafe {
                [
                    W::load8(weights.add(kk * NR)),
                    W::load8(weights.add(kk * NR + 8)),
                ]
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                #[allow(unsafe_code)]
                // SAFETY: `(r0 + r) * k + kk < (r0 + R) * k`, asserted above.
                let a = _mm256_set1_ps(unsafe { *rows.add((r0 + r) * k + kk) });
                acc[0] = _mm256_fmadd_ps(a, b[0], acc[0]);
                acc[1] = _mm256_fmadd_ps(a, b[1], acc[1]);
            }
        }
        let c0 = p * NR;
        let width = NR.min(n - c0);
        let mut bias = [0.0f32; NR];
        bias[..width].copy_from_slice(&layer.bias[c0..c0 + width]);
        #[allow(unsafe_code)]
        // SAFETY: sixteen readable floats; no alignment requirement.
        let bias = unsafe {
            [
                _mm256_loadu_ps(bias.as_ptr()),
                _mm256_loadu_ps(bias.as_ptr().add(8)),
            ]
        };
        for (r, acc) in acc.iter().enumerate() {
            let mut row = [0.0f32; NR];
            #[allow(unsafe_code)]
            // SAFETY: sixteen writable floats; no alignment requirement.
            unsafe {
                _mm256_storeu_ps(row.as_mut_ptr(), _mm256_add_ps(acc[0], bias[0]));
                _mm256_storeu_ps(row.as_mut_ptr().add(8), _mm256_add_ps(acc[1], bias[1]));
            }
            let at = (r0 + r) * n + c0;
            out[at..at + width].copy_from_slice(&row[..width]);
        }
    }
}

/// The matrix product on AVX-512: tiles of up to 12 rows x 32 columns (two packed panels side by
/// side) in 24 of the 32 vector registers, each input value broadcast once per pair of panels.
///
/// Against the 6 x 16 tile of the 256-bit build this halves the loads per multiply-add, and a short
/// input (a query of about ten word pieces) is one row tile, so every panel of the weights is read
/// exactly once per layer: that pass over the weights is what a query's embedding costs. Panels in
/// half precision are widened in registers when a tile reads them directly (a short input), or
/// once per pair into f32 scratch that the row tiles of a long input then share.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::{
        __m512, _mm512_add_ps, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_mask_storeu_ps,
        _mm512_set1_ps, _mm512_setzero_ps,
    };

    use super::{Linear, NR, Panels, ROW_BLOCK_FLOATS, Source, Weight, widen};

    /// Rows of one tile.
    const ROWS: usize = 12;

    #[target_feature(enable = "avx512f,avx,fma")]
    pub(super) fn linear(layer: &Linear, x: &[f32], out: &mut [f32]) {
        let (k, n) = (layer.inputs, layer.outputs);
        assert_eq!(x.len() % k, 0, "input width");
        let m = x.len() / k;
        assert_eq!(out.len(), m * n, "output shape");
        let packed = n.div_ceil(NR) * k * NR;
        let held = match &layer.panels {
            Panels::F32(f) => f.len(),
            Panels::Half(h) => h.len(),
        };
        assert_eq!(held, packed, "packed panels");
        let block = (ROW_BLOCK_FLOATS / k).max(ROWS) / ROWS * ROWS;
        let mut scratch = Vec::new();
        let mut start = 0;
        while start < m {
            let end = (start + block).min(m);
            rows_block(
                layer,
                &x[start * k..end * k],
                &mut out[start * n..end * n],
                &mut scratch,
            );
            start = end;
        }
    }

    #[target_feature(enable = "avx512f,avx,fma")]
    fn rows_block(layer: &Linear, x: &[f32], out: &mut [f32], scratch: &mut Vec<f32>) {
        let (k, n) = (layer.inputs, layer.outputs);
        let m = x.len() / k;
        let panels = n.div_ceil(NR);
        let mut p = 0;
        while p < panels {
            let count = if p + 1 < panels { 2 } else { 1 };
            let span = p * k * NR..(p + count) * k * NR;
            // One row tile reads each weight once: it widens half precision in registers. More
            // tiles share a pair widened once into scratch.
            let source = match &layer.panels {
                Panels::F32(f) => Source::Full(&f[span]),
                Panels::Half(h) if m <= ROWS => Source::Half(&h[span]),
                Panels::Half(h) => {
                    widen(&h[span], scratch);
                    Source::Full(scratch)
                }
            };
            let mut r0 = 0;
            while r0 < m {
                let rows = (m - r0).min(ROWS);
                macro_rules! dispatch {
                    ($($r:literal)*) => {
                        match (rows, count, source) {
                            $(($r, 2, Source::Full(f)) => tile::<$r, 2, f32>(layer, f, x, out, r0, p),
                              ($r, _, Source::Full(f)) => tile::<$r, 1, f32>(layer, f, x, out, r0, p),
                              ($r, 2, Source::Half(h)) => tile::<$r, 2, u16>(layer, h, x, out, r0, p),
                              ($r, _, Source::Half(h)) => tile::<$r, 1, u16>(layer, h, x, out, r0, p),)*
                            _ => unreachable!("a tile has 1 to {ROWS} rows"),
                        }
                    };
                }
                dispatch!(1 2 3 4 5 6 7 8 9 10 11 12);
                r0 += rows;
            }
            p += count;
        }
    }

    /// Rows `r0..r0 + R` of `x` against panels `p..p + P` (`panels` starting at panel `p`), bias
    /// added, into `out`.
    #[inline]
    #[target_feature(enable = "avx512f,avx,fma")]
    fn tile<const R: usize, const P: usize, W: Weight>(
        layer: &Linear,
        panels: &[W],
        x: &[f32],
        out: &mut [f32],
        r0: usize,
        p: usize,
    ) {
        let (k, n) = (layer.inputs, layer.outputs);
        // Every read below is inside these ranges; checked once here, not per multiply-add.
        assert!((r0 + R) * k <= x.len(), "tile rows");
        assert!(P * k * NR <= panels.len(), "tile panels");
        let weights = panels.as_ptr();
        let rows = x.as_ptr();
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        for kk in 0..k {
            #[allow(unsafe_code)]
            // SAFETY: `(q * k + kk) * NR + 16 <= P * k * NR <= panels.len()`, asserted above; the
            // CPU has AVX-512F (this function's features).
            let b: [__m512; P] =
                std::array::from_fn(|q| unsafe { W::load16(weights.add((q * k + kk) * NR)) });
            for (r, acc) in acc.iter_mut().enumerate() {
                #[allow(unsafe_code)]
                // SAFETY: `(r0 + r) * k + kk < (r0 + R) * k`, asserted above.
                let a = _mm512_set1_ps(unsafe { *rows.add((r0 + r) * k + kk) });
                for q in 0..P {
                    acc[q] = _mm512_fmadd_ps(a, b[q], acc[q]);
                }
            }
        }
        for q in 0..P {
            let c0 = (p + q) * NR;
            let width = NR.min(n - c0);
            let mut bias = [0.0f32; NR];
            bias[..width].copy_from_slice(&layer.bias[c0..c0 + width]);
            #[allow(unsafe_code)]
            // SAFETY: sixteen readable floats; no alignment requirement.
            let bias = unsafe { _mm512_loadu_ps(bias.as_ptr()) };
            let mask = if width == NR {
                u16::MAX
            } else {
                (1u16 << width) - 1
            };
            for (r, acc) in acc.iter().enumerate() {
                let at = (r0 + r) * n + c0;
                let dst = &mut out[at..at + width];
                #[allow(unsafe_code)]
                // SAFETY: the mask writes exactly `width` floats from `dst`'s start, all inside it;
                // masked-off lanes are neither written nor faulted on.
                unsafe {
                    _mm512_mask_storeu_ps(dst.as_mut_ptr(), mask, _mm512_add_ps(acc[q], bias))
                };
            }
        }
    }
}

/// The IEEE binary16 bit pattern nearest to `x` (ties to even; beyond the range: infinity).
pub(crate) fn f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x7f_ffff;
    if exponent == 0xff {
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    // The exponent in binary16's bias.
    let e = exponent - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // (the kept bits, the dropped ones, how many were dropped)
    let (kept, dropped, shift) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        // A subnormal: the implicit leading one becomes explicit, and the value is kept in
        // units of 2^-24.
        let full = mantissa | 0x80_0000;
        let shift = (14 - e) as u32;
        (full >> shift, full & ((1 << shift) - 1), shift)
    } else {
        (((e as u32) << 10) | (mantissa >> 13), mantissa & 0x1fff, 13)
    };
    let halfway = 1u32 << (shift - 1);
    let up = dropped > halfway || (dropped == halfway && kept & 1 == 1);
    // A carry out of the mantissa moves into the exponent, which is the right rounding (up to
    // infinity at the top).
    sign | (kept + u32::from(up)) as u16
}

/// The f32 value of an IEEE binary16 bit pattern (exact).
pub(crate) fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((h >> 10) & 0x1f);
    let mantissa = f32::from(h & 0x3ff);
    sign * match exponent {
        0 => mantissa * 2f32.powi(-24),
        0x1f if mantissa == 0.0 => f32::INFINITY,
        0x1f => f32::NAN,
        e => (1.0 + mantissa / 1024.0) * 2f32.powi(e - 15),
    }
}

/// `e^x` to about 2 ulp for `x` in [-87, 88] (inputs beyond are clamped), branch-free so that
/// loops over it vectorise: `e^x = 2^n e^r` with `|r| <= ln2 / 2` and a degree-6 polynomial for
/// `e^r` (the coefficients of Cephes' `expf`).
#[inline(always)]
pub(crate) fn exp<M: Mad>(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = M::mad(n, -0.693_359_4, x);
    let r = M::mad(n, 2.121_944_4e-4, r);
    let mut p = 1.987_569_1e-4;
    p = M::mad(p, r, 1.398_2e-3);
    p = M::mad(p, r, 8.333_452e-3);
    p = M::mad(p, r, 4.166_579_6e-2);
    p = M::mad(p, r, 1.666_666_5e-1);
    p = M::mad(p, r, 5.000_000_1e-1);
    let e = M::mad(p, r * r, r) + 1.0;
    e * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// `erf(x)` to 1.5e-7 (Abramowitz and Stegun 7.1.26), branch-free.
#[inline(always)]
fn erf<M: Mad>(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / M::mad(0.327_591_1, a, 1.0);
    let mut p = 1.061_405_4;
    p = M::mad(p, t, -1.453_152_1);
    p = M::mad(p, t, 1.421_413_8);
    p = M::mad(p, t, -0.284_496_72);
    p = M::mad(p, t, 0.254_829_6);
    let y = 1.0 - p * t * exp::<M>(-a * a);
    y.copysign(x)
}

/// GELU as BERT defines it (with `erf`, not the tanh approximation), in place.
#[inline(always)]
pub(crate) fn gelu<M: Mad>(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf::<M>(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Sum of a slice in `LANES` independent lanes (so it vectorises), then across them.
#[inline(always)]
fn sum<M: Mad>(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// Dot product in `LANES` independent lanes.
#[inline(always)]
fn dot<M: Mad>(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] = M::mad(x[l], y[l], acc[l]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `x = LayerNorm(x + residual)` row by row (rows of `gamma.len()`), with BERT's epsilon.
#[inline(always)]
pub(crate) fn add_layer_norm<M: Mad>(
    x: &mut [f32],
    residual: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    let width = gamma.len();
    for (row, res) in x.chunks_exact_mut(width).zip(residual.chunks_exact(width)) {
        for (v, r) in row.iter_mut().zip(res) {
            *v += r;
        }
        layer_norm_row::<M>(row, gamma, beta, eps);
    }
}

#[inline(always)]
pub(crate) fn layer_norm_row<M: Mad>(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let width = row.len() as f32;
    let mean = sum::<M>(row) / width;
    for v in row.iter_mut() {
        *v -= mean;
    }
    let var = dot::<M>(row, row) / width;
    let scale = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = M::mad(*v * scale, *g, *b);
    }
}

/// Buffers of [`attention`], kept across texts and layers so that a forward pass allocates them
/// once.
pub(crate) struct AttentionScratch {
    /// One head's queries, `len x head`.
    queries: Vec<f32>,
    /// One head's keys packed as the weights of a layer with `len` outputs and `head` inputs.
    keys: Linear,
    /// One head's values packed as the weights of a layer with `head` outputs and `len` inputs.
    values: Linear,
    /// Scores, then probabilities, `len x len`.
    scores: Vec<f32>,
    /// One head's context rows, `len x head`.
    context: Vec<f32>,
}

impl Default for AttentionScratch {
    fn default() -> Self {
        Self {
            queries: Vec::new(),
            keys: Linear::new(&[], &[], 0, 0),
            values: Linear::new(&[], &[], 0, 0),
            scores: Vec::new(),
            context: Vec::new(),
        }
    }
}

/// Scaled dot-product attention of one text, every head, as two matrix products per head on the
/// build's product ([`linear`]): the scores `Q Kᵀ` with the keys packed as a layer's weights, a
/// softmax per row, then the context `P V` with the values packed likewise.
///
/// `qkv` holds the text's rows (`len x 3·hidden`: queries, keys and values side by side), `out`
/// receives its context rows (`len x hidden`). No mask: a text's rows are exactly its word pieces,
/// never padding.
#[inline(always)]
pub(crate) fn attention<M: Mad>(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    out: &mut [f32],
    scratch: &mut AttentionScratch,
) {
    let width = 3 * hidden;
    let len = qkv.len() / width;
    assert_eq!(out.len(), len * hidden, "context shape");
    if len == 0 {
        return;
    }
    let head = hidden / heads;
    let scale = 1.0 / (head as f32).sqrt();
    let AttentionScratch {
        queries,
        keys,
        values,
        scores,
        context,
    } = scratch;
    scores.resize(len * len, 0.0);
    context.resize(len * head, 0.0);
    for h in 0..heads {
        let (q, k, v) = (h * head, hidden + h * head, 2 * hidden + h * head);
        queries.clear();
        for row in qkv.chunks_exact(width) {
            queries.extend_from_slice(&row[q..q + head]);
        }
        keys.repack(len, head, |c, i| qkv[c * width + k + i]);
        linear::<M>(keys, queries, scores);
        for row in scores.chunks_exact_mut(len) {
            softmax::<M>(row, scale);
        }
        values.repack(head, len, |c, i| qkv[i * width + v + c]);
        linear::<M>(values, scores, context);
        for (o, c) in out.chunks_exact_mut(hidden).zip(context.chunks_exact(head)) {
            o[q..q + head].copy_from_slice(c);
        }
    }
}

/// `row = softmax(row · scale)`, in place.
#[inline(always)]
fn softmax<M: Mad>(row: &mut [f32], scale: f32) {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = row.chunks_exact(LANES);
    let rest = chunks
        .remainder()
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for l in 0..LANES {
            lanes[l] = lanes[l].max(c[l]);
        }
    }
    let max = lanes.into_iter().fold(rest, f32::max);
    for s in row.iter_mut() {
        *s = exp::<M>((*s - max) * scale);
    }
    let norm = 1.0 / sum::<M>(row);
    for s in row.iter_mut() {
        *s *= norm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_linear(w: &[f32], b: &[f32], x: &[f32], n: usize, k: usize) -> Vec<f32> {
        let m = x.len() / k;
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = b[j] as f64;
                for kk in 0..k {
                    s += x[i * k + kk] as f64 * w[j * k + kk] as f64;
                }
                out[i * n + j] = s as f32;
            }
        }
        out
    }

    fn values(count: usize, seed: usize) -> Vec<f32> {
        (0..count)
            .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 2003.0) - 0.5)
            .collect()
    }

    #[test]
    fn linear_matches_the_textbook_product_for_every_edge_shape() {
        // Row counts around the 6- and 12-row tiles and the row blocks; column counts around the
        // 16-wide panel and the 32-wide pair of panels; the encoder's own shapes.
        for &(m, k, n) in &[
            (1, 3, 1),
            (10, 384, 1152),
            (12, 5, 33),
            (25, 9, 48),
            (3, 384, 1536),
            (5, 7, 15),
            (6, 16, 16),
            (7, 33, 17),
            (13, 384, 50),
            (700, 100, 40),
        ] {
            let (w, b, x) = (values(n * k, 1), values(n, 2), values(m * k, 3));
            let layer = Linear::new(&w, &b, n, k);
            let want = reference_linear(&w, &b, &x, n, k);
            // The half-precision layer against the product of its rounded weights.
            let half = Linear::half(&w, &b, n, k);
            let rounded: Vec<f32> = w.iter().map(|&v| f16_value(f16_bits(v))).collect();
            let want_half = reference_linear(&rounded, &b, &x, n, k);
            for build in [
                "plain",
                "plain-half",
                "fused",
                "fused-half",
                "wide",
                "wide-half",
            ] {
                let mut got = vec![f32::NAN; m * n];
                match build {
                    "plain" => linear::<Plain>(&layer, &x, &mut got),
                    "plain-half" => linear::<Plain>(&half, &x, &mut got),
                    "fused" if vectorized() => linear::<Fused>(&layer, &x, &mut got),
                    "fused-half" if vectorized() => linear::<Fused>(&half, &x, &mut got),
                    #[cfg(target_arch = "x86_64")]
                    "wide" if avx512() => linear::<Wide>(&layer, &x, &mut got),
                    #[cfg(target_arch = "x86_64")]
                    "wide-half" if avx512() => linear::<Wide>(&half, &x, &mut got),
                    _ => continue,
                }
                let want = if build.ends_with("-half") {
                    &want_half
                } else {
                    &want
                };
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{build} {m}x{k}x{n}: {g} vs {w}"
                    );
                }
            }
        }
    }

    /// Textbook attention in f64: every head, softmax of scaled scores, then the values.
    fn reference_attention(qkv: &[f32], hidden: usize, heads: usize) -> Vec<f32> {
        let width = 3 * hidden;
        let len = qkv.len() / width;
        let head = hidden / heads;
        let at = |i: usize, c: usize| qkv[i * width + c] as f64;
        let mut out = vec![0.0; len * hidden];
        for h in 0..heads {
            for i in 0..len {
                let scores: Vec<f64> = (0..len)
                    .map(|j| {
                        let dot: f64 = (0..head)
                            .map(|d| at(i, h * head + d) * at(j, hidden + h * head + d))
                            .sum();
                        dot / (head as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = exps.iter().sum();
                for d in 0..head {
                    let c: f64 = (0..len)
                        .map(|j| exps[j] / total * at(j, 2 * hidden + h * head + d))
                        .sum();
                    out[i * hidden + h * head + d] = c as f32;
                }
            }
        }
        out
    }

    #[test]
    fn attention_matches_the_textbook_one_for_every_edge_length() {
        // Lengths around the row tiles and the 16-wide panels; one scratch for every text, as a
        // forward pass shares it, so a longer text followed by a shorter one is covered too.
        for &(hidden, heads) in &[(8, 2), (384, 12)] {
            for build in ["plain", "fused", "wide"] {
                let mut scratch = AttentionScratch::default();
                for &len in &[0, 1, 5, 6, 13, 17, 40, 3, 33] {
                    // Values scaled up so the softmax is peaked as well as flat in places.
                    let qkv: Vec<f32> = values(len * 3 * hidden, len)
                        .iter()
                        .map(|v| v * 4.0)
                        .collect();
                    let mut got = vec![f32::NAN; len * hidden];
                    match build {
                        "plain" => attention::<Plain>(&qkv, hidden, heads, &mut got, &mut scratch),
                        "fused" if vectorized() => {
                            attention::<Fused>(&qkv, hidden, heads, &mut got, &mut scratch)
                        }
                        #[cfg(target_arch = "x86_64")]
                        "wide" if avx512() => {
                            attention::<Wide>(&qkv, hidden, heads, &mut got, &mut scratch)
                        }
                        _ => continue,
                    }
                    let want = reference_attention(&qkv, hidden, heads);
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "{build} {hidden}/{heads} len {len}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn half_precision_rounds_to_nearest_even() {
        let cases: [(f32, u16); 14] = [
            (0.0, 0x0000),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (1.0 + 1.0 / 1024.0, 0x3c01),
            // Ties: to the even neighbour.
            (1.0 + 1.0 / 2048.0, 0x3c00),
            (1.0 + 3.0 / 2048.0, 0x3c02),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (f32::INFINITY, 0x7c00),
            // Subnormals: 2^-24 is the smallest; half of it ties to zero, three quarters round up.
            (2f32.powi(-24), 0x0001),
            (2f32.powi(-25), 0x0000),
            (3.0 * 2f32.powi(-26), 0x0001),
            (2f32.powi(-14) - 2f32.powi(-24), 0x03ff),
        ];
        for (x, want) in cases {
            assert_eq!(f16_bits(x), want, "{x:e}");
        }
        assert!(f16_value(f16_bits(f32::NAN)).is_nan());
        // Every finite binary16 value round-trips, and any f32 is within half a unit of the
        // value it rounds to.
        for h in 0..0x7c00u16 {
            for h in [h, h | 0x8000] {
                assert_eq!(f16_bits(f16_value(h)), h, "{h:#06x}");
            }
        }
        let mut x = 1e-9f32;
        while x < 60000.0 {
            let v = f16_value(f16_bits(x));
            let exponent = x.log2().floor().max(-14.0);
            let unit = 2f32.powf(exponent - 10.0);
            assert!((x - v).abs() <= unit / 2.0 * 1.000_001, "{x:e} -> {v:e}");
            x *= 1.003_7;
        }
    }

    #[test]
    fn exp_and_erf_match_the_standard_library() {
        let mut x = -90.0f32;
        while x < 90.0 {
            let want = (x as f64).exp();
            let got = exp::<Plain>(x) as f64;
            if (-87.0..=88.0).contains(&x) {
                assert!(
                    (got - want).abs() <= 3e-7 * want,
                    "exp({x}) = {got}, want {want}"
                );
            }
            x += 0.0137;
        }
        // erf against its series for small |x| and the known value at 1.
        assert!((erf::<Plain>(1.0) - 0.842_700_8).abs() < 2e-7);
        assert!((erf::<Plain>(-1.0) + 0.842_700_8).abs() < 2e-7);
        assert!((erf::<Plain>(0.0)).abs() < 2e-7);
        assert!((erf::<Plain>(4.0) - 1.0).abs() < 2e-7);
    }
}
