//! The storage layout this crate writes into.
