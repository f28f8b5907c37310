//! Handing freed heap memory back to the system between turns.
//!
//! Piper's tensors are a new shape every sentence, and Whisper's and the resampler's buffers
//! vary with each utterance. glibc keeps what they free inside its heaps (raising its mmap
//! threshold after each large free, so later large blocks come from the heap too), and over
//! hundreds of turns the resident set creeps up with memory nobody uses. `malloc_trim(0)`
//! returns the free pages of every arena. It runs between turns, where nobody waits on it, and
//! says how long it took (the session logs it at debug level).

use std::time::{Duration, Instant};

/// Returns free heap pages to the system and says how long that took. A no-op on allocators
/// without such a call (non-glibc targets).
pub fn release_free_memory() -> Duration {
    let start = Instant::now();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks; it takes no
    // pointers from us.
    unsafe {
        libc::malloc_trim(0);
    }
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_blocks_leave_the_resident_set() {
        // Many mid-sized blocks (below the mmap threshold, so they live in the heap), then free
        // all but the last: without a trim, the pages under the freed blocks stay resident
        // because the live block pins the heap's top.
        let rss = || -> u64 {
            let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .expect("VmRSS")
        };
        let mut blocks: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8 | 1; 64 * 1024]).collect();
        let keep = blocks.pop();
        let full = rss();
        drop(blocks);
        release_free_memory();
        let trimmed = rss();
        assert!(keep.is_some_and(|k| k[0] != 0));
        // 2000 × 64 KiB = 125 MiB were freed; at least most of it must leave.
        assert!(
            full.saturating_sub(trimmed) > 64 * 1024,
            "RSS {full} kB before the trim, {trimmed} kB after"
        );
    }
}
