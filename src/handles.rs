//! The public handles are `Send + Sync`: an application keeps them in its state,
//! shares them across tasks and threads, and returns the errors from spawned tasks.
//! A field that loses either (an `Rc`, a `RefCell`, a non-`Sync` closure) fails
//! the build here, naming the type, not in a user's `tokio::spawn`.

use static_assertions::assert_impl_all;

use crate::combo::{Branch, Combo};
use crate::context::{Asker, Context, Principal, ProgressSink};
use crate::error::{ArgsError, BindError, ToolError};
use crate::extension::ConfigError;
use crate::limits::{LimitError, Limits};
use crate::name::{InvalidName, Name};
use crate::relocation::{Deferral, Departure, WireContext};
use crate::runtime::manifest::ManifestError;
use crate::runtime::{
    CatalogueEntry, DynBranch, DynExtension, DynStack, DynTool, Manifest, Registry, RegistryError,
};
use crate::toolset::{BaseTools, ToolInfo, Toolset, WeakToolset};

assert_impl_all!(Toolset: Send, Sync, Clone);
assert_impl_all!(WeakToolset: Send, Sync, Clone);
assert_impl_all!(BaseTools: Send, Sync);
assert_impl_all!(ToolInfo: Send, Sync);
assert_impl_all!(Registry: Send, Sync, Clone);
assert_impl_all!(CatalogueEntry: Send, Sync);
assert_impl_all!(Manifest: Send, Sync);
assert_impl_all!(DynExtension: Send, Sync);
assert_impl_all!(DynBranch: Send, Sync);
assert_impl_all!(DynStack: Send, Sync);
assert_impl_all!(DynTool: Send, Sync);
// The typed handles are generic over their stack: over a run-time one, they are.
assert_impl_all!(Branch<DynStack>: Send, Sync);
assert_impl_all!(Combo<DynStack>: Send, Sync);
assert_impl_all!(Name: Send, Sync);
assert_impl_all!(Context: Send, Sync);
assert_impl_all!(Asker: Send, Sync);
assert_impl_all!(Principal: Send, Sync);
assert_impl_all!(ProgressSink: Send, Sync);
assert_impl_all!(Limits: Send, Sync);
assert_impl_all!(Departure: Send, Sync);
assert_impl_all!(WireContext: Send, Sync);
assert_impl_all!(Deferral: Send, Sync);
// Errors cross task boundaries (`JoinHandle<Result<_, E>>`) and `Box<dyn Error + Send + Sync>`.
assert_impl_all!(ToolError: Send, Sync, std::error::Error);
assert_impl_all!(BindError: Send, Sync, std::error::Error);
assert_impl_all!(ArgsError: Send, Sync, std::error::Error);
assert_impl_all!(RegistryError: Send, Sync, std::error::Error);
assert_impl_all!(ManifestError: Send, Sync, std::error::Error);
assert_impl_all!(ConfigError: Send, Sync, std::error::Error);
assert_impl_all!(LimitError: Send, Sync, std::error::Error);
assert_impl_all!(InvalidName: Send, Sync, std::error::Error);
