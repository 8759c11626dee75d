// The guide's pages are the markdown files under docs/guide/, so that they read
// the same on GitHub; here each is a module's docs, and every Rust block on them
// a doctest. A page links to another as `[name]` with a definition to its file
// (`[combos]: combos.md`); the definitions below come first, and the first
// definition of a label wins, so in rustdoc the same links go to the modules.
#![doc = "[combos]: crate::guide::combos"]
#![doc = "[extensions]: crate::guide::extensions"]
#![doc = "[manifests]: crate::guide::manifests"]
#![doc = "[builtins]: crate::guide::builtins"]
#![doc = "[authoring]: crate::guide::authoring"]
#![doc = "[design]: crate::guide::design"]
#![doc = "[layout]: crate::guide::layout"]
#![doc = include_str!("../docs/guide/README.md")]

/// The rustdoc targets of the links between pages (see the module's comment).
macro_rules! pages {
    () => {
        "[combos]: crate::guide::combos\n\
         [extensions]: crate::guide::extensions\n\
         [manifests]: crate::guide::manifests\n\
         [builtins]: crate::guide::builtins\n\
         [design]: crate::guide::design\n"
    };
}

pub mod combos {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/combos.md")]
}

pub mod extensions {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/extensions.md")]
}

pub mod manifests {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/manifests.md")]
}

pub mod builtins {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/builtins.md")]
}

pub mod authoring {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/authoring.md")]
}

pub mod design {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/design.md")]
}

pub mod layout {
    #![doc = pages!()]
    #![doc = include_str!("../docs/guide/layout.md")]
}
