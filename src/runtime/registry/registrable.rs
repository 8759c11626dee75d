//! What [`Registry::register`](super::Registry::register) takes: the sealed
//! [`Registrable`], and its plain case: a typed extension as itself.

use std::sync::Arc;

use serde_json::Value;

use super::error::RegistryError;
use super::factory::Factory;
use super::typed::Typed;
use crate::combo::typestate::{InputContract, OutputContract};
use crate::extension::Mint;
use crate::kind::Kind;
use crate::name::Name;
use crate::stack::erased::DynStack;
use crate::stack::{DynInput, Stack};

/// What [`Registry::register`](crate::Registry::register) takes: a typed extension (as itself), a
/// [`Configured`](super::Configured), a [`Refined`](super::Refined), or a [`DynExtension`](super::DynExtension).
///
/// ```
/// use toolgraft::runtime::Registrable;
/// use toolgraft::ext::Trace;
/// fn registrable(_: impl Registrable) {}
/// registrable(Trace);
/// ```
///
/// Sealed: each case is one of the types above.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be registered as an extension",
    label = "not a registrable extension",
    note = "`Registry::register` takes a typed extension (`register(Trace)`), `Configured::new(ext)` for one that takes author config, `Configured::<E>::named(\"name\")` for one built from config only, `Refined::new(ext, refine)`, or a `DynExtension`",
    note = "a typed extension registers when it is `Clone` (each manifest element gets its own clone) and layers over `DynStack`, the run-time stack of JSON values (every `Wrap` does): the `help` above names what `{Self}` lacks"
)]
pub trait Registrable: sealed::Sealed {}

pub(super) mod sealed {
    pub trait Sealed {
        /// The extension's name and factory, for the registry to keep.
        #[allow(private_interfaces)]
        fn into_factory(
            self,
        ) -> Result<(super::Name, super::Arc<dyn super::Factory>), super::RegistryError>;
    }

    /// A typed extension the registry can run over the erased layer below: the
    /// one bound every typed case shares, stated once.
    pub trait OverErased: super::Mint<super::DynStack> + Clone {
        /// The factory of `typed`, one of this extension's cases. Private types
        /// in a sealed trait: no one outside this module can name or call it.
        #[allow(private_interfaces)]
        fn factory(typed: super::Typed<Self>) -> super::Arc<dyn super::Factory>;
    }

    /// The input of `E`'s branch over the run-time stack, which a run-time layer
    /// around it may read as JSON. `Self` is that input, not `E`: a failing bound
    /// whose `Self` is the registered extension would be reported as the bare
    /// `Registrable`, without this message.
    #[diagnostic::on_unimplemented(
        message = "`{E}` cannot be registered: its branch takes `{Self}`, which is not `Serialize`",
        label = "the branch of `{E}` takes `{Self}`",
        note = "a registered extension runs among layers defined at run time, which read the arguments of the layer below as JSON: the registry rebuilds them from the typed input when asked",
        note = "derive `serde::Serialize` for `{Self}` (its `Deserialize` twin), or implement it"
    )]
    pub trait RunTimeInput<E>: serde::Serialize {}

    #[diagnostic::do_not_recommend]
    impl<I: serde::Serialize, E> RunTimeInput<E> for I {}
}

impl<E> sealed::OverErased for E
where
    E: Mint<DynStack> + Clone,
    <E::Kind as Kind>::InputRule: InputContract<E, DynInput, <E::Branch as Stack>::Input>,
    <E::Kind as Kind>::OutputRule: OutputContract<E, Value, <E::Branch as Stack>::Output>,
    <E::Branch as Stack>::Input: sealed::RunTimeInput<E>,
{
    #[allow(private_interfaces)]
    fn factory(typed: Typed<E>) -> Arc<dyn Factory> {
        Arc::new(typed)
    }
}

impl<E: sealed::OverErased> sealed::Sealed for E {
    #[allow(private_interfaces)]
    fn into_factory(self) -> Result<(Name, Arc<dyn Factory>), RegistryError> {
        let name = Name::new(self.name())?;
        Ok((name, E::factory(Typed::Default(self))))
    }
}

impl<E: sealed::OverErased> Registrable for E {}
