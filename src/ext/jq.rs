//! `jq` (feature `jq`): jq expressions, compiled and run with
//! [jaq](https://docs.rs/jaq-core) (the Rust jq implementation) under bounds, for
//! [`Chain`](crate::ext::Chain).
//!
//! An expression from a caller is hostile input, so a run is bounded three ways,
//! each ending it with a typed [`JqError`] instead of a hang or an exhausted stack:
//!
//! * **steps**: every call of a jq function (`def`s, the standard library's
//!   generators such as `range`, `repeat`, `recurse` and `..`) is a step, and a run
//!   has [`JqBounds::steps`] of them (`def f: f; f` stops there);
//! * **time**: a run stops at [`JqBounds::time`];
//! * **depth**: a run has its own thread with a large stack, and stops well before
//!   its end (`def f: [f]; f` stops there).
//!
//! Expressions are at most [`MAX_EXPRESSION_LEN`] bytes, and a result at most
//! [`MAX_RESULT_NODES`] JSON values.
//!
//! What the bounds do not see: memory. A step checks the clock, so a run that
//! builds a huge value by repeated doubling (`reduce range(40) as $i ("x"; . + .)`)
//! stops at the first step after its time is up, having allocated what fits in
//! that time (a few GB at most on current machines); and one built-in that runs
//! long on one huge value (`tojson` of a value built by doubling, say) is not
//! interrupted: the caller is answered at the time bound all the same, and the
//! run's thread ends when that built-in returns.

use std::any::Any;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jaq_core::data::JustLut;
use jaq_core::load::parse::{BinaryOp, Def, Term};
use jaq_core::load::{Arena, File, Loader};
use jaq_core::path::{Part, Path};
use jaq_core::{Bind, Compiler, Ctx, Filter, Native, Vars, box_iter::box_once};
use jaq_json::Val;
use serde_json::{Map, Number, Value};

use crate::error::shorten;

/// The longest expression accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 4096;

/// The most JSON values (array items, object entries, scalars) a result may hold.
pub const MAX_RESULT_NODES: usize = 1_000_000;

/// The stack of a run's thread: reserved, not committed (the pages a run does not
/// touch take no memory).
const STACK: usize = 256 << 20;

/// How much of it a run may use before it stops, leaving room for what a step
/// does between two checks.
const STACK_USE: usize = 160 << 20;

/// The name of the step counter the compiler inserts before every function body.
const TICK: &str = "__toolgraft_step";

type Data = JustLut<Val>;

/// How far one run may go.
///
/// ```
/// let bounds = toolgraft::ext::jq::JqBounds::default();
/// assert_eq!(bounds.steps, 100_000);
/// assert_eq!(bounds.time, std::time::Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JqBounds {
    /// Calls of jq functions.
    pub steps: u64,
    /// Wall time.
    pub time: Duration,
}

impl Default for JqBounds {
    fn default() -> Self {
        Self {
            steps: 100_000,
            time: Duration::from_secs(1),
        }
    }
}

/// Why a jq expression could not be compiled or run.
///
/// ```
/// use toolgraft::ext::jq::{Jq, JqError};
/// let err = Jq::compile(".a |").unwrap_err();
/// assert!(matches!(err, JqError::Compile { .. }), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JqError {
    /// The expression does not compile (syntax, an undefined function or variable,
    /// or too long).
    #[error("jq expression does not compile: {problem}")]
    Compile {
        /// What is wrong, and where.
        problem: String,
    },
    /// The expression raised an error (`error("..")`, `1 + "a"`, ...).
    #[error("jq expression failed: {problem}")]
    Failed {
        /// jq's error, shortened.
        problem: String,
    },
    /// The run used all its steps.
    #[error("jq expression took more than {steps} steps; is there an endless recursion?")]
    OutOfSteps {
        /// The bound.
        steps: u64,
    },
    /// The run used all its time.
    #[error("jq expression ran longer than {after:?}")]
    OutOfTime {
        /// The bound.
        after: Duration,
    },
    /// The run recursed too deep.
    #[error("jq expression recursed too deep")]
    TooDeep,
    /// The expression yielded no value, or more than one.
    #[error("jq expression yielded {0}, not exactly one value")]
    NotOneValue(&'static str),
    /// The result is not JSON (an object key that is not a string), or too large.
    #[error("the jq result is not JSON the next tool can take: {problem}")]
    NotJson {
        /// What is wrong with it.
        problem: String,
    },
}

/// A compiled jq expression (see the [module](self) for the bounds it runs under).
///
/// ```
/// use serde_json::json;
/// use toolgraft::ext::jq::{Jq, JqBounds};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let jq = Jq::compile("{lat: .at.lat, days: ([.days[] | select(. > 2)] | length)}")?;
/// let out = jq.run(json!({"at": {"lat": 38.7}, "days": [1, 3, 5]}), JqBounds::default()).await?;
/// assert_eq!(out, json!({"lat": 38.7, "days": 2}));
///
/// // The step bound, not the clock, stops it (on a loaded machine the default
/// // second can run out first).
/// let bounds = JqBounds { time: std::time::Duration::from_secs(60), ..JqBounds::default() };
/// let endless = Jq::compile("def f: f; f")?;
/// let err = endless.run(json!(null), bounds).await.unwrap_err();
/// assert_eq!(err.to_string(), "jq expression took more than 100000 steps; is there an endless recursion?");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Jq {
    code: Arc<str>,
    filter: Arc<Filter<Data>>,
}

impl std::fmt::Debug for Jq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Jq").field(&self.code).finish()
    }
}

impl PartialEq for Jq {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
    }
}

impl Jq {
    /// Compiles `code` (on a thread of its own: the parser recurses).
    pub fn compile(code: &str) -> Result<Self, JqError> {
        let code: Arc<str> = code.into();
        let owned = code.clone();
        let filter = on_own_thread(move || compile(&owned))
            .unwrap_or_else(|problem| Err(JqError::Compile { problem }))?;
        Ok(Self {
            code,
            filter: Arc::new(filter),
        })
    }

    /// Compiles `code` without blocking the async runtime (what a chain does with
    /// a caller's expression).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let jq = toolgraft::ext::jq::Jq::compile_async(".a").await.unwrap();
    /// assert_eq!(jq.code(), ".a");
    /// # }
    /// ```
    pub async fn compile_async(code: &str) -> Result<Self, JqError> {
        let code: Arc<str> = code.into();
        let owned = code.clone();
        let (send, receive) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("toolgraft-jq".to_owned())
            .stack_size(STACK)
            .spawn(move || {
                let _ = send.send(std::panic::catch_unwind(|| compile(&owned)));
            });
        if let Err(error) = spawned {
            return Err(JqError::Compile {
                problem: format!("no thread to compile it on: {error}"),
            });
        }
        match receive.await {
            Ok(Ok(filter)) => Ok(Self {
                code,
                filter: Arc::new(filter?),
            }),
            Ok(Err(panic)) => Err(JqError::Compile {
                problem: format!(
                    "the compiler panicked: {}",
                    shorten(&crate::error::panic_message(panic.as_ref()))
                ),
            }),
            Err(_) => Err(JqError::Compile {
                problem: "its thread ended without a result".to_owned(),
            }),
        }
    }

    /// The expression as written.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Runs the expression on `input`; it must yield exactly one value.
    pub async fn run(&self, input: Value, bounds: JqBounds) -> Result<Value, JqError> {
        let filter = self.filter.clone();
        run_bounded(move || run(&filter, input, bounds), bounds).await
    }

    /// Compiles `code` and runs it on `input`, on one thread (an expression from a
    /// caller, used once).
    pub async fn compile_and_run(
        code: &str,
        input: Value,
        bounds: JqBounds,
    ) -> Result<Value, JqError> {
        let code = code.to_owned();
        run_bounded(
            move || {
                let filter = compile(&code)?;
                run(&filter, input, bounds)
            },
            bounds,
        )
        .await
    }
}

/// Runs `job` on a thread with a large stack, and waits for it up to the time
/// bound (plus a grace for the thread to start and the result to convert).
async fn run_bounded<F>(job: F, bounds: JqBounds) -> Result<Value, JqError>
where
    F: FnOnce() -> Result<Value, JqError> + Send + 'static,
{
    let (send, receive) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("toolgraft-jq".to_owned())
        .stack_size(STACK)
        .spawn(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(job));
            // The caller may have stopped waiting.
            let _ = send.send(outcome);
        });
    if let Err(error) = spawned {
        return Err(JqError::Failed {
            problem: format!("no thread to run it on: {error}"),
        });
    }
    let grace = Duration::from_secs(1);
    match tokio::time::timeout(bounds.time.saturating_add(grace), receive).await {
        Ok(Ok(Ok(result))) => result,
        Ok(Ok(Err(panic))) => Err(stopped(panic, bounds)),
        Ok(Err(_)) => Err(JqError::Failed {
            problem: "its thread ended without a result".to_owned(),
        }),
        Err(_) => Err(JqError::OutOfTime { after: bounds.time }),
    }
}

/// Runs `job` on a thread with a large stack and waits for it (compiling only:
/// bounded by the expression's length).
fn on_own_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    std::thread::Builder::new()
        .name("toolgraft-jq".to_owned())
        .stack_size(STACK)
        .spawn(job)
        .map_err(|error| format!("no thread to compile it on: {error}"))?
        .join()
        .map_err(|panic| {
            format!(
                "the compiler panicked: {}",
                shorten(&crate::error::panic_message(panic.as_ref()))
            )
        })
}

/// Why a run stopped early: the payload a step unwinds with (without the panic
/// hook: `resume_unwind`).
#[derive(Debug)]
enum Stop {
    Steps,
    Time,
    Depth,
}

fn stopped(panic: Box<dyn Any + Send>, bounds: JqBounds) -> JqError {
    match panic.downcast::<Stop>() {
        Ok(stop) => match *stop {
            Stop::Steps => JqError::OutOfSteps {
                steps: bounds.steps,
            },
            Stop::Time => JqError::OutOfTime { after: bounds.time },
            Stop::Depth => JqError::TooDeep,
        },
        Err(panic) => JqError::Failed {
            problem: format!(
                "jaq panicked: {}",
                shorten(&crate::error::panic_message(panic.as_ref()))
            ),
        },
    }
}

/// The current run's budget (one run per thread).
struct Budget {
    steps_left: u64,
    deadline: Instant,
    stack_base: usize,
}

thread_local! {
    static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// One step: the body of the native the compiler puts before every function body.
fn step() {
    let here = 0u8;
    let address = std::ptr::addr_of!(here) as usize;
    let stop = BUDGET.with(|budget| {
        let mut current = budget.take()?;
        let stop = if current.steps_left == 0 {
            Some(Stop::Steps)
        } else if current.stack_base.abs_diff(address) > STACK_USE {
            Some(Stop::Depth)
        } else if Instant::now() >= current.deadline {
            Some(Stop::Time)
        } else {
            None
        };
        current.steps_left = current.steps_left.saturating_sub(1);
        budget.set(Some(current));
        stop
    });
    if let Some(stop) = stop {
        // No panic hook, no message: this is how a run is stopped from inside.
        std::panic::resume_unwind(Box::new(stop));
    }
}

fn run(filter: &Filter<Data>, input: Value, bounds: JqBounds) -> Result<Value, JqError> {
    let here = 0u8;
    let input: Val = serde::Deserialize::deserialize(input).map_err(|error| JqError::Failed {
        problem: format!("the input is not a jq value: {error}"),
    })?;
    BUDGET.with(|budget| {
        budget.set(Some(Budget {
            steps_left: bounds.steps,
            deadline: Instant::now() + bounds.time,
            stack_base: std::ptr::addr_of!(here) as usize,
        }))
    });
    let ctx = Ctx::<Data>::new(&filter.lut, Vars::new([]));
    let mut outputs = filter.id.run((ctx, input)).map(jaq_core::unwrap_valr);
    let first = match outputs.next() {
        None => return Err(JqError::NotOneValue("no value")),
        Some(Err(error)) => {
            return Err(JqError::Failed {
                problem: shorten(&error.to_string()).into_owned(),
            });
        }
        Some(Ok(first)) => first,
    };
    if outputs.next().is_some() {
        return Err(JqError::NotOneValue("more than one value"));
    }
    let mut nodes = 0;
    to_json(&first, &mut nodes)
}

/// `value` as JSON, counting the values made against [`MAX_RESULT_NODES`] (a
/// result that shares its parts can be far larger written out than in memory).
fn to_json(value: &Val, nodes: &mut usize) -> Result<Value, JqError> {
    *nodes += 1;
    if *nodes > MAX_RESULT_NODES {
        return Err(JqError::NotJson {
            problem: format!("it holds more than {MAX_RESULT_NODES} values"),
        });
    }
    Ok(match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(num) => number(&num.to_string())?,
        Val::TStr(bytes) | Val::BStr(bytes) => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Val::Arr(items) => Value::Array(
            items
                .iter()
                .map(|item| to_json(item, nodes))
                .collect::<Result<_, _>>()?,
        ),
        Val::Obj(entries) => {
            let mut map = Map::new();
            for (key, value) in entries.iter() {
                let Val::TStr(key) = key else {
                    return Err(JqError::NotJson {
                        problem: format!(
                            "an object key is not a string: {}",
                            shorten(&key.to_string())
                        ),
                    });
                };
                map.insert(
                    String::from_utf8_lossy(key).into_owned(),
                    to_json(value, nodes)?,
                );
            }
            Value::Object(map)
        }
    })
}

fn number(text: &str) -> Result<Value, JqError> {
    if let Ok(int) = text.parse::<i64>() {
        return Ok(Value::Number(int.into()));
    }
    if let Ok(int) = text.parse::<u64>() {
        return Ok(Value::Number(int.into()));
    }
    match text.parse::<f64>().ok().and_then(Number::from_f64) {
        Some(number) => Ok(Value::Number(number)),
        None => Err(JqError::NotJson {
            problem: format!("{} is not a JSON number", shorten(text)),
        }),
    }
}

/// Compiles `code` with jaq's standard library, a step before every function body
/// (the library's and the expression's), `..` as the library's `recurse`, and
/// `range/3` (a loop in Rust in jaq) as a function.
fn compile<'s>(code: &'s str) -> Result<Filter<Data>, JqError> {
    if code.len() > MAX_EXPRESSION_LEN {
        return Err(JqError::Compile {
            problem: format!(
                "it is {} bytes long, over the limit of {MAX_EXPRESSION_LEN}",
                code.len()
            ),
        });
    }
    // Loading the expression as written gives jaq's own syntax errors.
    let arena = Arena::default();
    Loader::new(library())
        .load(&arena, File { code, path: () })
        .map_err(|errors| JqError::Compile {
            problem: load_problems(code, errors),
        })?;
    let Some(main): Option<Term<&'s str>> = jaq_core::load::parse(code, |parser| parser.term())
    else {
        return Err(JqError::Compile {
            problem: "it does not parse".to_owned(),
        });
    };
    let main = Def {
        name: "__toolgraft_main",
        args: Vec::new(),
        body: counted(main),
    };
    let prelude = library().chain([main]);
    let modules = Loader::new(prelude)
        .load(
            &arena,
            File {
                code: "__toolgraft_main",
                path: (),
            },
        )
        .map_err(|errors| JqError::Compile {
            problem: load_problems(code, errors),
        })?;
    let funs = jaq_core::funs::<Data>()
        .filter(|(name, args, _)| !(*name == "range" && args.len() == 3))
        .chain(jaq_std::funs::<Data>())
        .chain(jaq_json::funs::<Data>())
        .chain([step_native()])
        .map(|(name, args, native)| {
            let name: &'s str = name;
            (name, args, native)
        });
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| {
            let problems: Vec<String> = errors
                .into_iter()
                .flat_map(|(_, undefined)| undefined)
                .map(|(name, what)| format!("undefined {} `{}`", what.as_str(), shorten(name)))
                .collect();
            JqError::Compile {
                problem: problems.join("; "),
            }
        })
}

fn step_native() -> jaq_core::native::Fun<Data> {
    (
        TICK,
        Box::new([]) as Box<[Bind]>,
        Native::new(|cv| {
            step();
            box_once(Ok(cv.1))
        }),
    )
}

/// jaq's library with a step before every function body, and `range/3` as a
/// function (first: the library's `range/1` and `range/2` call it).
fn library<'s>() -> impl Iterator<Item = Def<&'s str>> {
    const RANGE: &str = "def range($from; $upto; $by): \
        def up: if . < $upto then ., (. + $by | up) else {}[] end; \
        def down: if . > $upto then ., (. + $by | down) else {}[] end; \
        if $by > 0 then $from | up elif $by < 0 then $from | down else {}[] end;";
    let range = jaq_core::load::parse(RANGE, |parser| parser.defs()).unwrap_or_default();
    range
        .into_iter()
        .chain(jaq_core::defs())
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .map(|def| Def {
            name: def.name,
            args: def.args,
            body: counted(def.body),
        })
}

/// `body` with a step first (`step | body`: the body stays in tail position) and
/// the same for every local definition in it.
fn counted(body: Term<&str>) -> Term<&str> {
    Term::BinOp(
        Box::new(Term::Call(TICK, Vec::new())),
        BinaryOp::Pipe(None),
        Box::new(rewrite(body)),
    )
}

/// Steps in every local definition, and `..` as `recurse` (a function, so it
/// steps).
fn rewrite<'s>(term: Term<&'s str>) -> Term<&'s str> {
    let boxed = |term: Box<Term<&'s str>>| Box::new(rewrite(*term));
    match term {
        Term::Recurse => Term::Call("recurse", Vec::new()),
        Term::Def(defs, rest) => Term::Def(
            defs.into_iter()
                .map(|def| Def {
                    body: counted(def.body),
                    ..def
                })
                .collect(),
            boxed(rest),
        ),
        Term::Str(format, parts) => Term::Str(
            format,
            parts
                .into_iter()
                .map(|part| match part {
                    jaq_core::load::lex::StrPart::Term(term) => {
                        jaq_core::load::lex::StrPart::Term(rewrite(term))
                    }
                    jaq_core::load::lex::StrPart::Str(s) => jaq_core::load::lex::StrPart::Str(s),
                    jaq_core::load::lex::StrPart::Char(c) => jaq_core::load::lex::StrPart::Char(c),
                })
                .collect(),
        ),
        Term::Arr(inner) => Term::Arr(inner.map(boxed)),
        Term::Obj(entries) => Term::Obj(
            entries
                .into_iter()
                .map(|(key, value)| (rewrite(key), value.map(rewrite)))
                .collect(),
        ),
        Term::Neg(inner) => Term::Neg(boxed(inner)),
        Term::BinOp(left, op, right) => Term::BinOp(boxed(left), op, boxed(right)),
        Term::Label(name, inner) => Term::Label(name, boxed(inner)),
        Term::Fold(name, over, pattern, args) => Term::Fold(
            name,
            boxed(over),
            pattern,
            args.into_iter().map(rewrite).collect(),
        ),
        Term::TryCatch(body, catch) => Term::TryCatch(boxed(body), catch.map(boxed)),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(cond, then)| (rewrite(cond), rewrite(then)))
                .collect(),
            otherwise.map(boxed),
        ),
        Term::Call(name, args) => Term::Call(name, args.into_iter().map(rewrite).collect()),
        Term::Path(inner, Path(parts)) => Term::Path(
            boxed(inner),
            Path(
                parts
                    .into_iter()
                    .map(|(part, optional)| {
                        let part = match part {
                            Part::Index(index) => Part::Index(rewrite(index)),
                            Part::Range(from, upto) => {
                                Part::Range(from.map(rewrite), upto.map(rewrite))
                            }
                        };
                        (part, optional)
                    })
                    .collect(),
            ),
        ),
        other @ (Term::Id | Term::Num(_) | Term::Break(_) | Term::Var(_)) => other,
    }
}

fn load_problems(code: &str, errors: jaq_core::load::Errors<&str, ()>) -> String {
    let at = |part: &str| -> usize {
        let start = part.as_ptr() as usize;
        let base = code.as_ptr() as usize;
        if start >= base && start <= base + code.len() {
            start - base
        } else {
            0
        }
    };
    let problems: Vec<String> = errors
        .into_iter()
        .flat_map(|(_, error)| match error {
            jaq_core::load::Error::Io(items) => items
                .into_iter()
                .map(|(path, problem)| {
                    format!("cannot load `{}`: {}", shorten(path), shorten(&problem))
                })
                .collect::<Vec<_>>(),
            jaq_core::load::Error::Lex(items) => items
                .into_iter()
                .map(|(expected, found)| {
                    format!("expected {} at byte {}", expected.as_str(), at(found))
                })
                .collect(),
            jaq_core::load::Error::Parse(items) => items
                .into_iter()
                .map(|(expected, found)| {
                    let position = at(found);
                    let found = if found.is_empty() {
                        "the end".to_owned()
                    } else {
                        format!("`{}`", shorten(found))
                    };
                    format!(
                        "expected {} at byte {position}, found {found}",
                        expected.as_str()
                    )
                })
                .collect(),
        })
        .collect();
    problems.join("; ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn eval(code: &str, input: Value) -> Result<Value, JqError> {
        Jq::compile(code)?.run(input, JqBounds::default()).await
    }

    #[tokio::test]
    async fn an_expression_computes_with_the_standard_library() {
        let input = json!({"items": [{"id": 1, "ok": true}, {"id": 2, "ok": false}], "name": "Ab"});
        let code = r#"{ids: [.items[] | select(.ok) | .id], name: (.name | ascii_downcase), n: ([range(5)] | add), m: ([limit(3; repeat(1))] | length), deep: ([..] | length), s: ("\([1,2] | map(. * 2))")}"#;
        assert_eq!(
            eval(code, input).await.unwrap(),
            json!({"ids": [1], "name": "ab", "n": 10, "m": 3, "deep": 9, "s": "[2,4]"})
        );
        assert_eq!(
            eval("[range(0; 10; 3)], [range(5; 0; -2)] | length", json!(null)).await,
            Err(JqError::NotOneValue("more than one value"))
        );
        assert_eq!(
            eval(
                "[range(0; 10; 3), range(5; 0; -2), range(1; 2; 0)]",
                json!(null)
            )
            .await
            .unwrap(),
            json!([0, 3, 6, 9, 5, 3, 1])
        );
    }

    #[tokio::test]
    async fn hostile_expressions_end_with_a_typed_error() {
        // Few steps and ample time, so the steps always end first.
        let bounds = JqBounds {
            steps: 10_000,
            time: Duration::from_secs(60),
        };
        let run = async |code: &str| Jq::compile(code).unwrap().run(json!(0), bounds).await;
        for code in [
            "def f: f; f",
            "[range(1e9)]",
            "[repeat(1)]",
            "last(range(1e18))",
            "[recurse(. + 1)]",
            "0 | until(false; .)",
            "reduce range(40) as $i (0; [., .]) | [..] | length",
            "[limit(1e9; repeat(1))]",
        ] {
            assert_eq!(
                run(code).await,
                Err(JqError::OutOfSteps { steps: 10_000 }),
                "{code}"
            );
        }
        for code in [
            "def f: [f]; f",
            "def f: 1 + f; f",
            "def f: try f catch f; f",
            "def f: (f | f); f",
        ] {
            let err = run(code).await.unwrap_err();
            assert!(
                matches!(err, JqError::TooDeep | JqError::OutOfSteps { .. }),
                "{code}: {err}"
            );
        }
        // With steps enough, the depth bound ends a deep recursion.
        let deep = JqBounds {
            steps: 10_000_000,
            time: Duration::from_secs(60),
        };
        let err = Jq::compile("def f: [f]; f")
            .unwrap()
            .run(json!(0), deep)
            .await;
        assert_eq!(err, Err(JqError::TooDeep));
        let slow = Jq::compile("[range(1e9)]").unwrap();
        let bounds = JqBounds {
            steps: u64::MAX,
            time: Duration::from_millis(50),
        };
        assert_eq!(
            slow.run(json!(0), bounds).await,
            Err(JqError::OutOfTime {
                after: Duration::from_millis(50)
            })
        );
        // Doubling a value: few steps, each slower than the last; the clock,
        // checked at every step, ends it.
        let doubling = Jq::compile(r#"reduce range(64) as $i ("x"; . + .) | length"#).unwrap();
        assert_eq!(
            doubling.run(json!(0), bounds).await,
            Err(JqError::OutOfTime {
                after: Duration::from_millis(50)
            })
        );
        // A result far larger written out than in memory.
        let doubled = "reduce range(30) as $i (0; [., .])";
        let err = eval(doubled, json!(0)).await.unwrap_err();
        // Cut at the node bound, or at the time bound on a loaded machine.
        assert!(
            matches!(err, JqError::NotJson { .. } | JqError::OutOfTime { .. }),
            "{err}"
        );
    }

    #[test]
    fn compile_errors_say_what_and_where() {
        let err = Jq::compile(".a |").unwrap_err();
        assert!(
            matches!(&err, JqError::Compile { problem } if problem.contains("byte")),
            "{err}"
        );
        let err = Jq::compile("nosuchfunction(1)").unwrap_err();
        assert!(
            matches!(&err, JqError::Compile { problem } if problem.contains("nosuchfunction")),
            "{err}"
        );
        let err = Jq::compile(&"(".repeat(100_000)).unwrap_err();
        assert!(
            matches!(&err, JqError::Compile { problem } if problem.contains("over the limit")),
            "{err}"
        );
        // Nesting as deep as the length allows parses (on the compiler's own stack).
        let nested = format!("{}1{}", "[".repeat(2000), "]".repeat(2000));
        assert!(Jq::compile(&nested).is_ok());
    }

    #[tokio::test]
    async fn failures_and_non_json_results_are_typed() {
        assert!(
            matches!(eval(r#"error("no")"#, json!(0)).await, Err(JqError::Failed { problem }) if problem.contains("no"))
        );
        assert_eq!(
            eval("empty", json!(0)).await,
            Err(JqError::NotOneValue("no value"))
        );
        assert_eq!(
            eval(".[]", json!([1, 2])).await,
            Err(JqError::NotOneValue("more than one value"))
        );
        assert!(matches!(
            eval("{(1): 2}", json!(0)).await,
            Err(JqError::NotJson { .. }) | Err(JqError::Failed { .. })
        ));
    }
}
