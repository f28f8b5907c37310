//! The floor under the client's CPU figure: what it costs on this machine only to read every
//! token as it arrives, with the kernel's arrival stamp, and to send the next request. It
//! keeps the client's reading pattern (one edge-triggered `epoll`, one `recvmsg` with
//! `SO_TIMESTAMPNS` per readiness, keep-alive connections) and does nothing else: no HTTP
//! parsing beyond finding the body's end, no SSE, no JSON, no async runtime. What the client
//! costs above this is its own work; the floor itself is the kernel's (the receive path, the
//! ACK it sends, the sleeps between arrivals) and no client that stamps each token can go
//! under it.

use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// The same request the client sends, as far as the scripted server cares.
fn request(authority: &str) -> Vec<u8> {
    let body = r#"{"model":"scripted-model","messages":[{"role":"user","content":"hi"}],"max_tokens":32,"stream":true,"stream_options":{"include_usage":true}}"#;
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One non-blocking `recvmsg` with room for the arrival stamp, as the client reads.
fn recv(fd: i32, buf: &mut [u8]) -> isize {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; every pointer in it points into buffers that outlive the
    // call.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT)
    }
}

struct Conn {
    stream: TcpStream,
    /// The last bytes read, to find the chunked body's end across reads.
    tail: Vec<u8>,
}

impl Conn {
    /// Reads what is there; true when the response has ended.
    fn read(&mut self, buf: &mut [u8]) -> bool {
        loop {
            let n = recv(self.stream.as_raw_fd(), buf);
            if n <= 0 {
                return false;
            }
            let n = n as usize;
            self.tail.extend_from_slice(&buf[..n]);
            let keep = self.tail.len().saturating_sub(5);
            let ended = self.tail.ends_with(b"0\r\n\r\n");
            self.tail.drain(..keep);
            if ended {
                self.tail.clear();
                return true;
            }
            // A short read drained the socket, as the client's reader assumes.
            if n < buf.len() {
                return false;
            }
        }
    }
}

/// Runs `total` requests, `concurrency` at a time, each on a connection opened and warmed
/// first; returns this thread's (user, kernel) CPU seconds and voluntary switches.
pub fn run(
    addr: &str,
    concurrency: usize,
    total: usize,
    cpu: impl Fn() -> (f64, f64, i64),
) -> (f64, f64, i64) {
    let req = request(addr);
    // SAFETY: plain epoll calls on descriptors this function owns.
    let ep = unsafe { libc::epoll_create1(0) };
    assert!(ep >= 0, "epoll_create1");
    let mut conns: Vec<Conn> = (0..concurrency)
        .map(|i| {
            let stream = TcpStream::connect(addr).expect("connect to the scripted server");
            stream.set_nodelay(true).unwrap();
            let on: libc::c_int = 1;
            // SAFETY: setsockopt with an int value on a socket we own.
            unsafe {
                libc::setsockopt(
                    stream.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_TIMESTAMPNS,
                    (&on as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            stream.set_nonblocking(true).unwrap();
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLET) as u32,
                u64: i as u64,
            };
            // SAFETY: registers a socket we own with our epoll.
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, stream.as_raw_fd(), &mut ev) };
            Conn {
                stream,
                tail: Vec::with_capacity(64),
            }
        })
        .collect();
    let mut buf = vec![0u8; 8192];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let mut wave = |conns: &mut Vec<Conn>, total: usize| {
        let mut sent = 0;
        let mut done = 0;
        for c in conns.iter_mut().take(total) {
            c.stream.write_all(&req).unwrap();
            sent += 1;
        }
        while done < total {
            // SAFETY: the events buffer outlives the call and its length is passed.
            let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
            for ev in &events[..n.max(0) as usize] {
                let c = &mut conns[ev.u64 as usize];
                if c.read(&mut buf) {
                    done += 1;
                    if sent < total {
                        c.stream.write_all(&req).unwrap();
                        sent += 1;
                    }
                }
            }
        }
    };
    wave(&mut conns, concurrency);
    let before = cpu();
    wave(&mut conns, total);
    let after = cpu();
    // SAFETY: closes the epoll descriptor this function opened.
    unsafe { libc::close(ep) };
    (after.0 - before.0, after.1 - before.1, after.2 - before.2)
}
