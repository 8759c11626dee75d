//! Published names: which bound names a toolset's clients see, and under
//! which names ([published-names](crate::rulebook#published-names)).

use std::collections::HashMap;

use serde::Serialize;

use super::info::ToolInfo;
use crate::error::BindError;
use crate::name::Name;

/// Which of a base tool's bound names its clients see (an MCP server lists and
/// calls these), and under which names. Set per tool with
/// [`Edit::publish`](crate::toolset::Edit::publish), or in a manifest.
///
/// Every bound name stays callable in process ([`Toolset::call`](crate::Toolset::call))
/// by its own name; publishing decides what
/// [`Toolset::published`](crate::Toolset::published) and
/// [`Toolset::call_published`](crate::Toolset::call_published) offer.
///
/// ```
/// use serde_json::json;
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::ext::{Cache, Trace};
/// use toolgraft::toolset::Publish;
/// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Query { q: String }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let search = Tool::builder().name("search").description("Search.").read_only()
///     .body(|i: Query| async move { Ok(i.q) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((search.combo().with(Cache::default()).with(Trace),))?;
///
/// // Clients keep calling `search`, and are served by the cached, traced branch.
/// toolset.edit().publish("search", Publish::only([("search", "search_cache_trace")])?).commit()?;
/// let published: Vec<_> = toolset.published().into_iter().map(|p| p.name.to_string()).collect();
/// assert_eq!(published, ["search"]);
/// assert_eq!(toolset.call_published("search", json!({"q": "tea"})).await?, json!("tea"));
/// assert!(toolset.call_published("search_cache", json!({"q": "tea"})).await.is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Publish {
    /// Every bound name, under its own name (the default).
    #[default]
    All,
    /// The outermost branch of each combo, under its own name; the base when it
    /// has no combo.
    Outermost,
    /// The tool's combo in place of the tool: its outermost branch published
    /// under the tool's own name, every other name hidden (the base alone when
    /// it has no combo). Clients keep the names they knew, and get the layers.
    /// A tool with several combos has no one branch to put in its place, and is
    /// refused.
    ///
    /// ```
    /// use toolgraft::{Tool, Toolset};
    /// use toolgraft::ext::{Cache, Trace};
    /// use toolgraft::toolset::Publish;
    /// # #[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)] struct Query { q: String }
    /// let search = Tool::builder().name("search").description("Search.").read_only()
    ///     .body(|i: Query| async move { Ok(i.q) }).build()?;
    /// let toolset = Toolset::new();
    /// toolset.bind_publishing((search.combo().with(Cache::default()).with(Trace),), [("search", Publish::InPlace)])?;
    /// assert_eq!(toolset.resolve("search").unwrap().name, "search_cache_trace");
    /// assert_eq!(toolset.published().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    InPlace,
    /// Exactly these: each published name with the bound name that serves it.
    /// A bound name may be published under several names, and one left out is
    /// hidden; none at all hides the tool.
    Only(Vec<(Name, Name)>),
}

impl Publish {
    /// [`Publish::Only`] from `(published, bound)` pairs of names.
    ///
    /// # Errors
    ///
    /// A published or bound name that is not a valid [`Name`].
    ///
    /// ```
    /// use toolgraft::toolset::Publish;
    /// assert!(Publish::only([("search", "search_cache")]).is_ok());
    /// assert!(Publish::only([("no spaces", "search")]).is_err());
    /// ```
    pub fn only<'a>(
        names: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, crate::error::InvalidName> {
        let names = names
            .into_iter()
            .map(|(published, bound)| Ok((Name::new(published)?, Name::new(bound)?)))
            .collect::<Result<_, _>>()?;
        Ok(Self::Only(names))
    }

    /// The names `tool` publishes, as `(published, bound)` pairs: `names` are
    /// its bound names, `outermost` each combo's outermost one.
    pub(crate) fn names(
        &self,
        tool: &Name,
        names: &[Name],
        outermost: impl Iterator<Item = Name>,
    ) -> Result<Vec<(Name, Name)>, BindError> {
        Ok(match self {
            Self::All => names
                .iter()
                .map(|name| (name.clone(), name.clone()))
                .collect(),
            Self::Outermost => {
                let mut published: Vec<_> = outermost.map(|name| (name.clone(), name)).collect();
                if published.is_empty() {
                    published.push((tool.clone(), tool.clone()));
                }
                published.sort();
                published.dedup();
                published
            }
            Self::InPlace => {
                let mut outermost: Vec<Name> = outermost.collect();
                outermost.sort();
                outermost.dedup();
                match outermost.len() {
                    0 => vec![(tool.clone(), tool.clone())],
                    1 => vec![(tool.clone(), outermost.remove(0))],
                    _ => {
                        return Err(BindError::InPlaceOfSeveral {
                            tool: tool.clone(),
                            outermost,
                        });
                    }
                }
            }
            Self::Only(pairs) => {
                for (published, bound) in pairs {
                    if !names.contains(bound) {
                        return Err(BindError::PublishedUnbound {
                            tool: tool.clone(),
                            published: published.clone(),
                            bound: bound.clone(),
                        });
                    }
                }
                pairs.clone()
            }
        })
    }
}

/// A published name and the bound name that serves it (see [`Publish`]).
///
/// ```
/// # use toolgraft::{Tool, Toolset};
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Query { q: String }
/// # let search = Tool::builder().name("search").description("Search.").read_only()
/// #     .body(|i: Query| async move { Ok(i.q) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((search.combo(),))?;
/// let published = &toolset.published()[0];
/// assert_eq!((published.name.as_str(), published.info.name.as_str()), ("search", "search"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Published {
    /// The name clients see and call.
    pub name: Name,
    /// The bound name behind it, and what clients see of it.
    pub info: ToolInfo,
}

/// Checks that `tool`'s published `names` are unique among all tools' (those
/// checked so far are in `published`, by the tool that publishes them), and each
/// fits `limit`.
pub(crate) fn check_unique(
    published: &mut HashMap<Name, Name>,
    tool: &Name,
    names: &[(Name, Name)],
    limit: usize,
) -> Result<(), BindError> {
    for (name, bound) in names {
        if name.len() > limit {
            return Err(BindError::PublishedTooLong {
                tool: tool.clone(),
                published: crate::error::shorten(name).into_owned(),
                bound: bound.clone(),
                len: name.len(),
                limit,
            });
        }
        // Built afresh for each change: an owner found is another tool, or
        // this one publishing the name twice.
        if let Some(owner) = published.insert(name.clone(), tool.clone()) {
            return Err(BindError::PublishedTwice {
                tool: tool.clone(),
                published: name.clone(),
                owner,
            });
        }
    }
    Ok(())
}
