//! TLS to Redis (feature `tls`, `rediss://`): rustls, with ring as its crypto
//! provider where the application installed none. (PostgreSQL's TLS is sqlx's,
//! which uses ring whatever is installed.)

/// Makes sure rustls has a process-wide crypto provider before a `rediss://`
/// tier connects (and only then: a process-wide default is the application's
/// to choose): the application's, if it installed one first (install yours
/// before the first connection), else ring's. rustls picks the one provider
/// compiled in by itself; with two (an application on aws-lc-rs), it needs one
/// installed, and connecting would panic without it.
#[cfg(feature = "tls")]
pub(super) fn provide() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one meanwhile: then it is theirs. ring is
        // deprecated in rustls for want of post-quantum key exchange; aws-lc-rs
        // has it, at the cost of a large C build, so an application that wants
        // it installs it (this one is then never used).
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Without TLS, nothing to provide.
#[cfg(not(feature = "tls"))]
pub(super) fn provide() {}
