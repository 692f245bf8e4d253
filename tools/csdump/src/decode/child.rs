//! OpenCSD in a process of its own.
//!
//! The trace bytes come from the file the user gave csdump, which may be damaged or crafted, and
//! OpenCSD is C++ that was not written for hostile input (1.3.3 crashed on corrupt trace). So
//! csdump does not run it in its own process: [`spawn`] forks a child, which holds a copy of the
//! capture and of the code images and nothing the parent shares, confines it, and lets it decode
//! and stream each element back through a pipe; the parent reads that stream with bounds-checked
//! Rust. A crash, an overflow or a hang inside the library ends the child only: the parent says
//! why, and keeps every element that came before.
//!
//! After the fork the child takes no lock another thread of the parent may have held (the panic
//! hook is installed in the parent; the pipe is written with `write(2)`; OpenCSD's lock is held
//! across the fork by the forking thread itself).
//!
//! The confinement, set up in the child before any trace byte is looked at:
//!
//! - `PR_SET_NO_NEW_PRIVS` and a seccomp filter that allows only what decoding needs: memory
//!   (`mmap`, `munmap`, `mremap`, `mprotect`, `madvise`, `brk`), `pread64` of files already open
//!   (a vmcore's pages), `futex`, `write` to its pipe and to stderr (a panic message, glibc's
//!   heap-corruption report), its own signal handling and signals to itself (`abort`, the
//!   runtime's fault handler), `exit_group`. Any other system call kills it with `SIGSYS`: it
//!   cannot open a file, connect, fork, execute or signal another process;
//! - no core file, no new file descriptors, one hour of CPU time, and death with its parent
//!   (`PR_SET_PDEATHSIG`). (No file-size limit: stderr may be a file the user redirected to, and
//!   the filter already keeps every other descriptor from being written.)

use std::ffi::c_int;
use std::fs::File;
use std::io::BufReader;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Once;

/// How much the child writes, or the parent reads, at once.
const CHUNK: usize = 64 << 10;

/// CPU time the child may use, in seconds: the bound on a decoder that loops, above what the
/// largest buffer takes (dense trace decodes at about 3 MB/s: a 4 GiB ETR buffer in some 25
/// minutes).
pub const CPU_SECONDS: u64 = 3600;

/// How the child ended, when it did not end well.
pub(super) fn explain(status: c_int, cpu_seconds: u64) -> Option<String> {
    if libc::WIFEXITED(status) {
        return match libc::WEXITSTATUS(status) {
            0 => None,
            PANICKED => Some("panicked".into()),
            NOT_CONFINED => Some(
                "could not be confined (the kernel refused its seccomp filter or resource \
                 limits), so it decoded nothing; set CSDUMP_DECODER_IN_PROCESS=1 to decode \
                 trusted input in csdump's own process"
                    .into(),
            ),
            n => Some(format!("exited with status {n}")),
        };
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        return Some(match sig {
            libc::SIGSYS => "was killed by SIGSYS: it made a system call that its seccomp \
                             filter does not allow"
                .into(),
            libc::SIGXCPU => format!(
                "was killed by SIGXCPU: it used up its {cpu_seconds} s of CPU time without \
                 finishing"
            ),
            _ => format!("died of signal {sig} ({})", signal_name(sig)),
        });
    }
    Some(format!("ended with wait status {status:#x}"))
}

fn signal_name(sig: c_int) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV: a bad memory access",
        libc::SIGBUS => "SIGBUS: a bad memory access",
        libc::SIGABRT => "SIGABRT: the library or the C runtime aborted, a heap corruption say",
        libc::SIGILL => "SIGILL: an illegal instruction",
        libc::SIGFPE => "SIGFPE: an arithmetic fault",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

/// Exit status of a child whose work panicked.
const PANICKED: c_int = 70;
/// Exit status of a child that could not be confined.
const NOT_CONFINED: c_int = 71;

/// The child's end of the pipe: buffered, written with `write(2)` only (no lock of the
/// parent's is taken after the fork).
pub(super) struct Sender {
    fd: c_int,
    buf: Vec<u8>,
    /// The parent closed its end (it stopped reading).
    pub closed: bool,
}

impl Sender {
    /// Queues `bytes`; sends when a chunk is full.
    pub fn send(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= CHUNK {
            self.flush();
        }
    }

    /// Sends what is queued.
    pub fn flush(&mut self) {
        let mut off = 0;
        while off < self.buf.len() && !self.closed {
            let rest = &self.buf[off..];
            // SAFETY: `rest` is readable for its length; the descriptor is the pipe's write end,
            // owned by this process.
            let n = unsafe { libc::write(self.fd, rest.as_ptr().cast(), rest.len()) };
            if n > 0 {
                // CAST: positive, at most rest.len().
                off += n as usize;
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                self.closed = true;
            }
        }
        self.buf.clear();
    }
}

/// The parent's side of a running child.
pub(super) struct Child {
    pid: libc::pid_t,
    /// What the child sends.
    pub stream: BufReader<File>,
    reaped: bool,
}

impl Child {
    /// Ends the child now (the parent needs nothing more from it) and reaps it.
    pub fn kill(mut self) {
        // SAFETY: the pid is this process's child, not reaped yet.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let _ = self.wait();
    }

    /// Waits for the child to end; `None` if it ended well, else why not.
    pub fn finish(mut self) -> Option<String> {
        match self.wait() {
            Ok(status) => explain(status, CPU_SECONDS),
            Err(e) => Some(format!("could not be waited for: {e}")),
        }
    }

    fn wait(&mut self) -> std::io::Result<c_int> {
        let mut status: c_int = 0;
        loop {
            // SAFETY: the pid is this process's child; `status` is writable.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                self.reaped = true;
                return Ok(status);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.reaped = true;
                return Err(e);
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: the pid is this process's child, not reaped yet.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = self.wait();
        }
    }
}

/// Runs `work` in a confined child process; the parent gets the child's stream.
///
/// `work` runs only in the child, which ends when it returns (`_exit`, no destructor of the
/// parent's state runs there). The fork happens while no other thread is inside OpenCSD, so the
/// child starts with the library's global state consistent.
pub(super) fn spawn(work: impl FnOnce(&mut Sender)) -> std::io::Result<Child> {
    child_panic_hook();
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [rd, wr] = fds;
    // SAFETY: plain call.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork has no memory-safety precondition; the child below only runs `work` on its
    // own copy of the address space and leaves through `_exit`.
    let pid = opencsd::exclusive(|| unsafe { libc::fork() });
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: both descriptors were just created by this function and are not used again.
        unsafe {
            libc::close(rd);
            libc::close(wr);
        }
        return Err(e);
    }
    if pid == 0 {
        // SAFETY: `rd` is this process's copy of the read end, not used in the child.
        unsafe { libc::close(rd) };
        let code = if confine(wr, parent).is_err() {
            NOT_CONFINED
        } else {
            IN_CHILD.store(true, Ordering::Relaxed);
            let mut tx = Sender {
                fd: wr,
                buf: Vec::with_capacity(CHUNK + 256),
                closed: false,
            };
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                work(&mut tx);
                tx.flush();
            }));
            if done.is_ok() {
                0
            } else {
                PANICKED
            }
        };
        // SAFETY: ends the child at once, without running the parent's atexit handlers or
        // flushing the parent's stdio buffers, which the child copied.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: `wr` is the parent's copy of the write end, not used in the parent.
    unsafe { libc::close(wr) };
    // SAFETY: `rd` was created above, is open, and is owned by the File from now on.
    let file = unsafe { File::from_raw_fd(rd) };
    Ok(Child {
        pid,
        stream: BufReader::with_capacity(CHUNK, file),
        reaped: false,
    })
}

/// Set in a child right after the fork.
static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// Installs, once and in the parent, a panic hook that in a child only writes the message to
/// stderr (the default one may open files for a backtrace, which the filter forbids) and in the
/// parent is the hook that was there. The child must not install it itself: the hook's lock may
/// have been held by another thread of the parent at the fork, and would never be released.
fn child_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let parent = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CHILD.load(Ordering::Relaxed) {
                let m = format!("csdump: the decoder's process panicked: {info}\n");
                // SAFETY: `m` is readable for its length; fd 2 is stderr.
                unsafe { libc::write(2, m.as_ptr().cast(), m.len()) };
            } else {
                parent(info);
            }
        }));
    });
}

/// Confines the calling process (the child of `parent`): death with its parent, resource
/// limits, no new privileges, the seccomp filter. `pipe` is the one descriptor it may write to
/// besides stderr.
fn confine(pipe: c_int, parent: libc::pid_t) -> Result<(), ()> {
    // A csdump killed while it decodes takes its child with it (and one that died before this
    // call ends the child here).
    // SAFETY: plain integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0
        // SAFETY: plain call.
        || unsafe { libc::getppid() } != parent
    {
        return Err(());
    }
    let limit = |res, n: u64| {
        let l = libc::rlimit {
            rlim_cur: n,
            rlim_max: n,
        };
        // SAFETY: `l` is a valid rlimit for the duration of the call.
        if unsafe { libc::setrlimit(res, &l) } == 0 {
            Ok(())
        } else {
            Err(())
        }
    };
    limit(libc::RLIMIT_CORE, 0)?;
    limit(libc::RLIMIT_NOFILE, 0)?;
    limit(libc::RLIMIT_CPU, CPU_SECONDS)?;
    // SAFETY: plain integer arguments.
    let own = unsafe { libc::getpid() };
    let prog = filter(pipe, own);
    let fprog = libc::sock_fprog {
        // CAST: the filter has fewer than 100 instructions.
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: plain integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(());
    }
    // SAFETY: `fprog` points to `prog`, alive for the call (the kernel copies the program).
    if unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
        )
    } != 0
    {
        return Err(());
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Offsets in `struct seccomp_data`: the system call number, the architecture, the low half of
/// argument `i` (little-endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        // CAST: BPF opcodes fit 16 bits.
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        // CAST: BPF opcodes fit 16 bits.
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

fn nr(n: libc::c_long) -> u32 {
    // CAST: system call numbers are small and positive.
    n as u32
}

/// The child's seccomp filter (see the module documentation).
fn filter(pipe: c_int, own: libc::pid_t) -> Vec<libc::sock_filter> {
    let load = |off| stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, off);
    let allow = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW);
    let kill = stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS);
    let mut p = vec![load(ARCH), jeq(AUDIT_ARCH, 1, 0), kill, load(NR)];
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 ABI's numbers: not this process's.
        p.push(libc::sock_filter {
            // CAST: BPF opcodes fit 16 bits.
            code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: 0x4000_0000,
        });
        p.push(kill);
    }
    let plain = [
        libc::SYS_pread64,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_sched_yield,
        libc::SYS_getrandom,
        libc::SYS_clock_gettime,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    for n in plain {
        p.push(jeq(nr(n), 0, 1));
        p.push(allow);
    }
    // CAST: descriptors and pids are positive ints.
    let (pipe, own) = (pipe as u32, own as u32);
    // A system call allowed when its first argument is one of `ok`: the pipe or stderr for
    // write, stderr for writev, this process for tgkill.
    let mut on_arg0 = |n: libc::c_long, ok: &[u32]| {
        // CAST: at most two values, so the block is short.
        let skip = (2 + 2 * ok.len()) as u8;
        p.push(jeq(nr(n), 0, skip));
        p.push(load(arg_lo(0)));
        for &v in ok {
            p.push(jeq(v, 0, 1));
            p.push(allow);
        }
        p.push(kill);
    };
    on_arg0(libc::SYS_write, &[pipe, 2]);
    on_arg0(libc::SYS_writev, &[2]);
    on_arg0(libc::SYS_tgkill, &[own]);
    p.push(kill);
    p
}

/// Reads exactly `buf.len()` bytes of the child's stream; `Ok(false)` at a clean end (no byte).
pub(super) fn read_record(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "a record cut short",
                ));
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(work: impl FnOnce(&mut Sender)) -> (Vec<u8>, Option<String>) {
        let mut child = spawn(work).expect("fork");
        let mut got = Vec::new();
        child.stream.read_to_end(&mut got).expect("read");
        (got, child.finish())
    }

    #[test]
    fn what_the_child_sends_arrives_whole() {
        let big: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let want = big.clone();
        let (got, end) = run(move |tx| tx.send(&big));
        assert_eq!(end, None);
        assert_eq!(got, want);
    }

    #[test]
    fn the_child_cannot_open_a_file() {
        let (_, end) = run(|tx| {
            // A decoder that tries to open a file is killed there.
            let _ = std::fs::File::open("/etc/hostname");
            tx.send(b"opened");
        });
        let end = end.expect("killed");
        assert!(end.starts_with("was killed by SIGSYS"), "{end}");
    }

    #[test]
    fn the_child_cannot_signal_its_parent() {
        // SAFETY: plain call.
        let parent = unsafe { libc::getpid() };
        let (_, end) = run(move |_| {
            // SAFETY: sending SIGTERM (which the filter refuses) has no memory effect.
            unsafe { libc::kill(parent, libc::SIGTERM) };
        });
        assert!(end.expect("killed").starts_with("was killed by SIGSYS"));
    }

    #[test]
    fn a_crash_in_the_child_is_named_and_the_parent_goes_on() {
        let (got, end) = run(|tx| {
            tx.send(b"before");
            tx.flush();
            // What a decoder that overflows a buffer comes to.
            // SAFETY: not safe: the point of the test is a child that faults.
            unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
        });
        assert_eq!(got, b"before");
        let end = end.expect("crashed");
        assert!(end.starts_with("died of signal 11 (SIGSEGV"), "{end}");
    }

    #[test]
    fn an_abort_in_the_child_is_named() {
        let (_, end) = run(|_| std::process::abort());
        let end = end.expect("aborted");
        assert!(end.starts_with("died of signal 6 (SIGABRT"), "{end}");
    }

    #[test]
    fn a_panic_in_the_child_is_named() {
        let (_, end) = run(|_| panic!("in the child"));
        assert_eq!(end.as_deref(), Some("panicked"));
    }

    #[test]
    fn every_ending_has_words() {
        assert_eq!(explain(0, 1), None);
        assert!(explain(71 << 8, 1).is_some_and(|s| s.contains("CSDUMP_DECODER_IN_PROCESS")));
        assert!(explain(libc::SIGXCPU, 9).is_some_and(|s| s.contains("its 9 s of CPU time")));
    }
}
