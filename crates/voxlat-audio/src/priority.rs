//! A higher scheduling weight for the device callback threads. With a few tens of ms of
//! buffer, a callback that waits behind Whisper or llama.cpp threads for longer makes the
//! driver underrun (an audible gap) or overrun (lost microphone audio). Niceness −10 gives the
//! thread about ten times a normal thread's share under contention while staying in the
//! fair scheduler, so even a thread that spun could not starve the machine (real-time
//! SCHED_FIFO could, and did here, through the ALSA pulse plugin's busy capture loop).
//! Unprivileged processes may not lower niceness; the request then fails and nothing changes.

const NICE: i32 = -10;

/// Lowers the calling thread's niceness; true if granted. Two system calls, no allocation,
/// so it may run (once) inside a device callback.
pub(crate) fn raise_current_thread() -> bool {
    // SAFETY: plain system calls on the calling thread's id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, NICE) == 0
    }
}
