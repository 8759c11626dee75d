// Reserved params are `()` or a `Params` struct: the engine strips exactly the
// properties their schema declares, so no hand-written impl may take others.
use toolgraft::error::ArgsError;
use toolgraft::extension::{Args, ReservedParams};

struct TakesEverything;

impl ReservedParams for TakesEverything {
    type With<I: Send + 'static> = I;

    fn schema() -> Option<schemars::Schema> {
        None
    }

    fn split<I: Send + 'static>(with: I) -> (Self, I) {
        (TakesEverything, with)
    }

    fn join<I: Send + 'static>(self, input: I) -> I {
        input
    }

    fn take(args: &mut Args, _: &[String]) -> Result<Self, ArgsError> {
        args.clear();
        Ok(TakesEverything)
    }
}

fn main() {}
