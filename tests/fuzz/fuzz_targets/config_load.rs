//! Config loader: TOML text → parse → validate. Any input gives a config or a list of errors,
//! each naming a key path; nothing panics. A config that loads must validate again unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_shared::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Config::from_toml_str(text) {
        Ok(config) => assert!(config.validate().is_ok(), "a loaded config must validate"),
        Err(errors) => assert!(!errors.to_string().is_empty(), "errors must say something"),
    }
});
