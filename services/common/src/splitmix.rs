//! SplitMix64 (Steele, Lea and Flood, 2014): a small seedable generator, the same on every
//! platform, for reproducible test data and generated models (not for anything secret).

/// The generator; its state is the seed as given.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The generator's output function: a 64-bit finalizer in which every input bit moves about half
/// the output bits (also a hash of a `u64`, the same on every platform).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_sequence_and_units_stay_in_range() {
        let (mut a, mut b) = (SplitMix64(7), SplitMix64(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            b.unit();
        }
        // The reference sequence for seed 0.
        assert_eq!(SplitMix64(0).next_u64(), 0xe220_a839_7b1d_cdaf);
    }
}
