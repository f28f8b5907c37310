//! The sentence chunker: LLM deltas of any size in, speakable chunks out.
//!
//! Piper synthesizes a whole chunk in one model call, so its time to first audio grows with the
//! chunk's length. The chunker therefore hands over each sentence as soon as it ends, and lets
//! the *first* chunk end early at a clause boundary once it is long enough to sound natural.
//!
//! Boundaries:
//! - sentence ends `. ! ?` followed by whitespace (with any closing quotes or brackets), and
//!   `。！？` without;
//! - a line break (list items, headings and paragraphs rarely end with punctuation);
//! - for the first chunk only, `, ; :` followed by whitespace and `，；：、`, once the chunk
//!   has at least [`ChunkerConfig::first_chunk_min_chars`] characters;
//! - the length cap [`ChunkerConfig::max_chars`], at the last space before it (or mid-word when
//!   there is none, as in unspaced scripts); the first chunk has a lower cap,
//!   [`ChunkerConfig::first_chunk_max_chars`], so a reply with no early boundary (a digit
//!   string, a list, code) is not waited for to its end before anything is spoken;
//! - a chunk that follows one cut inside a sentence has a cap of [`CAP_GROWTH`] times that
//!   one's length, never below the first chunk's cap or above `max_chars`. The rest of a
//!   sentence after a first chunk of three words took longer to write and speak than those
//!   words took to play, and the reply went quiet mid-sentence. (A pause after a sentence end
//!   is a breath, so the next sentence keeps the long cap.) A chunk cut at such a cap ends at
//!   its last clause mark if that leaves it at least the first chunk's cap long, else at its
//!   last space.
//!
//! Never boundaries: decimals and times (`3.14`, `7:30`, `3,000`: no whitespace follows),
//! URLs and file names (same), ellipses (`...`), abbreviations (`Dr.`, `e.g.`, `U.S.`, `etc.`,
//! single initials), and `No.` before a number. A missed boundary only makes a chunk longer;
//! a wrong one breaks a sentence's prosody, so doubtful cases are not split.
//!
//! Markdown is stripped first ([`crate::markup`]). Chunks come out trimmed, with each run of
//! whitespace collapsed to one space. A decision that needs the next character waits for it,
//! so the chunks are the same however the text was split into deltas.

use crate::markup::MarkupStripper;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkerConfig {
    /// The first chunk may end at a clause boundary once it has this many characters.
    /// `usize::MAX` disables early splitting.
    pub first_chunk_min_chars: usize,
    /// No chunk is longer than this many characters (at least 1).
    pub max_chars: usize,
    /// The first chunk is cut at the last space before this many characters when no boundary
    /// came sooner. `usize::MAX` leaves it to `max_chars`.
    pub first_chunk_max_chars: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        Self {
            // About three words: long enough for natural prosody, short enough that Piper's
            // first audio comes quickly.
            first_chunk_min_chars: 16,
            // About two spoken sentences; longer chunks delay audio for no gain.
            max_chars: 240,
            // About seven words: a first chunk Piper says in well under 200 ms on one core,
            // still a phrase rather than a word or two.
            first_chunk_max_chars: 40,
        }
    }
}

#[derive(Debug)]
pub struct Chunker {
    config: ChunkerConfig,
    markup: MarkupStripper,
    /// Clean text not yet emitted.
    buf: String,
    emitted: usize,
    /// How the last chunk emitted ended, which sets the next one's cap.
    before: Before,
}

/// Closing characters that belong to the sentence before them.
pub(crate) const CLOSERS: &[char] = &['"', '\'', ')', ']', '}', '”', '’', '»', '」', '』', '）'];
pub(crate) const SENTENCE_ENDS: &[char] = &['.', '!', '?'];
pub(crate) const WIDE_SENTENCE_ENDS: &[char] = &['。', '！', '？'];
const CLAUSE_ENDS: &[char] = &[',', ';', ':'];
const WIDE_CLAUSE_ENDS: &[char] = &['，', '；', '：', '、'];

/// Words that end with a period without ending the sentence (lowercase, without the period).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "approx", "dept", "fig",
    "vol", "inc", "ltd", "co", "corp", "est", "gen", "gov", "sen", "rep", "col", "capt", "lt",
    "sgt", "ave", "blvd", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct",
    "nov", "dec",
];

impl Default for Chunker {
    fn default() -> Self {
        Self::new(ChunkerConfig::default())
    }
}

impl Chunker {
    pub fn new(config: ChunkerConfig) -> Self {
        Self {
            config: ChunkerConfig {
                max_chars: config.max_chars.max(1),
                ..config
            },
            markup: MarkupStripper::new(),
            buf: String::new(),
            emitted: 0,
            before: Before::Nothing,
        }
    }

    /// Feeds one delta; returns the chunks it completed (often none).
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.markup.push(delta, &mut self.buf);
        self.drain(false)
    }

    /// End of the stream: returns the remaining chunks, the unterminated tail included.
    pub fn finish(&mut self) -> Vec<String> {
        self.markup.finish(&mut self.buf);
        self.drain(true)
    }

    /// Chunks emitted so far.
    pub fn emitted(&self) -> usize {
        self.emitted
    }

    /// Splits a whole text (convenience for non-streaming callers such as `voxlat speak`).
    pub fn split(text: &str, config: ChunkerConfig) -> Vec<String> {
        let mut c = Chunker::new(config);
        let mut out = c.push(text);
        out.extend(c.finish());
        out
    }

    fn drain(&mut self, at_end: bool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let lead = self.buf.len() - self.buf.trim_start().len();
            self.buf.drain(..lead);
            if self.buf.is_empty() {
                break;
            }
            let end = match find_boundary(&self.buf, self.before, &self.config, at_end) {
                Some(end) => end,
                None if at_end => self.buf.len(),
                None => break,
            };
            let chunk = normalize_space(&self.buf[..end]);
            self.buf.drain(..end);
            if !chunk.is_empty() {
                self.emitted += 1;
                self.before = Before::chunk(&chunk);
                out.push(chunk);
            }
        }
        out
    }
}

/// How much longer a chunk may be than the one before it, when that one was cut inside a
/// sentence. On 2 cores the LLM writes a character in about 6 ms (25 ms a token of about four
/// characters) and Piper speaks one in about 6.5 ms (real-time factor 0.1), while playing it
/// takes about 65 ms: the next chunk is ready within the current one's audio when it is up to
/// about five times as long, less the fixed cost of each call. Three leaves room for a slower
/// machine or model.
pub const CAP_GROWTH: usize = 3;

/// How the chunk before the one being cut ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Before {
    /// Nothing: this is the first chunk.
    Nothing,
    /// At the end of a sentence.
    SentenceEnd,
    /// Inside a sentence (at a clause mark, a cap or a line break), after this many characters.
    MidSentence(usize),
}

impl Before {
    fn chunk(chunk: &str) -> Before {
        let last = chunk.trim_end_matches(CLOSERS).chars().next_back();
        if last.is_some_and(|c| SENTENCE_ENDS.contains(&c) || WIDE_SENTENCE_ENDS.contains(&c)) {
            Before::SentenceEnd
        } else {
            Before::MidSentence(chunk.chars().count())
        }
    }
}

/// The cap of the chunk after `before`.
fn cap_after(before: Before, cfg: &ChunkerConfig) -> usize {
    let first = cfg.first_chunk_max_chars.max(1);
    let cap = match before {
        Before::Nothing => first,
        Before::SentenceEnd => cfg.max_chars,
        Before::MidSentence(len) => first.max(len.saturating_mul(CAP_GROWTH)),
    };
    cfg.max_chars.min(cap)
}

fn normalize_space(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Byte offset where the chunk starting at `buf[0]` (not whitespace), after `before`, ends,
/// or `None` when that depends on text not received yet (or, at the end, when no boundary
/// exists).
fn find_boundary(buf: &str, before: Before, cfg: &ChunkerConfig, at_end: bool) -> Option<usize> {
    // The decision almost always falls within the first `max_chars` characters. Scanning a
    // window of the buffer first keeps a long buffer from making chunking quadratic (found by
    // fuzzing: a 64 KiB reply with a tiny cap timed out). A window scan never decides on text
    // past its end (it runs as "not at the end"), so a decision it makes is the one the whole
    // buffer gives; an undecided window falls back to the whole buffer.
    let window = cfg.max_chars.saturating_mul(2).saturating_add(64);
    if let Some((cut, _)) = buf.char_indices().nth(window) {
        if let Some(end) = scan_boundary(&buf[..cut], before, cfg, false) {
            return Some(end);
        }
    }
    scan_boundary(buf, before, cfg, at_end)
}

fn scan_boundary(buf: &str, before: Before, cfg: &ChunkerConfig, at_end: bool) -> Option<usize> {
    let first = before == Before::Nothing;
    let cap = cap_after(before, cfg);
    // A chunk cut at a grown cap may end at a clause mark instead, if it stays as long as a
    // first chunk may be (the first has its own clause rule below).
    let floor = matches!(before, Before::MidSentence(_)).then(|| cap_after(Before::Nothing, cfg));
    // Byte offset just past the last clause mark, at least `floor` characters in, where the
    // chunk may end if it reaches its cap: an ASCII mark needs whitespace after it, within
    // the cap.
    let mut last_clause: Option<usize> = None;
    let chars: Vec<(usize, char)> = buf.char_indices().collect();
    let byte_at = |k: usize| chars.get(k).map_or(buf.len(), |&(b, _)| b);
    // Length as it will be after whitespace is collapsed.
    let mut length = 0usize;
    let mut prev_space = false;
    let mut k = 0;
    while k < chars.len() {
        let (i, c) = chars[k];
        let space = c.is_whitespace();
        if !(space && prev_space) {
            length += 1;
        }
        prev_space = space;
        if length > cap {
            return Some(last_clause.unwrap_or_else(|| cap_split(buf, i)));
        }
        if c == '\n' {
            return Some(i);
        }
        if SENTENCE_ENDS.contains(&c) {
            let (marks_end, run_end) = skip_run(&chars, k, SENTENCE_ENDS);
            // The whole run is judged at once (each dot of an ellipsis would otherwise be
            // judged again on its own), so it counts towards the cap here.
            length += run_end - k - 1;
            if length > cap {
                return Some(last_clause.unwrap_or_else(|| cap_split(buf, i)));
            }
            let Some(&(_, next)) = chars.get(run_end) else {
                return at_end.then_some(buf.len());
            };
            let marks: String = chars[k..marks_end].iter().map(|&(_, c)| c).collect();
            if marks == "."
                && !at_end
                && next.is_whitespace()
                && depends_on_next_word(&chars, k, run_end)
            {
                return None;
            }
            let ends = next.is_whitespace()
                && !is_ellipsis(&marks)
                && !(marks == "." && is_abbreviation(&chars, k, run_end));
            if ends {
                return Some(byte_at(run_end));
            }
            k = run_end;
            prev_space = false;
            continue;
        }
        if WIDE_SENTENCE_ENDS.contains(&c) {
            let (_, run_end) = skip_run(&chars, k, WIDE_SENTENCE_ENDS);
            length += run_end - k - 1;
            if length > cap {
                return Some(last_clause.unwrap_or_else(|| cap_split(buf, i)));
            }
            if run_end == chars.len() && !at_end {
                return None;
            }
            return Some(byte_at(run_end));
        }
        if first && length >= cfg.first_chunk_min_chars {
            if CLAUSE_ENDS.contains(&c) {
                match chars.get(k + 1) {
                    None => return at_end.then_some(buf.len()),
                    Some(&(_, next)) if next.is_whitespace() => return Some(byte_at(k + 1)),
                    Some(_) => {}
                }
            } else if WIDE_CLAUSE_ENDS.contains(&c) {
                return Some(byte_at(k + 1));
            }
        }
        if floor.is_some_and(|floor| length >= floor) {
            let spaced = length < cap
                && CLAUSE_ENDS.contains(&c)
                && chars
                    .get(k + 1)
                    .is_some_and(|&(_, next)| next.is_whitespace());
            if spaced || WIDE_CLAUSE_ENDS.contains(&c) {
                last_clause = Some(byte_at(k + 1));
            }
        }
        k += 1;
    }
    None
}

/// Ends of the run of terminators starting at `k`: after the marks, and after the closing
/// quotes and brackets that follow them.
fn skip_run(chars: &[(usize, char)], k: usize, terminators: &[char]) -> (usize, usize) {
    let mut j = k;
    while j < chars.len() && terminators.contains(&chars[j].1) {
        j += 1;
    }
    let marks_end = j;
    while j < chars.len() && CLOSERS.contains(&chars[j].1) {
        j += 1;
    }
    (marks_end, j)
}

fn is_ellipsis(run: &str) -> bool {
    run.chars().filter(|&c| c == '.').count() >= 2 && !run.contains(['!', '?'])
}

/// The text between the previous whitespace and the period at `dot`.
fn word_before(chars: &[(usize, char)], dot: usize) -> String {
    let start = chars[..dot]
        .iter()
        .rposition(|&(_, c)| c.is_whitespace())
        .map_or(0, |p| p + 1);
    chars[start..dot].iter().map(|&(_, c)| c).collect()
}

/// Opening quotes and brackets that may precede a word.
const OPENERS: &[char] = &['"', '\'', '(', '[', '{', '“', '‘', '«'];

/// Whether the period at `dot` ends an abbreviation rather than a sentence. `after` is the
/// index just past the period's run (its closers included).
fn is_abbreviation(chars: &[(usize, char)], dot: usize, after: usize) -> bool {
    let next = chars[after..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    abbreviation_before_dot(&word_before(chars, dot), next)
}

/// Whether the period at `dot` is judged by the word after it ("No. 5") and that word has not
/// arrived yet. Found by fuzzing: deciding early made the chunks depend on delta boundaries.
fn depends_on_next_word(chars: &[(usize, char)], dot: usize, after: usize) -> bool {
    word_before(chars, dot)
        .trim_start_matches(OPENERS)
        .eq_ignore_ascii_case("no")
        && chars[after..].iter().all(|&(_, c)| c.is_whitespace())
}

/// Whether `word` (the text between the previous whitespace and a period) is an abbreviation,
/// so that the period does not end the sentence. `next` is the first non-space character after
/// the period, when known.
pub(crate) fn abbreviation_before_dot(word: &str, next: Option<char>) -> bool {
    let word: String = word
        .chars()
        .skip_while(|c| OPENERS.contains(c))
        .flat_map(char::to_lowercase)
        .collect();
    if word.is_empty() {
        return false;
    }
    // A single initial ("J. R. R. Tolkien") or a dotted abbreviation ("e.g", "u.s", "ph.d"):
    // every dot-separated part is one or two letters.
    if word.split('.').all(|part| {
        (1..=2).contains(&part.chars().count()) && part.chars().all(char::is_alphabetic)
    }) && (word.contains('.') || word.chars().count() == 1)
    {
        return true;
    }
    if ABBREVIATIONS.contains(&word.as_str()) {
        return true;
    }
    // "No. 5" but not "I said no. Then".
    word == "no" && next.is_some_and(|c| c.is_ascii_digit())
}

/// Where a chunk that has grown past the cap at byte `at` is cut: the last whitespace before
/// it, or `at` itself when there is none (a long URL, unspaced scripts).
fn cap_split(buf: &str, at: usize) -> usize {
    let through = buf[at..].chars().next().map_or(at, |c| at + c.len_utf8());
    match buf[..through].rfind(char::is_whitespace) {
        Some(p) if p > 0 => p,
        _ if at > 0 => at,
        // A run of marks longer than the cap at the very start: cut after its first character
        // rather than return an empty chunk, which would never advance (a hang found by fuzzing).
        _ => through,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(text: &str) -> Vec<String> {
        Chunker::split(text, ChunkerConfig::default())
    }

    /// Regression (fuzzing): a run of marks longer than the cap at the start of a chunk gave an
    /// empty chunk that never advanced, so the chunker spun forever.
    #[test]
    fn a_run_of_marks_longer_than_the_cap_does_not_hang() {
        let config = ChunkerConfig::default();
        let text = format!("{} Then words.", "?".repeat(config.max_chars + 60));
        let chunks = Chunker::split(&text, config);
        assert!(chunks
            .iter()
            .all(|c| !c.is_empty() && c.chars().count() <= config.max_chars));
        assert_eq!(chunks.concat().matches('?').count(), config.max_chars + 60);
        assert_eq!(chunks.last().map(String::as_str), Some("Then words."));
    }

    /// Regression (fuzzing): a long text with a tiny cap made every chunk rescan the whole
    /// buffer. The windowed scan must give exactly the chunks of a whole-buffer scan.
    #[test]
    fn windowed_scan_gives_the_same_chunks_as_a_whole_buffer_scan() {
        let text = "Well, one two. Three four five six seven eight nine ten eleven twelve! \
                    No. 5 is here...   and   then,   spaced     out?  Dr. Who said e.g. this.\n"
            .repeat(40);
        for max_chars in [1, 3, 8, 20, 240] {
            let config = ChunkerConfig {
                first_chunk_min_chars: 4,
                max_chars,
                first_chunk_max_chars: usize::MAX,
            };
            let mut by_scan = Vec::new();
            let mut rest = text.trim_start();
            while !rest.is_empty() {
                let before = by_scan
                    .last()
                    .map_or(Before::Nothing, |c: &String| Before::chunk(c));
                let end = scan_boundary(rest, before, &config, true).unwrap_or(rest.len());
                assert!(
                    end > 0,
                    "no progress at {:?} (max_chars {max_chars})",
                    &rest[..rest.len().min(30)]
                );
                let chunk = normalize_space(&rest[..end]);
                if !chunk.is_empty() {
                    by_scan.push(chunk);
                }
                rest = rest[end..].trim_start();
            }
            assert_eq!(
                Chunker::split(&text, config),
                by_scan,
                "max_chars {max_chars}"
            );
        }
    }

    /// Regression (fuzzing): with the delta ending right after "No. ", the chunker split there
    /// before seeing the number that makes "No." an abbreviation.
    #[test]
    fn no_before_a_number_is_the_same_whatever_the_deltas() {
        let text = "Take platform No. 5 now. Then wait.";
        let config = ChunkerConfig {
            first_chunk_min_chars: usize::MAX,
            ..ChunkerConfig::default()
        };
        let whole = Chunker::split(text, config);
        assert_eq!(whole, ["Take platform No. 5 now.", "Then wait."]);
        let chars: Vec<char> = text.chars().collect();
        for step in 1..=8 {
            let mut c = Chunker::new(config);
            let mut got = Vec::new();
            for piece in chars.chunks(step) {
                got.extend(c.push(&piece.iter().collect::<String>()));
            }
            got.extend(c.finish());
            assert_eq!(got, whole, "deltas of {step} chars");
        }
        // "no." ending a sentence still ends it once the next word shows it is not a number.
        assert_eq!(
            Chunker::split("I said no. Then I left.", config),
            ["I said no.", "Then I left."]
        );
    }

    /// No early first chunk: neither at a clause nor at the first chunk's cap.
    fn chunks_no_early(text: &str) -> Vec<String> {
        Chunker::split(
            text,
            ChunkerConfig {
                first_chunk_min_chars: usize::MAX,
                first_chunk_max_chars: usize::MAX,
                ..ChunkerConfig::default()
            },
        )
    }

    #[test]
    fn a_first_chunk_without_a_boundary_is_cut_at_a_word_before_its_cap_while_streaming() {
        let mut c = Chunker::default();
        let mut first = Vec::new();
        // A digit string: no clause or sentence end until the very end.
        for d in "The numbers are 4 8 15 16 23 42 4 8 15 16 23 42 and so on.".split_inclusive(' ') {
            first.extend(c.push(d));
            if !first.is_empty() {
                break;
            }
        }
        assert_eq!(first, ["The numbers are 4 8 15 16 23 42 4 8 15"]);
        assert!(first[0].chars().count() <= ChunkerConfig::default().first_chunk_max_chars);
        // Later chunks keep the long cap.
        let rest =
            c.push("and then a much longer second part of the reply goes on without any break ");
        assert!(rest.is_empty(), "{rest:?}");
    }

    #[test]
    fn splits_on_sentence_ends() {
        assert_eq!(
            chunks_no_early("Hello there. How are you? I am fine! Good"),
            ["Hello there.", "How are you?", "I am fine!", "Good"]
        );
    }

    #[test]
    fn splits_on_wide_sentence_ends_without_spaces() {
        assert_eq!(
            chunks("你好。今天好吗？很好！"),
            ["你好。", "今天好吗？", "很好！"]
        );
    }

    #[test]
    fn first_chunk_splits_early_at_a_clause_once_long_enough() {
        assert_eq!(
            chunks("Well, that is a good question, and the answer is long. Then, more."),
            [
                "Well, that is a good question,",
                "and the answer is long.",
                "Then, more."
            ]
        );
    }

    #[test]
    fn early_split_covers_semicolons_colons_and_wide_clause_marks() {
        assert_eq!(
            chunks("Here is the whole plan; step one follows."),
            ["Here is the whole plan;", "step one follows."]
        );
        assert_eq!(
            chunks("Here is the whole plan: step one follows."),
            ["Here is the whole plan:", "step one follows."]
        );
        assert_eq!(
            chunks("这是一个很长的句子的开头部分吧就这样，然后继续。"),
            ["这是一个很长的句子的开头部分吧就这样，", "然后继续。"]
        );
    }

    #[test]
    fn later_chunks_do_not_split_at_clauses() {
        assert_eq!(
            chunks("Yes. Well, that is a good question, and the answer is long."),
            [
                "Yes.",
                "Well, that is a good question, and the answer is long."
            ]
        );
    }

    /// The rest of a sentence after a three-word first chunk is not one long second chunk:
    /// the reply would go quiet mid-sentence while it was written and spoken.
    #[test]
    fn chunks_after_a_short_first_one_grow_threefold() {
        let cfg = ChunkerConfig {
            first_chunk_max_chars: 16,
            ..ChunkerConfig::default()
        };
        let reply = "I will remind you to call your mother tomorrow morning at nine o'clock \
                     sharp and again in the evening if you have not called her by then.";
        assert_eq!(
            Chunker::split(reply, cfg),
            [
                "I will remind",
                "you to call your mother tomorrow",
                "morning at nine o'clock sharp and again in the evening if you have not called \
                 her by then.",
            ]
        );
        let mid = Before::MidSentence;
        assert_eq!(cap_after(Before::Nothing, &cfg), 16);
        assert_eq!(cap_after(mid(13), &cfg), 39);
        assert_eq!(
            cap_after(mid(2), &cfg),
            16,
            "never below the first chunk's cap"
        );
        assert_eq!(cap_after(mid(90), &cfg), 240, "never above max_chars");
        assert_eq!(cap_after(mid(usize::MAX), &cfg), 240);
        // After a sentence end the next sentence is whole: a pause there is a breath.
        assert_eq!(cap_after(Before::SentenceEnd, &cfg), 240);
        assert_eq!(
            Chunker::split(
                "Yes. Well, that is a good question, and the answer is long.",
                cfg
            ),
            [
                "Yes.",
                "Well, that is a good question, and the answer is long."
            ]
        );
        assert_eq!(Before::chunk("He said \"yes.\""), Before::SentenceEnd);
        assert_eq!(Before::chunk("Well, then"), mid(10));
        // No short first cap, no growth: every chunk has the long cap.
        let long = ChunkerConfig {
            first_chunk_max_chars: usize::MAX,
            ..ChunkerConfig::default()
        };
        assert_eq!(cap_after(Before::Nothing, &long), 240);
        assert_eq!(cap_after(mid(3), &long), 240);
    }

    #[test]
    fn a_chunk_cut_at_a_grown_cap_ends_at_its_last_long_enough_clause() {
        let cfg = ChunkerConfig {
            first_chunk_max_chars: 16,
            ..ChunkerConfig::default()
        };
        // After "Well then, the" (14 characters) the cap is 42, reached inside "can": the
        // chunk ends at the comma after "weekend" (26 characters), not at "can".
        assert_eq!(
            Chunker::split(
                "Well then, the forecast for this weekend, as far as I can tell, is sunny.",
                cfg
            ),
            [
                "Well then, the",
                "forecast for this weekend,",
                "as far as I can tell, is sunny."
            ]
        );
        // A comma that would leave the chunk shorter than a first chunk is passed over.
        assert_eq!(
            Chunker::split(
                "Well then, the forecast, I see for this weekend is sunny and warm.",
                cfg
            ),
            [
                "Well then, the",
                "forecast, I see for this weekend is sunny",
                "and warm."
            ]
        );
    }

    #[test]
    fn never_splits_decimals_times_or_thousands() {
        assert_eq!(
            chunks_no_early(
                "Pi is about 3.14 today and the train at 7:30 costs 3,000 yen in total. Ok."
            ),
            [
                "Pi is about 3.14 today and the train at 7:30 costs 3,000 yen in total.",
                "Ok."
            ]
        );
    }

    #[test]
    fn never_splits_abbreviations() {
        for text in [
            "Dr. Smith is here.",
            "Ask Mr. Jones and Mrs. Jones now.",
            "Fruit, e.g. apples, is good.",
            "Use i.e. this one.",
            "He moved to the U.S. in May.",
            "Bring pens, paper, etc. to class.",
            "J. R. R. Tolkien wrote it.",
            "See item No. 5 for more.",
            "Meet me at 5 p.m. tomorrow.",
        ] {
            assert_eq!(chunks_no_early(text), [text], "{text}");
        }
    }

    #[test]
    fn no_without_a_number_ends_a_sentence() {
        assert_eq!(
            chunks_no_early("I said no. Then I left."),
            ["I said no.", "Then I left."]
        );
    }

    #[test]
    fn never_splits_ellipses() {
        assert_eq!(
            chunks_no_early("Wait... I think so. Yes"),
            ["Wait... I think so.", "Yes"]
        );
        assert_eq!(chunks_no_early("What...? No."), ["What...?", "No."]);
    }

    #[test]
    fn never_splits_urls() {
        assert_eq!(
            chunks_no_early("Go to https://example.com/a.b?c=d!e now. Or www.x.org. Done"),
            [
                "Go to https://example.com/a.b?c=d!e now.",
                "Or www.x.org.",
                "Done"
            ]
        );
    }

    #[test]
    fn closing_quotes_and_brackets_stay_with_their_sentence() {
        assert_eq!(
            chunks_no_early("He said \"stop.\" Then (quietly.) we left."),
            ["He said \"stop.\"", "Then (quietly.)", "we left."]
        );
    }

    #[test]
    fn line_breaks_end_chunks() {
        assert_eq!(
            chunks("Shopping list\n- apples\n- pears\n\nThat is all"),
            ["Shopping list", "apples", "pears", "That is all"]
        );
    }

    #[test]
    fn markdown_is_stripped() {
        assert_eq!(
            chunks("## **Answer**\n1. Run `cargo build` first.\n* Then test."),
            ["Answer", "Run cargo build first.", "Then test."]
        );
    }

    #[test]
    fn the_tail_is_flushed_at_the_end() {
        let mut c = Chunker::default();
        assert!(c.push("no terminator here").is_empty());
        assert_eq!(c.finish(), ["no terminator here"]);
        assert_eq!(c.emitted(), 1);
    }

    #[test]
    fn a_final_period_waits_for_the_next_delta() {
        let mut c = Chunker::new(ChunkerConfig {
            first_chunk_min_chars: usize::MAX,
            ..ChunkerConfig::default()
        });
        assert!(c.push("It costs 3.").is_empty());
        assert_eq!(c.push("50 dollars. And"), ["It costs 3.50 dollars."]);
        assert_eq!(c.finish(), ["And"]);
    }

    #[test]
    fn long_text_is_capped_at_a_word_boundary() {
        let cfg = ChunkerConfig {
            first_chunk_min_chars: usize::MAX,
            max_chars: 20,
            first_chunk_max_chars: usize::MAX,
        };
        let out = Chunker::split("one two three four five six seven eight nine", cfg);
        assert_eq!(out, ["one two three four", "five six seven eight", "nine"]);
        assert!(out.iter().all(|c| c.chars().count() <= 20));
    }

    #[test]
    fn closing_quotes_count_towards_the_cap() {
        let cfg = ChunkerConfig {
            first_chunk_min_chars: usize::MAX,
            max_chars: 13,
            first_chunk_max_chars: usize::MAX,
        };
        assert_eq!(
            Chunker::split("bold \"quoted.\"", cfg),
            ["bold", "\"quoted.\""]
        );
    }

    #[test]
    fn a_word_longer_than_the_cap_is_cut() {
        let cfg = ChunkerConfig {
            first_chunk_min_chars: usize::MAX,
            max_chars: 4,
            first_chunk_max_chars: usize::MAX,
        };
        assert_eq!(Chunker::split("abcdefghij", cfg), ["abcd", "efgh", "ij"]);
    }

    #[test]
    fn whitespace_is_collapsed_and_empty_input_gives_nothing() {
        assert_eq!(chunks("  a   b \t c.  "), ["a b c."]);
        assert!(chunks("").is_empty());
        assert!(chunks("   \n\n  ").is_empty());
        assert!(chunks("**``**").is_empty());
    }

    #[test]
    fn punctuation_and_emoji_only_chunks_pass_through_for_tts_to_judge() {
        assert_eq!(chunks("Great! 🎉🎉 ... !!"), ["Great!", "🎉🎉 ... !!"]);
    }
}
