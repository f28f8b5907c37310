use crate::report::{Event, Reporter};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// sha256 of a file, reporting progress for large files (hashing a 250 MB model is visible).
pub fn sha256_file(path: &Path, model: &str, reporter: &dyn Reporter) -> io::Result<(String, u64)> {
    let mut f = File::open(path)?;
    let total = f.metadata()?.len();
    let what = format!(
        "checking {}",
        path.file_name().unwrap_or_default().to_string_lossy()
    );
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        done += n as u64;
        reporter.event(Event::Bytes {
            model,
            what: &what,
            done,
            total: Some(total),
        });
    }
    reporter.event(Event::BytesDone { model, what: &what });
    Ok((hex(&h.finalize()), done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("abc");
        std::fs::write(&p, b"abc").unwrap();
        let (h, n) = sha256_file(&p, "m", &crate::report::Quiet).unwrap();
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(n, 3);
    }
}
