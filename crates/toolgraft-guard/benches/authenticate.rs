//! Per-request cost of checking an access token once the issuer's keys are
//! fetched: `ResourceServer::authenticate` on an RS256, an ES256 and an EdDSA
//! JWT (signature, issuer, audience, times, scopes and kept claims), and a
//! static token table's lookup, beside the single bearer token's compare.
//!
//! Run: `cargo bench -p toolgraft-guard --features oauth --bench authenticate`.

#[allow(dead_code)]
#[path = "../tests/oauth/support.rs"]
mod support;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::Algorithm;
use toolgraft_guard::{Authenticated, Guard, TokenTable};

fn authenticate(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let issuer = runtime.block_on(support::Issuer::start());
    let server = issuer.server();
    runtime.block_on(server.warm()).unwrap();
    let claims = support::claims(issuer.url());
    let mut group = c.benchmark_group("authenticate");
    for (name, key, algorithm, kid) in [
        ("jwt/rs256", support::rsa_a(), Algorithm::RS256, "rsa-a"),
        ("jwt/es256", support::ec(), Algorithm::ES256, "ec"),
        ("jwt/eddsa", support::ed(), Algorithm::EdDSA, "ed"),
    ] {
        let token = support::sign(&key, algorithm, Some(kid), &claims);
        runtime.block_on(server.authenticate(&token)).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| black_box(runtime.block_on(server.authenticate(black_box(&token)))))
        });
    }
    let secret = "0123456789abcdef0123456789abcdef";
    let table = TokenTable::new()
        .grant(
            secret,
            Authenticated::new("alice").with_scopes(["tools:read"]),
        )
        .unwrap();
    group.bench_function("table", |b| {
        b.iter(|| black_box(table.identify(black_box(secret))))
    });
    let single = Guard::bearer(secret).unwrap();
    group.bench_function("bearer", |b| {
        b.iter(|| black_box(single.accepts_token(black_box(secret))))
    });
    group.finish();
}

criterion_group!(benches, authenticate);
criterion_main!(benches);
