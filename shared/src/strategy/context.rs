//! `context-optimized`: the smallest context window that fits the request.
//!
//! A request goes to the tightest model that can hold it, which keeps the long-context (and
//! usually dearer) models free for the requests that need them, and never sends a request to a
//! model that must reject it. Order: windows that fit (smallest first), then unknown windows
//! (the catalog does not know the model), then windows too small (largest first, the closest
//! miss). Ties, and requests of unknown size, go by priority.

use std::cmp::Ordering;

use super::candidate::Candidate;
use super::ranked::{Entry, Rank};

/// Whether `c` holds `tokens`: `None` when either is unknown.
pub(super) fn fits(c: &Candidate, tokens: Option<u32>) -> Option<bool> {
    Some(tokens? <= c.context_window?)
}

pub(super) fn fit_cmp(tokens: Option<u32>) -> impl Fn(Entry<'_>, Entry<'_>) -> Ordering {
    move |a, b| {
        if tokens.is_none() {
            return Rank::Priority.cmp(a, b);
        }
        let group = |c: &Candidate| match fits(c, tokens) {
            Some(true) => 0u8,
            None => 1,
            Some(false) => 2,
        };
        let (ga, gb) = (group(a.1), group(b.1));
        let window = |c: &Candidate| c.context_window.unwrap_or(0);
        let by_window = match ga {
            0 => window(a.1).cmp(&window(b.1)),
            2 => window(b.1).cmp(&window(a.1)),
            _ => Ordering::Equal,
        };
        ga.cmp(&gb)
            .then(if ga == gb { by_window } else { Ordering::Equal })
            .then_with(|| Rank::Priority.cmp(a, b))
    }
}
