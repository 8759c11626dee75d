//! The authoring surface's use of the shared guard (`toolgraft-guard`): the page's
//! sign-in cookie, the sign-in route, and refusals written as the API's errors or,
//! for the page, as the sign-in form.

use axum::Form;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use toolgraft_guard::{Guard, GuardLayer, Refusal};

use crate::problem::Problem;
use crate::state::Shared;

/// The cookie the page signs in with; it carries the token itself (a token is
/// `token68`, which is a valid cookie value).
const COOKIE: &str = "toolgraft_token";

/// The guard in front of every route: Host and Origin always, the token in the
/// header or the page's cookie, except on `POST /login`, which checks the token in
/// its form (and still gets the Host and Origin checks: a foreign page cannot sign
/// a browser in).
pub(crate) fn layer(guard: &Guard) -> GuardLayer {
    guard
        .layer()
        .with_token_cookie(COOKIE)
        .with_token_skipped_for(|request| request.method == Method::POST && is_login(request))
        .respond_with(refusal)
}

/// The sign-in route, wherever the router is nested: the route the request
/// matched (its template, which the router sets before the guard runs) is the
/// `/login` one. Not the request's path: any path ending in `/login` (one no
/// route matches, answered by the fallback) is no sign-in, and gets the token
/// check as every other.
fn is_login(request: &Parts) -> bool {
    request
        .extensions
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|matched| matched.as_str().ends_with("/login"))
}

/// The page without a token gets the sign-in form; everything else the API's JSON
/// error. (The guard keeps the status and the `WWW-Authenticate` challenge.)
fn refusal(refusal: &Refusal, request: &Parts) -> Response {
    let page = request.method == Method::GET && matches!(request.uri.path(), "/" | "");
    if page && refusal.status() == StatusCode::UNAUTHORIZED {
        return Html(crate::page::sign_in(None)).into_response();
    }
    Problem::new(refusal.status(), refusal.message()).into_response()
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
    if !state.guard.requires_token() {
        return redirect_to_page(None);
    }
    match form {
        Ok(Form(SignIn { token })) if state.guard.accepts_token(token.trim()) => {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                token.trim()
            );
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
