//! Request scan against the full parse: on any bytes, the node's fast scan and
//! serde_json's tree parse (`request_body::reference`) both refuse with the same `code` or
//! both accept with the same routing fields. The fast scan skips what it does not read, so
//! this is what keeps it from accepting a body the full parse (or an upstream) would refuse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::request_body::reference::disagreement;

fuzz_target!(|data: &[u8]| {
    if let Some(why) = disagreement(data) {
        panic!("{why}");
    }
});
