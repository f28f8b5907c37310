//! The conversation a session keeps, trimmed so that the server's prefix cache keeps working.
//!
//! llama.cpp (like vLLM and SGLang) reuses its KV cache up to the first token where a prompt
//! differs from the one before. Dropping the oldest exchange on every turn, once the history is
//! full, shifts everything after the system prompt, so every turn prefills the whole history
//! again. Measured live on the bundled clips (`scripts/live-vs-replay.sh`, embedded SmolLM2 on
//! one thread): from the sixth turn on only the 21 system-prompt tokens were reused, and
//! `llm_ttft` rose from about 300 ms to 1.2–2.1 s. So the history is cut in halves instead: when
//! it passes its cap only the newest half is kept, and the next turns extend that prefix again.

use voxlat_llm::Message;

/// Adds the exchange, then, if the history is longer than `cap` messages, keeps only the newest
/// `cap / 2` (whole exchanges, so it always starts with the user).
pub fn remember(history: &mut Vec<Message>, user: String, assistant: String, cap: usize) {
    history.push(Message::new("user", user));
    history.push(Message::new("assistant", assistant));
    if history.len() > cap {
        let keep = (cap / 2) & !1;
        history.drain(..history.len() - keep);
    }
}

/// What the user heard of a reply cut short: the chunks (text, seconds of audio) that played
/// whole, then the share of the one playing when it stopped, by its audio, cut back to the
/// last whole word. Empty when nothing was heard.
pub fn as_heard(chunks: &[(String, f64)], heard_s: f64) -> String {
    let mut left = heard_s.max(0.0);
    let mut said: Vec<&str> = Vec::new();
    let mut partial = String::new();
    for (text, audio_s) in chunks {
        if left >= *audio_s {
            said.push(text.trim());
            left -= audio_s;
            continue;
        }
        if *audio_s > 0.0 && left > 0.0 {
            let chars = text.trim().chars().count();
            let upto = ((left / audio_s) * chars as f64).floor() as usize;
            let head: String = text.trim().chars().take(upto).collect();
            // A word cut in the middle was not heard whole.
            let whole = match text.trim().chars().nth(upto) {
                Some(c) if !c.is_whitespace() => head.rsplit_once(' ').map_or("", |(w, _)| w),
                _ => head.as_str(),
            };
            partial = whole.trim_end().to_string();
        }
        break;
    }
    if !partial.is_empty() {
        said.push(&partial);
    }
    said.retain(|s| !s.is_empty());
    said.join(" ")
}

/// The user's words of a turn that continues `earlier` (an early commit's words, which the
/// user went on from before hearing a reply): one message, earlier words first.
pub fn continued(earlier: Option<&str>, now: &str) -> String {
    match earlier.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) if !now.trim().is_empty() => format!("{e} {}", now.trim()),
        Some(e) => e.to_string(),
        None => now.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_cut_short_is_remembered_up_to_the_last_word_heard() {
        let chunks = vec![
            ("It is noon.".to_string(), 1.1),
            ("Have a nice day.".to_string(), 1.6),
        ];
        assert_eq!(as_heard(&chunks, 0.0), "");
        assert_eq!(as_heard(&chunks, 0.5), "It is");
        assert_eq!(as_heard(&chunks, 1.1), "It is noon.");
        // 1.3 s of the second chunk's 1.6: "Have a nice d" heard, "day." not whole.
        assert_eq!(as_heard(&chunks, 2.4), "It is noon. Have a nice");
        assert_eq!(as_heard(&chunks, 9.0), "It is noon. Have a nice day.");
    }

    /// The prompt a turn sends: system prompt, history, the user's words.
    fn prompt(history: &[Message], user: &str) -> Vec<Message> {
        let mut p = vec![Message::new("system", "be brief")];
        p.extend(history.iter().cloned());
        p.push(Message::new("user", user));
        p
    }

    /// Turns whose prompt does not begin with the whole previous prompt: those the server must
    /// prefill again from where they differ. Judged on the prompts themselves, not on the rule.
    fn cache_misses(cap: usize, turns: usize) -> usize {
        let mut history = Vec::new();
        let mut previous: Option<Vec<Message>> = None;
        let mut misses = 0;
        for i in 0..turns {
            let user = format!("question {i}");
            let p = prompt(&history, &user);
            if let Some(prev) = &previous {
                if !p.starts_with(prev) {
                    misses += 1;
                }
            }
            remember(&mut history, user, format!("answer {i}"), cap);
            assert!(history.len() <= cap, "{} > {cap}", history.len());
            assert_eq!(history.len() % 2, 0);
            if cap >= 2 {
                assert_eq!(history[0].role, "user");
                assert_eq!(history.last().unwrap().content, format!("answer {i}"));
            }
            previous = Some(p);
        }
        misses
    }

    #[test]
    fn a_full_history_is_cut_in_halves_so_most_turns_extend_the_cached_prompt() {
        // Cap 8: prompts carry 0, 2, 4, 6, 8, 4, 6, 8, 4 … history messages; every third turn
        // after the first cut starts again from the system prompt. Dropping one exchange per
        // turn would miss on 30 − 5 = 25 of them.
        let misses = cache_misses(8, 30);
        assert!(misses <= 9, "{misses} of 30 turns lost the cached prefix");
        assert!(misses >= 8, "the history must still be bounded: {misses}");
        assert_eq!(
            cache_misses(40, 20),
            0,
            "a history under its cap is never cut"
        );
    }

    #[test]
    fn a_cap_under_one_exchange_keeps_none() {
        let mut history = Vec::new();
        remember(&mut history, "a".into(), "b".into(), 0);
        assert!(history.is_empty());
        remember(&mut history, "a".into(), "b".into(), 1);
        assert!(history.is_empty());
        remember(&mut history, "a".into(), "b".into(), 2);
        assert_eq!(history.len(), 2);
    }
}
