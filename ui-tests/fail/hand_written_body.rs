// A tool body is a function whose future is `Send`: the trait is sealed, so a type
// cannot claim to be a body with a future that is not.
use std::future::Ready;
use toolgraft::error::BoxError;
use toolgraft::tool::Body;

#[derive(Clone)]
struct NotAFunction;

impl Body<String, String> for NotAFunction {
    type Future = Ready<Result<String, BoxError>>;

    fn run(&self, input: String) -> Self::Future {
        std::future::ready(Ok(input))
    }
}

fn main() {}
