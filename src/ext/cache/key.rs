//! Cache keys: an input's JSON, written straight into one buffer, with the entries
//! of every map sorted by key.
//!
//! A map's entries come in whatever order it iterates (a `HashMap` field's changes
//! from one instance to the next; a run-time layer's arguments come in the
//! caller's order), so they are sorted: equal inputs give equal keys. A struct's
//! fields are written in declaration order, which is the same for every value of
//! the type, so they need no sorting, and a typed input is serialized without
//! building a `serde_json::Value` first: a cache hit costs what its key costs.
//!
//! Keys are JSON but for two cases that JSON cannot tell apart: a non-finite
//! float is written `NaN`, `Infinity` or `-Infinity` (JSON writes `null`, the
//! same as `None`), and a map key that is not a string, a number or a bool (a
//! `None`, a sequence) is refused, as `serde_json` refuses it (quoted, `null`
//! would be the string key `"null"`).

use std::cell::RefCell;

use serde::Serialize;
use serde::ser;

type Error = serde_json::Error;

/// `input`'s key (see the module docs).
pub(super) fn cache_key<I: Serialize + ?Sized>(input: &I) -> Result<String, Error> {
    /// Drops the entries a write left behind: a failed one (an error, or a
    /// panicking `Serialize`) leaves its maps' entries on the thread's list.
    struct Truncate(usize);
    impl Drop for Truncate {
        fn drop(&mut self) {
            ENTRIES.with(|entries| entries.borrow_mut().truncate(self.0));
        }
    }
    let mut out = Vec::with_capacity(64);
    let written = {
        let _truncate = Truncate(ENTRIES.with(|entries| entries.borrow().len()));
        input.serialize(Canonical { out: &mut out })
    };
    written?;
    // Only `serde_json` writes into `out`, and it writes UTF-8.
    String::from_utf8(out).map_err(ser::Error::custom)
}

/// Writes one value's JSON into `out`.
struct Canonical<'a> {
    out: &'a mut Vec<u8>,
}

impl Canonical<'_> {
    fn scalar<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        serde_json::to_writer(&mut *self.out, value)
    }
}

/// Writes `text` as a JSON string. Most strings (every field name) need no
/// escaping, and go out as they are; the others through `serde_json`.
fn write_str(out: &mut Vec<u8>, text: &str) -> Result<(), Error> {
    if text
        .bytes()
        .any(|byte| byte < 0x20 || byte == b'"' || byte == b'\\')
    {
        return serde_json::to_writer(out, text);
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Quotes what was written from `start` on (a number or a bool as a map key).
fn quote_from(out: &mut Vec<u8>, start: usize) {
    out.insert(start, b'"');
    out.push(b'"');
}

/// Writes an integer, without `serde_json`'s serializer around its formatter.
fn write_int<I: itoa::Integer>(out: &mut Vec<u8>, value: I) -> Result<(), Error> {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    Ok(())
}

/// A sequence being written: `[` is out, `,` goes before every item but the first.
struct Seq<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// What closes it: `]`, or `]}` for a tuple variant (`{"Variant":[...]}`).
    close: &'static [u8],
}

impl Seq<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        value.serialize(Canonical { out: self.out })
    }

    fn close(self) -> Result<(), Error> {
        self.out.extend_from_slice(self.close);
        Ok(())
    }
}

/// A struct being written, fields in declaration order.
struct Struct<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    close: &'static [u8],
}

impl Struct<'_> {
    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        write_str(self.out, key)?;
        self.out.push(b':');
        value.serialize(Canonical { out: self.out })
    }
}

/// A map being written: entries go out as they come, and are put in key order at
/// the end if they did not come in it.
struct Map<'a> {
    out: &'a mut Vec<u8>,
    /// Where the first entry starts (just after `{`).
    start: usize,
    /// Where this map's entries start in [`ENTRIES`].
    base: usize,
    /// How many entries it has.
    len: usize,
}

thread_local! {
    /// The entries of the maps being written on this thread, innermost last: one
    /// buffer, kept between keys, so keying a call's arguments allocates nothing
    /// for them. A map's entries sit above its parent's and are gone before the
    /// parent's next entry starts.
    static ENTRIES: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// One entry's key (its JSON string) and its end, as offsets into `out`.
#[derive(Clone, Copy)]
struct Entry {
    key_start: usize,
    key_end: usize,
    end: usize,
}

impl Map<'_> {
    fn close(self) -> Result<(), Error> {
        let (out, start, base) = (self.out, self.start, self.base);
        ENTRIES.with(|entries| {
            let mut entries = entries.borrow_mut();
            let mine = entries.get_mut(base..).unwrap_or_default();
            let sorted = mine.windows(2).all(|pair| {
                out[pair[0].key_start..pair[0].key_end] <= out[pair[1].key_start..pair[1].key_end]
            });
            if !sorted {
                let written = out.split_off(start);
                let key = |entry: &Entry| &written[entry.key_start - start..entry.key_end - start];
                mine.sort_by(|a, b| key(a).cmp(key(b)));
                for (at, entry) in mine.iter().enumerate() {
                    if at > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&written[entry.key_start - start..entry.end - start]);
                }
            }
            entries.truncate(base);
        });
        out.push(b'}');
        Ok(())
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        if self.len > 0 {
            self.out.push(b',');
        }
        let key_start = self.out.len();
        key.serialize(Canonical { out: self.out })?;
        // JSON keys are strings: a number or a bool key is quoted, as `serde_json`
        // does; any other is refused, as it refuses it.
        match self.out.get(key_start) {
            Some(b'"') => {}
            Some(b'0'..=b'9' | b't' | b'f') => quote_from(self.out, key_start),
            Some(b'-') if self.out[key_start..] != *b"-Infinity" => {
                quote_from(self.out, key_start);
            }
            _ => {
                return Err(ser::Error::custom(
                    "key must be a string, a number or a bool",
                ));
            }
        }
        let key_end = self.out.len();
        let entry = Entry {
            key_start,
            key_end,
            end: key_end,
        };
        ENTRIES.with(|entries| entries.borrow_mut().push(entry));
        self.len += 1;
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.out.push(b':');
        value.serialize(Canonical { out: self.out })?;
        let end = self.out.len();
        // The value's own maps are closed: this map's entry is the last one.
        ENTRIES.with(|entries| {
            if let Some(entry) = entries.borrow_mut().last_mut() {
                entry.end = end;
            }
        });
        Ok(())
    }

    fn end(self) -> Result<(), Error> {
        self.close()
    }
}

/// The four sequence-like compounds write the same way: items, then the close.
macro_rules! seq_like {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.item(value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

seq_like!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// A struct and a struct variant write the same way: fields, then the close.
macro_rules! struct_like {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Struct<'_> {
            type Ok = ();
            type Error = Error;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), Error> {
                self.out.extend_from_slice(self.close);
                Ok(())
            }
        }
    )*};
}

struct_like!(SerializeStruct, SerializeStructVariant);

/// Every integer goes out through `itoa`.
macro_rules! integers {
    ($($method:ident: $int:ty),*) => {$(
        fn $method(self, v: $int) -> Result<(), Error> {
            write_int(self.out, v)
        }
    )*};
}

impl<'a> ser::Serializer for Canonical<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Struct<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.scalar(&v)
    }
    integers!(
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_i128: i128,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_u128: u128
    );
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if v.is_finite() {
            return self.scalar(&v);
        }
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            return self.scalar(&v);
        }
        // JSON has no such number (`serde_json` writes `null`, which `None` is).
        self.out.extend_from_slice(match v {
            f64::INFINITY => b"Infinity",
            f64::NEG_INFINITY => b"-Infinity",
            _ => b"NaN",
        });
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.scalar(&v)
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        self.scalar(v)
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        self.scalar(&())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.push(b':');
        value.serialize(Canonical { out: self.out })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Seq<'a>, Error> {
        self.out.push(b'[');
        Ok(Seq {
            out: self.out,
            first: true,
            close: b"]",
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Seq<'a>, Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Seq {
            out: self.out,
            first: true,
            close: b"]}",
        })
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Map<'a>, Error> {
        self.out.push(b'{');
        let start = self.out.len();
        let base = ENTRIES.with(|entries| entries.borrow().len());
        Ok(Map {
            out: self.out,
            start,
            base,
            len: 0,
        })
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Struct<'a>, Error> {
        self.out.push(b'{');
        Ok(Struct {
            out: self.out,
            first: true,
            close: b"}",
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Struct<'a>, Error> {
        self.out.push(b'{');
        serde_json::to_writer(&mut *self.out, variant)?;
        self.out.extend_from_slice(b":{");
        Ok(Struct {
            out: self.out,
            first: true,
            close: b"}}",
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

    use super::*;

    #[derive(Serialize)]
    struct Query {
        text: String,
        limit: Option<u32>,
        tags: HashMap<String, i64>,
        nested: Vec<Shape>,
    }

    #[derive(Serialize)]
    enum Shape {
        Dot,
        Circle(f64),
        Pair(i8, i8),
        Rect { w: u8, h: u8 },
    }

    #[test]
    fn equal_inputs_give_equal_keys_whatever_their_maps_order() {
        let tags = |pairs: &[(&str, i64)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let one = Query {
            text: "a \"quoted\" é".into(),
            limit: None,
            tags: tags(&[("z", 1), ("a", 2), ("m", 3)]),
            nested: vec![
                Shape::Dot,
                Shape::Circle(1.5),
                Shape::Pair(1, -2),
                Shape::Rect { w: 3, h: 4 },
            ],
        };
        let two = Query {
            tags: tags(&[("m", 3), ("z", 1), ("a", 2)]),
            ..one
        };
        let key = cache_key(&two).unwrap();
        assert_eq!(
            key,
            r#"{"text":"a \"quoted\" é","limit":null,"tags":{"a":2,"m":3,"z":1},"nested":["Dot",{"Circle":1.5},{"Pair":[1,-2]},{"Rect":{"w":3,"h":4}}]}"#
        );
        // The key is JSON, and says what serde_json says of the same value.
        let parsed: serde_json::Value = serde_json::from_str(&key).unwrap();
        assert_eq!(parsed, serde_json::to_value(&two).unwrap());
    }

    #[test]
    fn arguments_in_any_order_give_one_key() {
        let a = json!({"b": {"y": [1, {"q": 1, "p": 2}], "x": null}, "a": "s"});
        let b = json!({"a": "s", "b": {"x": null, "y": [1, {"p": 2, "q": 1}]}});
        assert_eq!(cache_key(&a).unwrap(), cache_key(&b).unwrap());
        assert_eq!(
            cache_key(&a).unwrap(),
            r#"{"a":"s","b":{"x":null,"y":[1,{"p":2,"q":1}]}}"#
        );
    }

    #[test]
    fn a_long_map_in_reverse_order_is_sorted() {
        let mut args = serde_json::Map::new();
        for n in (0..20).rev() {
            args.insert(format!("k{n:02}"), json!({"z": n, "a": [n]}));
        }
        let sorted: BTreeMap<String, BTreeMap<String, serde_json::Value>> = args
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::from_value(v.clone()).unwrap()))
            .collect();
        let args = serde_json::Value::Object(args);
        assert_eq!(
            cache_key(&args).unwrap(),
            serde_json::to_string(&sorted).unwrap()
        );
    }

    /// Fails halfway through a nested map.
    struct Broken;

    impl Serialize for Broken {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = serializer.serialize_map(None)?;
            map.serialize_entry("b", &1)?;
            map.serialize_entry("a", &json!({"y": 1, "x": 2}))?;
            Err(ser::Error::custom("broken on purpose"))
        }
    }

    #[test]
    fn a_failed_key_leaves_nothing_behind() {
        assert!(cache_key(&json!({"outer": [1, {}], "z": null})).is_ok());
        assert!(cache_key(&vec![json!(1), json!({"k": 1})]).is_ok());
        let err = cache_key(&BTreeMap::from([("p", Broken)])).unwrap_err();
        assert!(err.to_string().contains("broken on purpose"));
        assert_eq!(ENTRIES.with(|entries| entries.borrow().len()), 0);
        let again = json!({"b": {"d": 1, "c": 2}, "a": 0});
        assert_eq!(cache_key(&again).unwrap(), r#"{"a":0,"b":{"c":2,"d":1}}"#);
    }

    #[test]
    fn non_string_map_keys_are_quoted_as_serde_json_quotes_them() {
        let map: BTreeMap<i32, bool> = [(2, true), (-1, false)].into();
        assert_eq!(
            cache_key(&map).unwrap(),
            serde_json::to_string(&map).unwrap()
        );
        assert_eq!(cache_key(&map).unwrap(), r#"{"-1":false,"2":true}"#);
        let bools: BTreeMap<bool, u8> = [(true, 1)].into();
        assert_eq!(cache_key(&bools).unwrap(), r#"{"true":1}"#);
    }

    /// Quoted, a `None` key would be the string key `"null"`, and a sequence one
    /// not JSON at all: they are refused, as `serde_json` refuses them.
    #[test]
    fn keys_json_cannot_quote_are_refused_not_mistaken_for_strings() {
        let none: HashMap<Option<String>, u8> = [(None, 1)].into();
        let null: HashMap<Option<String>, u8> = [(Some("null".into()), 1)].into();
        assert!(cache_key(&none).is_err());
        assert_eq!(cache_key(&null).unwrap(), r#"{"null":1}"#);
        let unit: HashMap<(), u8> = [((), 1)].into();
        assert!(cache_key(&unit).is_err());
        let pair: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(cache_key(&pair).is_err());
        for float in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(
                cache_key(&BTreeMap::from([(Float(float), 1)])).is_err(),
                "{float}"
            );
        }
        assert_eq!(
            cache_key(&BTreeMap::from([(Float(-0.5), 1)])).unwrap(),
            r#"{"-0.5":1}"#
        );
        // Nothing is left behind by the refusals.
        assert_eq!(ENTRIES.with(|entries| entries.borrow().len()), 0);
    }

    /// A float as a map key (`f64` is not `Ord`).
    struct Float(f64);

    impl PartialEq for Float {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other).is_eq()
        }
    }

    impl Eq for Float {}

    impl PartialOrd for Float {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }

    impl Ord for Float {
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&other.0)
        }
    }

    impl Serialize for Float {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_f64(self.0)
        }
    }

    /// JSON writes every non-finite float as `null`, the same as `None`: keys
    /// tell them apart.
    #[test]
    fn non_finite_floats_have_keys_of_their_own() {
        let keys: Vec<String> = [
            None,
            Some(f64::NAN),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
            Some(0.0),
            Some(-0.0),
            Some(1.5),
        ]
        .iter()
        .map(|value| cache_key(value).unwrap())
        .collect();
        assert_eq!(
            keys,
            ["null", "NaN", "Infinity", "-Infinity", "0.0", "-0.0", "1.5"]
        );
        assert_eq!(cache_key(&f32::NAN).unwrap(), "NaN");
        assert_eq!(cache_key(&1.25f32).unwrap(), "1.25");
    }

    /// A panicking `Serialize` leaves nothing on the thread's list either.
    #[test]
    fn a_panicking_input_leaves_nothing_behind() {
        struct Panics;
        impl Serialize for Panics {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = serializer.serialize_map(None)?;
                map.serialize_entry("b", &1)?;
                panic!("on purpose");
            }
        }
        let panicked = std::panic::catch_unwind(|| cache_key(&BTreeMap::from([("p", Panics)])));
        assert!(panicked.is_err());
        assert_eq!(ENTRIES.with(|entries| entries.borrow().len()), 0);
    }
}
