//! [`Cel`]: a condition in CEL, the Common Expression Language, over the
//! caller, the name called and the call's arguments (the `cel` feature).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Access, Denied, Missing, Policy};
use crate::quote::shorten;

/// The longest CEL expression, in characters.
pub const MAX_CEL_LEN: usize = 4096;

/// How deep a CEL expression may nest: brackets (`(`, `[`, `{`) within
/// brackets, and the operations of the parsed expression within one another
/// (`f(g(x))` is three levels, and so is `a + b + c`).
pub const MAX_CEL_DEPTH: usize = 24;

/// The most steps an expression may take per element of what the caller
/// sends: its operations, each counted once, but those in a comprehension
/// (`all`, `exists`, `map`, `filter`) over a literal list counted once per
/// element of that list. A comprehension inside another's body is refused
/// outright: over the caller's lists, its rounds would multiply.
pub const MAX_CEL_COST: u64 = 10_000;

/// A CEL condition of access, compiled: a [`Policy`] of its own, and a manifest
/// policy's `when` ([`PolicySpec::when`](super::PolicySpec::when)).
///
/// An expression is compiled once, where it is written (a manifest's `when`,
/// [`Cel::new`]), and evaluated on each call it guards. It reads these variables:
///
/// | variable | CEL type | value |
/// |---|---|---|
/// | `subject` | `string` | [`Identity::subject`](crate::context::Identity::subject) |
/// | `issuer` | `string` or `null` | [`Identity::issuer`](crate::context::Identity::issuer) |
/// | `scopes` | `list(string)` | [`Identity::scopes`](crate::context::Identity::scopes) |
/// | `claims` | `map(string, dyn)` | [`Identity::claims`](crate::context::Identity::claims) |
/// | `tool` | `string` | the name called ([`Access::name`]) |
/// | `arguments` | `map(string, dyn)` | the call's arguments ([`Access::arguments`]) |
///
/// It decides among authenticated callers: a call with no
/// [`Identity`](crate::context::Identity) is refused before it is evaluated.
/// It fails closed: a result other than `true`
/// refuses, and so does an evaluation that fails (a missing claim, a comparison
/// of a string with a number), with a reason that names neither the caller's
/// nor the arguments' values. A listing has no arguments: an expression that
/// reaches `arguments` there lets the name be listed, and its calls decide
/// (`claims.tenant == "acme" && arguments.limit <= 100` hides the name from
/// another tenant, and shows it to the caller of `acme`).
///
/// A hostile manifest cannot exhaust the process with an expression: one is at
/// most [`MAX_CEL_LEN`] characters and [`MAX_CEL_DEPTH`] levels deep, checked
/// before it is parsed, and parsed on a thread of its own with a stack that
/// holds whatever those limits let through; once parsed, it takes at most
/// [`MAX_CEL_COST`] steps, comprehensions over literal lists counted per
/// element, and none nests inside another ([`CelError::TooCostly`]). What an
/// expression costs per call then grows linearly with what it iterates of the
/// caller's (`arguments.items.all(i, ..)`), which the toolset's
/// [limits](crate::limits) bound.
///
/// Without toolgraft's `cel` feature the type is there, but [`Cel::new`] refuses
/// every expression with [`CelError::Disabled`], which says to enable it.
///
/// ```
/// # #[cfg(feature = "cel")] {
/// use serde_json::json;
/// use toolgraft::access::{Access, Cel, Policy};
/// use toolgraft::context::Identity;
/// let small = Cel::new(r#"claims.tenant == "acme" && arguments.limit <= 100"#)?;
/// let alice = Identity::new("alice").with_claim("tenant", "acme");
/// let args = |limit: i64| json!({"limit": limit}).as_object().cloned().unwrap();
/// assert!(small.check(&Access::call(Some(&alice), "search", &args(10))).is_ok());
/// let refused = small.check(&Access::call(Some(&alice), "search", &args(1000))).unwrap_err();
/// assert_eq!(refused.to_string(), "the call needs its access condition to hold");
/// // Listed: its calls decide on their arguments.
/// assert!(small.check(&Access::listing(Some(&alice), "search")).is_ok());
/// # }
/// # Ok::<(), toolgraft::access::CelError>(())
/// ```
#[derive(Clone)]
pub struct Cel {
    source: Arc<str>,
    compiled: Arc<Compiled>,
}

/// A CEL expression that cannot be used, named (shortened) with what is wrong.
///
/// ```
/// use toolgraft::access::{Cel, CelError};
/// let long = "true || ".repeat(600) + "true";
/// let refused = Cel::new(&long).unwrap_err();
/// if cfg!(feature = "cel") {
///     assert!(matches!(refused, CelError::TooLong { len: 4804, .. }));
/// } else {
///     assert!(refused.to_string().starts_with("CEL expressions need toolgraft's `cel` feature"));
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CelError {
    /// Longer than [`MAX_CEL_LEN`].
    #[error(
        "a CEL expression of {len} characters is longer than the {MAX_CEL_LEN} allowed: `{expression}`"
    )]
    TooLong {
        /// The expression, shortened.
        expression: String,
        /// Its length, in characters.
        len: usize,
    },
    /// Deeper than [`MAX_CEL_DEPTH`].
    #[error(
        "the CEL expression `{expression}` nests deeper than the {MAX_CEL_DEPTH} levels allowed (brackets, calls and operators within one another)"
    )]
    TooDeep {
        /// The expression, shortened.
        expression: String,
    },
    /// Could take more than [`MAX_CEL_COST`] steps per element of what the
    /// caller sends, or nests a comprehension inside another.
    #[error(
        "the CEL expression `{expression}` could take too long: {problem} (at most {MAX_CEL_COST} steps, a literal list's comprehension counted per element, and no comprehension inside another)"
    )]
    TooCostly {
        /// The expression, shortened.
        expression: String,
        /// Which of the two.
        problem: &'static str,
    },
    /// Not CEL.
    #[error("the CEL expression `{expression}` cannot be parsed: {problem}")]
    Syntax {
        /// The expression, shortened.
        expression: String,
        /// The parser's message, shortened.
        problem: String,
    },
    /// Written where toolgraft was built without its `cel` feature.
    #[error(
        "CEL expressions need toolgraft's `cel` feature (`features = [\"cel\"]` on the toolgraft dependency); `{expression}` was not compiled"
    )]
    Disabled {
        /// The expression, shortened.
        expression: String,
    },
}

impl Cel {
    /// `source`, compiled: refused when longer than [`MAX_CEL_LEN`], deeper than
    /// [`MAX_CEL_DEPTH`], or not CEL.
    ///
    /// ```
    /// use toolgraft::access::{Cel, CelError};
    /// let deep = format!("{}true{}", "(".repeat(2000), ")".repeat(2000));
    /// assert!(matches!(Cel::new(&deep), Err(CelError::TooDeep { .. } | CelError::Disabled { .. })));
    /// ```
    pub fn new(source: &str) -> Result<Self, CelError> {
        let expression = || shorten(source).into_owned();
        if !cfg!(feature = "cel") {
            return Err(CelError::Disabled {
                expression: expression(),
            });
        }
        let len = source.chars().count();
        if len > MAX_CEL_LEN {
            return Err(CelError::TooLong {
                expression: expression(),
                len,
            });
        }
        if bracket_depth(source) > MAX_CEL_DEPTH {
            return Err(CelError::TooDeep {
                expression: expression(),
            });
        }
        let compiled = engine::compile(source)?;
        Ok(Self {
            source: source.into(),
            compiled: Arc::new(compiled),
        })
    }

    /// The expression as written.
    ///
    /// ```
    /// # #[cfg(feature = "cel")] {
    /// assert_eq!(toolgraft::access::Cel::new("tool == 'x'")?.source(), "tool == 'x'");
    /// # }
    /// # Ok::<(), toolgraft::access::CelError>(())
    /// ```
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// The deepest nesting of brackets outside string literals: a bound checked
/// before the parser, which recurses on each, ever sees them. Strings are read
/// as CEL reads them: quoted by `"` or `'`, or by three of either, and raw (a
/// backslash escapes nothing) after an `r` or `R` prefix (`r"\"` is one
/// backslash).
fn bracket_depth(source: &str) -> usize {
    let chars: Vec<char> = source.chars().collect();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut at = 0;
    while let Some(&c) = chars.get(at) {
        match c {
            '"' | '\'' => at = string_end(&chars, at),
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
                at += 1;
            }
            ')' | ']' | '}' => {
                depth = depth.saturating_sub(1);
                at += 1;
            }
            _ => at += 1,
        }
    }
    deepest
}

/// Where the string literal whose opening quote is at `open` ends (just past
/// its closing quote, or the end of the source when it is not closed).
fn string_end(chars: &[char], open: usize) -> usize {
    let quote = chars[open];
    // The prefix: the letters just before the quote (`r`, `b`, `rb`, `br`, any case).
    let prefix: Vec<char> = chars[..open]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
        .take(3)
        .copied()
        .collect();
    let raw = prefix.len() <= 2
        && prefix.iter().all(|c| matches!(c, 'r' | 'R' | 'b' | 'B'))
        && prefix.iter().any(|c| matches!(c, 'r' | 'R'));
    let triple = chars.get(open + 1) == Some(&quote) && chars.get(open + 2) == Some(&quote);
    let mut at = open + if triple { 3 } else { 1 };
    while let Some(&c) = chars.get(at) {
        if c == '\\' && !raw {
            at += 2;
        } else if c == quote && !triple {
            return at + 1;
        } else if c == quote
            && chars.get(at + 1) == Some(&quote)
            && chars.get(at + 2) == Some(&quote)
        {
            return at + 3;
        } else {
            at += 1;
        }
    }
    chars.len()
}

impl Policy for Cel {
    fn check(&self, access: &Access<'_>) -> Result<(), Denied> {
        let Some(who) = access.identity else {
            return Err(Denied::new(Missing::Caller));
        };
        engine::evaluate(&self.compiled, access, who).map_err(|why| {
            let words = match why {
                None => "its access condition to hold".to_owned(),
                Some(why) => format!("its access condition to hold ({why})"),
            };
            Denied::new(Missing::Condition(words))
        })
    }

    fn reads_arguments(&self) -> bool {
        engine::reads_arguments(&self.compiled)
    }
}

impl fmt::Debug for Cel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Cel").field(&self.source).finish()
    }
}

impl PartialEq for Cel {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Cel {}

impl Serialize for Cel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for Cel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Expression;
        impl serde::de::Visitor<'_> for Expression {
            type Value = Cel;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CEL expression (a string)")
            }

            fn visit_str<E: serde::de::Error>(self, source: &str) -> Result<Cel, E> {
                Cel::new(source).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Expression)
    }
}

/// The CEL interpreter behind [`Cel`]: the `cel` crate.
#[cfg(feature = "cel")]
mod engine {
    use std::sync::{Arc, OnceLock};

    use ::cel::common::ast::{EntryExpr, Expr};
    use ::cel::{Context, Env, ExecutionError, IdedExpr, Program, Value};

    use super::{CelError, MAX_CEL_COST, MAX_CEL_DEPTH};
    use crate::access::Access;
    use crate::context::Identity;
    use crate::quote::shorten;

    /// Enough for the parser's recursion over any expression the limits let
    /// through (its parse tree of a 4,096-character operator chain is that
    /// deep); only touched pages are committed.
    const PARSER_STACK: usize = 64 << 20;

    /// A compiled expression, with the variables it reads.
    pub(super) struct Compiled {
        program: Program,
        reads: Reads,
    }

    #[derive(Clone, Copy, Default)]
    struct Reads {
        subject: bool,
        issuer: bool,
        scopes: bool,
        claims: bool,
        tool: bool,
        arguments: bool,
    }

    /// CEL's standard functions and macros, built once.
    fn env() -> &'static Arc<Env> {
        static ENV: OnceLock<Arc<Env>> = OnceLock::new();
        ENV.get_or_init(|| Arc::new(Env::stdlib()))
    }

    pub(super) fn compile(source: &str) -> Result<Compiled, CelError> {
        let expression = || shorten(source).into_owned();
        let owned = source.to_owned();
        // The parser recurses on the expression's parse tree: on a thread of its
        // own, a deep one is an error, never an overflow of the caller's stack;
        // the program it returns is checked for depth there too, before anyone
        // walks it recursively.
        let parsed = std::thread::Builder::new()
            .name("toolgraft-cel-parse".into())
            .stack_size(PARSER_STACK)
            .spawn(move || -> Result<Compiled, Refused> {
                let program = env()
                    .compile(&owned)
                    .map_err(|errors| Refused::Syntax(errors.to_string()))?;
                if depth(program.expression()) > MAX_CEL_DEPTH {
                    return Err(Refused::TooDeep);
                }
                // Walked recursively: no deeper than MAX_CEL_DEPTH now.
                let steps = cost(program.expression(), false).map_err(Refused::TooCostly)?;
                if steps > MAX_CEL_COST {
                    return Err(Refused::TooCostly("it could take more steps than allowed"));
                }
                let references = program.references();
                let reads = Reads {
                    subject: references.has_variable("subject"),
                    issuer: references.has_variable("issuer"),
                    scopes: references.has_variable("scopes"),
                    claims: references.has_variable("claims"),
                    tool: references.has_variable("tool"),
                    arguments: references.has_variable("arguments"),
                };
                Ok(Compiled { program, reads })
            });
        let outcome = match parsed {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Refused::Syntax("the parser panicked".into()))),
            Err(error) => Err(Refused::Syntax(format!(
                "the parser's thread did not start: {error}"
            ))),
        };
        outcome.map_err(|refused| match refused {
            Refused::TooDeep => CelError::TooDeep {
                expression: expression(),
            },
            Refused::TooCostly(problem) => CelError::TooCostly {
                expression: expression(),
                problem,
            },
            Refused::Syntax(problem) => CelError::Syntax {
                expression: expression(),
                problem: shorten(problem.trim()).into_owned(),
            },
        })
    }

    /// Why the parser's thread refused an expression.
    enum Refused {
        TooDeep,
        TooCostly(&'static str),
        Syntax(String),
    }

    /// How many rounds a comprehension over `range` makes at most, per
    /// element of what the caller sends: a literal list's (or map's) elements,
    /// those of another comprehension's range (`map` and `filter` give at
    /// most one element per round), lists added together; anything else is
    /// the caller's, whose size is the caller's to pay for.
    fn rounds(range: &IdedExpr) -> u64 {
        match &range.expr {
            Expr::List(list) => list.elements.len().max(1) as u64,
            Expr::Map(map) => map.entries.len().max(1) as u64,
            Expr::Comprehension(comprehension) => rounds(&comprehension.iter_range),
            Expr::Call(call) if call.func_name == "_+_" => call
                .args
                .iter()
                .fold(0u64, |total, arg| total.saturating_add(rounds(arg))),
            _ => 1,
        }
    }

    /// An upper bound of the steps `node` takes per element of what the
    /// caller sends (see [`MAX_CEL_COST`]), saturating; refused for a
    /// comprehension inside another's body (`in_loop`).
    fn cost(node: &IdedExpr, in_loop: bool) -> Result<u64, &'static str> {
        match &node.expr {
            Expr::Comprehension(comprehension) => {
                if in_loop {
                    return Err("a comprehension runs inside another's body");
                }
                let rounds = rounds(&comprehension.iter_range);
                let once = cost(&comprehension.iter_range, false)?
                    .saturating_add(cost(&comprehension.accu_init, false)?)
                    .saturating_add(cost(&comprehension.result, false)?);
                let round = cost(&comprehension.loop_cond, true)?
                    .saturating_add(cost(&comprehension.loop_step, true)?);
                Ok(once.saturating_add(rounds.saturating_mul(round)))
            }
            _ => {
                let mut total = 1u64;
                for child in children(node) {
                    total = total.saturating_add(cost(child, in_loop)?);
                }
                Ok(total)
            }
        }
    }

    /// The depth of a parsed expression, walked without recursion.
    fn depth(root: &IdedExpr) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(root, 1usize)];
        while let Some((node, level)) = stack.pop() {
            deepest = deepest.max(level);
            stack.extend(children(node).into_iter().map(|child| (child, level + 1)));
        }
        deepest
    }

    /// The expressions `node` is made of.
    fn children(node: &IdedExpr) -> Vec<&IdedExpr> {
        let mut children: Vec<&IdedExpr> = Vec::new();
        match &node.expr {
            Expr::Call(call) => {
                children.extend(call.target.as_deref());
                children.extend(&call.args);
            }
            Expr::Comprehension(comprehension) => children.extend([
                &comprehension.iter_range,
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ]),
            Expr::List(list) => children.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    entry_of(&entry.expr, &mut children);
                }
            }
            Expr::Struct(fields) => {
                for entry in &fields.entries {
                    entry_of(&entry.expr, &mut children);
                }
            }
            Expr::Select(select) => children.push(&select.operand),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
        children
    }

    fn entry_of<'a>(entry: &'a EntryExpr, children: &mut Vec<&'a IdedExpr>) {
        match entry {
            EntryExpr::StructField(field) => children.push(&field.value),
            EntryExpr::MapEntry(entry) => children.extend([&entry.key, &entry.value]),
        }
    }

    pub(super) fn reads_arguments(compiled: &Compiled) -> bool {
        compiled.reads.arguments
    }

    fn string(text: &str) -> Value {
        Value::String(Arc::new(text.to_owned()))
    }

    /// `Ok` when the expression gives `true`; else why not, in words that quote
    /// no value (`None`: it gave `false`).
    pub(super) fn evaluate(
        compiled: &Compiled,
        access: &Access<'_>,
        who: &Identity,
    ) -> Result<(), Option<String>> {
        let reads = compiled.reads;
        let mut context = Context::with_env(env().clone());
        let unreadable = |_| Some("a value it reads could not be converted".to_owned());
        if reads.subject {
            context.add_variable_from_value("subject", string(who.subject()));
        }
        if reads.issuer {
            context.add_variable_from_value("issuer", who.issuer().map_or(Value::Null, string));
        }
        if reads.scopes {
            let scopes = who.scopes().into_iter().map(string).collect();
            context.add_variable_from_value("scopes", Value::List(Arc::new(scopes)));
        }
        if reads.claims {
            context.add_variable_from_value(
                "claims",
                ::cel::to_value(who.claims()).map_err(unreadable)?,
            );
        }
        if reads.tool {
            context.add_variable_from_value("tool", string(access.name));
        }
        if reads.arguments
            && let Some(arguments) = access.arguments
        {
            context.add_variable_from_value(
                "arguments",
                ::cel::to_value(arguments).map_err(unreadable)?,
            );
        }
        match compiled.program.execute(&context) {
            Ok(Value::Bool(true)) => Ok(()),
            Ok(Value::Bool(false)) => Err(None),
            Ok(other) => Err(Some(format!("it gave a {}, not a bool", other.type_of()))),
            // A listing: the calls decide on their arguments.
            Err(ExecutionError::UndeclaredReference(name))
                if access.arguments.is_none() && name.as_str() == "arguments" =>
            {
                Ok(())
            }
            Err(error) => Err(Some(format!("its evaluation failed: {}", failure(&error)))),
        }
    }

    /// What went wrong, without the values the interpreter's message quotes
    /// (an argument's, a claim's).
    fn failure(error: &ExecutionError) -> &'static str {
        match error {
            ExecutionError::NoSuchKey(_) => "a key it reads is missing",
            ExecutionError::UndeclaredReference(_) => "it reads an undeclared name",
            ExecutionError::NoSuchOverload(_)
            | ExecutionError::UnexpectedType { .. }
            | ExecutionError::ValuesNotComparable(..)
            | ExecutionError::UnsupportedBinaryOperator(..)
            | ExecutionError::UnsupportedTargetType { .. }
            | ExecutionError::NotSupportedAsMethod { .. } => {
                "an operation on values of the wrong type"
            }
            ExecutionError::DivisionByZero(_) | ExecutionError::RemainderByZero(_) => {
                "a division by zero"
            }
            ExecutionError::Overflow(..) => "an overflow",
            ExecutionError::IndexOutOfBounds(_) | ExecutionError::UnsupportedIndex(..) => {
                "an index out of bounds"
            }
            _ => "an error of the interpreter",
        }
    }
}

/// Without the `cel` feature: no expression compiles, so none is evaluated.
#[cfg(not(feature = "cel"))]
mod engine {
    use super::CelError;
    use crate::access::Access;
    use crate::context::Identity;
    use crate::quote::shorten;

    /// None: [`compile`] refuses every expression.
    pub(super) enum Compiled {}

    pub(super) fn compile(source: &str) -> Result<Compiled, CelError> {
        Err(CelError::Disabled {
            expression: shorten(source).into_owned(),
        })
    }

    pub(super) fn reads_arguments(compiled: &Compiled) -> bool {
        match *compiled {}
    }

    pub(super) fn evaluate(
        compiled: &Compiled,
        _: &Access<'_>,
        _: &Identity,
    ) -> Result<(), Option<String>> {
        match *compiled {}
    }
}

use engine::Compiled;
