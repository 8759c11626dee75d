//! The kind properties as types: what the typestate combo reads at compile time.
//!
//! Each property of [`ExtensionKind`](super::ExtensionKind) has a sealed trait here
//! with one marker type per value; [`Kind`](super::Kind) names one marker per
//! property, and the `kind` module proves the two tables equal. [`Locality`] is a
//! property of one extension, not of its kind.
//!
//! ```
//! use toolgraft::kind::property::{AtMostOne, Cardinality, Execution, InPlace, Many,
//!     OutputRule, Relocating, Reshaped, SameShape};
//! use toolgraft::kind::{Backend, Kind};
//!
//! assert!(Many::MULTIPLE && !AtMostOne::MULTIPLE);
//! assert!(Relocating::RELOCATES_EXECUTION && !InPlace::RELOCATES_EXECUTION);
//! assert!(SameShape::PRESERVES_OUTPUT_SHAPE && !Reshaped::PRESERVES_OUTPUT_SHAPE);
//! assert_eq!(<Backend as Kind>::MULTIPLE, <<Backend as Kind>::Cardinality as Cardinality>::MULTIPLE);
//! ```

pub(crate) mod sealed {
    pub trait Sealed {}
    /// The seal of [`Relocator`](super::Relocator): `NotRelocated` here, every
    /// extension in the typestate.
    pub trait Relocator {}
}

use frunk::hlist::HCons;

use crate::context::{self, BodyLocalCall};
use crate::name::Name;

/// Type-level `multiple`.
pub trait Cardinality: sealed::Sealed {
    /// The property's value.
    const MULTIPLE: bool;
    #[doc(hidden)]
    type After<E, Seen>;
}

/// More than one extension of the kind may sit in a combo.
#[derive(Debug)]
pub struct Many;
/// At most one extension of the kind may sit in a combo.
#[derive(Debug)]
pub struct AtMostOne;

impl sealed::Sealed for Many {}
impl sealed::Sealed for AtMostOne {}

impl Cardinality for Many {
    const MULTIPLE: bool = true;
    type After<E, Seen> = Seen;
}

impl Cardinality for AtMostOne {
    const MULTIPLE: bool = false;
    // Remember the extension: a second one of its kind will be refused by name.
    type After<E, Seen> = HCons<E, Seen>;
}

/// Type-level `relocates_execution`.
pub trait Execution: sealed::Sealed {
    /// The property's value.
    const RELOCATES_EXECUTION: bool;
    #[doc(hidden)]
    type After<E: Relocator, R: Relocator>: Relocator;
    /// What a branch carries of its layer's base tool (rule `side-effects`): the
    /// layer's `Base` if the branch makes the layer's calls elsewhere, else
    /// `Otherwise` (what the input rule says).
    #[doc(hidden)]
    type Hinting<Base, Otherwise>;
}

/// The body runs where the extension runs.
#[derive(Debug)]
pub struct InPlace;
/// The extension runs the layer below somewhere else.
#[derive(Debug)]
pub struct Relocating;

impl sealed::Sealed for InPlace {}
impl sealed::Sealed for Relocating {}

impl Execution for InPlace {
    const RELOCATES_EXECUTION: bool = false;
    type After<E: Relocator, R: Relocator> = R;
    type Hinting<Base, Otherwise> = Otherwise;
}

impl Execution for Relocating {
    const RELOCATES_EXECUTION: bool = true;
    type After<E: Relocator, R: Relocator> = R::First<E>;
    type Hinting<Base, Otherwise> = Base;
}

/// Type-level `preserves_schema` and `declares_schema`.
pub trait InputRule: sealed::Sealed {
    /// `preserves_schema`.
    const PRESERVES_SCHEMA: bool;
    /// `declares_schema`.
    const DECLARES_SCHEMA: bool;
    /// What a branch carries of its layer's base tool (rule `side-effects`): the
    /// layer's `Base` if it forwards the layer's calls (`preserves_schema`), else
    /// `New`, a new tool's.
    #[doc(hidden)]
    type Hinting<Base, New>;
}

/// The branch takes the layer input unchanged, plus reserved params (wrappers).
#[derive(Debug)]
pub struct Preserved;
/// The branch presents its own concrete input (transformers).
#[derive(Debug)]
pub struct Declared;
/// No input rule (backends).
#[derive(Debug)]
pub struct Unconstrained;

impl sealed::Sealed for Preserved {}
impl sealed::Sealed for Declared {}
impl sealed::Sealed for Unconstrained {}

impl InputRule for Preserved {
    const PRESERVES_SCHEMA: bool = true;
    const DECLARES_SCHEMA: bool = false;
    type Hinting<Base, New> = Base;
}

impl InputRule for Declared {
    const PRESERVES_SCHEMA: bool = false;
    const DECLARES_SCHEMA: bool = true;
    type Hinting<Base, New> = New;
}

impl InputRule for Unconstrained {
    const PRESERVES_SCHEMA: bool = false;
    const DECLARES_SCHEMA: bool = false;
    type Hinting<Base, New> = New;
}

/// Type-level `preserves_output_shape`.
pub trait OutputRule: sealed::Sealed {
    /// The property's value.
    const PRESERVES_OUTPUT_SHAPE: bool;
}

/// The branch returns the layer's output type.
#[derive(Debug)]
pub struct SameShape;
/// The branch returns an output of its own.
#[derive(Debug)]
pub struct Reshaped;

impl sealed::Sealed for SameShape {}
impl sealed::Sealed for Reshaped {}

impl OutputRule for SameShape {
    const PRESERVES_OUTPUT_SHAPE: bool = true;
}

impl OutputRule for Reshaped {
    const PRESERVES_OUTPUT_SHAPE: bool = false;
}

/// Where an extension must run to work: a property of one extension, not of its
/// kind. Rules `locality-inside-relocation` (beside the body: inside any relocating
/// extension) and `caller-outside-relocation` (beside the caller: outside any).
///
/// ```
/// use toolgraft::extension::{Anywhere, BodyLocal, CallerLocal, Locality, Placement};
/// assert!(BodyLocal::REQUIRES_BODY_LOCALITY && !Anywhere::REQUIRES_BODY_LOCALITY);
/// assert!(CallerLocal::REQUIRES_CALLER_LOCALITY && !BodyLocal::REQUIRES_CALLER_LOCALITY);
/// assert_eq!(CallerLocal::PLACEMENT, Placement::BesideCaller);
/// ```
pub trait Locality: sealed::Sealed + Send + Sync + 'static {
    /// Where the extension must run, as a value the engine and clients read.
    const PLACEMENT: Placement;
    /// True when the extension only works in the thread/task that runs the body.
    const REQUIRES_BODY_LOCALITY: bool = matches!(Self::PLACEMENT, Placement::BesideBody);
    /// True when the extension only works where the call arrived: it asks the
    /// caller's user, or reports to the caller's session.
    const REQUIRES_CALLER_LOCALITY: bool = matches!(Self::PLACEMENT, Placement::BesideCaller);

    /// What the extension does about who may have an answer, as a value the
    /// engine reads (rule `shared-answers-inside-authorization`).
    const ACCESS: AccessRole = AccessRole::Neutral;

    /// True when the extension answers a repeated call (one with the same key)
    /// with the first one's outcome, so its branch may be called again whatever
    /// the tool below says of side effects (rule `side-effects`): what the engine
    /// reads for combos from manifests, as [`Hinting`](Locality::Hinting) is what
    /// the typestate reads.
    const ANSWERS_REPEATS: bool = false;

    /// The hints a wrapper of this locality gives its branch: `Kept`, its
    /// layer's, or `Granted`, its layer's made idempotent ([`AnswersRepeats`]).
    #[doc(hidden)]
    type Hinting<Kept, Granted>;

    /// The first caller-local extension of a combo once `E` (of this locality)
    /// is added, given the one so far, `C`.
    #[doc(hidden)]
    type After<E: Relocator, C: Relocator>: Relocator;

    /// The first authorization check of a combo once `E` (of this locality) is
    /// added, given the one so far, `A`.
    #[doc(hidden)]
    type Checked<E: Relocator, A: Relocator>: Relocator;

    /// Runs a wrapper's call: marked as a body-local layer's for a body-local
    /// wrapper (so a backend reached from inside it refuses to relocate), as is for
    /// one that runs anywhere (at no cost).
    #[doc(hidden)]
    #[inline(always)]
    fn run_layer<F: Future + Send>(
        extension: &str,
        branch: &Name,
        call: F,
    ) -> impl Future<Output = F::Output> + Send {
        let _ = (extension, branch);
        call
    }
}

/// Where a layer must run, as a value: what [`Locality::PLACEMENT`] says, what the
/// binding engine checks for combos from manifests, and what a
/// [`Link`](crate::toolset::Link) shows clients.
///
/// ```
/// use toolgraft::extension::Placement;
/// assert_eq!(Placement::BesideCaller.to_string(), "beside the caller");
/// assert_eq!(serde_json::to_value(Placement::BesideBody)?, "beside_body");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Works wherever it runs ([`Anywhere`]).
    #[default]
    Anywhere,
    /// Only beside the tool body: inside any relocating extension ([`BodyLocal`]).
    BesideBody,
    /// Only where the call arrived: outside any relocating extension ([`CallerLocal`]).
    BesideCaller,
}

impl Placement {
    /// Whether it is [`Placement::Anywhere`].
    pub fn is_anywhere(&self) -> bool {
        *self == Self::Anywhere
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Anywhere => "anywhere",
            Self::BesideBody => "beside the body",
            Self::BesideCaller => "beside the caller",
        })
    }
}

/// The extension works wherever it runs.
#[derive(Debug)]
pub struct Anywhere;
/// The extension only works beside the tool body (it sets a context entry the body
/// reads, say), so it must sit inside any relocating extension.
#[derive(Debug)]
pub struct BodyLocal;
/// The extension only works where the call arrived (it asks the caller's user, or
/// reports to the caller's session), so it must sit outside any relocating
/// extension: inside one, it would run on a worker that has no caller.
#[derive(Debug)]
pub struct CallerLocal;

impl sealed::Sealed for Anywhere {}
impl sealed::Sealed for BodyLocal {}
impl sealed::Sealed for CallerLocal {}

impl Locality for Anywhere {
    const PLACEMENT: Placement = Placement::Anywhere;
    type After<E: Relocator, C: Relocator> = C;
    type Checked<E: Relocator, A: Relocator> = A;
    type Hinting<Kept, Granted> = Kept;
}

impl Locality for BodyLocal {
    const PLACEMENT: Placement = Placement::BesideBody;
    type After<E: Relocator, C: Relocator> = C;
    type Checked<E: Relocator, A: Relocator> = A;
    type Hinting<Kept, Granted> = Kept;

    fn run_layer<F: Future + Send>(
        extension: &str,
        branch: &Name,
        call: F,
    ) -> impl Future<Output = F::Output> + Send {
        let call_in = BodyLocalCall {
            extension: Name::unchecked(extension),
            branch: branch.clone(),
        };
        context::with(call_in, call)
    }
}

impl Locality for CallerLocal {
    const PLACEMENT: Placement = Placement::BesideCaller;
    type After<E: Relocator, C: Relocator> = C::First<E>;
    type Checked<E: Relocator, A: Relocator> = A;
    type Hinting<Kept, Granted> = Kept;
}

/// The extension decides who may call ([`Authorize`](crate::ext::Authorize)):
/// an authorization check. It runs where the call arrived, like a
/// [`CallerLocal`] one (outside every relocating extension, so no job is
/// enqueued for a caller it refuses), and every extension that answers from what
/// it kept ([`SharedAnswers`]) must sit inside it: rule
/// `shared-answers-inside-authorization`.
#[derive(Debug)]
pub struct Authorizing;
/// The extension answers callers from what it kept of earlier calls (a cache),
/// without calling below: an answer that may be another caller's, or one given
/// under another token. It must sit inside, that is before, every authorization
/// check of the combo (rule `shared-answers-inside-authorization`), or it would
/// answer callers the check never saw. It works anywhere else.
#[derive(Debug)]
pub struct SharedAnswers;

impl sealed::Sealed for Authorizing {}
impl sealed::Sealed for SharedAnswers {}

impl Locality for Authorizing {
    const PLACEMENT: Placement = Placement::BesideCaller;
    const ACCESS: AccessRole = AccessRole::Authorizes;
    // Outside every relocating extension too, but for its own reason: the typed
    // rule follows the first check (`Checked`), and its message says why.
    type After<E: Relocator, C: Relocator> = C;
    type Checked<E: Relocator, A: Relocator> = A::First<E>;
    type Hinting<Kept, Granted> = Kept;
}

impl Locality for SharedAnswers {
    const PLACEMENT: Placement = Placement::Anywhere;
    const ACCESS: AccessRole = AccessRole::SharesAnswers;
    type After<E: Relocator, C: Relocator> = C;
    type Checked<E: Relocator, A: Relocator> = A;
    type Hinting<Kept, Granted> = Kept;
}

/// The extension answers a repeated call, one with the same key (an
/// idempotency key, a retry's call, a redelivered job), with the first one's
/// outcome instead of calling below again ([`OncePerKey`](crate::ext::OncePerKey)): its
/// branch does no more when called twice than once, whatever the tool below says
/// of side effects, so a `retry` may sit outside it on any tool (rule
/// `side-effects`). What it answers is kept, per caller: like [`SharedAnswers`],
/// it must sit inside every authorization check (rule
/// `shared-answers-inside-authorization`). It works anywhere else.
///
/// Declaring it is a promise the compiler and the binding engine take at its
/// word, as they take a tool's `idempotentHint`: a `retry` binds over the
/// extension's branch on any tool. Declare it only for a layer that, like
/// `once`, never calls below twice for one key, and keeps what it answered
/// where every process that may run the call again reads it.
#[derive(Debug)]
pub struct AnswersRepeats;

impl sealed::Sealed for AnswersRepeats {}

impl Locality for AnswersRepeats {
    const PLACEMENT: Placement = Placement::Anywhere;
    const ACCESS: AccessRole = AccessRole::SharesAnswers;
    const ANSWERS_REPEATS: bool = true;
    type After<E: Relocator, C: Relocator> = C;
    type Checked<E: Relocator, A: Relocator> = A;
    type Hinting<Kept, Granted> = Granted;
}

/// What a layer does about who may have an answer, as a value: what
/// [`Locality::ACCESS`] says, what the binding engine checks for combos from
/// manifests (rule `shared-answers-inside-authorization`).
///
/// ```
/// use toolgraft::extension::{AccessRole, Authorizing, Locality, SharedAnswers};
/// assert_eq!(Authorizing::ACCESS, AccessRole::Authorizes);
/// assert_eq!(SharedAnswers::ACCESS.to_string(), "answers from what it kept");
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AccessRole {
    /// Neither: it calls below for every call it lets through.
    #[default]
    Neutral,
    /// It decides who may call ([`Authorizing`]).
    Authorizes,
    /// It answers from what it kept, without calling below ([`SharedAnswers`]).
    SharesAnswers,
}

impl AccessRole {
    /// Whether it is [`AccessRole::Neutral`].
    pub fn is_neutral(&self) -> bool {
        *self == Self::Neutral
    }
}

impl std::fmt::Display for AccessRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Neutral => "neutral",
            Self::Authorizes => "authorizes",
            Self::SharesAnswers => "answers from what it kept",
        })
    }
}

/// What relocated a combo so far: [`NotRelocated`], or the first relocating
/// extension itself (so a diagnostic can name it). Every extension is one.
#[doc(hidden)]
pub trait Relocator: sealed::Relocator {
    /// The first relocator once `E` (which relocates) is added.
    type First<E: Relocator>: Relocator;
}

/// No extension of the combo relocates execution (yet).
#[derive(Debug)]
pub struct NotRelocated;

impl sealed::Relocator for NotRelocated {}

impl Relocator for NotRelocated {
    type First<E: Relocator> = E;
}

/// No extension of the combo needs the caller's session (yet): the typestate's
/// counterpart of [`NotRelocated`] for rule `caller-outside-relocation`.
#[derive(Debug)]
pub struct NoCallerLocal;

impl sealed::Relocator for NoCallerLocal {}

impl Relocator for NoCallerLocal {
    type First<E: Relocator> = E;
}

/// No extension of the combo checks authorization (yet): the typestate's
/// counterpart of [`NotRelocated`] for rule `shared-answers-inside-authorization`.
#[derive(Debug)]
pub struct NoAuthorizer;

impl sealed::Relocator for NoAuthorizer {}

impl Relocator for NoAuthorizer {
    type First<E: Relocator> = E;
}
