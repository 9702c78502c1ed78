//! Hashes that are the same on every process, platform and release (for placement, ids and
//! fingerprints that processes compare or persist; not for anything secret).

/// FNV-1a (64-bit) of `bytes`.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a_gives_the_published_values() {
        assert_eq!(super::fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
    }
}
