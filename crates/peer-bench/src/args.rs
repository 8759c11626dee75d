//! The command line: a command, positional arguments, `--key value` options and
//! `--flag`s.

use std::collections::HashMap;

use crate::systems::ToolgraftHttp;

const FLAGS: [&str; 2] = ["toolgraft-router-plain", "toolgraft-router-nodelay"];

/// Parsed arguments.
pub struct Args {
    /// The subcommand.
    pub command: String,
    /// Arguments that are not options.
    pub positional: Vec<String>,
    options: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// Parses `args` (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut args = args.into_iter();
        let command = args.next().ok_or("no command")?;
        let mut parsed = Args {
            command,
            positional: Vec::new(),
            options: HashMap::new(),
            flags: Vec::new(),
        };
        while let Some(arg) = args.next() {
            match arg.strip_prefix("--") {
                Some(flag) if FLAGS.contains(&flag) => parsed.flags.push(flag.to_owned()),
                Some(key) => {
                    let value = args
                        .next()
                        .ok_or_else(|| format!("--{key} needs a value"))?;
                    parsed.options.insert(key.to_owned(), value);
                }
                None => parsed.positional.push(arg),
            }
        }
        Ok(parsed)
    }

    /// An integer option.
    pub fn num(&self, key: &str, default: u64) -> u64 {
        self.options.get(key).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--{key}: not a number: {v}"))
        })
    }

    /// A number option.
    pub fn float(&self, key: &str, default: f64) -> f64 {
        self.options.get(key).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("--{key}: not a number: {v}"))
        })
    }

    /// A comma-separated list of integers.
    pub fn list(&self, key: &str, default: &[usize]) -> Vec<usize> {
        self.options.get(key).map_or_else(
            || default.to_vec(),
            |v| {
                v.split(',')
                    .map(|n| {
                        n.trim()
                            .parse()
                            .unwrap_or_else(|_| panic!("--{key}: not a list of numbers: {v}"))
                    })
                    .collect()
            },
        )
    }

    /// How toolgraft is served over HTTP.
    pub fn toolgraft_mode(&self) -> ToolgraftHttp {
        if self.flags.iter().any(|f| f == "toolgraft-router-plain") {
            ToolgraftHttp::RouterPlain
        } else if self.flags.iter().any(|f| f == "toolgraft-router-nodelay") {
            ToolgraftHttp::RouterNoDelay
        } else {
            ToolgraftHttp::Shipped
        }
    }
}
