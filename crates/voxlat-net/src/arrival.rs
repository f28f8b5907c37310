//! When bytes reached this host, not when a task got round to reading them.
//!
//! A stamp taken after a read returns is late by however long the reading task waited for a
//! CPU: with 64 streams on one worker thread, the last of 64 first tokens that arrive together
//! is stamped a millisecond after it arrived. The kernel stamps every received packet as it
//! takes it in (`SO_TIMESTAMPNS`) and hands the stamp of the newest packet a read consumed
//! beside the bytes. [`ArrivalStream`] reads that way and keeps the stamp, mapped onto the
//! process clock, for whoever consumes the bytes.
//!
//! The kernel's stamp is on the real-time clock, which the process clock never uses (it
//! jumps). Only its *age* is used: the real-time clock's now minus the stamp, taken from the
//! process clock's now read beside it. A jump between the packet's arrival and the read would
//! corrupt that age, so an age that is negative or implausibly large falls back to the read
//! time, as does every read on a system without the option.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use voxlat_core::clock::{self, Nanos};

/// A kernel stamp older than this is not believed: no read waits that long behind a packet
/// that is already queued, so the real-time clock must have jumped.
const MAX_AGE_NS: i128 = 10_000_000_000;

/// The most one read takes: far more than a token's event, and what the direct transport
/// asks room for before each read.
#[cfg(target_os = "linux")]
const MAX_READ: usize = 8 * 1024;

/// The arrival time of the newest bytes read from a stream, shared between the reader and
/// whoever consumes what it read (an HTTP stack may read on the consumer's behalf).
#[derive(Debug, Default)]
pub struct LastArrival(AtomicU64, AtomicU64);

impl LastArrival {
    /// When the bytes of the latest read arrived; `None` before the first read.
    pub fn get(&self) -> Option<Nanos> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            t => Some(Nanos(t - 1)),
        }
    }

    /// How many reads so far were stamped when they returned, not by the kernel (no stamp
    /// came, or an implausible one): a record says so rather than pass the read time off as
    /// an arrival.
    pub fn fallbacks(&self) -> u64 {
        self.1.load(Ordering::Acquire)
    }

    fn set(&self, t: Nanos) {
        self.0.store(t.0.saturating_add(1), Ordering::Release);
    }

    fn set_read_time(&self, t: Nanos) {
        self.1.fetch_add(1, Ordering::AcqRel);
        self.set(t);
    }
}

/// A TCP stream whose reads note when their bytes arrived ([`ArrivalStream::arrivals`]).
/// Writes pass straight through.
#[derive(Debug)]
pub struct ArrivalStream {
    socket: Socket,
    last: Arc<LastArrival>,
    kernel: bool,
    /// Where `recvmsg` puts the stamp.
    #[cfg(target_os = "linux")]
    control: Vec<u8>,
    /// Where it puts the bytes: nix reads into initialised memory only, and zeroing the
    /// caller's fresh buffer before every read cost more than copying what came.
    #[cfg(target_os = "linux")]
    scratch: Box<[u8]>,
}

/// On Linux the stream is read with `recvmsg` for the stamp, so it sits in the reactor as a
/// plain descriptor: tokio's `TcpStream` can only be read with `read`, and its `try_io` cannot
/// mark the socket drained after a short read, which cost one `EAGAIN` read per token.
#[cfg(target_os = "linux")]
type Socket = tokio::io::unix::AsyncFd<std::net::TcpStream>;
#[cfg(not(target_os = "linux"))]
type Socket = TcpStream;

impl ArrivalStream {
    /// Wraps `inner`, asking the kernel for receive stamps. Where it will not give them, reads
    /// are stamped when they return (see [`ArrivalStream::kernel_stamps`]).
    pub fn new(inner: TcpStream) -> io::Result<ArrivalStream> {
        #[cfg(target_os = "linux")]
        let (socket, kernel) = {
            let std = inner.into_std()?;
            let kernel = sys::enable(&std).is_ok();
            // SAFETY: a std TcpStream owns its descriptor, keeps it open until it is dropped
            // and always returns the same one, and the AsyncFd owns the stream.
            let fd = unsafe { tokio::io::unix::AsyncFd::register(std)? };
            (fd, kernel)
        };
        #[cfg(not(target_os = "linux"))]
        let (socket, kernel) = (inner, false);
        Ok(ArrivalStream {
            socket,
            last: Arc::default(),
            kernel,
            #[cfg(target_os = "linux")]
            control: sys::control_buffer(),
            #[cfg(target_os = "linux")]
            scratch: vec![0; MAX_READ].into_boxed_slice(),
        })
    }

    /// The arrival time of the newest read, shared.
    pub fn arrivals(&self) -> Arc<LastArrival> {
        self.last.clone()
    }

    /// Whether reads carry the kernel's receive stamp (false: the time the read returned).
    pub fn kernel_stamps(&self) -> bool {
        self.kernel
    }

    /// Whether the stream is open with nothing unread: what a pooled connection must be before
    /// a request goes out on it. It asks the socket (a non-blocking peek), not the reactor,
    /// whose news of a close the peer sent can be a turn late.
    pub fn idle_and_open(&self) -> bool {
        let mut probe = [0u8; 1];
        #[cfg(target_os = "linux")]
        let peeked = self.socket.get_ref().peek(&mut probe);
        #[cfg(not(target_os = "linux"))]
        let peeked = {
            let mut buf = ReadBuf::new(&mut probe);
            let mut cx = Context::from_waker(std::task::Waker::noop());
            match self.socket.poll_peek(&mut cx, &mut buf) {
                Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
                Poll::Ready(r) => r,
            }
        };
        // Ok(0): the peer closed; Ok(n): bytes nobody asked for; an error: the socket broke.
        matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// The process-clock time of a kernel real-time stamp `ts_ns`, from the clocks' nows; `None`
/// when its age is not believable.
fn from_realtime(ts_ns: i128, realtime_now_ns: i128, now: Nanos) -> Option<Nanos> {
    let age = realtime_now_ns - ts_ns;
    if !(0..MAX_AGE_NS).contains(&age) {
        return None;
    }
    Some(Nanos(now.0.saturating_sub(age as u64)))
}

#[cfg(target_os = "linux")]
impl AsyncRead for ArrivalStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let mut guard = std::task::ready!(this.socket.poll_read_ready(cx))?;
            let room = buf.remaining().min(MAX_READ);
            let into = &mut this.scratch[..room];
            match guard.try_io(|s| sys::recv(s.get_ref(), into, &mut this.control)) {
                Ok(Ok((n, stamp))) => {
                    // A short read drained the socket (the reactor is edge-triggered): say so
                    // now rather than learn it from one more read that finds nothing.
                    if n < room {
                        guard.clear_ready();
                    }
                    buf.put_slice(&this.scratch[..n]);
                    if n > 0 {
                        // The real-time read sits between two process-clock reads, so a
                        // preemption between them costs half its length, not all of it.
                        let before = clock::now();
                        let realtime = sys::realtime_now();
                        let now = clock::now();
                        let at_realtime = Nanos(before.0 + (now.0 - before.0) / 2);
                        match stamp.and_then(|ts| from_realtime(ts, realtime, at_realtime)) {
                            Some(t) => this.last.set(t),
                            None => this.last.set_read_time(now),
                        }
                    }
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(target_os = "linux")]
impl AsyncWrite for ArrivalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        use std::io::Write;
        self.get_mut().write_with(cx, |mut s| s.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        use std::io::Write;
        self.get_mut()
            .write_with(cx, |mut s| s.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.get_ref().shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(target_os = "linux")]
impl ArrivalStream {
    fn write_with(
        &mut self,
        cx: &mut Context<'_>,
        mut write: impl FnMut(&std::net::TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        // Tried before asking the reactor: a socket just registered has no readiness recorded
        // until the reactor's next turn, and a new connection's first write (the request,
        // stamped as written) would wait for that turn, a millisecond and more under load.
        match write(self.socket.get_ref()) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => return Poll::Ready(r),
        }
        loop {
            let mut guard = std::task::ready!(self.socket.poll_write_ready(cx))?;
            match guard.try_io(|s| write(s.get_ref())) {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Elsewhere: tokio's stream, each read stamped when it returns.
#[cfg(not(target_os = "linux"))]
impl AsyncRead for ArrivalStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.socket).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.last.set_read_time(clock::now());
        }
        r
    }
}

#[cfg(not(target_os = "linux"))]
impl AsyncWrite for ArrivalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().socket).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_shutdown(cx)
    }
}

/// The socket calls, through nix: no hand-walked control messages.
#[cfg(target_os = "linux")]
mod sys {
    use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
    use nix::sys::time::TimeSpec;
    use std::io::{self, IoSliceMut};
    use std::net::TcpStream;
    use std::os::fd::AsRawFd;

    pub fn enable(s: &TcpStream) -> io::Result<()> {
        Ok(setsockopt(s, sockopt::ReceiveTimestampns, &true)?)
    }

    /// CLOCK_REALTIME, the clock the kernel's receive stamps are on.
    pub fn realtime_now() -> i128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128)
    }

    /// Room for the one control message a read carries, allocated once per stream.
    pub fn control_buffer() -> Vec<u8> {
        nix::cmsg_space!(TimeSpec)
    }

    /// One non-blocking `recvmsg`: the bytes, and the kernel's real-time receive stamp (ns) of
    /// the newest packet they came from, when it gave one.
    pub fn recv(
        s: &TcpStream,
        buf: &mut [u8],
        control: &mut [u8],
    ) -> io::Result<(usize, Option<i128>)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(
            s.as_raw_fd(),
            &mut iov,
            Some(control),
            MsgFlags::MSG_DONTWAIT,
        )?;
        let mut stamp = None;
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                stamp = Some(i128::from(ts.tv_sec()) * 1_000_000_000 + i128::from(ts.tv_nsec()));
            }
        }
        Ok((msg.bytes, stamp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn an_age_is_taken_back_from_now_and_an_implausible_one_is_not_believed() {
        let now = Nanos(5_000_000_000);
        assert_eq!(
            from_realtime(900, 1_000, now),
            Some(Nanos(5_000_000_000 - 100))
        );
        // A stamp from the future (the real-time clock stepped back).
        assert_eq!(from_realtime(1_100, 1_000, now), None);
        // A stamp older than any queued packet could be (it stepped forward).
        assert_eq!(from_realtime(0, MAX_AGE_NS + 1, now), None);
        // An age beyond the process clock's start cannot go below zero.
        assert_eq!(from_realtime(0, 9_000_000_000, now), Some(Nanos(0)));
    }

    /// Bytes that wait in the socket are stamped when they arrived, not when they were read:
    /// the writer's own clock before its write is the ground truth.
    #[test]
    fn bytes_read_late_carry_the_time_they_arrived() {
        clock::init();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
            let mut reader = ArrivalStream::new(client.unwrap()).unwrap();
            if !reader.kernel_stamps() {
                eprintln!("no kernel receive stamps here: nothing to check");
                return;
            }
            let mut writer = accepted.unwrap().0;
            let mut buf = [0u8; 64];
            // The kernel turns packet stamping on a moment after the first socket asks (a
            // deferred switch), so the first bytes may come unstamped.
            writer.write_all(b"hello").await.unwrap();
            reader.read_exact(&mut buf[..5]).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let written = clock::now();
            writer.write_all(b"first token").await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let fallbacks = reader.arrivals().fallbacks();
            let n = reader.read(&mut buf).await.unwrap();
            assert_eq!(reader.arrivals().fallbacks(), fallbacks, "a kernel stamp came");
            let read = clock::now();
            assert_eq!(&buf[..n], b"first token");
            let arrived = reader.arrivals().get().expect("a stamp");
            // Converting the kernel's real-time stamp to the process clock is good to a few
            // microseconds unless the thread is preempted between the clock reads (tests run
            // in parallel on two cores); 2 ms is far below the 300 ms this test tells apart.
            assert!(
                arrived.signed_since(written) > -2_000_000,
                "{arrived:?} more than 2 ms before the write {written:?}"
            );
            assert!(
                arrived.signed_since(written) < 150_000_000,
                "stamped {} ms after the write: the read time (read {} ms after it), not the arrival",
                arrived.signed_since(written) / 1_000_000,
                read.signed_since(written) / 1_000_000
            );
        });
    }
}
