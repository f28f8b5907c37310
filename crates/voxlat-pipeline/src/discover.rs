//! Which scenario files a list of paths names: each file as given, and the `.toml` files of
//! each directory, sorted so that runs are repeatable.

use std::path::{Path, PathBuf};

/// How deep [`scenario_files`] looks into a directory tree: a corpus is a directory of
/// halves, each a directory of files; a link loop must not recurse for ever.
pub const MAX_DEPTH: usize = 4;

/// The scenario files under `roots`: a file is taken as it is (its loading reports whether it
/// is one), a directory gives its `.toml` files, and with `recursive` those of its
/// subdirectories too, down to [`MAX_DEPTH`]. A file named twice (a directory and a file in
/// it, or two spellings of one path) is listed once, where it first came: its turns must not
/// count twice.
pub fn scenario_files(roots: &[PathBuf], recursive: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for r in roots {
        if r.is_dir() {
            walk(r, if recursive { MAX_DEPTH } else { 0 }, &mut out);
        } else {
            out.push(r.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|p| seen.insert(p.canonicalize().unwrap_or_else(|_| p.clone())));
    out
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if depth > 0 {
                walk(&p, depth - 1, out);
            }
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_give_their_toml_files_in_order_and_subdirectories_only_when_recursive() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("test")).unwrap();
        for f in ["b.toml", "a.toml", "notes.md", "test/c.toml"] {
            std::fs::write(root.join(f), "").unwrap();
        }
        let flat = scenario_files(&[root.to_path_buf()], false);
        assert_eq!(flat, vec![root.join("a.toml"), root.join("b.toml")]);
        let deep = scenario_files(&[root.to_path_buf()], true);
        assert_eq!(
            deep,
            vec![
                root.join("a.toml"),
                root.join("b.toml"),
                root.join("test/c.toml")
            ]
        );
        // A file named again, directly or through another spelling, is listed once.
        let twice = scenario_files(
            &[
                root.to_path_buf(),
                root.join("test/c.toml"),
                root.join("test/../a.toml"),
            ],
            true,
        );
        assert_eq!(twice, deep);
        // A file is passed on as given, whatever its name.
        let given = root.join("notes.md");
        assert_eq!(
            scenario_files(std::slice::from_ref(&given), true),
            vec![given]
        );
    }
}
