use super::*;

#[test]
fn owner_hash_is_sha256_hex_and_never_the_token() {
    let token = "vlo_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
    let hash = owner_hash(token);
    assert_eq!(hash.len(), 64);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(!hash.contains(token));
    // Known vector: SHA-256("abc").
    assert_eq!(
        owner_hash("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn scripts_are_versioned_and_take_their_keys_from_the_caller() {
    // Script bodies reach Redis only by SHA; make sure none hardcodes a key name.
    for body in [
        include_str!("lua/lease_acquire_v2.lua"),
        include_str!("lua/lease_move_v1.lua"),
        include_str!("lua/lease_renew_v1.lua"),
        include_str!("lua/lease_release_v1.lua"),
        include_str!("lua/lease_fence_v1.lua"),
        include_str!("lua/lease_revoke_v1.lua"),
        include_str!("lua/lease_fenced_del_v1.lua"),
    ] {
        assert!(body.contains("KEYS[1]"));
        assert!(!body.contains("lease:{"), "hardcoded key in {body}");
    }
}
