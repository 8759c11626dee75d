//! Extension kinds, as data and as types.
//!
//! [`ExtensionKind`] is the run-time enum (what a manifest names); the marker types
//! [`Wrapper`], [`Transformer`] and [`Backend`] carry the same five properties at the
//! type level, where the typestate combo reads them. A compile-time assertion at the
//! bottom of this file proves the two tables equal, so they cannot drift.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod property;

use property::{
    AtMostOne, Cardinality, Declared, Execution, InPlace, InputRule, Many, OutputRule, Preserved,
    Relocating, Reshaped, SameShape, Unconstrained,
};

/// The three kinds of extension. Every kind mints a new-named branch; they differ in
/// the five properties below, and generic machinery keys off those properties.
///
/// ```
/// use toolgraft::kind::ExtensionKind;
///
/// assert!(!ExtensionKind::Backend.multiple());
/// assert_eq!("backend".parse::<ExtensionKind>(), Ok(ExtensionKind::Backend));
/// assert!("BACKEND".parse::<ExtensionKind>().is_err());
/// assert_eq!(ExtensionKind::Transformer.to_string(), "transformer");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtensionKind {
    /// Forwards the layer input unchanged (plus its own reserved params); stackable.
    Wrapper,
    /// Presents its own concrete input schema and reshapes the result; stackable.
    Transformer,
    /// Runs the layer below somewhere else; at most one per combo.
    Backend,
}

impl ExtensionKind {
    /// Every kind, in declaration order.
    ///
    /// ```
    /// use toolgraft::kind::ExtensionKind;
    /// let names: Vec<_> = ExtensionKind::ALL.iter().map(|k| k.as_str()).collect();
    /// assert_eq!(names, ["wrapper", "transformer", "backend"]);
    /// ```
    pub const ALL: [ExtensionKind; 3] = [Self::Wrapper, Self::Transformer, Self::Backend];

    /// Iterates over every kind, in declaration order.
    ///
    /// ```
    /// use toolgraft::kind::ExtensionKind;
    /// assert_eq!(ExtensionKind::iter().filter(|k| k.multiple()).count(), 2);
    /// ```
    pub fn iter() -> impl ExactSizeIterator<Item = ExtensionKind> + Clone {
        Self::ALL.into_iter()
    }

    /// Whether one combo may hold more than one extension of this kind.
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert!(ExtensionKind::Wrapper.multiple() && !ExtensionKind::Backend.multiple());
    /// ```
    pub const fn multiple(self) -> bool {
        !matches!(self, Self::Backend)
    }

    /// Whether the branch presents its layer input's input schema unchanged
    /// (minus the extension's own reserved params).
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert!(ExtensionKind::Wrapper.preserves_schema());
    /// ```
    pub const fn preserves_schema(self) -> bool {
        matches!(self, Self::Wrapper)
    }

    /// Whether the branch presents its own concrete input schema.
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert!(ExtensionKind::Transformer.declares_schema());
    /// ```
    pub const fn declares_schema(self) -> bool {
        matches!(self, Self::Transformer)
    }

    /// Whether the body runs somewhere else (worker thread, process or machine).
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert!(ExtensionKind::Backend.relocates_execution());
    /// ```
    pub const fn relocates_execution(self) -> bool {
        matches!(self, Self::Backend)
    }

    /// Whether the branch returns its layer input's output shape, so it may inherit
    /// the base's output schema.
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert!(!ExtensionKind::Transformer.preserves_output_shape());
    /// ```
    pub const fn preserves_output_shape(self) -> bool {
        !matches!(self, Self::Transformer)
    }

    /// The lowercase wire name: `wrapper`, `transformer` or `backend`.
    ///
    /// ```
    /// # use toolgraft::kind::ExtensionKind;
    /// assert_eq!(ExtensionKind::Wrapper.as_str(), "wrapper");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Wrapper => "wrapper",
            Self::Transformer => "transformer",
            Self::Backend => "backend",
        }
    }
}

impl fmt::Display for ExtensionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no [`ExtensionKind`].
///
/// ```
/// use toolgraft::kind::ExtensionKind;
/// let err = "back end".parse::<ExtensionKind>().unwrap_err();
/// assert_eq!(err.to_string(),
///     "unknown extension kind `back end`: expected `wrapper`, `transformer` or `backend`");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("unknown extension kind `{input}`: expected `wrapper`, `transformer` or `backend`")]
pub struct UnknownKind {
    /// The rejected input, verbatim.
    pub input: String,
}

impl FromStr for ExtensionKind {
    type Err = UnknownKind;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::iter()
            .find(|kind| kind.as_str() == input)
            .ok_or_else(|| UnknownKind {
                input: input.to_owned(),
            })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A kind at the type level: one of the markers [`Wrapper`], [`Transformer`],
/// [`Backend`] (the set is sealed).
///
/// The associated types are what the typestate combo reads; the associated consts
/// mirror [`ExtensionKind`] and are derived from the types, so each marker states each
/// property once.
///
/// ```
/// use toolgraft::kind::{Backend, ExtensionKind, Kind};
/// assert_eq!(Backend::KIND, ExtensionKind::Backend);
/// assert!(!Backend::MULTIPLE && Backend::RELOCATES_EXECUTION);
/// ```
pub trait Kind: sealed::Sealed + Send + Sync + 'static {
    /// The run-time value of this kind.
    const KIND: ExtensionKind;
    /// Type-level `multiple`: [`Many`] or [`AtMostOne`].
    type Cardinality: Cardinality;
    /// Type-level `relocates_execution`: [`InPlace`] or [`Relocating`].
    type Execution: Execution;
    /// Type-level `preserves_schema` / `declares_schema`: [`Preserved`], [`Declared`]
    /// or [`Unconstrained`].
    type InputRule: InputRule;
    /// Type-level `preserves_output_shape`: [`SameShape`] or [`Reshaped`].
    type OutputRule: OutputRule;
    /// A type-level number unique to the kind, so the typestate can tell kinds apart.
    #[doc(hidden)]
    type Id;
    /// The kind's wire name as a type (`backend`), which is how the compiler's
    /// messages print it.
    #[doc(hidden)]
    type Word;

    /// See [`ExtensionKind::multiple`].
    const MULTIPLE: bool = <Self::Cardinality as Cardinality>::MULTIPLE;
    /// See [`ExtensionKind::preserves_schema`].
    const PRESERVES_SCHEMA: bool = <Self::InputRule as InputRule>::PRESERVES_SCHEMA;
    /// See [`ExtensionKind::declares_schema`].
    const DECLARES_SCHEMA: bool = <Self::InputRule as InputRule>::DECLARES_SCHEMA;
    /// See [`ExtensionKind::relocates_execution`].
    const RELOCATES_EXECUTION: bool = <Self::Execution as Execution>::RELOCATES_EXECUTION;
    /// See [`ExtensionKind::preserves_output_shape`].
    const PRESERVES_OUTPUT_SHAPE: bool = <Self::OutputRule as OutputRule>::PRESERVES_OUTPUT_SHAPE;
}

/// The kinds' wire names as types: how the compiler's messages name a kind, since
/// users think in the words `wrapper`, `transformer` and `backend`, not in marker
/// types. Nothing to use directly.
#[allow(non_camel_case_types)]
pub mod words {
    /// A wrapper.
    #[derive(Debug)]
    pub struct wrapper;
    /// A transformer.
    #[derive(Debug)]
    pub struct transformer;
    /// A backend.
    #[derive(Debug)]
    pub struct backend;
}

/// Type-level number zero, and its successor: the kind ids.
#[doc(hidden)]
#[derive(Debug)]
pub struct Zero;
#[doc(hidden)]
#[derive(Debug)]
pub struct Succ<N>(std::marker::PhantomData<N>);

/// Marker for [`ExtensionKind::Wrapper`].
///
/// ```
/// use toolgraft::kind::{Kind, Wrapper};
/// assert!(Wrapper::MULTIPLE && Wrapper::PRESERVES_SCHEMA);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Wrapper;

/// Marker for [`ExtensionKind::Transformer`].
///
/// ```
/// use toolgraft::kind::{Kind, Transformer};
/// assert!(Transformer::DECLARES_SCHEMA && !Transformer::PRESERVES_OUTPUT_SHAPE);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Transformer;

/// Marker for [`ExtensionKind::Backend`].
///
/// ```
/// use toolgraft::kind::{Backend, Kind};
/// assert!(!Backend::MULTIPLE && Backend::RELOCATES_EXECUTION);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Backend;

impl sealed::Sealed for Wrapper {}
impl sealed::Sealed for Transformer {}
impl sealed::Sealed for Backend {}

impl Kind for Wrapper {
    const KIND: ExtensionKind = ExtensionKind::Wrapper;
    type Cardinality = Many;
    type Execution = InPlace;
    type InputRule = Preserved;
    type OutputRule = SameShape;
    type Id = Zero;
    type Word = words::wrapper;
}

impl Kind for Transformer {
    const KIND: ExtensionKind = ExtensionKind::Transformer;
    type Cardinality = Many;
    type Execution = InPlace;
    type InputRule = Declared;
    type OutputRule = Reshaped;
    type Id = Succ<Zero>;
    type Word = words::transformer;
}

impl Kind for Backend {
    const KIND: ExtensionKind = ExtensionKind::Backend;
    type Cardinality = AtMostOne;
    type Execution = Relocating;
    type InputRule = Unconstrained;
    type OutputRule = SameShape;
    type Id = Succ<Succ<Zero>>;
    type Word = words::backend;
}

/// True when the marker `K` states exactly the properties of its enum value.
const fn agrees<K: Kind>() -> bool {
    let kind = K::KIND;
    K::MULTIPLE == kind.multiple()
        && K::PRESERVES_SCHEMA == kind.preserves_schema()
        && K::DECLARES_SCHEMA == kind.declares_schema()
        && K::RELOCATES_EXECUTION == kind.relocates_execution()
        && K::PRESERVES_OUTPUT_SHAPE == kind.preserves_output_shape()
}

/// The marker of `kind` states exactly its properties. The exhaustive `match` makes a
/// new kind without a marker a compile error here.
const fn marker_agrees(kind: ExtensionKind) -> bool {
    match kind {
        ExtensionKind::Wrapper => {
            matches!(Wrapper::KIND, ExtensionKind::Wrapper) && agrees::<Wrapper>()
        }
        ExtensionKind::Transformer => {
            matches!(Transformer::KIND, ExtensionKind::Transformer) && agrees::<Transformer>()
        }
        ExtensionKind::Backend => {
            matches!(Backend::KIND, ExtensionKind::Backend) && agrees::<Backend>()
        }
    }
}

const fn every_marker_agrees() -> bool {
    let mut at = 0;
    while at < ExtensionKind::ALL.len() {
        if !marker_agrees(ExtensionKind::ALL[at]) {
            return false;
        }
        at += 1;
    }
    true
}

// The two property tables (enum and markers) are one table: this fails to compile
// the moment either side changes alone, with the message below (not an overflow).
const _: () = assert!(
    every_marker_agrees(),
    "a kind marker's constants (`Wrapper`, `Transformer`, `Backend`) disagree with `ExtensionKind`'s properties: change both tables together"
);
