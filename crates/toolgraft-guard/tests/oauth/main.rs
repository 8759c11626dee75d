//! The guard as an OAuth 2.1 resource server (feature `oauth`), against a local
//! authorization server: real keys, real signatures, forged tokens.

mod support;

mod forged;
mod introspection;
mod keys;
mod metadata;
