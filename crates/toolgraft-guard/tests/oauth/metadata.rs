//! The protected resource metadata, served unguarded beside the guarded route, and
//! the step-up challenge.

use axum::Router;
use axum::body::Body;
use toolgraft_guard::{Guard, ResourceServer};
use tower::ServiceExt;

use crate::support::*;

#[tokio::test]
async fn the_metadata_is_served_without_a_token() {
    let server = ResourceServer::new(RESOURCE, "http://127.0.0.1:9")
        .unwrap()
        .with_scopes_supported(["tools:read"])
        .unwrap()
        .with_resource_name("Test tools");
    let guarded = app(&Guard::oauth(server.clone()));
    let app = Router::new()
        .route_service(server.metadata_path(), server.metadata_service())
        .merge(guarded);
    let request = http::Request::get("/.well-known/oauth-protected-resource/mcp")
        .header("host", "localhost")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        document,
        serde_json::json!({
            "resource": RESOURCE,
            "authorization_servers": ["http://127.0.0.1:9"],
            "scopes_supported": ["tools:read"],
            "bearer_methods_supported": ["header"],
            "resource_name": "Test tools",
        })
    );
    let post = http::Request::post(server.metadata_path())
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.clone().oneshot(post).await.unwrap().status(), 405);
    // The challenge points at it.
    let answer = call(&app, None).await;
    assert!(
        answer
            .challenge
            .unwrap()
            .ends_with(&format!(r#"resource_metadata="{METADATA_URL}""#))
    );
}

#[test]
fn the_step_up_challenge_names_the_scopes_needed() {
    let server = ResourceServer::new(RESOURCE, "http://127.0.0.1:9").unwrap();
    let response = server.insufficient_scope(["tools:write", "bad\"scope", "admin"]);
    assert_eq!(response.status(), 403);
    assert_eq!(
        response.headers()["www-authenticate"],
        format!(
            r#"Bearer error="insufficient_scope", scope="tools:write admin", resource_metadata="{METADATA_URL}""#
        )
    );
}
