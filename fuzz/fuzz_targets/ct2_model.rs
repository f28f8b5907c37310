//! The CTranslate2 `model.bin` parser and the whole ggml conversion on arbitrary bytes. The
//! model file comes from a package registry, so a corrupt or hostile one must give an error
//! with an offset, never a panic or a huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

const VOCABULARY: &str = "[\"!\", \"hello\", \"<|endoftext|>\"]";

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = voxlat_asr::convert::ct2::parse(data) {
        for v in &m.variables {
            assert_eq!(v.data.len(), v.numel() * v.dtype.size());
        }
    }
    let _ = voxlat_asr::convert::convert(data, VOCABULARY, &mut std::io::sink());
});
