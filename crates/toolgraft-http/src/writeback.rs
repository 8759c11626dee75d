//! Writing a tool's combos back to the manifest file: only that tool's entry
//! changes (everything else in the file stays byte for byte, comments included),
//! and the file is replaced atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use toolgraft::error::shorten;
use toolgraft::runtime::manifest::{ComboSpec, Manifest};

use crate::body::combos_value;

/// The formats a manifest file is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Toml,
}

/// A manifest file as read before a change.
#[derive(Debug)]
pub(crate) struct ManifestText {
    /// The file itself (symbolic links resolved, so the link stays a link).
    pub path: PathBuf,
    pub format: Format,
    pub text: String,
}

impl ManifestText {
    /// Reads the file, and checks that it is a manifest now (an operator may have
    /// broken it by hand since it was loaded: then nothing is changed).
    pub fn read(path: &Path) -> Result<Self, String> {
        let failed = |problem: String| {
            format!(
                "the manifest file {} cannot be updated: {problem}",
                path.display()
            )
        };
        let format = match path
            .extension()
            .and_then(|ext| ext.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("json") => Format::Json,
            Some("toml") => Format::Toml,
            _ => return Err(failed("name it *.json or *.toml".to_owned())),
        };
        let resolved = fs::canonicalize(path).map_err(|err| failed(err.to_string()))?;
        let text = fs::read_to_string(&resolved).map_err(|err| failed(err.to_string()))?;
        let parsed = match format {
            Format::Json => Manifest::from_json(&text),
            Format::Toml => Manifest::from_toml(&text),
        };
        parsed.map_err(|err| failed(err.to_string()))?;
        Ok(Self {
            path: resolved,
            format,
            text,
        })
    }

    /// The text with `tool`'s entry holding `combos` (the entry removed when there
    /// are none, added at the end of `tools` when there was none).
    pub fn with_tool(&self, tool: &str, combos: &[ComboSpec]) -> Result<String, String> {
        match self.format {
            Format::Json => json_with_tool(&self.text, tool, combos),
            Format::Toml => toml_with_tool(&self.text, tool, combos),
        }
    }
}

/// Whether `combos` can be written in `format` (TOML has no `null`, and no integer
/// past `i64`), before anything changes.
pub(crate) fn representable(format: Format, combos: &[ComboSpec]) -> Result<(), String> {
    match format {
        Format::Json => Ok(()),
        Format::Toml => toml_value(&combos_value(combos)).map(drop),
    }
}

/// How old a temporary file of another process must be to be taken for a
/// leftover where the system cannot say whether that process lives: a write
/// takes milliseconds.
const LEFTOVER_AFTER: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Removes the temporary files a writer of `path` killed mid-write left beside
/// it (`.<name>.<pid>.<n>.tmp`): those of processes that no longer run (Linux:
/// no `/proc/<pid>`), or, where that cannot be told, older than
/// [`LEFTOVER_AFTER`]. This process's own and other files are kept. Returns how
/// many went.
pub(crate) fn remove_leftovers(path: &Path) -> usize {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let Some(name) = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
    else {
        return 0;
    };
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let proc_fs = Path::new("/proc/self").exists();
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(middle) = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some(pid) = middle
            .split_once('.')
            .filter(|(_, n)| n.bytes().all(|byte| byte.is_ascii_digit()) && !n.is_empty())
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let gone = if proc_fs {
            !Path::new("/proc").join(pid.to_string()).exists()
        } else {
            entry
                .metadata()
                .and_then(|metadata| metadata.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age > LEFTOVER_AFTER)
        };
        if gone && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Writes `text` to a new file beside `path` and renames it over `path`: a reader
/// sees the old file or the new one, never a part. Keeps the file's permissions.
pub(crate) fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        if let Ok(metadata) = fs::metadata(path) {
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temp, path)?;
        // The rename itself is durable once the directory is synced (not every
        // platform lets a directory be opened for that).
        if let Ok(dir) = File::open(dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

// ---- JSON: the tool's value is spliced into the text, nothing else is touched.

fn json_with_tool(text: &str, tool: &str, combos: &[ComboSpec]) -> Result<String, String> {
    let mut scanner = Scanner {
        text: text.as_bytes(),
        at: 0,
    };
    scanner.space();
    let top = scanner.object()?;
    let tools = top
        .members
        .iter()
        .find(|member| member.key == "tools")
        .ok_or("the manifest has no `tools`")?;
    scanner.at = tools.value.0;
    let tools = scanner.object()?;
    let key = serde_json::to_string(tool).map_err(|err| err.to_string())?;
    let at = tools.members.iter().position(|member| member.key == tool);
    let mut out = String::with_capacity(text.len() + 256);
    // A tool written `{"combos": [...], "publish": ...}`: only its combos change,
    // and what it publishes stays as the file says it.
    if let Some(member) = at.map(|at| &tools.members[at])
        && text[member.value.0..].starts_with('{')
    {
        scanner.at = member.value.0;
        let entry = scanner.object()?;
        let member = entry
            .members
            .iter()
            .find(|member| member.key == "combos")
            .ok_or("the tool's entry has no `combos`")?;
        let old = &text[member.value.0..member.value.1];
        let value = if combos.is_empty() {
            "[]".to_owned()
        } else {
            let reused = old_json_combos(text, member.value);
            json_combos(combos, layout_of(text, old, member), reused)?
        };
        out.push_str(&text[..member.value.0]);
        out.push_str(&value);
        out.push_str(&text[member.value.1..]);
        return Ok(out);
    }
    match (at, combos.is_empty()) {
        (Some(at), false) => {
            let member = &tools.members[at];
            let old = &text[member.value.0..member.value.1];
            let reused = old_json_combos(text, member.value);
            let value = json_combos(combos, layout_of(text, old, member), reused)?;
            out.push_str(&text[..member.value.0]);
            out.push_str(&value);
            out.push_str(&text[member.value.1..]);
        }
        (Some(at), true) => {
            let member = &tools.members[at];
            let (from, to) = match (tools.members.get(at + 1), at.checked_sub(1)) {
                // Up to the next key: takes this member, its comma and the space.
                (Some(next), _) => (member.key_at, next.key_at),
                // The last: from the end of the previous value.
                (None, Some(previous)) => (tools.members[previous].value.1, member.value.1),
                (None, None) => (member.key_at, member.value.1),
            };
            out.push_str(&text[..from]);
            out.push_str(&text[to..]);
        }
        (None, false) => {
            let (insert_at, prefix) = match tools.members.last() {
                Some(last) => match line_indent(text, last.key_at) {
                    Some(indent) => (last.value.1, format!(",\n{indent}")),
                    None => (last.value.1, ", ".to_owned()),
                },
                None => (tools.open + 1, String::new()),
            };
            let value = json_combos(combos, None, Vec::new())?;
            out.push_str(&text[..insert_at]);
            out.push_str(&prefix);
            out.push_str(&key);
            out.push_str(": ");
            out.push_str(&value);
            out.push_str(&text[insert_at..]);
        }
        (None, true) => out.push_str(text),
    }
    Ok(out)
}

/// The combos of a tool's value in the file, each with its text; for a flat list
/// (one combo), the whole value. Empty when the value cannot be read as combos.
fn old_json_combos(text: &str, span: (usize, usize)) -> Vec<(ComboSpec, String)> {
    let value = &text[span.0..span.1];
    let mut scanner = Scanner {
        text: text.as_bytes(),
        at: span.0,
    };
    let Ok(elements) = scanner.array() else {
        return Vec::new();
    };
    let texts: Vec<&str> = elements
        .iter()
        .map(|(from, to)| &text[*from..*to])
        .collect();
    let nested = texts.iter().all(|element| element.starts_with('['));
    let combos: Vec<&str> = if nested { texts } else { vec![value] };
    combos
        .into_iter()
        .filter_map(|combo| {
            let manifest =
                Manifest::from_json(&format!(r#"{{"tools": {{"t": [{combo}]}}}}"#)).ok()?;
            let spec = manifest.tools.into_iter().next()?.1.into_iter().next()?;
            Some((normalized(spec), combo.to_owned()))
        })
        .collect()
}

/// A combo as the toolset reports it: an empty config is no config.
fn normalized(combo: ComboSpec) -> ComboSpec {
    combo
        .into_iter()
        .map(|mut element| {
            if element
                .config
                .as_ref()
                .is_some_and(|config| config.is_empty())
            {
                element.config = None;
            }
            element
        })
        .collect()
}

/// How a multi-line value was laid out: the indent of its elements and of its
/// closing bracket. `None` for a value on one line.
fn layout_of(text: &str, old: &str, member: &Member) -> Option<(String, String)> {
    if !old.contains('\n') {
        return None;
    }
    let close = line_indent(text, member.key_at).unwrap_or_default();
    let inner = old[1..].trim_start_matches([' ', '\t', '\r', '\n']);
    let first = member.value.0 + (old.len() - inner.len());
    let element = line_indent(text, first).unwrap_or_else(|| format!("{close}  "));
    Some((element, close))
}

/// The whitespace before `at` on its line, when only whitespace precedes it.
fn line_indent(text: &str, at: usize) -> Option<String> {
    let start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
    let before = &text[start..at];
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then(|| before.to_owned())
}

/// `[["trace", "cache"], ["pool"]]`, or one combo a line in the given layout. A
/// combo the file held already keeps its text (`reused`: each old combo with it).
fn json_combos(
    combos: &[ComboSpec],
    layout: Option<(String, String)>,
    mut reused: Vec<(ComboSpec, String)>,
) -> Result<String, String> {
    let mut one = |combo: &ComboSpec| match reused.iter().position(|(old, _)| old == combo) {
        Some(at) => Ok(reused.remove(at).1),
        None => spaced(&crate::body::combo_value(combo)),
    };
    let combos: Vec<String> = combos.iter().map(&mut one).collect::<Result<_, _>>()?;
    Ok(match layout {
        None => format!("[{}]", combos.join(", ")),
        Some((element, close)) => {
            let separator = format!(",\n{element}");
            format!("[\n{element}{}\n{close}]", combos.join(&separator))
        }
    })
}

/// JSON on one line with a space after each comma and colon, as people write it.
fn spaced(value: &Value) -> Result<String, String> {
    struct Spaced;
    impl serde_json::ser::Formatter for Spaced {
        fn begin_array_value<W: ?Sized + io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> io::Result<()> {
            if first {
                Ok(())
            } else {
                writer.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + io::Write>(
            &mut self,
            writer: &mut W,
            first: bool,
        ) -> io::Result<()> {
            self.begin_array_value(writer, first)
        }
        fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
            writer.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut out, Spaced,
        ))
        .map_err(|err| err.to_string())?;
    String::from_utf8(out).map_err(|err| err.to_string())
}

/// A member of a JSON object: its decoded key, where the key starts, and the span
/// of its value.
#[derive(Debug)]
struct Member {
    key: String,
    key_at: usize,
    value: (usize, usize),
}

#[derive(Debug)]
struct Object {
    /// Where its `{` is.
    open: usize,
    members: Vec<Member>,
}

/// Spans in a text already parsed as a manifest (so it is valid JSON, and nests
/// no deeper than the parser allows): values are skipped, not built.
struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!(
                "expected `{}` at byte {} of the manifest",
                byte as char, self.at
            ))
        }
    }

    /// Skips a string, from its opening quote.
    fn string(&mut self) -> Result<(usize, usize), String> {
        let start = self.at;
        self.expect(b'"')?;
        loop {
            match self.peek() {
                Some(b'\\') => self.at += 2,
                Some(b'"') => {
                    self.at += 1;
                    return Ok((start, self.at));
                }
                Some(_) => self.at += 1,
                None => return Err("a string in the manifest does not end".to_owned()),
            }
        }
    }

    /// Skips any value.
    fn value(&mut self) -> Result<(usize, usize), String> {
        let start = self.at;
        match self.peek() {
            Some(b'"') => self.string(),
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                loop {
                    match self.peek() {
                        Some(b'"') => {
                            self.string()?;
                            continue;
                        }
                        Some(b'{' | b'[') => depth += 1,
                        Some(b'}' | b']') => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return Ok((start, self.at));
                            }
                        }
                        Some(_) => {}
                        None => return Err("a value in the manifest does not end".to_owned()),
                    }
                    self.at += 1;
                }
            }
            Some(_) => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n')
                ) {
                    self.at += 1;
                }
                Ok((start, self.at))
            }
            None => Err("the manifest ends where a value should be".to_owned()),
        }
    }

    /// An array's elements, from its `[`; leaves the scanner past its `]`.
    fn array(&mut self) -> Result<Vec<(usize, usize)>, String> {
        self.expect(b'[')?;
        let mut elements = Vec::new();
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(elements);
        }
        loop {
            self.space();
            elements.push(self.value()?);
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(elements);
                }
                _ => return Err(format!("expected `,` or `]` at byte {}", self.at)),
            }
        }
    }

    /// An object's members, from its `{`; leaves the scanner past its `}`.
    fn object(&mut self) -> Result<Object, String> {
        let open = self.at;
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Object { open, members });
        }
        loop {
            self.space();
            let (key_at, key_end) = self.string()?;
            let key: String = serde_json::from_slice(&self.text[key_at..key_end])
                .map_err(|err| err.to_string())?;
            self.space();
            self.expect(b':')?;
            self.space();
            let value = self.value()?;
            members.push(Member { key, key_at, value });
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Object { open, members });
                }
                _ => return Err(format!("expected `,` or `}}` at byte {}", self.at)),
            }
        }
    }
}

// ---- TOML: through toml_edit, which keeps the rest of the document as written.

fn toml_with_tool(text: &str, tool: &str, combos: &[ComboSpec]) -> Result<String, String> {
    let mut document: toml_edit::DocumentMut = text.parse().map_err(|err| format!("{err}"))?;
    let tools = document
        .get_mut("tools")
        .and_then(toml_edit::Item::as_table_like_mut)
        .ok_or("the manifest has no `tools` table")?;
    // A tool written as a table with `combos` (and `publish`): only its combos
    // change, and what it publishes stays as the file says it.
    if let Some(entry) = tools
        .get_mut(tool)
        .and_then(toml_edit::Item::as_table_like_mut)
    {
        let value = match entry.get("combos").and_then(toml_edit::Item::as_value) {
            _ if combos.is_empty() => toml_edit::Value::Array(toml_edit::Array::new()),
            Some(old) => toml_combos(combos, old)?,
            None => toml_value(&combos_value(combos))?,
        };
        entry.insert("combos", toml_edit::Item::Value(value));
        return Ok(document.to_string());
    }
    if combos.is_empty() {
        tools.remove(tool);
        return Ok(document.to_string());
    }
    match tools.get_mut(tool) {
        Some(item) => {
            let value = match item.as_value() {
                Some(old) => toml_combos(combos, old)?,
                None => toml_value(&combos_value(combos))?,
            };
            *item = toml_edit::Item::Value(value);
        }
        None => {
            let value = toml_value(&combos_value(combos))?;
            tools.insert(tool, toml_edit::Item::Value(value));
        }
    }
    Ok(document.to_string())
}

/// The combos as a TOML array in place of `old`: its decor and layout kept, and
/// the combos it held already as they were written.
fn toml_combos(combos: &[ComboSpec], old: &toml_edit::Value) -> Result<toml_edit::Value, String> {
    let mut reused: Vec<(ComboSpec, toml_edit::Value)> = match old.as_array() {
        Some(array) if array.iter().all(toml_edit::Value::is_array) => array
            .iter()
            .filter_map(|combo| {
                let value = serde_json::json!({"tools": {"t": [json_of(combo)?]}});
                let manifest = Manifest::from_value(&value).ok()?;
                let spec = manifest.tools.into_iter().next()?.1.into_iter().next()?;
                Some((normalized(spec), combo.clone()))
            })
            .collect(),
        _ => Vec::new(),
    };
    let multiline = old.to_string().contains('\n');
    let mut array = toml_edit::Array::new();
    for combo in combos {
        match reused.iter().position(|(spec, _)| spec == combo) {
            Some(at) => array.push_formatted(reused.remove(at).1),
            None => {
                let mut value = toml_value(&crate::body::combo_value(combo))?;
                if multiline {
                    value.decor_mut().set_prefix("\n    ");
                }
                array.push_formatted(value);
            }
        }
    }
    if let Some(first) = array.get_mut(0)
        && !multiline
    {
        first.decor_mut().set_prefix("");
    }
    if multiline {
        array.set_trailing("\n");
        array.set_trailing_comma(true);
    } else if let Some(old) = old.as_array() {
        array.set_trailing(old.trailing().as_str().unwrap_or(""));
    }
    let mut value = toml_edit::Value::Array(array);
    *value.decor_mut() = old.decor().clone();
    Ok(value)
}

/// A TOML value as JSON (`None` for a date, which no combo holds).
fn json_of(value: &toml_edit::Value) -> Option<Value> {
    Some(match value {
        toml_edit::Value::String(s) => Value::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => Value::Number(serde_json::Number::from_f64(*f.value())?),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Datetime(_) => return None,
        toml_edit::Value::Array(array) => {
            Value::Array(array.iter().map(json_of).collect::<Option<_>>()?)
        }
        toml_edit::Value::InlineTable(table) => Value::Object(
            table
                .iter()
                .map(|(key, value)| Some((key.to_owned(), json_of(value)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

/// A JSON value as a TOML value; `null` and integers past `i64` have none.
fn toml_value(value: &Value) -> Result<toml_edit::Value, String> {
    Ok(match value {
        Value::Null => {
            return Err(
                "TOML has no `null`: leave the config key out, or write the manifest in JSON"
                    .to_owned(),
            );
        }
        Value::Bool(b) => (*b).into(),
        Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(int), _) => int.into(),
            (None, Some(float)) if number.is_f64() => float.into(),
            _ => {
                return Err(format!(
                    "TOML integers stop at {}; {} does not fit",
                    i64::MAX,
                    shorten(&number.to_string())
                ));
            }
        },
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item)?);
            }
            toml_edit::Value::Array(array)
        }
        Value::Object(fields) => {
            let mut table = toml_edit::InlineTable::new();
            for (key, item) in fields {
                table.insert(key, toml_value(item)?);
            }
            toml_edit::Value::InlineTable(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgraft::runtime::manifest::ElementSpec;

    fn combo(names: &[&str]) -> ComboSpec {
        names.iter().map(|name| ElementSpec::named(*name)).collect()
    }

    const JSON: &str = r#"{
  "tools": {
    "weather": [
      ["trace", "cache"],
      [{ "name": "batch", "config": { "max_items": 1e1 } }, "pool"]
    ],
    "search": [["cache"]],
    "translate": [["pool", "proxy"]]
  }
}
"#;

    #[test]
    fn json_replaces_only_the_tool() {
        let out = json_with_tool(JSON, "search", &[combo(&["trace"]), combo(&["cache"])]).unwrap();
        assert_eq!(
            out,
            JSON.replace(r#"[["cache"]]"#, r#"[["trace"], ["cache"]]"#)
        );
    }

    #[test]
    fn json_keeps_a_multi_line_layout() {
        let out = json_with_tool(JSON, "weather", &[combo(&["trace"]), combo(&["pool"])]).unwrap();
        let expected = "    \"weather\": [\n      [\"trace\"],\n      [\"pool\"]\n    ],\n";
        assert!(out.contains(expected), "{out}");
        assert!(out.contains(r#""translate": [["pool", "proxy"]]"#));
        Manifest::from_json(&out).unwrap();
    }

    #[test]
    fn json_adds_and_removes_keys() {
        let added = json_with_tool(JSON, "new\"one", &[combo(&["trace"])]).unwrap();
        assert!(
            added.contains("[[\"pool\", \"proxy\"]],\n    \"new\\\"one\": [[\"trace\"]]\n  }"),
            "{added}"
        );
        let removed = json_with_tool(&added, "new\"one", &[]).unwrap();
        assert_eq!(removed, JSON);
        for tool in ["weather", "search", "translate"] {
            let out = json_with_tool(JSON, tool, &[]).unwrap();
            let manifest = Manifest::from_json(&out).unwrap();
            assert_eq!(manifest.tools.len(), 2, "{out}");
            assert!(manifest.tools.iter().all(|(name, _)| name != tool));
        }
        let only = json_with_tool(r#"{"tools": {"a": ["trace"]}}"#, "a", &[]).unwrap();
        assert_eq!(only, r#"{"tools": {}}"#);
        let first = json_with_tool(&only, "b", &[combo(&["pool"])]).unwrap();
        assert_eq!(first, r#"{"tools": {"b": [["pool"]]}}"#);
    }

    const TOML: &str = r#"# Operator's combos.
[tools]
# the weather service
weather = [["trace", "cache"], [{ name = "batch", config = { max_items = 10 } }, "pool"]]
search = [
    ["cache"],
]
translate = [["pool", "proxy"]] # keep
"#;

    #[test]
    fn toml_replaces_only_the_tool() {
        let configured = vec![ElementSpec::configured(
            "batch",
            serde_json::json!({"max_items": 3, "parallel": true}),
        )];
        let out = toml_with_tool(TOML, "weather", &[configured, combo(&["pool"])]).unwrap();
        assert_eq!(
            out,
            TOML.replace(
                r#"[["trace", "cache"], [{ name = "batch", config = { max_items = 10 } }, "pool"]]"#,
                r#"[[{ name = "batch", config = { max_items = 3, parallel = true } }], ["pool"]]"#
            )
        );
        let out = toml_with_tool(TOML, "search", &[combo(&["trace"])]).unwrap();
        assert!(out.contains("search = [\n    [\"trace\"],\n]\n"), "{out}");
        let out = toml_with_tool(TOML, "translate", &[combo(&["trace"])]).unwrap();
        assert!(out.contains("translate = [[\"trace\"]] # keep\n"), "{out}");
    }

    #[test]
    fn toml_adds_and_removes_keys() {
        let added = toml_with_tool(TOML, "new", &[combo(&["trace"])]).unwrap();
        let manifest = Manifest::from_toml(&added).unwrap();
        assert_eq!(manifest.tools.last().unwrap().0, "new");
        assert!(added.ends_with("# keep\nnew = [[\"trace\"]]\n"), "{added}");
        let removed = toml_with_tool(&added, "new", &[]).unwrap();
        assert_eq!(removed, TOML);
    }

    #[test]
    fn toml_refuses_what_it_cannot_hold() {
        let null = vec![ElementSpec::configured(
            "cache",
            serde_json::json!({"x": null}),
        )];
        assert!(
            representable(Format::Toml, std::slice::from_ref(&null))
                .unwrap_err()
                .contains("no `null`")
        );
        assert!(representable(Format::Json, &[null]).is_ok());
        let big = vec![ElementSpec::configured(
            "cache",
            serde_json::json!({"x": u64::MAX}),
        )];
        assert!(representable(Format::Toml, &[big]).is_err());
    }
}
