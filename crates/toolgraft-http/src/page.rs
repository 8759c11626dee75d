//! The page: server-rendered HTML (the bound-name table, each tool's combos, the
//! catalogue) with forms to add and remove combos; a little JavaScript sends them
//! to the JSON API and shows a refusal in place.

use std::fmt::Write;

use axum::extract::State;
use axum::response::Html;
use serde_json::Value;
use toolgraft::runtime::manifest::ComboSpec;
use toolgraft::schema::Schema;
use toolgraft::toolset::{Site, ToolInfo};

use crate::body::combo_value;
use crate::state::Shared;

/// `GET /`.
pub(crate) async fn show(State(state): State<Shared>) -> Html<String> {
    let tools = state.toolset.tools();
    let bases: Vec<(String, Vec<ComboSpec>)> = tools
        .iter()
        .filter(|info| !info.is_branch())
        .map(|info| {
            let combos = state.toolset.combos(&info.name).unwrap_or_default();
            (info.name.to_string(), combos)
        })
        .collect();
    let mut page = String::with_capacity(16 * 1024);
    page.push_str(HEAD);
    let written = if state.manifest.is_some() {
        ", and is written to the manifest file, so a restart keeps it"
    } else {
        ""
    };
    let _ = write!(
        page,
        "<header><h1>Tools and combos</h1><p>Every change is checked by the same rules as \
         the manifest and applies live{written}.</p></header><main>"
    );
    bound_names(&mut page, &tools);
    combos(&mut page, &bases);
    add_form(&mut page, &bases);
    catalogue(&mut page, &state);
    page.push_str("</main><script>");
    page.push_str(SCRIPT);
    page.push_str("</script></body></html>");
    Html(page)
}

fn bound_names(page: &mut String, tools: &[ToolInfo]) {
    page.push_str(
        "<section aria-labelledby=\"bound-title\"><h2 id=\"bound-title\">Bound names</h2>\
         <table id=\"bound\"><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Base</th>\
         <th scope=\"col\">Layers, inner to outer</th><th scope=\"col\">Where each runs</th>\
         <th scope=\"col\">Input</th><th scope=\"col\">Output</th></tr></thead><tbody>",
    );
    for info in tools {
        let layers = if info.chain.is_empty() {
            "<span class=\"muted\">(base)</span>".to_owned()
        } else {
            info.chain
                .iter()
                .map(|link| {
                    format!(
                        "<code>{}</code> <span class=\"kind\">{}</span>",
                        escape(&link.to_string()),
                        link.kind
                    )
                })
                .collect::<Vec<_>>()
                .join(" › ")
        };
        let mut runs: Vec<String> = info
            .chain
            .iter()
            .zip(info.sites())
            .map(|(link, site)| {
                let needs = if link.placement.is_anywhere() {
                    String::new()
                } else {
                    format!(
                        " <span class=\"placement\">(must run {})</span>",
                        link.placement
                    )
                };
                format!(
                    "{}: {}{needs}",
                    escape(link.extension.as_str()),
                    site_text(&site)
                )
            })
            .collect();
        runs.push(format!("body: {}", site_text(&info.body_site())));
        let output = info
            .output_schema
            .as_deref()
            .map_or_else(|| "<span class=\"muted\">-</span>".to_owned(), output_text);
        let _ = write!(
            page,
            "<tr data-name=\"{name}\" data-base=\"{base}\"><th scope=\"row\"><code>{name}</code></th>\
             <td><code>{base}</code></td><td>{layers}</td><td>{runs}</td><td>{input}</td><td>{output}</td></tr>",
            name = escape(info.name.as_str()),
            base = escape(info.base.as_str()),
            runs = runs.join("<br>"),
            input = parameters(&info.input_schema),
        );
    }
    page.push_str("</tbody></table></section>");
}

fn combos(page: &mut String, bases: &[(String, Vec<ComboSpec>)]) {
    page.push_str(
        "<section aria-labelledby=\"combos-title\" id=\"combos\"><h2 id=\"combos-title\">Combos</h2>\
         <p id=\"remove-error\" class=\"error\" role=\"alert\" hidden></p>",
    );
    for (tool, combos) in bases {
        let _ = write!(page, "<h3><code>{}</code></h3>", escape(tool));
        if combos.is_empty() {
            page.push_str("<p class=\"muted\">No combos.</p>");
            continue;
        }
        page.push_str("<ul class=\"combos\">");
        for combo in combos {
            let value = combo_value(combo);
            let shown = combo
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(
                page,
                "<li><code>[{shown}]</code> <button type=\"button\" class=\"remove\" data-tool=\"{tool}\" \
                 data-combo=\"{combo}\" aria-label=\"Remove [{shown}] from {tool}\">Remove</button></li>",
                shown = escape(&shown),
                tool = escape(tool),
                combo = escape(&value.to_string()),
            );
        }
        page.push_str("</ul>");
    }
    page.push_str("</section>");
}

fn add_form(page: &mut String, bases: &[(String, Vec<ComboSpec>)]) {
    page.push_str(
        "<section aria-labelledby=\"add-title\"><h2 id=\"add-title\">Add a combo</h2>\
         <form id=\"add\"><div class=\"row\"><label for=\"add-tool\">Tool</label>\
         <select id=\"add-tool\" name=\"tool\">",
    );
    for (tool, _) in bases {
        let _ = write!(page, "<option>{}</option>", escape(tool));
    }
    page.push_str(
        "</select></div><div class=\"row\"><label for=\"add-combo\">Combo</label>\
         <input id=\"add-combo\" name=\"combo\" required size=\"48\" placeholder=\"trace, cache\" \
         aria-describedby=\"add-help\"></div>\
         <p id=\"add-help\" class=\"muted\">Extension names, inner first, separated by commas; \
         with config, a JSON list: <code>[{\"name\": \"batch\", \"config\": {\"max_items\": 10}}, \"pool\"]</code></p>\
         <button type=\"submit\">Add combo</button>\
         <p id=\"add-error\" class=\"error\" role=\"alert\" hidden></p>\
         <p id=\"add-status\" class=\"ok\" role=\"status\"></p></form></section>",
    );
}

fn catalogue(page: &mut String, state: &Shared) {
    page.push_str(
        "<section aria-labelledby=\"catalogue-title\"><h2 id=\"catalogue-title\">Catalogue</h2>\
         <table id=\"catalogue\"><thead><tr><th scope=\"col\">Extension</th><th scope=\"col\">Kind</th></tr></thead><tbody>",
    );
    for entry in state.registry.catalogue() {
        let _ = write!(
            page,
            "<tr><th scope=\"row\"><code>{}</code></th><td>{}</td></tr>",
            escape(entry.name.as_str()),
            entry.kind
        );
    }
    page.push_str("</tbody></table></section>");
}

/// The sign-in form the page shows when a token is required.
pub(crate) fn sign_in(problem: Option<&str>) -> String {
    let problem = problem
        .map(|problem| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(problem)))
        .unwrap_or_default();
    format!(
        "{HEAD}<header><h1>Tools and combos</h1></header><main><section><h2>Sign in</h2>\
         <form method=\"post\" action=\"login\"><div class=\"row\"><label for=\"token\">Token</label>\
         <input id=\"token\" name=\"token\" type=\"password\" required autocomplete=\"current-password\"></div>\
         {problem}<button type=\"submit\">Sign in</button></form></section></main></body></html>"
    )
}

fn site_text(site: &Site) -> String {
    match site {
        Site::Caller => "caller".to_owned(),
        Site::Relocated { by } => format!("via <code>{}</code>", escape(by.as_str())),
    }
}

/// Parameters as `city, exp?` (`?` for optional ones).
fn parameters(schema: &Schema) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|required| required.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .keys()
                .map(|name| {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("<code>{}{optional}</code>", escape(name))
                })
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        "<span class=\"muted\">none</span>".to_owned()
    } else {
        names.join(", ")
    }
}

fn output_text(schema: &Schema) -> String {
    let describe = |key: &str| schema.get(key).and_then(Value::as_str).map(escape);
    describe("title")
        .or_else(|| describe("type"))
        .unwrap_or_else(|| "any".to_owned())
}

/// Text for HTML content and quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const HEAD: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tools and combos</title><style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 72rem; padding: 1rem 1.5rem; color: #1b1b1b; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 1.6rem; } h3 { font-size: 1rem; margin: .8rem 0 .3rem; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; vertical-align: top; padding: .3rem .5rem; border-bottom: 1px solid #ddd; }
thead th { background: #f3f3f3; } code { font-size: .92em; } .kind { color: #555; font-size: .85em; }
.muted { color: #666; } .error { color: #9b1c1c; background: #fdecec; border-left: 4px solid #9b1c1c; padding: .4rem .6rem; }
.ok { color: #14532d; } .rule { display: block; font-size: .85em; margin-top: .2rem; }
.row { margin: .4rem 0; } label { display: inline-block; min-width: 4rem; font-weight: 600; }
ul.combos { margin: 0; padding-left: 1.2rem; } button { margin-left: .4rem; }
tr.new { background: #e9f7ef; }
</style></head><body>"#;

const SCRIPT: &str = r##"
"use strict";
const api = (tool) => "tools/" + encodeURIComponent(tool) + "/extensions/combos";

function show(element, data) {
  element.textContent = data.error;
  if (data.rule) {
    const rule = document.createElement("span");
    rule.className = "rule";
    rule.textContent = "rule: " + data.rule;
    element.append(rule);
  }
  element.hidden = false;
}

async function send(tool, body) {
  const response = await fetch(api(tool), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({ error: response.status + " " + response.statusText }));
  return { ok: response.ok, data };
}

// Replaces the table and the combos with the server's current ones.
async function refresh() {
  const response = await fetch("./", { credentials: "same-origin" });
  const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
  for (const id of ["bound", "combos"]) {
    document.getElementById(id).replaceWith(fresh.getElementById(id));
  }
}

function parseCombo(text) {
  text = text.trim();
  if (text.startsWith("[")) {
    return JSON.parse(text);
  }
  return text.split(/[\s,>]+/).filter(Boolean);
}

document.getElementById("add").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("add-error");
  const status = document.getElementById("add-status");
  error.hidden = true;
  status.textContent = "";
  const tool = document.getElementById("add-tool").value;
  let combo;
  try {
    combo = parseCombo(document.getElementById("add-combo").value);
  } catch (problem) {
    show(error, { error: "The combo is not valid JSON: " + problem.message });
    return;
  }
  const before = new Set([...document.querySelectorAll("#bound tr[data-name]")].map((row) => row.dataset.name));
  const { ok, data } = await send(tool, { add: [combo] });
  if (!ok) {
    show(error, data);
    return;
  }
  await refresh();
  const added = data.names.filter((name) => !before.has(name));
  for (const name of added) {
    document.querySelector(`#bound tr[data-name="${CSS.escape(name)}"]`)?.classList.add("new");
  }
  status.textContent = "Added to " + tool + (added.length ? "; new names: " + added.join(", ") : "") + ".";
});

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.remove");
  if (!button) {
    return;
  }
  const error = document.getElementById("remove-error");
  error.hidden = true;
  const { ok, data } = await send(button.dataset.tool, { remove: [JSON.parse(button.dataset.combo)] });
  if (!ok) {
    show(error, data);
    return;
  }
  await refresh();
  document.getElementById("add-status").textContent = "Removed from " + button.dataset.tool + ".";
});
"##;
