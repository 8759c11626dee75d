// The guide's pages are the markdown files under docs/guide/, so that they read
// the same on GitHub; here each is a module's docs, and every Rust block on them
// a doctest. A page links to another as `[name]` with a definition to its file
// (`[http]: http.md`); the definitions below come first, and the first definition
// of a label wins, so in rustdoc the same links go to the modules. The `http`
// page needs its feature: without it, its links stay the file's.
#![doc = "[serving]: crate::guide::serving"]
#![doc = "[embedding]: crate::guide::embedding"]
#![cfg_attr(feature = "http", doc = "[http]: crate::guide::http")]
#![doc = "[tasks]: crate::guide::tasks"]
#![cfg_attr(feature = "upstream", doc = "[upstream]: crate::guide::upstream")]
#![doc = include_str!("../docs/guide/README.md")]

/// The rustdoc targets of the links between pages (see the module's comment).
macro_rules! pages {
    () => {
        "[serving]: crate::guide::serving\n\
         [embedding]: crate::guide::embedding\n\
         [tasks]: crate::guide::tasks\n"
    };
}

pub mod serving {
    #![doc = pages!()]
    #![cfg_attr(feature = "http", doc = "[http]: crate::guide::http")]
    #![doc = include_str!("../docs/guide/serving.md")]
}

pub mod embedding {
    #![doc = pages!()]
    #![cfg_attr(feature = "http", doc = "[http]: crate::guide::http")]
    #![doc = include_str!("../docs/guide/embedding.md")]
}

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/http.md")]
}

pub mod tasks {
    #![doc = pages!()]
    #![cfg_attr(feature = "http", doc = "[http]: crate::guide::http")]
    #![doc = include_str!("../docs/guide/tasks.md")]
}

#[cfg(feature = "upstream")]
#[cfg_attr(docsrs, doc(cfg(feature = "upstream")))]
pub mod upstream {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/upstream.md")]
}
