//! The line reader: lines over the bound come to an error for their id, or to
//! nothing, without being held; the lines after them are read as before.

use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::time::Duration;

use rmcp::model::{JsonRpcError, JsonRpcMessage, NumberOrString};

use super::lines::{Incoming, Lines, answer_size};

const BOUND: usize = 1024;

fn reader(input: impl Read) -> Lines<impl BufRead> {
    Lines::new(BufReader::new(input), BOUND, 512)
}

/// A well-formed answer to request `id`, on a line of its own.
fn answer(id: u32) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#) + "\n"
}

fn assert_answers(incoming: Option<Incoming>, id: i64, after: &str) {
    match incoming {
        Some(Incoming::Message(JsonRpcMessage::Response(response))) => {
            assert_eq!(response.id, NumberOrString::Number(id), "after {after}");
        }
        other => panic!("not the answer to {id} after {after}: {other:?}"),
    }
}

/// The error that stands in for an answer of `size` bytes to request `id`.
fn assert_too_large(incoming: Option<Incoming>, id: &NumberOrString, size: usize) {
    let Some(Incoming::Message(JsonRpcMessage::Error(JsonRpcError {
        id: Some(got),
        error,
        ..
    }))) = incoming
    else {
        panic!("not an error: {incoming:?}");
    };
    assert_eq!(&got, id);
    assert_eq!(answer_size(&error), Some(size), "{error:?}");
    assert!(
        error.message.contains("`max_result_bytes` (512)"),
        "{error:?}"
    );
}

/// `head`, then `len` bytes of `fill`, then `tail`, made as they are read.
struct Generated {
    head: &'static [u8],
    fill: u8,
    len: usize,
    tail: &'static [u8],
}

impl Read for Generated {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.head.is_empty() {
            return self.head.read(out);
        }
        if self.len > 0 {
            let len = out.len().min(self.len);
            out[..len].fill(self.fill);
            self.len -= len;
            return Ok(len);
        }
        self.tail.read(out)
    }
}

#[test]
fn a_line_over_the_bound_with_an_id_fails_that_request_and_the_next_lines_are_read() {
    let large = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(4 * BOUND)
    );
    let input = answer(1) + &large + "\n" + &answer(2);
    let mut lines = reader(input.as_bytes());
    assert_answers(lines.next(), 1, "");
    assert_too_large(lines.next(), &NumberOrString::Number(7), large.len());
    assert_answers(lines.next(), 2, "");
    assert!(lines.next().is_none());
}

#[test]
fn the_id_is_read_wherever_it_is_and_a_string_id_too() {
    let large = format!(
        r#"{{"result":{{"a":["{}",{{"b":null}}]}}, "jsonrpc":"2.0" , "id" : "call-1"}}"#,
        "y".repeat(2 * BOUND)
    );
    let mut lines = reader(Cursor::new(format!("{large}\r\n")));
    let id = NumberOrString::String("call-1".into());
    assert_too_large(lines.next(), &id, large.len() + 1);
}

#[test]
fn a_notification_over_the_bound_is_skipped() {
    let large = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{}"}}}}"#,
        "z".repeat(2 * BOUND)
    );
    let input = large + "\n" + &answer(3);
    let mut lines = reader(input.as_bytes());
    assert_answers(lines.next(), 3, "");
}

#[test]
fn a_request_of_the_child_over_the_bound_is_refused_to_it() {
    let large = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{{"x":"{}"}}}}"#,
        "z".repeat(2 * BOUND)
    );
    let mut lines = reader(Cursor::new(format!("{large}\n")));
    match lines.next() {
        Some(Incoming::Reply(JsonRpcMessage::Error(JsonRpcError {
            id: Some(NumberOrString::Number(9)),
            error,
            ..
        }))) => assert!(error.message.contains("more than this client reads")),
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn lines_over_the_bound_that_say_no_usable_id_are_skipped() {
    let long = "w".repeat(2 * BOUND);
    let digits = "1".repeat(2 * BOUND);
    let (open, close) = ("[".repeat(200), "]".repeat(200));
    let unreadable: Vec<Vec<u8>> = vec![
        // Not JSON, or not UTF-8.
        long.clone().into(),
        format!(r#"{{"id":1,"result":"{long}""#).into(),
        format!(r#"{{"id":1,"result":"{long}"}} trailing"#).into(),
        [
            br#"{"id":1,"result":""#.as_slice(),
            b"\xff",
            long.as_bytes(),
            b"\"}",
        ]
        .concat(),
        // No id, or none that a request has.
        format!(r#"[{{"id":1,"result":"{long}"}}]"#).into(),
        format!(r#"{{"id":null,"error":{{"code":1,"message":"{long}"}}}}"#).into(),
        format!(r#"{{"id":{{"a":1}},"result":"{long}"}}"#).into(),
        format!(r#"{{"id":1.5,"result":"{long}"}}"#).into(),
        // An id, or a key, longer than any.
        format!(r#"{{"id":"{long}","result":{{}}}}"#).into(),
        format!(r#"{{"id":{digits},"result":{{}}}}"#).into(),
        format!(r#"{{"{long}":1,"id":1}}"#).into(),
        // Nested deeper than serde_json reads.
        format!(r#"{{"id":1,"result":{open}"{long}"{close}}}"#).into(),
    ];
    for line in unreadable {
        let shown = String::from_utf8_lossy(&line[..60]).into_owned();
        let input = [line.as_slice(), b"\n", answer(4).as_bytes()].concat();
        assert_answers(reader(input.as_slice()).next(), 4, &shown);
    }
}

#[test]
fn a_last_line_without_its_newline_is_read_as_rmcp_reads_it() {
    let large = format!(
        r#"{{"jsonrpc":"2.0","id":5,"result":"{}"}}"#,
        "v".repeat(BOUND)
    );
    let mut lines = reader(large.as_bytes());
    assert_too_large(lines.next(), &NumberOrString::Number(5), large.len());
    assert!(lines.next().is_none());
    let small = answer(6);
    let mut lines = reader(small.trim_end().as_bytes());
    assert_answers(lines.next(), 6, "a last line without its newline");
    assert!(lines.next().is_none());
}

#[test]
fn lines_within_the_bound_are_read_as_rmcp_reads_them() {
    let input = String::new()
        + "not json\n"
        + "\n"
        + "\u{feff}"
        + &answer(8)
        + r#"{"jsonrpc":"2.0","surprise":true}"#
        + "\n";
    let mut lines = reader(input.as_bytes());
    assert_answers(lines.next(), 8, "");
    assert!(
        matches!(
            lines.next(),
            Some(Incoming::Reply(JsonRpcMessage::Error(JsonRpcError {
                id: None,
                ..
            })))
        ),
        "a message of no JSON-RPC shape is answered as an invalid request"
    );
    assert!(lines.next().is_none());
}

/// 64 MiB made as it is read: nothing holds more than the bound (1 KiB) of it,
/// by construction (`Generated` has no buffer to give, the reader's is 8 KiB);
/// 64 MiB of nesting too, which serde_json's skipping would hold a byte a
/// level of.
#[test]
fn a_line_of_64_mib_is_read_through_without_being_held() {
    const LEN: usize = 64 << 20;
    let head = br#"{"jsonrpc":"2.0","id":"big","result":{"text":""#;
    let mut lines = reader(Generated {
        head,
        fill: b'x',
        len: LEN,
        tail: b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{}}\n",
    });
    let id = NumberOrString::String("big".into());
    assert_too_large(lines.next(), &id, head.len() + LEN + 3);
    assert_answers(lines.next(), 10, "");
    let deep = Generated {
        head: br#"{"id":1,"result":"#,
        fill: b'[',
        len: LEN,
        tail: b"\n",
    };
    assert!(reader(deep).next().is_none(), "nested too deep to read");
}

/// A child that writes valid JSON of no JSON-RPC shape without end, and never
/// reads its stdin: each line is answered as an invalid request, and the
/// answers wait on a stdin nobody reads. They are not let pile up without
/// bound (a task each, a line's bytes each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_a_child_that_reads_nothing_do_not_pile_up() {
    use rmcp::transport::Transport as _;

    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", "yes '{}'"]);
    let (mut transport, _stderr) = super::ChildTransport::spawn(command, BOUND, 512).unwrap();
    let received = tokio::time::timeout(Duration::from_secs(2), transport.receive()).await;
    assert!(received.is_err(), "no message comes: {received:?}");
    let alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    assert!(alive <= 64, "{alive} tasks wait to answer the child");
    transport.close().await.unwrap();
}
