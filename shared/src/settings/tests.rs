//! Unit tests of the settings layers.
