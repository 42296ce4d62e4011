//! Test support for Switchyard: a mock upstream faithful to the OpenAI and Anthropic wire
//! formats, and helpers that start real processes for black-box scenario tests.

pub mod mock_upstream;
