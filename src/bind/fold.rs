//! One step of the fold: an element applied to the running view, the rules in
//! the rulebook's order.

use std::sync::Arc;

use super::info::Link;
use super::rules;
use super::running::{Element, Running};
use crate::error::BindError;

impl Running {
    /// Applies one element (the rulebook's per-layer order: locality, caller side,
    /// config, same name, input rule, output fold, description).
    pub(crate) fn apply(&self, element: &Element) -> Result<Running, BindError> {
        rules::locality(self, element)?;
        rules::caller_side(self, element)?;
        rules::shared_answers(self, element)?;
        rules::config(self, element)?;
        rules::side_effects(self, element)?;
        rules::new_name(self, element)?;
        let mut input_schema = rules::input_schema(self, element)?;
        // Above a transformer, what was withheld below is an item's, not the
        // arguments' (rule `reserved-params`).
        let mut withheld = if element.kind.declares_schema() {
            Arc::from([])
        } else {
            self.withheld.clone()
        };
        let pins = element.pinned.clone().unwrap_or_default();
        let hidden = element.hidden.as_deref().unwrap_or_default();
        if !pins.is_empty() || !hidden.is_empty() {
            rules::pins(self, element, &pins, hidden)?;
            let names: Vec<String> = pins.keys().chain(hidden).cloned().collect();
            input_schema = Arc::new(crate::schema::without(&input_schema, &names));
            withheld = withheld.iter().chain(&names).cloned().collect();
        }
        let output_schema = rules::output_schema(self, element)?;
        let description = rules::description(self, element);
        let link = Link {
            extension: element.name.clone(),
            kind: element.kind,
            placement: element.placement,
            access: element.access,
            config: element.config.clone(),
        };
        let chain = self.chain.iter().cloned().chain([link]).collect();
        Ok(Running {
            name: element.branch.clone(),
            base: self.base.clone(),
            description,
            input_schema,
            output_schema,
            presentation: rules::presentation(self, element),
            withheld,
            chain,
            checks: self.checks.and(element.policy.as_ref()),
            answers_repeats: rules::answers_repeats(self, element),
        })
    }
}

#[cfg(test)]
mod tests {
    //! The engine on hand-made elements: what a run-time combo can present that a
    //! typed one cannot (the typed path proves these by construction).

    use serde_json::json;

    use schemars::Schema;
    use serde_json::Value;

    use super::*;
    use crate::bind::key::written_config;
    use crate::extension::Placement;
    use crate::kind::ExtensionKind;
    use crate::kind::ExtensionKind::{Backend, Transformer, Wrapper};
    use crate::name::Name;
    use crate::tool::ToolSpec;

    fn name(text: &str) -> Name {
        Name::new(text).unwrap()
    }

    fn schema(value: Value) -> Arc<Schema> {
        Arc::new(Schema::try_from(value).unwrap())
    }

    fn shout() -> Running {
        Running::of_base(&ToolSpec {
            name: name("shout"),
            description: "Return the text.".into(),
            input_schema: schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            })),
            output_schema: Some(schema(json!({"type": "string"}))),
            presentation: Default::default(),
        })
    }

    fn element(below: &Running, extension: &str, kind: ExtensionKind) -> Element {
        Element::bare(&name(extension), kind, below)
    }

    fn fold(elements: &[Element]) -> Result<Vec<Running>, BindError> {
        let mut running = shout();
        let mut all = Vec::new();
        for element in elements {
            running = running.apply(element)?;
            all.push(running.clone());
        }
        Ok(all)
    }

    #[test]
    fn cardinality_names_the_kind_and_every_offender_in_order() {
        let base = shout();
        let pool = element(&base, "pool", Backend);
        let other = element(&base, "other_backend", Backend);
        let trace = element(&base, "trace", Wrapper);
        let check = |elements: &[Element]| {
            let kinds: Vec<(&Name, ExtensionKind)> =
                elements.iter().map(|e| (&e.name, e.kind)).collect();
            rules::cardinality(&base.base, kinds.into_iter())
        };
        let err = check(&[pool.clone(), trace.clone(), pool.clone()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a combo of `shout` holds more than one backend: [pool, pool]; a combo allows one backend, so put each in its own combo"
        );
        let err = check(&[pool.clone(), other]).unwrap_err();
        assert!(
            matches!(err, BindError::MultipleOfKind { kind: Backend, ref extensions, .. }
            if extensions.iter().map(Name::as_str).eq(["pool", "other_backend"]))
        );
        assert!(check(&[trace.clone(), pool, trace]).is_ok());
    }

    #[test]
    fn locality_inside_relocation_names_both_and_the_fix() {
        let base = shout();
        let pool = element(&base, "pool", Backend);
        let mut proxy = element(&base, "proxy", Wrapper);
        proxy.placement = Placement::BesideBody;
        let after_pool = base.apply(&pool).unwrap();
        let mut outside = proxy.clone();
        outside.branch = after_pool.name.branch(&outside.name);
        let err = after_pool.apply(&outside).unwrap_err();
        assert_eq!(
            err.to_string(),
            "on `shout`, `proxy` needs to run beside the tool body but sits outside `pool`, which runs the body elsewhere; place `proxy` before `pool`"
        );
        // Inside is fine, and so is a wrapper without the flag outside.
        let inside = base.apply(&proxy).unwrap();
        let mut pool_outside = pool.clone();
        pool_outside.branch = inside.name.branch(&pool.name);
        assert!(inside.apply(&pool_outside).is_ok());
        let mut trace = element(&after_pool, "trace", Wrapper);
        trace.branch = after_pool.name.branch(&trace.name);
        assert!(after_pool.apply(&trace).is_ok());
    }

    #[test]
    fn caller_outside_relocation_names_both_and_the_fix() {
        let base = shout();
        let mut approve = element(&base, "approve", Wrapper);
        approve.placement = Placement::BesideCaller;
        let approved = base.apply(&approve).unwrap();
        let mut pool = element(&approved, "pool", Backend);
        pool.branch = approved.name.branch(&pool.name);
        let err = approved.apply(&pool).unwrap_err();
        assert_eq!(
            err.rule(),
            Some(crate::rulebook::Rule::CallerOutsideRelocation)
        );
        assert_eq!(
            err.to_string(),
            "on `shout`, `approve` needs the caller's session but sits inside `pool`, which would run it on a worker with no caller to ask or report to; place `approve` after `pool`"
        );
        // Outside is fine, and so are wrappers of every other placement inside.
        let pooled = base.apply(&element(&base, "pool", Backend)).unwrap();
        let mut outside = approve.clone();
        outside.branch = pooled.name.branch(&approve.name);
        assert!(pooled.apply(&outside).is_ok());
        for placement in [Placement::Anywhere, Placement::BesideBody] {
            let mut inner = element(&base, "inner", Wrapper);
            inner.placement = placement;
            let wrapped = base.apply(&inner).unwrap();
            let mut pool = element(&wrapped, "pool", Backend);
            pool.branch = wrapped.name.branch(&pool.name);
            assert!(wrapped.apply(&pool).is_ok(), "{placement}");
        }
        // The chain says where each layer must run.
        let outer = pooled.apply(&outside).unwrap();
        let placements: Vec<Placement> = outer.chain.iter().map(|link| link.placement).collect();
        assert_eq!(placements, [Placement::Anywhere, Placement::BesideCaller]);
    }

    #[test]
    fn a_branch_named_like_the_base_is_refused() {
        // A wrapper whose branch would take the base tool's own name: refused.
        let base = shout();
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.branch = name("shout");
        let err = base.apply(&renamer).unwrap_err();
        assert!(matches!(err, BindError::SameName { .. }));
        assert!(err.to_string().contains("same name"));
    }

    #[test]
    fn config_reaches_only_extensions_that_accept_it() {
        // Config for an extension that takes none is refused unless it is empty.
        let base = shout();
        let mut trace = element(&base, "trace", Wrapper);
        trace.written = written_config(Some(&json!({"x": 1})));
        let err = base.apply(&trace).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`trace` (on `shout`) does not accept config; remove its `config` or leave it empty"
        );
        trace.written = written_config(Some(&json!({})));
        assert!(base.apply(&trace).is_ok());
        trace.written = written_config(Some(&json!({"x": 1})));
        trace.accepts_config = true;
        assert!(base.apply(&trace).is_ok());
    }

    #[test]
    fn a_run_time_wrapper_must_present_its_layer_input_schema() {
        let base = shout();
        // A wrapper presenting `{ txt }` over `shout`'s `{ text }` changed the schema.
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.presented_input = Some(schema(json!({
            "type": "object", "properties": {"txt": {"type": "string"}}, "required": ["txt"],
        })));
        let err = base.apply(&renamer).unwrap_err();
        assert!(
            err.to_string().starts_with("wrapper changed the schema"),
            "{err}"
        );
        assert!(err.to_string().contains("`txt`"), "{err}");

        // A changed type is a change too.
        renamer.presented_input = Some(schema(json!({
            "type": "object", "properties": {"text": {"type": "integer"}}, "required": ["text"],
        })));
        let err = base.apply(&renamer).unwrap_err();
        assert!(err.to_string().contains("/properties/text/type"), "{err}");

        // The same schema plus declared reserved params binds.
        let mut cache = element(&base, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        cache.presented_input = Some(schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "exp": {"type": "number"}},
            "required": ["text"],
        })));
        let branch = base.apply(&cache).unwrap();
        assert_eq!(
            branch.input_schema.get("properties").unwrap()["exp"]["type"],
            "number"
        );
    }

    #[test]
    fn an_empty_required_list_equals_an_absent_one() {
        // `ping {}` plus a reserved `exp`, with `required: []` written out, as a
        // run-time wrapper would present it.
        let ping = Running::of_base(&ToolSpec {
            name: name("ping"),
            description: "Answer pong.".into(),
            input_schema: schema(json!({"type": "object", "properties": {}})),
            output_schema: None,
            presentation: Default::default(),
        });
        let mut cache = element(&ping, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        cache.presented_input = Some(schema(json!({
            "type": "object", "properties": {"exp": {"type": "number"}}, "required": [],
        })));
        assert!(ping.apply(&cache).is_ok());
    }

    #[test]
    fn reserved_params_must_be_new_and_inline() {
        let base = shout();
        let mut shadow = element(&base, "shadow", Wrapper);
        shadow.reserved = Some(schema(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ));
        let err = base.apply(&shadow).unwrap_err();
        assert_eq!(
            err.to_string(),
            "reserved param `text` already exists: `shadow` on `shout` reserves `text`, which `shout` already takes; rename the reserved param"
        );
        shadow.reserved = Some(schema(json!({
            "type": "object",
            "properties": {"mode": {"$ref": "#/$defs/Mode"}},
            "$defs": {"Mode": {"enum": ["a", "b"]}},
        })));
        assert!(matches!(
            base.apply(&shadow).unwrap_err(),
            BindError::ReservedParamNotInline { .. }
        ));
        // Declared by a non-wrapper, reserved params are ignored.
        let mut backend = element(&base, "remote", Backend);
        backend.reserved = Some(schema(
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ));
        assert_eq!(
            base.apply(&backend).unwrap().input_schema,
            base.input_schema
        );
    }

    #[test]
    fn transformers_present_concrete_schemas_and_backends_anything() {
        let base = shout();
        let mut transformer = element(&base, "batch", Transformer);
        assert!(matches!(
            base.apply(&transformer).unwrap_err(),
            BindError::TransformerSchemaNotConcrete { .. }
        ));
        transformer.presented_input = Some(schema(json!({"type": "object", "properties": {}})));
        assert!(base.apply(&transformer).is_ok());
        // A backend may present any schema: its branch takes it as it is.
        let mut backend = element(&base, "remote", Backend);
        backend.presented_input = Some(schema(json!({
            "type": "object", "properties": {"other": {"type": "integer"}},
        })));
        let branch = base.apply(&backend).unwrap();
        assert_eq!(branch.input_schema, backend.presented_input.unwrap());
    }

    #[test]
    fn output_schema_folds_by_shape_and_declarations() {
        let base = shout();
        let trace = element(&base, "trace", Wrapper);
        let mut batch = element(&base, "batch", Transformer);
        batch.presented_input = Some(schema(
            json!({"type": "object", "properties": {"items": {}}}),
        ));
        let folded = fold(&[trace.clone(), {
            let mut b = batch.clone();
            b.branch = name("shout_trace_batch");
            b
        }])
        .unwrap();
        assert_eq!(folded[0].output_schema, base.output_schema);
        assert_eq!(folded[1].output_schema, None);
        // A wrapper may not contradict its layer's output schema; it may declare
        // one where its layer has none (after a transformer).
        let mut declaring = element(&base, "typed", Wrapper);
        declaring.declared_output = Some(schema(json!({"type": "object"})));
        assert!(matches!(
            base.apply(&declaring),
            Err(BindError::OutputSchemaContradicts { .. })
        ));
        let after_batch = &folded[1];
        let mut declaring = element(after_batch, "typed", Wrapper);
        declaring.declared_output = Some(schema(json!({"type": "array"})));
        assert_eq!(
            after_batch
                .apply(&declaring)
                .unwrap()
                .output_schema
                .as_deref(),
            declaring.declared_output.as_deref()
        );
    }

    #[test]
    fn per_layer_rules_run_in_spec_order() {
        // Locality before config: an element that breaks both reports locality, as
        // the manifest path must.
        let base = shout();
        let after_pool = base.apply(&element(&base, "pool", Backend)).unwrap();
        let mut proxy = element(&after_pool, "proxy", Wrapper);
        proxy.placement = Placement::BesideBody;
        proxy.written = written_config(Some(&json!({"allow": ["a"]})));
        let err = after_pool.apply(&proxy).unwrap_err();
        assert!(
            matches!(err, BindError::LocalityOutsideRelocation { .. }),
            "{err:?}"
        );
        // Config before the input rule.
        let mut renamer = element(&base, "renamer", Wrapper);
        renamer.written = written_config(Some(&json!({"x": 1})));
        renamer.presented_input =
            Some(schema(json!({"type": "object", "properties": {"txt": {}}})));
        assert!(matches!(
            base.apply(&renamer).unwrap_err(),
            BindError::ConfigNotAccepted { .. }
        ));
    }

    #[test]
    fn a_malformed_layer_schema_is_an_error_not_a_panic() {
        let base = shout();
        let mut odd = element(&base, "odd", Backend);
        odd.presented_input = Some(schema(json!({"type": "object", "properties": 5})));
        let below = base.apply(&odd).unwrap();
        let mut cache = element(&below, "cache", Wrapper);
        cache.reserved = Some(schema(
            json!({"type": "object", "properties": {"exp": {"type": "number"}}}),
        ));
        let err = below.apply(&cache).unwrap_err();
        assert!(matches!(err, BindError::MalformedSchema { .. }), "{err:?}");
        assert!(err.to_string().contains("`properties` is `5`"), "{err}");
    }

    #[test]
    fn required_is_a_set() {
        let base = shout();
        let mut presented = (*base.input_schema).clone();
        presented.insert("required".into(), json!(["text"]));
        let mut two = element(&base, "two", Wrapper);
        two.reserved = Some(schema(
            json!({"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]}),
        ));
        let mut flipped = presented.clone();
        flipped
            .get_mut("properties")
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert("mode".into(), json!({"type": "string"}));
        flipped.insert("required".into(), json!(["mode", "text"]));
        two.presented_input = Some(Arc::new(flipped));
        assert!(
            base.apply(&two).is_ok(),
            "`required` in another order is the same schema"
        );
    }
}
