//! Process-independent hashing for `cache-optimized` and the strict-random deck.
//!
//! Every node of a cluster must send the same prompt-cache key to the same candidate, so the hash
//! cannot be `std`'s randomly keyed SipHash: it is FNV-1a 64 followed by the MurmurHash3 `fmix64`
//! finalizer (FNV alone mixes its high bits poorly). The values are part of the cluster contract:
//! changing them reshuffles every cache affinity, so tests pin them.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// FNV-1a, 64 bit.
pub const fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    h
}

/// MurmurHash3's 64-bit finalizer: a bijection with full avalanche.
pub const fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// The stable hash of an id or cache key: the same on every node, build and run.
pub const fn stable_hash(bytes: &[u8]) -> u64 {
    fmix64(fnv1a64(bytes))
}

/// Rendezvous (highest-random-weight) score of `key` on a candidate; the highest score owns the
/// key. Removing a candidate only moves the keys it owned.
pub const fn rendezvous_weight(key: u64, id_hash: u64) -> u64 {
    fmix64(key ^ fmix64(id_hash.wrapping_add(GOLDEN)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fmix_is_a_bijection_on_samples() {
        assert_eq!(fmix64(0), 0);
        assert_ne!(fmix64(1), fmix64(2));
    }
}
