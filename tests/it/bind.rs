//! `Toolset::bind`: one verb for typed combos, from none to many, of one base
//! tool or several.

use toolgraft::combo::StartCombo;
use toolgraft::ext::{Cache, Trace};
use toolgraft::tool::BaseTool;
use toolgraft::{BindError, Tool, Toolset};

use toolgraft::runtime::manifest::{ComboSpec, ElementSpec};

use crate::common::{Ping, Shout, ping, shout};

#[test]
fn an_empty_tuple_binds_nothing() {
    let toolset = Toolset::new();
    let mut changes = toolset.changes();
    changes.mark_unchanged();
    let () = toolset.bind(()).unwrap();
    assert!(toolset.names().is_empty());
    assert!(!changes.has_changed().unwrap());
}

#[test]
fn a_combo_with_no_extension_is_its_base_alone() {
    let tool = shout();
    let toolset = Toolset::new();
    let (base,) = toolset.bind((tool.combo(),)).unwrap();
    assert_eq!(base.name(), "shout");
    assert_eq!(toolset.names(), ["shout"]);
    // It is no combo of the tool's: nothing to detach.
    assert!(toolset.combos("shout").unwrap().is_empty());
    // Beside other combos it changes nothing.
    let toolset = Toolset::new();
    toolset
        .bind((tool.combo(), tool.combo().with(Trace), tool.combo()))
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_trace"]);
    assert_eq!(toolset.combos("shout").unwrap().len(), 1);
}

#[tokio::test]
async fn twelve_combos_bind_in_one_call_and_come_back_typed() {
    let tool = shout();
    let toolset = Toolset::new();
    let t = || tool.combo().with(Trace);
    let (a, b, c, d, e, f, g, h, i, j, k, l) = toolset
        .bind((
            tool.combo(),
            t(),
            t().with(Trace),
            t().with(Trace).with(Trace),
            tool.combo().with(Cache::default()),
            t().with(Cache::default()),
            t().with(Trace).with(Cache::default()),
            tool.combo().with(Cache::default()).with(Trace),
            t().with(Cache::default()).with(Trace),
            t().with(Trace).with(Trace).with(Trace),
            t().with(Trace).with(Trace).with(Trace).with(Trace),
            tool.combo().with(Cache::default()).with(Trace).with(Trace),
        ))
        .unwrap();
    let names = [
        a.name(),
        b.name(),
        c.name(),
        d.name(),
        e.name(),
        f.name(),
        g.name(),
        h.name(),
        i.name(),
        j.name(),
        k.name(),
        l.name(),
    ];
    for name in names {
        assert!(toolset.contains(name), "{name}");
    }
    assert_eq!(l.name(), "shout_cache_trace_trace");
    assert_eq!(l.call(Shout::new("hi")).await.unwrap(), "hi");
    assert_eq!(k.call(Shout::new("ho")).await.unwrap(), "ho");
    // Each prefix once: `shout`, five of traces only, and six with a cache.
    assert_eq!(toolset.names().len(), 1 + 5 + 6);
}

#[test]
fn combos_of_several_tools_bind_every_base_or_none() {
    let (shout, ping) = (shout(), ping());
    let toolset = Toolset::new();
    let (traced, pinged, cached) = toolset
        .bind((
            shout.combo().with(Trace),
            ping.combo().with(Trace),
            shout.combo().with(Cache::default()),
        ))
        .unwrap();
    assert_eq!(
        [traced.name(), pinged.name(), cached.name()],
        ["shout_trace", "ping_trace", "shout_cache"]
    );
    assert_eq!(
        toolset.names(),
        ["ping", "ping_trace", "shout", "shout_cache", "shout_trace"]
    );
    assert_eq!(toolset.combos("shout").unwrap().len(), 2);

    // One of the bases is bound already: neither binds.
    let fresh = Tool::builder()
        .name("fresh")
        .description("Return the text.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let err = toolset
        .bind((fresh.combo().with(Trace), ping.combo()))
        .unwrap_err();
    assert!(
        matches!(err, BindError::AlreadyBound { ref tool } if tool == "ping"),
        "{err}"
    );
    assert!(!toolset.contains("fresh"));
}

/// Each combo brings its base, so no combo can be bound with another tool (what
/// `BindError::ForeignCombo` once refused at run time): interleaved combos of two
/// tools attach each to the tool it was started from, and run that tool's body.
#[tokio::test]
async fn interleaved_combos_attach_to_the_tool_they_were_started_from() {
    let (shout, ping) = (shout(), ping());
    let toolset = Toolset::new();
    let (pinged, shouted, cached) = toolset
        .bind((
            ping.combo().with(Trace),
            shout.combo().with(Trace),
            ping.combo().with(Cache::default()).with(Trace),
        ))
        .unwrap();
    let spec =
        |names: &[&str]| -> ComboSpec { names.iter().map(|n| ElementSpec::named(*n)).collect() };
    assert_eq!(toolset.combos("shout").unwrap(), [spec(&["trace"])]);
    assert_eq!(
        toolset.combos("ping").unwrap(),
        [spec(&["trace"]), spec(&["cache", "trace"])]
    );
    assert_eq!(pinged.call(Ping {}).await.unwrap(), "pong");
    assert_eq!(cached.call(Ping {}).await.unwrap(), "pong");
    assert_eq!(shouted.call(Shout::new("hi")).await.unwrap(), "hi");
}

#[test]
fn two_different_tools_of_one_name_in_one_call_are_refused() {
    let first = shout();
    let second = Tool::builder()
        .name("shout")
        .description("Another tool, of the same name.")
        .read_only()
        .body(|input: Shout| async move { Ok(input.text) })
        .build()
        .unwrap();
    let toolset = Toolset::new();
    let err = toolset
        .bind((
            first.combo().with(Trace),
            second.combo().with(Cache::default()),
        ))
        .unwrap_err();
    assert!(
        matches!(err, BindError::AlreadyBound { ref tool } if tool == "shout"),
        "{err}"
    );
    assert!(toolset.names().is_empty());
    // Clones of one tool are one tool.
    let copy = first.clone();
    toolset
        .bind((
            first.combo().with(Trace),
            copy.combo().with(Cache::default()),
        ))
        .unwrap();
    assert_eq!(toolset.names(), ["shout", "shout_cache", "shout_trace"]);
}

#[test]
fn names_minted_by_two_tools_of_one_call_are_refused() {
    // `a`'s trace branch is named like the base `a_trace`.
    let tool = |name: &str| {
        Tool::builder()
            .name(name)
            .description("Return the text.")
            .read_only()
            .body(|input: Shout| async move { Ok(input.text) })
            .build()
            .unwrap()
    };
    let (a, a_trace) = (tool("a"), tool("a_trace"));
    let toolset = Toolset::new();
    let err = toolset
        .bind((a.combo().with(Trace), a_trace.combo()))
        .unwrap_err();
    assert!(matches!(err, BindError::NameTaken { .. }), "{err}");
    assert!(toolset.names().is_empty());
}

/// A generic helper binds a base alone through the one verb.
fn bind_alone<B: BaseTool>(toolset: &Toolset, base: &B) -> Result<(), BindError> {
    toolset.bind((base.combo(),)).map(drop)
}

#[test]
fn a_base_alone_binds_from_generic_code() {
    let toolset = Toolset::new();
    bind_alone(&toolset, &ping()).unwrap();
    assert_eq!(toolset.names(), ["ping"]);
}

#[tokio::test]
async fn more_than_sixteen_combos_bind_as_nested_tuples() {
    let tool = shout();
    let toolset = Toolset::new();
    let t = |marker: &'static str| tool.combo().with(crate::common::marker(marker));
    let ((a, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _), (q, (r, ()))) = toolset
        .bind((
            (
                t("a"),
                t("b"),
                t("c"),
                t("d"),
                t("e"),
                t("f"),
                t("g"),
                t("h"),
                t("i"),
                t("j"),
                t("k"),
                t("l"),
                t("m"),
                t("n"),
                t("o"),
                t("p"),
            ),
            (t("q"), (t("r"), ())),
        ))
        .unwrap();
    assert_eq!(
        [a.name(), q.name(), r.name()],
        ["shout_a", "shout_q", "shout_r"]
    );
    assert_eq!(toolset.names().len(), 1 + 18);
    assert_eq!(r.call(Shout::new("hi")).await.unwrap(), "hi|r");
}
