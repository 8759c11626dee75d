//! Bearer-token authentication: an `Authorization: Bearer` header for programs,
//! and for the page a cookie set by signing in with the same token.

use axum::Form;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};

use crate::Shared;
use crate::problem::Problem;

const COOKIE: &str = "toolgraft_token";

/// Lets a request through when authentication is off or it carries the token;
/// otherwise the page answers with a sign-in form and the API with a 401.
pub(crate) async fn require(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let path = request.uri().path();
    let signing_in = request.method() == Method::POST && path.ends_with("/login");
    if signing_in || carries(request.headers(), token) {
        return next.run(request).await;
    }
    if request.method() == Method::GET && (path == "/" || path.is_empty()) {
        return (StatusCode::UNAUTHORIZED, Html(crate::page::sign_in(None))).into_response();
    }
    let mut response = Problem::new(
        StatusCode::UNAUTHORIZED,
        "send `Authorization: Bearer <token>` with the server's token",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// Whether the request carries the token, in the header or the page's cookie.
fn carries(headers: &HeaderMap, token: &str) -> bool {
    let bearer = headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .any(|(_, given)| same(given.trim().as_bytes(), token.as_bytes()));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .any(|given| same(given.as_bytes(), hex(token).as_bytes()));
    bearer || cookie
}

/// Compares in time that depends on the length only, not on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The cookie carries the token hex-encoded: any token is then a valid cookie value.
fn hex(token: &str) -> String {
    token.bytes().map(|byte| format!("{byte:02x}")).collect()
}

#[derive(serde::Deserialize)]
pub(crate) struct SignIn {
    token: String,
}

/// `POST /login` from the page's sign-in form: sets the cookie and goes back to the
/// page, or shows the form again.
pub(crate) async fn login(
    State(state): State<Shared>,
    form: Result<Form<SignIn>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Some(token) = &state.token else {
        return redirect_to_page(None);
    };
    match form {
        Ok(Form(SignIn { token: given })) if same(given.trim().as_bytes(), token.as_bytes()) => {
            let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", hex(token));
            redirect_to_page(Some(cookie))
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            Html(crate::page::sign_in(Some(
                "That is not the server's token.",
            ))),
        )
            .into_response(),
    }
}

fn redirect_to_page(cookie: Option<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "./")]).into_response();
    if let Some(value) = cookie.and_then(|cookie| header::HeaderValue::from_str(&cookie).ok()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_whole_tokens() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert_eq!(hex("a;b"), "613b62");
    }
}
