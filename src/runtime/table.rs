//! A plain-text table of bound names, for operators and examples.

use std::fmt;

use schemars::Schema;
use serde_json::Value;

use crate::bind::{Site, ToolInfo};

/// Renders bound names as a table: name, base, chain, where each layer runs, the
/// input parameters (`?` marks optional ones) and the output.
///
/// ```
/// use toolgraft::{Tool, Toolset};
/// use toolgraft::runtime::NameTable;
/// use toolgraft::tool::BaseTool;
/// use toolgraft::ext::Trace;
/// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Shout { text: String }
/// let shout = Tool::builder().name("shout").description("Return the text.")
///     .body(|i: Shout| async move { Ok(i.text) }).build()?;
/// let toolset = Toolset::new();
/// toolset.bind((shout.combo().with(Trace),))?;
/// let table = NameTable(&toolset.tools()).to_string();
/// assert!(table.contains("| shout_trace | shout | trace (wrapper)"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct NameTable<'a>(pub &'a [ToolInfo]);

const HEADER: [&str; 6] = [
    "name",
    "base",
    "chain (inner > outer)",
    "where it runs",
    "input",
    "output",
];

impl fmt::Display for NameTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<[String; 6]> = self.0.iter().map(row).collect();
        let widths: Vec<usize> = (0..HEADER.len())
            .map(|col| {
                rows.iter()
                    .map(|row| row[col].len())
                    .chain([HEADER[col].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, cells: [&str; 6]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:width$}"))
                .collect();
            writeln!(f, "| {} |", padded.join(" | "))
        };
        line(f, HEADER)?;
        let rule: Vec<String> = widths.iter().map(|width| "-".repeat(width + 2)).collect();
        writeln!(f, "|{}|", rule.join("|"))?;
        for row in &rows {
            line(f, [&row[0], &row[1], &row[2], &row[3], &row[4], &row[5]])?;
        }
        Ok(())
    }
}

fn row(tool: &ToolInfo) -> [String; 6] {
    let chain = if tool.chain.is_empty() {
        "(base)".to_owned()
    } else {
        let links: Vec<String> = tool
            .chain
            .iter()
            .map(|link| format!("{} ({})", link.extension, link.kind))
            .collect();
        links.join(" > ")
    };
    let mut sites: Vec<String> = tool
        .chain
        .iter()
        .zip(tool.sites())
        .map(|(link, site)| format!("{}@{}", link.extension, at(&site)))
        .collect();
    sites.push(format!("body@{}", at(&tool.body_site())));
    [
        tool.name.to_string(),
        tool.base.to_string(),
        chain,
        sites.join(" "),
        parameters(&tool.input_schema),
        tool.output_schema
            .as_deref()
            .map_or_else(|| "-".to_owned(), output),
    ]
}

fn at(site: &Site) -> String {
    match site {
        Site::Caller => "caller".to_owned(),
        Site::Relocated { by } => by.to_string(),
    }
}

fn parameters(schema: &Schema) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|required| required.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let names = crate::schema::property_names(schema).unwrap_or_default();
    let shown: Vec<String> = names
        .iter()
        .map(|name| {
            if required.contains(&name.as_str()) {
                name.clone()
            } else {
                format!("{name}?")
            }
        })
        .collect();
    shown.join(", ")
}

fn output(schema: &Schema) -> String {
    let describe = |key: &str| schema.get(key).and_then(Value::as_str).map(str::to_owned);
    describe("title")
        .or_else(|| describe("type"))
        .unwrap_or_else(|| "any".to_owned())
}
