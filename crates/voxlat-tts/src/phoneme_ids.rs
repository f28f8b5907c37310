//! Piper's model input: clauses → sentences of phonemes → ids.
//!
//! A sentence's phonemes are its clauses' phonemes, each followed by its punctuation and a
//! space, the sentence's last clause without the space. The ids are `^`, `_`, then every
//! phoneme followed by `_`, then `$` (Piper's BOS, padding and EOS symbols), each looked up in
//! the voice's `phoneme_id_map` one Unicode scalar at a time.

use crate::config::VoiceConfig;
use crate::espeak::Clause;
use std::collections::HashMap;

const PAD: char = '_';
const BOS: char = '^';
const EOS: char = '$';

/// Groups clauses into sentences, Piper-style. Each sentence is synthesized by its own model
/// call.
pub fn sentences(clauses: &[Clause]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for clause in clauses {
        if !current.is_empty() && !current.ends_with(' ') {
            current.push(' ');
        }
        current.push_str(&clause.phonemes);
        if let Some(p) = clause.punctuation {
            current.push(p);
        }
        if clause.ends_sentence() {
            out.push(std::mem::take(&mut current).trim().to_string());
        } else {
            current.push(' ');
        }
    }
    let tail = current.trim();
    if !tail.is_empty() {
        out.push(tail.to_string());
    }
    out.retain(|s| !s.is_empty());
    out
}

#[derive(Debug, Clone)]
pub struct PhonemeIds {
    map: HashMap<char, Vec<i64>>,
    substitutions: HashMap<char, Vec<char>>,
    pad: Vec<i64>,
    bos: Vec<i64>,
    eos: Vec<i64>,
}

/// The ids of one sentence, and what could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub ids: Vec<i64>,
    /// Phonemes that are not in the voice's table (skipped).
    pub unknown: Vec<char>,
    /// Phonemes that were mapped (BOS, EOS and padding not counted).
    pub mapped: usize,
}

/// A voice table without an id for one of Piper's padding, BOS and EOS symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("phoneme_id_map has no id for {0:?}")]
pub struct MissingSymbol(pub char);

impl PhonemeIds {
    /// Builds the table from a voice config. Keys of more than one scalar cannot come out of
    /// espeak-ng's per-character phonemes and are ignored.
    pub fn from_config(config: &VoiceConfig) -> Result<Self, MissingSymbol> {
        let single = |k: &str| {
            let mut it = k.chars();
            match (it.next(), it.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        };
        let map: HashMap<char, Vec<i64>> = config
            .phoneme_id_map
            .iter()
            .filter_map(|(k, v)| single(k).map(|c| (c, v.clone())))
            .collect();
        let substitutions = config
            .phoneme_map
            .iter()
            .filter_map(|(k, v)| {
                let to: Vec<char> = v.iter().filter_map(|s| single(s)).collect();
                single(k).map(|c| (c, to))
            })
            .collect();
        let required = |c: char| {
            map.get(&c)
                .filter(|ids| !ids.is_empty())
                .cloned()
                .ok_or(MissingSymbol(c))
        };
        Ok(Self {
            pad: required(PAD)?,
            bos: required(BOS)?,
            eos: required(EOS)?,
            map,
            substitutions,
        })
    }

    pub fn encode(&self, phonemes: &str) -> Encoded {
        let mut ids = Vec::with_capacity(phonemes.len() * 2 + 3);
        ids.extend_from_slice(&self.bos);
        ids.extend_from_slice(&self.pad);
        let mut unknown = Vec::new();
        let mut mapped = 0;
        for c in phonemes.chars() {
            let substituted = self.substitutions.get(&c);
            let expanded: &[char] = match substituted {
                Some(v) => v,
                None => std::slice::from_ref(&c),
            };
            for p in expanded {
                match self.map.get(p) {
                    Some(v) => {
                        ids.extend_from_slice(v);
                        ids.extend_from_slice(&self.pad);
                        mapped += 1;
                    }
                    None => unknown.push(*p),
                }
            }
        }
        ids.extend_from_slice(&self.eos);
        Encoded {
            ids,
            unknown,
            mapped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(extra: &str) -> VoiceConfig {
        let json = format!(
            r#"{{
                "audio": {{"sample_rate": 22050}},
                "espeak": {{"voice": "en-us"}},
                "phoneme_id_map": {{"_": [0], "^": [1], "$": [2], " ": [3], ",": [8],
                                    ".": [10], "a": [14], "b": [15], "ˈ": [120], "ɪ": [74]}}
                {extra}
            }}"#
        );
        VoiceConfig::from_json(&json, Path::new("test.onnx.json")).expect("config")
    }

    fn clause(phonemes: &str, punctuation: Option<char>) -> Clause {
        Clause {
            phonemes: phonemes.into(),
            punctuation,
        }
    }

    #[test]
    fn ids_are_bos_pad_then_each_phoneme_and_pad_then_eos() {
        let ids = PhonemeIds::from_config(&config("")).expect("table");
        let e = ids.encode("ab, ˈɪ.");
        assert_eq!(
            e.ids,
            [1, 0, 14, 0, 15, 0, 8, 0, 3, 0, 120, 0, 74, 0, 10, 0, 2]
        );
        assert!(e.unknown.is_empty());
        assert_eq!(e.mapped, 7);
    }

    #[test]
    fn unknown_phonemes_are_skipped_and_reported() {
        let ids = PhonemeIds::from_config(&config("")).expect("table");
        let e = ids.encode("aZb");
        assert_eq!(e.ids, [1, 0, 14, 0, 15, 0, 2]);
        assert_eq!(e.unknown, ['Z']);
        let e = ids.encode("");
        assert_eq!(e.ids, [1, 0, 2]);
        assert_eq!(e.mapped, 0);
    }

    #[test]
    fn phoneme_map_substitutes_before_lookup() {
        let ids = PhonemeIds::from_config(&config(r#", "phoneme_map": {"X": ["a", "b"]}"#))
            .expect("table");
        assert_eq!(ids.encode("X").ids, [1, 0, 14, 0, 15, 0, 2]);
    }

    #[test]
    fn multi_id_entries_are_all_emitted() {
        let mut cfg = config("");
        cfg.phoneme_id_map.insert("a".into(), vec![14, 99]);
        let ids = PhonemeIds::from_config(&cfg).expect("table");
        assert_eq!(ids.encode("a").ids, [1, 0, 14, 99, 0, 2]);
    }

    #[test]
    fn a_table_without_special_symbols_is_refused() {
        let mut cfg = config("");
        cfg.phoneme_id_map.remove("^");
        let err = PhonemeIds::from_config(&cfg).expect_err("no BOS");
        assert!(err.to_string().contains("'^'"), "{err}");
    }

    #[test]
    fn clauses_become_sentences_with_their_punctuation() {
        let s = sentences(&[
            clause("həlˈoʊ", Some(',')),
            clause("wˈɜːld", Some('.')),
            clause("hˈaʊ", Some('?')),
            clause("tˈeɪl", None),
        ]);
        assert_eq!(s, ["həlˈoʊ, wˈɜːld.", "hˈaʊ?", "tˈeɪl"]);
        assert!(sentences(&[]).is_empty());
        assert_eq!(sentences(&[clause("", Some('.'))]), ["."]);
    }
}
