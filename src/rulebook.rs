//! The rulebook: every rule a combo obeys, one named section each.
//!
//! Typed combos are checked by the compiler, where a rule can be a trait bound;
//! combos that only exist at run time (a manifest, [`Toolset::edit`]) are checked
//! when they are bound, by the same binding engine, in the order below, and each
//! refusal is a [`BindError`] whose [`rule`](crate::error::BindError::rule) names its section
//! here. Errors, diagnostics and docs across the crate point to these names.
//!
//! [`Toolset::edit`]: crate::Toolset::edit
//! [`BindError`]: crate::BindError
//!
//! # Vocabulary
//!
//! A *tool* is a named, described async function with JSON-Schema input and
//! output. An *extension* extends one tool: given the layer below (its callable,
//! running name and description, and optional author config) it mints a new-named
//! *branch* beside it. A *combo* is an ordered, non-empty list of extensions on one
//! *base* tool; `[a, b]` is `b(a(tool))`. Its *kind* is `wrapper`, `transformer` or
//! `backend`, and kinds differ only in five properties (see
//! [`ExtensionKind`](crate::kind::ExtensionKind)): generic machinery reads a property,
//! never a kind's name.
//!
//! # branch-by-rename
//! Applying an element mints a new-named branch, `<layer input name>_<extension
//! name>`, bound alongside the original: no kind replaces a tool in place. A branch
//! whose name equals the base's is refused.
//!
//! # order
//! `[a, b]` applies `a` first, then `b`: `b` is outermost and sees the call first.
//!
//! # one-branch-per-prefix
//! Combo `[a, b]` on `tool` binds `tool`, `tool_a` and `tool_a_b`. Separate combos
//! are independent (`[[a], [b]]` never binds `tool_a_b`); identical prefixes bind
//! once; two different stacks that would mint the same name are refused.
//!
//! # unknown-extension
//! At run time, every name in a combo that the registry does not know is reported,
//! sorted, before anything else is checked.
//!
//! # cardinality
//! A kind whose `multiple` is false (a backend) appears at most once per combo; the
//! same backend twice counts twice. Two combos of one tool may each hold one.
//!
//! # locality-inside-relocation
//! An extension that needs body locality (it sets something only the body's task
//! or thread sees, like `proxy`'s route) must sit inside, that is before, every
//! extension that relocates execution: `[proxy, pool]` binds, `[pool, proxy]`
//! does not, since outside the pool the proxy would wrap only the submitting side.
//! Extensions without the need may sit outside a backend; they run in the calling
//! process. The rules see a combo's own elements: an extension's kind and locality
//! are its author's word about what its code does, and a branch whose code calls
//! another tool runs that tool with that tool's own combo.
//!
//! # config
//! An element's config reaches only an extension that accepts config (an empty one
//! is fine anywhere); a config the extension cannot parse or work with is refused,
//! naming the extension and the field.
//!
//! # wrapper-input-schema
//! A wrapper's branch presents its layer input's input schema unchanged, defaults,
//! descriptions and constraints included, plus the wrapper's reserved params. Typed
//! wrappers hold this by construction (the branch takes the layer's input type);
//! at run time it is compared.
//!
//! # reserved-params
//! A wrapper may add control parameters for itself (`cache`'s `exp`, `proxy`'s
//! `proxies`); they are taken out before the layer below is called. One whose name
//! the layer input already has is refused (it would mask a real parameter), and so
//! is one that is not an inline JSON type. Parameters a transformer or backend adds
//! beside its layer input's follow the same rule.
//!
//! # transformer-input-schema
//! A transformer presents its own concrete input schema: an object with named
//! properties, or an empty object. A bare "any JSON" passthrough is refused.
//!
//! # backend-input-schema
//! No rule: a backend may add task options of its own.
//!
//! # output-schema
//! A branch inherits the base's output schema only when every element of its
//! prefix preserves output shape (no transformer in it) and it declares none of its
//! own. Typed wrappers and backends keep the output type, so this holds by
//! construction. A wrapper or backend returns its layer's output as is: it may
//! declare an output schema where its layer has none, never one that contradicts
//! its layer's.
//!
//! # description-carry-forward
//! The running description starts as the base's; an element that sets one replaces
//! it, one that does not keeps it.
//!
//! # all-or-nothing
//! A rule broken in any combo of a tool leaves none of that tool's names bound (nor
//! changed, for a live change).
//!
//! # registry
//! Registering an extension name twice is refused. The catalogue lists `{name,
//! kind}` sorted by name, kinds in lowercase.
//!
//! # branch-bookkeeping
//! Every bound name knows its base and whether it is a branch. A branch is never
//! the target of a combo.
//!
//! # relocation
//! A backend ships no code: it hands the name of its layer input (the branch just
//! inside it) and the JSON arguments to a worker that has the same tools bound, and
//! the worker runs that inner stack. Everything inside the backend runs on the
//! worker, everything outside where the call arrived; task-locals, thread-locals and
//! in-memory caches do not cross. A backend's branch answers with its layer's result
//! ([output-schema](#output-schema)): one that answers with something else, a job
//! ticket, is a transformer over the backend's branch (`toolgraft-jobs`' `submit`
//! sits right outside its `remote`).
//!
//! # manifest-shape
//! A manifest maps base tool names to combos: `{"tools": {"weather": [["cache",
//! "batch"], ["trace"]]}}`; a flat list is one combo. Refused, naming the tool: a
//! value that is not a list, an empty list or combo, flat elements mixed with
//! combos, and an element that is neither a non-empty name nor `{name, config}`
//! with a mapping config and no other keys.
