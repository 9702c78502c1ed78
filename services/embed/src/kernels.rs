//! The f32 kernels of the encoder's forward pass: a matrix product against weights packed once at
//! load ([`Linear`]), attention over one text's rows, layer normalisation and GELU.
//!
//! Every kernel is written once, generic over how a multiply-add is done ([`Mad`]), and compiled
//! twice: with fused multiply-adds on 256-bit vectors for CPUs that have AVX and FMA (detected at
//! run time, so one binary serves every x86-64 machine), and plainly for the rest. Loops keep
//! independent accumulators in fixed-size arrays so the compiler turns them into vector
//! instructions; nothing here needs a reordering of floating-point sums that the compiler would
//! not do on its own.

/// Columns of one packed weight panel: two 8-lane vectors.
const NR: usize = 16;
/// Output rows computed together against one panel: 12 accumulator vectors of the 16 registers.
const MR: usize = 6;
/// Floats of the input processed against every panel before the next rows (256 KiB: they stay in
/// the core's L2 while the weights stream past).
const ROW_BLOCK_FLOATS: usize = 64 * 1024;
/// Lanes of the accumulators of dot products and sums.
const LANES: usize = 8;

/// How one multiply-add `a * b + c` is computed.
pub(crate) trait Mad {
    fn mad(a: f32, b: f32, c: f32) -> f32;
}

/// One rounding: compiles to an FMA instruction where the target has it.
pub(crate) struct Fused;
/// Two roundings: a multiply and an add, for CPUs without FMA.
pub(crate) struct Plain;

impl Mad for Fused {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Mad for Plain {
    #[inline(always)]
    fn mad(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// Whether this CPU runs the fused, 256-bit build of the kernels.
pub fn vectorized() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A linear layer: `out = x . Wᵀ + bias` with `W` stored `outputs x inputs` (PyTorch's layout),
/// repacked at load as `ceil(outputs / 16)` panels of `inputs x 16` so that the product reads each
/// panel contiguously, once per block of rows, and never repacks anything per call.
pub(crate) struct Linear {
    inputs: usize,
    outputs: usize,
    panels: Vec<f32>,
    bias: Vec<f32>,
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
            panels,
            bias: bias.to_vec(),
        }
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

#[inline(always)]
pub(crate) fn linear<M: Mad>(layer: &Linear, x: &[f32], out: &mut [f32]) {
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
    for (p, panel) in layer.panels.chunks_exact(k * NR).enumerate() {
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
        match m - r0 {
            0 => {}
            1 => store(
                micro::<M, 1>([row(r0)], panel, &bias),
                out,
                width,
                n,
                r0,
                c0,
            ),
            2 => store(
                micro::<M, 2>(std::array::from_fn(|i| row(r0 + i)), panel, &bias),
                out,
                width,
                n,
                r0,
                c0,
            ),
            3 => store(
                micro::<M, 3>(std::array::from_fn(|i| row(r0 + i)), panel, &bias),
                out,
                width,
                n,
                r0,
                c0,
            ),
            4 => store(
                micro::<M, 4>(std::array::from_fn(|i| row(r0 + i)), panel, &bias),
                out,
                width,
                n,
                r0,
                c0,
            ),
            _ => store(
                micro::<M, 5>(std::array::from_fn(|i| row(r0 + i)), panel, &bias),
                out,
                width,
                n,
                r0,
                c0,
            ),
        }
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

/// Scaled dot-product attention of one text, every head, for query rows `queries` of the text.
///
/// `qkv` holds the text's rows (`len x 3·hidden`: queries, keys and values side by side), `out`
/// the context rows of `queries` (`queries.len() x hidden`); `scores` is scratch of at least
/// `len` floats. No mask: a text's rows are exactly its word pieces, never padding.
#[inline(always)]
pub(crate) fn attention<M: Mad>(
    qkv: &[f32],
    hidden: usize,
    heads: usize,
    queries: std::ops::Range<usize>,
    out: &mut [f32],
    scores: &mut [f32],
) {
    let width = 3 * hidden;
    let len = qkv.len() / width;
    let head = hidden / heads;
    let scale = 1.0 / (head as f32).sqrt();
    let scores = &mut scores[..len];
    for (i, ctx) in queries.zip(out.chunks_exact_mut(hidden)) {
        for h in 0..heads {
            let q = &qkv[i * width + h * head..i * width + (h + 1) * head];
            for (j, s) in scores.iter_mut().enumerate() {
                let k = &qkv[j * width + hidden + h * head..j * width + hidden + (h + 1) * head];
                *s = dot::<M>(q, k) * scale;
            }
            let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for s in scores.iter_mut() {
                *s = exp::<M>(*s - max);
            }
            let norm = 1.0 / sum::<M>(scores);
            let c = &mut ctx[h * head..(h + 1) * head];
            c.fill(0.0);
            for (j, p) in scores.iter().enumerate() {
                let v = &qkv
                    [j * width + 2 * hidden + h * head..j * width + 2 * hidden + (h + 1) * head];
                for (c, v) in c.iter_mut().zip(v) {
                    *c = M::mad(*p, *v, *c);
                }
            }
            for c in c.iter_mut() {
                *c *= norm;
            }
        }
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
        // Row counts around the 6-row tile and the row block; column counts around the 16-wide panel.
        for &(m, k, n) in &[
            (1, 3, 1),
            (5, 7, 15),
            (6, 16, 16),
            (7, 33, 17),
            (13, 384, 50),
            (700, 100, 40),
        ] {
            let (w, b, x) = (values(n * k, 1), values(n, 2), values(m * k, 3));
            let layer = Linear::new(&w, &b, n, k);
            let want = reference_linear(&w, &b, &x, n, k);
            for fused in [false, true] {
                if fused && !vectorized() {
                    continue;
                }
                let mut got = vec![f32::NAN; m * n];
                if fused {
                    linear::<Fused>(&layer, &x, &mut got);
                } else {
                    linear::<Plain>(&layer, &x, &mut got);
                }
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{m}x{k}x{n}: {g} vs {w}"
                    );
                }
            }
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
