//! Wire decode: total over arbitrary bytes (an envelope or a `WireError`, never a panic or an
//! allocation beyond the message limit), and whatever decodes re-encodes to an equal envelope.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::wire::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(env) = decode(data) {
        let bytes = encode(&env).expect("a decoded envelope re-encodes");
        assert_eq!(decode(&bytes).expect("re-encoded bytes decode"), env);
    }
});
