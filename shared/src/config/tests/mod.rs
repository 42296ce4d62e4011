//! Unit tests of the config loader.
