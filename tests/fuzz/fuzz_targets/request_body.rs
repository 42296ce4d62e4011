//! Request JSON extractor: any bytes give routing fields or a coded 400; a body that scans
//! splices into valid JSON whose `model` is the upstream model and whose other fields are kept.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchyard_shared::request_body::{MAX_MODEL_LEN, scan, splice};

const CODES: [&str; 4] = [
    "invalid_json",
    "missing_model",
    "invalid_model",
    "invalid_parameter",
];

fuzz_target!(|data: &[u8]| {
    match scan(data) {
        Err(e) => assert!(CODES.contains(&e.code), "unexpected code {}", e.code),
        Ok(fields) => {
            assert!(!fields.model.is_empty() && fields.model.len() <= MAX_MODEL_LEN);
            let out = splice(data, &fields, "up\"stream/model");
            // The scan refuses whatever the tree parser refuses (the differential target
            // checks that in full), so both documents parse.
            let before: Value = match serde_json::from_slice(data) {
                Ok(v) => v,
                Err(e) => panic!("scan accepted what serde_json refuses: {e}"),
            };
            let after: Value = match serde_json::from_slice(&out) {
                Ok(v) => v,
                Err(e) => panic!("splice produced invalid JSON: {e}"),
            };
            assert_eq!(after["model"], "up\"stream/model");
            if fields.background {
                assert_eq!(after["background"], false);
            }
            if let (Value::Object(a), Value::Object(b)) = (&before, &after) {
                assert_eq!(a.len(), b.len(), "splice changed the set of keys");
                for (k, v) in a {
                    if k != "model" && k != "background" {
                        assert_eq!(Some(v), b.get(k), "splice changed `{k}`");
                    }
                }
            }
        }
    }
});
