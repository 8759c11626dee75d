// A context entry that travels serialized to worker processes, or that a cache
// keys on, must be serde's: the message says what to derive, or what else to
// choose (not serde's own "the trait bound is not satisfied").
use toolgraft::context::{Entry, InProcess, Keyed, Serialized, Unkeyed};

#[derive(Clone, Debug)]
struct Tenant(String);

impl Entry for Tenant {
    const NAME: &'static str = "example.tenant";
    type Travel = Serialized;
    type Key = Unkeyed;
}

#[derive(Clone, Debug)]
struct Region(String);

impl Entry for Region {
    const NAME: &'static str = "example.region";
    type Travel = InProcess;
    type Key = Keyed;
}

fn main() {}
