//! What the tool index tests share.

/// A unit vector of `dim` dimensions from a seed (xorshift): different seeds give different
/// vectors, equal seeds equal ones.
pub fn unit_vector(seed: u64, dim: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
    v.iter_mut().for_each(|a| *a /= norm);
    v
}
