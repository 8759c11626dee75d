// A wrapper's branch takes its layer input unchanged (plus reserved params): the
// trait that says so is sealed, so no impl can declare another input "unchanged".
use toolgraft::extension::Forwards;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Fetch {
    url: String,
}

struct Other;

impl Forwards<Fetch> for Other {
    type Reserved = ();
}

fn main() {}
