//! Transformers without a hand-written stack: [`Transform`] says what one call
//! does, [`Transformed`] is the branch that runs it.

use std::fmt;
use std::future::Future;

use serde::Serialize;

use super::{Extension, LayerInput};
use crate::error::{ArgsError, ToolError};
use crate::kind::Transformer;
use crate::kind::property::Locality;
use crate::name::Name;
use crate::schema::Args;
use crate::stack::{Next, Stack};

/// What a transformer does to one call over the stack `S`: it takes an input of its
/// own, and answers with an output of its own, calling the layer below through
/// `next` as it needs.
///
/// A transformer is an [`Extension`] (which presents its input schema, as rule
/// `transformer-input-schema` in the [rulebook](crate::rulebook) asks), a `Transform`,
/// and a one-line [`Layer`](super::Layer) that returns [`Transformed::new`]. The
/// built-in `output_schema` is written this way.
///
/// ```
/// use toolgraft::extension::{decode_args, Anywhere, Args, Extension, Layer, LayerInput,
///     Next, Stack, Transform, Transformed, Transformer};
/// use toolgraft::error::ArgsError;
/// use toolgraft::ToolError;
///
/// /// Calls the layer below once per word of `text`, and counts the answers.
/// #[derive(Clone, Debug)]
/// struct PerWord;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Words { text: String }
///
/// impl Extension for PerWord {
///     type Kind = Transformer;
///     type Locality = Anywhere;
///     fn name(&self) -> &str { "per_word" }
///     fn input_schema(&self, _: &LayerInput<'_, Self>) -> Option<schemars::Schema> {
///         Some(toolgraft::schema::of::<Words>())
///     }
/// }
///
/// impl<S: Stack<Input = String>> Transform<S> for PerWord {
///     type Input = Words;
///     type Output = usize;
///
///     async fn call(&self, next: Next<'_, S, Self>, input: Words) -> Result<usize, ToolError> {
///         let mut answered = 0;
///         for word in input.text.split_whitespace() {
///             next.call(word.to_owned()).await?;
///             answered += 1;
///         }
///         Ok(answered)
///     }
///
///     fn decode(&self, _below: &S, args: Args) -> Result<Words, ArgsError> {
///         decode_args(args)
///     }
/// }
///
/// impl<S: Stack<Input = String>> Layer<S> for PerWord {
///     type Branch = Transformed<Self, S>;
///     fn layer(self, inner: S, below: &LayerInput<'_, Self>) -> Self::Branch {
///         Transformed::new(self, inner, below)
///     }
/// }
/// ```
pub trait Transform<S: Stack>: Extension<Kind = Transformer> + Clone {
    /// What the branch takes.
    type Input: Send + 'static;
    /// What the branch returns.
    type Output: Serialize + Send + 'static;

    /// Runs one call.
    fn call(
        &self,
        next: Next<'_, S, Self>,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// Reads the branch's input from JSON arguments: [`decode_args`](super::decode_args)
    /// for an input of its own, or through `below` (the layer below) for one that
    /// carries the layer input.
    fn decode(&self, below: &S, args: Args) -> Result<Self::Input, ArgsError>;
}

/// The branch a [`Transform`] mints. Made only for the transformer being bound
/// (from its [`LayerInput`]).
pub struct Transformed<T, S> {
    transform: T,
    inner: S,
    below: Name,
    branch: Name,
}

impl<T, S> fmt::Debug for Transformed<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transformed")
            .field("branch", &self.branch)
            .field("below", &self.below)
            .finish_non_exhaustive()
    }
}

impl<T: Clone, S: Clone> Clone for Transformed<T, S> {
    fn clone(&self) -> Self {
        Self {
            transform: self.transform.clone(),
            inner: self.inner.clone(),
            below: self.below.clone(),
            branch: self.branch.clone(),
        }
    }
}

impl<T: Transform<S>, S: Stack> Transformed<T, S> {
    /// The branch of `transform` over `inner`.
    pub fn new(transform: T, inner: S, below: &LayerInput<'_, T>) -> Self {
        Self {
            transform,
            inner,
            below: below.name.clone(),
            branch: below.branch.clone(),
        }
    }

    /// The transformer.
    pub fn transform(&self) -> &T {
        &self.transform
    }
}

impl<T: Transform<S>, S: Stack> Stack for Transformed<T, S> {
    type Input = T::Input;
    type Output = T::Output;

    #[inline]
    fn call(&self, input: T::Input) -> impl Future<Output = Result<T::Output, ToolError>> + Send {
        let call = self.transform.call(
            Next::new(
                &self.inner,
                &self.below,
                &self.branch,
                self.transform.name(),
            ),
            input,
        );
        // A body-local transformer's call is pinned, as a body-local wrapper's
        // (and one declared at run time) is; nothing for one that runs anywhere.
        let call = <T::Locality as Locality>::run_layer(self.transform.name(), &self.branch, call);
        #[cfg(feature = "otel")]
        let call = crate::otel::in_layer(
            <T::Kind as crate::kind::Kind>::KIND,
            self.transform.name(),
            &self.branch,
            &self.below,
            call,
        );
        call
    }

    fn decode(&self, args: Args) -> Result<T::Input, ArgsError> {
        self.transform.decode(&self.inner, args)
    }
}
