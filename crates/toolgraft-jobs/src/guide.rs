// The guide's pages are the markdown files under docs/guide/, so that they read
// the same on GitHub; here each is a module's docs, and every Rust block on them
// a doctest. The definition below comes before the page's own
// (`[workers]: workers.md`), and the first definition of a label wins, so in
// rustdoc the link goes to the module.
#![doc = "[workers]: crate::guide::workers"]
#![doc = include_str!("../docs/guide/README.md")]

pub mod workers {
    #![doc = include_str!("../docs/guide/workers.md")]
}
