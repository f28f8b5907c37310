//! An incremental Server-Sent Events parser (WHATWG `text/event-stream` rules).
//!
//! Written here rather than taken from a crate because every event must carry the arrival
//! time of the network read that completed it, and because the quirks real gateways send
//! (lone `\r`, `\r\n` split across reads, comments, multi-line `data:`, no trailing blank line)
//! must each be handled deliberately and tested.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any (`None` means the default type, "message").
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    pub id: Option<String>,
}

/// One dispatched event, lent by the parser to the callback of [`SseParser::feed_with`]: the
/// client reads each event once, in place, so no event costs an allocation of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    /// The `event:` field, if any (`None` means the default type, "message").
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
    pub id: Option<&'a str>,
}

impl SseEventRef<'_> {
    pub fn to_event(self) -> SseEvent {
        SseEvent {
            event: self.event.map(str::to_string),
            data: self.data.to_string(),
            id: self.id.map(str::to_string),
        }
    }
}

/// The largest event the client accepts. Real chunks are a few hundred bytes; even a whole
/// long answer in one event fits easily. Past this the stream is not SSE as an LLM server
/// sends it, and buffering on would only end in running out of memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    /// The previous byte was a `\r`: a `\n` right after it belongs to the same line end, even
    /// when it arrives in the next read.
    after_cr: bool,
    at_stream_start: bool,
    /// The first bytes of the stream while they could still be the start of a byte order mark
    /// (a read can end inside it).
    start: Vec<u8>,
    comments: u64,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    pub fn new() -> SseParser {
        SseParser {
            at_stream_start: true,
            ..SseParser::default()
        }
    }

    /// Bytes held for the event being assembled (its unfinished line plus its `data:` so far).
    /// A server that never ends an event makes this grow without bound, so the client checks
    /// it against [`MAX_EVENT_BYTES`] after every read.
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// Comment lines seen so far (`: keep-alive` and the like).
    pub fn comments(&self) -> u64 {
        self.comments
    }

    /// Feeds bytes as they arrive; complete events are appended to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.feed_with(bytes, &mut |ev| out.push(ev.to_event()));
    }

    /// Feeds bytes as they arrive; each complete event is handed to `on_event`, in order.
    pub fn feed_with<F: FnMut(SseEventRef<'_>)>(&mut self, bytes: &[u8], on_event: &mut F) {
        if self.at_stream_start {
            // A UTF-8 byte order mark may only start the stream, and a read may end inside it
            // (found by fuzzing): hold the first bytes until they decide.
            self.start.extend_from_slice(bytes);
            let n = self.start.len().min(BOM.len());
            if n < BOM.len() && self.start[..n] == BOM[..n] {
                return;
            }
            self.at_stream_start = false;
            let held = std::mem::take(&mut self.start);
            self.feed_bytes(held.strip_prefix(BOM).unwrap_or(&held), on_event);
            return;
        }
        self.feed_bytes(bytes, on_event);
    }

    fn feed_bytes<F: FnMut(SseEventRef<'_>)>(&mut self, mut bytes: &[u8], on_event: &mut F) {
        // A line that ends inside this read is taken where it lies; only a line split across
        // reads is gathered in `line`. This runs for every read of every stream, and the
        // copies and the byte-at-a-time push were a visible share of the client's CPU.
        while !bytes.is_empty() {
            if self.after_cr && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                self.after_cr = false;
                continue;
            }
            match memchr::memchr2(b'\n', b'\r', bytes) {
                Some(i) => {
                    self.after_cr = bytes[i] == b'\r';
                    if self.line.is_empty() {
                        self.take_line(&bytes[..i], on_event);
                    } else {
                        self.line.extend_from_slice(&bytes[..i]);
                        self.take_gathered_line(on_event);
                    }
                    bytes = &bytes[i + 1..];
                }
                None => {
                    self.line.extend_from_slice(bytes);
                    self.after_cr = false;
                    return;
                }
            }
        }
    }

    /// At end of stream: dispatches an event that was not followed by a blank line (many
    /// servers omit it on the last event). Returns true if there was one.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> bool {
        self.finish_with(&mut |ev| out.push(ev.to_event()))
    }

    /// [`SseParser::finish`], handing the last event to `on_event`.
    pub fn finish_with<F: FnMut(SseEventRef<'_>)>(&mut self, on_event: &mut F) -> bool {
        if self.at_stream_start {
            // The stream ended inside what could have been a byte order mark: it was data.
            self.at_stream_start = false;
            let held = std::mem::take(&mut self.start);
            self.feed_bytes(&held, on_event);
        }
        if !self.line.is_empty() {
            self.take_gathered_line(on_event);
        }
        let pending = self.has_data;
        self.dispatch(on_event);
        pending
    }

    /// The line gathered in `line`, which keeps its capacity for the next one.
    fn take_gathered_line<F: FnMut(SseEventRef<'_>)>(&mut self, on_event: &mut F) {
        let line = std::mem::take(&mut self.line);
        self.take_line(&line, on_event);
        self.line = line;
        self.line.clear();
    }

    fn take_line<F: FnMut(SseEventRef<'_>)>(&mut self, line: &[u8], on_event: &mut F) {
        if line.is_empty() {
            self.dispatch(on_event);
            return;
        }
        // Valid UTF-8 is checked the fast way; only a broken line pays for the lossy walk.
        let line = match std::str::from_utf8(line) {
            Ok(l) => std::borrow::Cow::Borrowed(l),
            Err(_) => String::from_utf8_lossy(line),
        };
        if line.starts_with(':') {
            self.comments += 1;
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {} // `retry` and unknown fields are ignored, as the spec says.
        }
    }

    fn dispatch<F: FnMut(SseEventRef<'_>)>(&mut self, on_event: &mut F) {
        if self.has_data {
            on_event(SseEventRef {
                event: self.event.as_deref(),
                data: &self.data,
                id: self.id.as_deref(),
            });
        }
        // Cleared, not taken: the buffer's capacity serves the next event.
        self.has_data = false;
        self.data.clear();
        self.event = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> (Vec<SseEvent>, SseParser) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        (out, p)
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    /// Regression (fuzzing): a read that ended inside the byte order mark left its first bytes
    /// glued to the first line, so `: keep-alive` stopped being a comment.
    #[test]
    fn a_byte_order_mark_split_across_reads_is_still_removed() {
        let stream = b"\xEF\xBB\xBF: keep-alive\n\ndata: x\n\n";
        for cut in 0..=4 {
            let (mut out, mut p) = parse_all(&[&stream[..cut], &stream[cut..]]);
            p.finish(&mut out);
            assert_eq!(data(&out), ["x"], "cut at {cut}");
            assert_eq!(p.comments(), 1, "cut at {cut}");
        }
        // One byte at a time, too.
        let pieces: Vec<&[u8]> = stream.chunks(1).collect();
        let (_, p) = parse_all(&pieces);
        assert_eq!(p.comments(), 1);
        // A stream that ends inside a BOM prefix is handed to the line parser at the end (a
        // field-less line, so no event) rather than kept back forever.
        let (mut out, mut p) = parse_all(&[b"\xEF\xBB"]);
        assert!(!p.finish(&mut out));
        assert!(out.is_empty());
        assert!(p.start.is_empty() && !p.at_stream_start);
    }

    const STREAM: &str = "data: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";

    #[test]
    fn lf_stream_with_comments() {
        let (ev, p) = parse_all(&[STREAM.as_bytes()]);
        assert_eq!(data(&ev), vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        assert_eq!(p.comments(), 1);
    }

    #[test]
    fn crlf_and_lone_cr_line_ends() {
        let crlf = STREAM.replace('\n', "\r\n");
        let (ev, _) = parse_all(&[crlf.as_bytes()]);
        assert_eq!(data(&ev), vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        let cr = STREAM.replace('\n', "\r");
        let (ev, _) = parse_all(&[cr.as_bytes()]);
        assert_eq!(data(&ev), vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        // "\r" ends one read and "\n" starts the next: still one line end, not a blank line.
        let (ev, _) = parse_all(&[b"data: x\r", b"\ndata: y\r\n\r\n"]);
        assert_eq!(data(&ev), vec!["x\ny"]);
    }

    #[test]
    fn multi_line_data_and_event_type() {
        let (ev, _) = parse_all(&[b"event: error\ndata: line one\ndata:line two\nid: 7\n\n"]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(ev[0].data, "line one\nline two");
        assert_eq!(ev[0].id.as_deref(), Some("7"));
    }

    #[test]
    fn event_without_trailing_blank_line_is_dispatched_at_finish() {
        let (ev, mut p) = parse_all(&[b"data: [DONE]"]);
        assert!(ev.is_empty());
        let mut out = Vec::new();
        assert!(p.finish(&mut out));
        assert_eq!(data(&out), vec!["[DONE]"]);
        assert!(!p.finish(&mut out));
    }

    #[test]
    fn bom_is_skipped_and_field_without_colon_is_a_field_name() {
        let (ev, _) = parse_all(&[b"\xEF\xBB\xBFdata\n\ndata: z\n\n"]);
        assert_eq!(data(&ev), vec!["", "z"]);
    }

    #[test]
    fn event_type_does_not_leak_into_next_event() {
        let (ev, _) = parse_all(&[b"event: ping\n\ndata: a\n\n"]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].event, None);
    }

    /// One line of a generated stream, with its line end.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let text = prop_oneof![
            "[a-z :é\"{}\\[\\]]{0,10}".prop_map(String::into_bytes),
            Just(b"caf\xC3".to_vec()),
            Just(b"\xFFx".to_vec()),
        ];
        let body = prop_oneof![
            4 => text.clone().prop_map(|t| [b"data: ".as_slice(), &t].concat()),
            2 => text.clone().prop_map(|t| [b"data:".as_slice(), &t].concat()),
            4 => Just(Vec::new()),
            1 => text.clone().prop_map(|t| [b":".as_slice(), &t].concat()),
            1 => "[a-z]{0,5}".prop_map(|w| format!("event: {w}").into_bytes()),
            1 => "[a-z0-9]{0,4}".prop_map(|w| format!("id: {w}").into_bytes()),
            1 => Just(b"retry: 5".to_vec()),
            1 => text,
        ];
        let end = prop_oneof![6 => Just("\n"), 2 => Just("\r\n"), 1 => Just("\r")];
        (body, end).prop_map(|(b, e)| [b.as_slice(), e.as_bytes()].concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Generated streams give the same events and comments whole, cut at random points,
        /// and a byte at a time. A line cut in two never reaches the whole-event shortcut, so
        /// this also holds the shortcut to the line-by-line path.
        #[test]
        fn generated_streams_read_the_same_whole_and_cut(
            lines in proptest::collection::vec(line(), 0..16),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let bytes = lines.concat();
            let read = |pieces: Vec<&[u8]>| {
                let (mut out, mut p) = parse_all(&pieces);
                p.finish(&mut out);
                (out, p.comments())
            };
            let whole = read(vec![&bytes]);
            let bytewise = read(bytes.chunks(1).collect());
            prop_assert_eq!(&bytewise, &whole);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for c in at { pieces.push(&bytes[prev..c]); prev = c; }
            pieces.push(&bytes[prev..]);
            prop_assert_eq!(read(pieces), whole);
        }

        /// Any split of the stream into reads, at any byte and with either line ending, yields
        /// exactly the events of parsing it whole.
        #[test]
        fn splits_at_any_byte_do_not_change_events(
            cuts in proptest::collection::vec(0usize..200, 0..12),
            crlf in any::<bool>(),
        ) {
            let text = "data: {\"content\":\"héllo\"}\n\n: ka\n\nevent: x\ndata: 1\ndata: 2\n\ndata: [DONE]\n\n";
            let text = if crlf { text.replace('\n', "\r\n") } else { text.to_string() };
            let bytes = text.as_bytes();
            let (whole, _) = parse_all(&[bytes]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for c in cuts { pieces.push(&bytes[prev..c]); prev = c; }
            pieces.push(&bytes[prev..]);
            let (split, _) = parse_all(&pieces);
            prop_assert_eq!(split, whole);
        }
    }
}
