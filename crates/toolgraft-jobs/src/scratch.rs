//! Scratch SQLite job files for the unit tests.

/// A new job file's URL in the temp directory; its files (the jobs, the replies,
/// their WAL and lock files) are removed when it is dropped.
pub(crate) struct NewFile(pub(crate) String);

impl NewFile {
    pub(crate) fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "{test}-{}.db",
            ulid::Ulid::generate().to_string().to_lowercase()
        ));
        Self(format!("sqlite://{}", path.display()))
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        let path = self.0.trim_start_matches("sqlite://");
        for suffix in ["", "-wal", "-shm", ".lock"] {
            for file in [path.to_owned(), format!("{path}.replies")] {
                let _ = std::fs::remove_file(format!("{file}{suffix}"));
            }
        }
    }
}
