// Checked with the default built-ins only (tests/ui.rs): its list of `Wrap`
// implementors grows with `metrics` and `tower`.
// `Registry::register` takes an extension (typed, `Configured`, `Refined` or a
// `DynExtension`): anything else is named.
use toolgraft::Registry;

fn main() {
    let mut registry = Registry::new();
    let _ = registry.register("trace");
}
