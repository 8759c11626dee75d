//! Per-call cost of authorization: a call by name with a policy on the name (a
//! scope and a claim, checked before the call) against the same call with none,
//! and the `authorize` layer on the typed path against the bare tool. With the
//! `cel` feature, one check of a manifest's policy alone: without `when`, with a
//! `when` on a claim, and a CEL condition on the arguments.
//!
//! Run: `cargo bench --bench access --features cel` (see BENCHMARKS.md).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolgraft::access::{Claim, Scopes};
use toolgraft::context::{self, Identity, Principal};
use toolgraft::error::BoxError;
use toolgraft::ext::Authorize;
use toolgraft::prelude::*;
use toolgraft::{Stack, Toolset};

#[derive(Clone, Deserialize, Serialize, JsonSchema)]
struct Add {
    a: i64,
    b: i64,
}

async fn add(input: Add) -> Result<i64, BoxError> {
    Ok(input.a + input.b)
}

fn tool(name: &str) -> impl BaseTool<Input = Add, Output = i64> + Clone {
    Tool::builder()
        .name(name)
        .description("Add two numbers.")
        .read_only()
        .body(add)
        .build()
        .unwrap()
}

fn alice() -> Identity {
    Identity::new("alice")
        .with_scopes(["tools:read", "notes:write", "profile", "email"])
        .with_claim("tenant", "acme")
}

fn policy() -> (Scopes, Claim) {
    (Scopes::all(["tools:read"]), Claim::is("tenant", "acme"))
}

fn access(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let toolset = Toolset::new();
    toolset
        .bind((tool("open").combo(), tool("guarded").combo()))
        .unwrap();
    toolset
        .edit()
        .authorize("guarded", policy())
        .commit()
        .unwrap();
    let mut group = c.benchmark_group("access");
    // Both calls carry the caller's context, as a server's do: the difference is
    // the policy alone.
    for name in ["open", "guarded"] {
        group.bench_function(format!("by_name/{name}"), |b| {
            b.iter(|| {
                let call = toolset.call(name, json!({"a": 2, "b": 3}));
                let call = context::with(Principal::new("alice"), context::with(alice(), call));
                black_box(runtime.block_on(call).unwrap())
            })
        });
    }
    let bare = tool("add");
    let checked = tool("add").combo().with(Authorize::new(policy()));
    let checked = checked.stack();
    group.bench_function("typed/bare", |b| {
        b.iter(|| {
            let call = context::with(alice(), bare.call(black_box(Add { a: 2, b: 3 })));
            black_box(runtime.block_on(call).unwrap())
        })
    });
    group.bench_function("typed/authorize", |b| {
        b.iter(|| {
            let call = context::with(alice(), checked.call(black_box(Add { a: 2, b: 3 })));
            black_box(runtime.block_on(call).unwrap())
        })
    });
    group.finish();
}

/// One check of a policy as a manifest writes it, with no call around it: what a
/// CEL condition adds to the scopes and claims.
#[cfg(feature = "cel")]
fn conditions(c: &mut Criterion) {
    use toolgraft::access::{Access, Cel, Policy, PolicySpec};

    let spec = |when: &str| -> PolicySpec {
        let mut policy = json!({"scopes": ["tools:read"], "claims": {"tenant": "acme"}});
        if !when.is_empty() {
            policy["when"] = json!(when);
        }
        serde_json::from_value(policy).unwrap()
    };
    let plain = spec("");
    let when = spec("claims.tenant == 'acme' && 'notes:write' in scopes");
    let on_arguments = Cel::new("arguments.a + arguments.b <= 100").unwrap();
    let who = alice();
    let arguments = json!({"a": 2, "b": 3}).as_object().cloned().unwrap();
    let access = Access::call(Some(&who), "add", &arguments);
    let mut group = c.benchmark_group("access");
    group.bench_function("spec/plain", |b| {
        b.iter(|| black_box(plain.check(black_box(&access))).unwrap())
    });
    group.bench_function("spec/when", |b| {
        b.iter(|| black_box(when.check(black_box(&access))).unwrap())
    });
    group.bench_function("cel/arguments", |b| {
        b.iter(|| black_box(on_arguments.check(black_box(&access))).unwrap())
    });
    group.finish();
}

#[cfg(not(feature = "cel"))]
fn conditions(_: &mut Criterion) {}

criterion_group!(benches, access, conditions);
criterion_main!(benches);
