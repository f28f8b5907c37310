//! Transcript comparison: word normalisation and word error rate.

/// Number words that ASR writes as digits ("ten minutes" → "10 minutes"), so WER compares
/// words, not spelling conventions.
const NUMBERS: &[(&str, &str)] = &[
    ("zero", "0"),
    ("one", "1"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("thirteen", "13"),
    ("fourteen", "14"),
    ("fifteen", "15"),
    ("sixteen", "16"),
    ("seventeen", "17"),
    ("eighteen", "18"),
    ("nineteen", "19"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("forty", "40"),
    ("fifty", "50"),
    ("sixty", "60"),
    ("seventy", "70"),
    ("eighty", "80"),
    ("ninety", "90"),
];

/// Lower-case words with punctuation removed (apostrophes inside words kept), number words
/// as digits.
pub fn normalize_words(s: &str) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || c == '-' || c == '—')
        .map(|w| {
            let w: String = w
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .flat_map(char::to_lowercase)
                .collect();
            let w = w.trim_matches('\'').to_string();
            NUMBERS
                .iter()
                .find(|(word, _)| *word == w)
                .map_or(w, |(_, d)| d.to_string())
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate: word-level edit distance / reference length. An empty reference gives 0
/// for an empty hypothesis and 1 otherwise.
pub fn wer(reference: &str, hypothesis: &str) -> f64 {
    let r = normalize_words(reference);
    let h = normalize_words(hypothesis);
    if r.is_empty() {
        return if h.is_empty() { 0.0 } else { 1.0 };
    }
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut cur = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[h.len()] as f64 / r.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(
            normalize_words("Set a timer for ten minutes."),
            ["set", "a", "timer", "for", "10", "minutes"]
        );
        assert_eq!(
            normalize_words("What's the weather—like?"),
            ["what's", "the", "weather", "like"]
        );
        assert!(normalize_words(" ... !! ").is_empty());
    }

    #[test]
    fn wer_counts_edits() {
        assert_eq!(
            wer("ask not what your country", "Ask not, what your country!"),
            0.0
        );
        assert_eq!(
            wer("ask not what your country", "ask what your country"),
            0.2
        );
        assert_eq!(
            wer("ask not what your country", "ask not what your county"),
            0.2
        );
        assert_eq!(wer("a b", "a b c d"), 1.0);
        assert_eq!(wer("", ""), 0.0);
        assert_eq!(wer("", "you"), 1.0);
    }
}
