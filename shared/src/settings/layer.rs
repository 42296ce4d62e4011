//! The layering machinery behind the resilience settings.
//!
//! Every setting exists in three shapes: a plain value tree (what policy code reads), a partial
//! *patch* tree where every leaf is optional (the file, environment and persisted layers), and an
//! *effective* tree where every leaf carries the [`Source`] it came from (what
//! `GET /api/resilience` shows). Writing those three trees by hand for ~70 leaves would let them
//! drift apart, so the `section!` macro generates all three from one field list
//! and this module supplies the [`Layer`] trait that stitches them together.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;

use serde::Serialize;

use super::{FieldError, Source, Sourced};
use crate::config::ErrorRule;

/// Bounds for leaves that have none (booleans) and for nested sections (whose own fields carry
/// their bounds).
pub(crate) const ANY: () = ();

/// One node of the settings tree, seen through its three shapes. Implemented for leaf values and,
/// by the section macro, for every section. It is public only because the generated patch and
/// effective structs name its associated types; callers use the concrete structs.
pub trait Layer: Clone {
    /// The partial shape: `Option<T>` for a leaf, a struct of partial fields for a section.
    type Patch: PatchValue + Clone + Default + PartialEq + fmt::Debug;
    /// The shape whose leaves carry their [`Source`].
    type Effective: Clone + PartialEq + fmt::Debug + Serialize;
    /// What a valid value looks like (a range for numbers, `()` for the rest).
    type Bounds;

    /// This value, with every leaf marked as coming from `source`.
    fn sourced(&self, source: Source) -> Self::Effective;
    /// The plain value of an effective tree.
    fn value(effective: &Self::Effective) -> Self;
    /// Overwrite the leaves `patch` sets, marking them with `source`.
    fn apply(effective: &mut Self::Effective, patch: &Self::Patch, source: Source);
    /// Fold a newer patch into an older one (newer leaves win).
    fn merge(base: &mut Self::Patch, newer: &Self::Patch);
    /// Report every leaf set in `patch` that is out of bounds and bring it into bounds.
    fn bound(
        patch: &mut Self::Patch,
        bounds: &Self::Bounds,
        mode: Mode,
        path: &str,
        out: &mut Vec<FieldError>,
    );
}

/// What [`Layer::bound`] is for: rejecting a runtime patch (the messages say what is allowed) or
/// repairing a startup layer (the messages also say what was done instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Reject,
    Clamp,
}

/// Whether a patch node sets nothing (used to keep serialized patches minimal).
pub trait PatchValue {
    fn is_unset(&self) -> bool;
}

impl<T> PatchValue for Option<T> {
    fn is_unset(&self) -> bool {
        self.is_none()
    }
}

/// A leaf value that knows how to check and repair itself against its bounds.
pub trait Bounded: Sized {
    type Bounds;
    /// Push one error per violation (naming `path`) and repair the value in place.
    fn bound(&mut self, bounds: &Self::Bounds, mode: Mode, path: &str, out: &mut Vec<FieldError>);
}

macro_rules! bounded_int {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            type Bounds = RangeInclusive<$t>;
            fn bound(&mut self, bounds: &Self::Bounds, mode: Mode, path: &str, out: &mut Vec<FieldError>) {
                let clamped = (*self).clamp(*bounds.start(), *bounds.end());
                if clamped != *self {
                    let mut message = format!(
                        "{} is out of range {}..={}",
                        *self,
                        bounds.start(),
                        bounds.end()
                    );
                    if mode == Mode::Clamp {
                        message.push_str(&format!("; clamped to {clamped}"));
                    }
                    out.push(FieldError::new(path, message));
                    *self = clamped;
                }
            }
        }
    )*};
}
bounded_int!(u32, u64);

impl Bounded for bool {
    type Bounds = ();
    fn bound(&mut self, _: &(), _: Mode, _: &str, _: &mut Vec<FieldError>) {}
}

/// Status-code lists: codes outside the range are dropped.
impl Bounded for Vec<u16> {
    type Bounds = RangeInclusive<u16>;
    fn bound(&mut self, bounds: &Self::Bounds, mode: Mode, path: &str, out: &mut Vec<FieldError>) {
        let mut index = 0;
        self.retain(|code| {
            let ok = bounds.contains(code);
            if !ok {
                out.push(FieldError::new(
                    format!("{path}[{index}]"),
                    format!(
                        "status code {code} is out of range {}..={}{}",
                        bounds.start(),
                        bounds.end(),
                        mode.suffix("dropped")
                    ),
                ));
            }
            index += 1;
            ok
        });
    }
}

/// Runtime error rules per provider id. Invalid rules are dropped.
pub type ProviderErrorRules = BTreeMap<String, Vec<ErrorRule>>;

/// The most rules one provider may carry (as the reference).
pub const MAX_RULES_PER_PROVIDER: usize = 50;

impl Bounded for ProviderErrorRules {
    type Bounds = ();
    fn bound(&mut self, _: &(), mode: Mode, path: &str, out: &mut Vec<FieldError>) {
        for (provider, rules) in self.iter_mut() {
            let base = format!("{path}.{provider}");
            let mut index = 0;
            rules.retain(|rule| {
                let problem = rule.problem();
                if let Some(message) = &problem {
                    out.push(FieldError::new(
                        format!("{base}[{index}]"),
                        format!("{message}{}", mode.suffix("rule dropped")),
                    ));
                }
                index += 1;
                problem.is_none()
            });
            if rules.len() > MAX_RULES_PER_PROVIDER {
                out.push(FieldError::new(
                    base.clone(),
                    format!(
                        "{} rules exceed the limit of {MAX_RULES_PER_PROVIDER}{}",
                        rules.len(),
                        mode.suffix("extra rules dropped")
                    ),
                ));
                rules.truncate(MAX_RULES_PER_PROVIDER);
            }
        }
    }
}

macro_rules! leaf_layer {
    ($($t:ty),*) => {$(
        impl Layer for $t {
            type Patch = Option<$t>;
            type Effective = Sourced<$t>;
            type Bounds = <$t as Bounded>::Bounds;

            fn sourced(&self, source: Source) -> Sourced<$t> {
                Sourced { value: self.clone(), source }
            }
            fn value(effective: &Sourced<$t>) -> Self {
                effective.value.clone()
            }
            fn apply(effective: &mut Sourced<$t>, patch: &Option<$t>, source: Source) {
                if let Some(value) = patch {
                    *effective = Sourced { value: value.clone(), source };
                }
            }
            fn merge(base: &mut Option<$t>, newer: &Option<$t>) {
                if newer.is_some() {
                    base.clone_from(newer);
                }
            }
            fn bound(
                patch: &mut Option<$t>,
                bounds: &Self::Bounds,
                mode: Mode,
                path: &str,
                out: &mut Vec<FieldError>,
            ) {
                if let Some(value) = patch {
                    value.bound(bounds, mode, path, out);
                }
            }
        }
    )*};
}
leaf_layer!(u32, u64, bool, Vec<u16>, ProviderErrorRules);

impl Mode {
    fn suffix(self, action: &str) -> String {
        match self {
            Self::Reject => String::new(),
            Self::Clamp => format!("; {action}"),
        }
    }
}

/// `a.b` path joining that tolerates an empty prefix.
pub(crate) fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Generates, from one field list, the plain struct, its `…Patch` and `…Effective` twins and
/// their [`Layer`] implementation. Each field is `name: Type => bounds` where the bounds are a
/// range for numbers and [`ANY`] for booleans and nested sections.
macro_rules! section {
    (
        $(#[$meta:meta])*
        $name:ident / $patch:ident / $eff:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $bounds:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        #[doc = concat!("A partial [`", stringify!($name), "`]: unset keys keep the lower layer's value.")]
        #[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $patch {
            $(
                #[serde(default, skip_serializing_if = "crate::settings::layer::PatchValue::is_unset")]
                pub $field: <$ty as crate::settings::layer::Layer>::Patch,
            )*
        }

        #[doc = concat!("[`", stringify!($name), "`] with the source of every value.")]
        #[derive(Debug, Clone, PartialEq, serde::Serialize)]
        pub struct $eff {
            $( pub $field: <$ty as crate::settings::layer::Layer>::Effective, )*
        }

        impl crate::settings::layer::PatchValue for $patch {
            fn is_unset(&self) -> bool {
                true $( && crate::settings::layer::PatchValue::is_unset(&self.$field) )*
            }
        }

        impl $eff {
            /// The plain values, without their sources.
            pub fn values(&self) -> $name {
                <$name as crate::settings::layer::Layer>::value(self)
            }
        }

        impl crate::settings::layer::Layer for $name {
            type Patch = $patch;
            type Effective = $eff;
            type Bounds = ();

            fn sourced(&self, source: crate::settings::Source) -> $eff {
                $eff { $( $field: crate::settings::layer::Layer::sourced(&self.$field, source), )* }
            }
            fn value(effective: &$eff) -> Self {
                Self { $( $field: <$ty as crate::settings::layer::Layer>::value(&effective.$field), )* }
            }
            fn apply(effective: &mut $eff, patch: &$patch, source: crate::settings::Source) {
                $( <$ty as crate::settings::layer::Layer>::apply(&mut effective.$field, &patch.$field, source); )*
            }
            fn merge(base: &mut $patch, newer: &$patch) {
                $( <$ty as crate::settings::layer::Layer>::merge(&mut base.$field, &newer.$field); )*
            }
            fn bound(
                patch: &mut $patch,
                _: &(),
                mode: crate::settings::layer::Mode,
                path: &str,
                out: &mut Vec<crate::settings::FieldError>,
            ) {
                $(
                    <$ty as crate::settings::layer::Layer>::bound(
                        &mut patch.$field,
                        &$bounds,
                        mode,
                        &crate::settings::layer::join(path, stringify!($field)),
                        out,
                    );
                )*
            }
        }
    };
}
pub(crate) use section;
