//! Unit tests for translation.
