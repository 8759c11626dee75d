// `Configured` registers an extension built from author config: one without a
// `Configurable` impl is named, with the two ways to register it.
use toolgraft::Registry;
use toolgraft::ext::Pool;
use toolgraft::runtime::Configured;

fn main() {
    let mut registry = Registry::new();
    let _ = registry.register(Configured::new(Pool::new(1).unwrap()));
}
