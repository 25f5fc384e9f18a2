//! Request heads up to 1 MiB, as kube-apiserver takes them.
//!
//! Go's HTTP server, and so kube-apiserver, accepts a request line plus
//! headers of up to 1 MiB. hyper (and the `http` crate's `Uri`) refuse a
//! request target over 65 534 bytes with a bare 414 and close the
//! connection, so a valid 100 KB label selector from kubectl would never
//! reach the handler. [`Framer`] sits between the socket and hyper and
//! follows HTTP/1.1 message framing (heads, `Content-Length` and chunked
//! bodies), so it knows where every request head starts:
//!
//! - a head whose request target is too long for hyper is rewritten: the
//!   query moves into the [`LONG_QUERY`] header and the target keeps the
//!   path, so the handler sees the same query;
//! - a head hyper would refuse with a bare status (over 1 MiB, too many
//!   headers, malformed, path over the limit, unframable body) is replaced
//!   by a tiny request carrying [`HEAD_ERROR`], which the listener answers
//!   with a `metav1.Status`, closing the connection; the rest of the
//!   client's bytes are discarded.
//!
//! Every other byte goes to hyper unchanged.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Largest request head accepted (request line and headers), as Go's
/// `http.DefaultMaxHeaderBytes`.
pub const MAX_HEAD_BYTES: usize = 1 << 20;
/// Most header lines in one head.
pub const MAX_HEADERS: usize = 256;
/// Longest request target hyper and `http::Uri` take.
const MAX_TARGET: usize = u16::MAX as usize - 1;
/// Longest chunk-size or trailer line followed; past it the bytes go to
/// hyper unchanged (which refuses them).
const MAX_LINE: usize = 4096;

/// Header carrying the query of a request whose target was too long.
pub const LONG_QUERY: &str = "x-ward-long-query";
/// Header of the stand-in request for a head that could not be served: the
/// status code to answer.
pub const HEAD_ERROR: &str = "x-ward-head-error";

/// Where the framer is in the client's byte stream.
#[derive(Debug)]
enum State {
    /// Collecting a request head.
    Head,
    /// In a body of this many more bytes.
    Fixed(u64),
    /// In a chunked body.
    Chunked(Chunk),
    /// Lost track of framing: everything goes to hyper as it is.
    Passthrough,
    /// A stand-in error request was sent: everything else is dropped.
    Discard,
}

/// Where the framer is in a chunked body.
#[derive(Debug)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// In a chunk's data, this many bytes left.
    Data(u64),
    /// After a chunk's data, up to its line end.
    DataEnd,
    /// Reading trailer lines, up to the empty one.
    Trailer,
}

/// HTTP/1.1 request framing over the bytes a client sends (see the module
/// docs). Pure: bytes in, bytes out.
#[derive(Debug)]
pub struct Framer {
    state: State,
    /// The head or line being collected.
    buf: Vec<u8>,
}

impl Default for Framer {
    fn default() -> Self {
        Framer {
            state: State::Head,
            buf: Vec::new(),
        }
    }
}

impl Framer {
    /// Take bytes read from the client; append what hyper is to read.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            match &mut self.state {
                State::Passthrough => {
                    out.extend_from_slice(input);
                    return;
                }
                State::Discard => return,
                State::Head => {
                    if self.buf.is_empty() {
                        // Empty lines before a request line are ignored (RFC 9112 2.2).
                        let skip = input
                            .iter()
                            .take_while(|b| matches!(b, b'\r' | b'\n'))
                            .count();
                        out.extend_from_slice(&input[..skip]);
                        input = &input[skip..];
                        if input.is_empty() {
                            return;
                        }
                    }
                    let searched = self.buf.len().saturating_sub(2);
                    self.buf.extend_from_slice(input);
                    match head_end(&self.buf, searched) {
                        Some(end) if end > MAX_HEAD_BYTES => {
                            self.buf = Vec::new();
                            self.state = stand_in(431, out);
                            return;
                        }
                        Some(end) => {
                            let consumed = input.len() - (self.buf.len() - end);
                            input = &input[consumed..];
                            self.buf.truncate(end);
                            let head = std::mem::take(&mut self.buf);
                            self.state = self.head(&head, out);
                        }
                        None if self.buf.len() > MAX_HEAD_BYTES => {
                            self.buf = Vec::new();
                            self.state = stand_in(431, out);
                            return;
                        }
                        None => return,
                    }
                }
                State::Fixed(left) => {
                    input = pass(left, input, out);
                    if *left == 0 {
                        self.state = State::Head;
                    }
                }
                State::Chunked(Chunk::Data(left)) => {
                    input = pass(left, input, out);
                    if *left == 0 {
                        self.state = State::Chunked(Chunk::DataEnd);
                    }
                }
                State::Chunked(_) => {
                    // A line: chunk size, the end of a chunk's data, or a trailer.
                    let (line, rest, complete) = match input.iter().position(|b| *b == b'\n') {
                        Some(i) => (&input[..=i], &input[i + 1..], true),
                        None => (input, &input[input.len()..], false),
                    };
                    out.extend_from_slice(line);
                    input = rest;
                    self.buf.extend_from_slice(line);
                    if !complete {
                        if self.buf.len() > MAX_LINE {
                            self.buf = Vec::new();
                            self.state = State::Passthrough;
                        }
                        continue;
                    }
                    let line = std::mem::take(&mut self.buf);
                    self.state = self.after_line(&line);
                }
            }
        }
    }

    /// The client closed its side: a head still being collected goes to
    /// hyper as it is (which answers nothing to an incomplete request).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if matches!(self.state, State::Head) {
            out.append(&mut self.buf);
        }
    }

    /// The state after a complete chunked-body line.
    fn after_line(&self, line: &[u8]) -> State {
        let State::Chunked(chunk) = &self.state else {
            unreachable!("only chunked bodies have lines")
        };
        let text = trim_line(line);
        match chunk {
            Chunk::Size => {
                let size = text.split(|b| *b == b';').next().unwrap_or_default();
                let size = std::str::from_utf8(size)
                    .ok()
                    .and_then(|s| u64::from_str_radix(s.trim(), 16).ok());
                match size {
                    Some(0) => State::Chunked(Chunk::Trailer),
                    Some(n) => State::Chunked(Chunk::Data(n)),
                    None => State::Passthrough,
                }
            }
            Chunk::DataEnd => State::Chunked(Chunk::Size),
            Chunk::Trailer if text.is_empty() => State::Head,
            Chunk::Trailer => State::Chunked(Chunk::Trailer),
            Chunk::Data(_) => unreachable!("data is not read by lines"),
        }
    }

    /// Pass on (or rewrite, or stand in for) one complete head; the state
    /// for what follows it.
    fn head(&self, head: &[u8], out: &mut Vec<u8>) -> State {
        // On the stack: no allocation per request head.
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Err(httparse::Error::TooManyHeaders) => return stand_in(431, out),
            Ok(httparse::Status::Partial) | Err(_) => return stand_in(400, out),
        }
        let Some(body) = framing(req.headers) else {
            return stand_in(400, out);
        };
        let target = req.path.unwrap_or_default();
        if target.len() <= MAX_TARGET {
            out.extend_from_slice(head);
        } else {
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            if path.len() > MAX_TARGET {
                return stand_in(414, out);
            }
            let line_end = head
                .iter()
                .position(|b| *b == b'\n')
                .map_or(head.len(), |i| i + 1);
            let method = req.method.unwrap_or_default();
            let version = req.version.unwrap_or(1);
            out.extend_from_slice(
                format!("{method} {path} HTTP/1.{version}\r\n{LONG_QUERY}: {query}\r\n").as_bytes(),
            );
            out.extend_from_slice(&head[line_end..]);
        }
        body
    }
}

/// Pass on up to `left` bytes of `input` (counting them off); the rest of `input`.
fn pass<'a>(left: &mut u64, input: &'a [u8], out: &mut Vec<u8>) -> &'a [u8] {
    let n = input
        .len()
        .min(usize::try_from(*left).unwrap_or(usize::MAX));
    out.extend_from_slice(&input[..n]);
    *left -= n as u64;
    &input[n..]
}

/// Where a head ends (just past its empty line), searching from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(p) = buf[i..].iter().position(|b| *b == b'\n') {
        let nl = i + p;
        match buf.get(nl + 1..nl + 3) {
            Some([b'\r', b'\n', ..]) => return Some(nl + 3),
            _ if buf.get(nl + 1) == Some(&b'\n') => return Some(nl + 2),
            _ => {}
        }
        i = nl + 1;
    }
    None
}

/// A line without its line end.
fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// How the body after a head is framed (RFC 9112 6.3), or None when it
/// cannot be (hyper refuses such a request too).
fn framing(headers: &[httparse::Header<'_>]) -> Option<State> {
    fn named<'h>(
        headers: &'h [httparse::Header<'h>],
        name: &'static str,
    ) -> impl Iterator<Item = Option<&'h str>> {
        headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| std::str::from_utf8(h.value).ok())
    }
    let codings: Option<Vec<&str>> = named(headers, "transfer-encoding").collect();
    let codings = codings?;
    if !codings.is_empty() {
        let last = codings.join(",");
        let last = last.rsplit(',').next().unwrap_or_default().trim();
        return last
            .eq_ignore_ascii_case("chunked")
            .then_some(State::Chunked(Chunk::Size));
    }
    let mut length = None;
    for value in named(headers, "content-length") {
        for v in value?.split(',') {
            let n = v.trim().parse::<u64>().ok()?;
            if length.is_some_and(|l| l != n) {
                return None;
            }
            length = Some(n);
        }
    }
    Some(match length {
        None | Some(0) => State::Head,
        Some(n) => State::Fixed(n),
    })
}

/// Send hyper a stand-in request that the listener answers with `code`,
/// and drop the rest of the connection's input.
fn stand_in(code: u16, out: &mut Vec<u8>) -> State {
    out.extend_from_slice(
        format!(
            "GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{HEAD_ERROR}: {code}\r\n\r\n"
        )
        .as_bytes(),
    );
    State::Discard
}

/// A client connection read through a [`Framer`] (writes go straight through).
#[derive(Debug)]
pub struct FramedIo<IO> {
    io: IO,
    framer: Framer,
    /// Bytes framed but not yet read by hyper, from `pos`.
    pending: Vec<u8>,
    pos: usize,
    scratch: Box<[u8]>,
    eof: bool,
}

impl<IO> FramedIo<IO> {
    /// Frame the requests read from `io`.
    pub fn new(io: IO) -> Self {
        FramedIo {
            io,
            framer: Framer::default(),
            pending: Vec::new(),
            pos: 0,
            scratch: vec![0; 16 * 1024].into_boxed_slice(),
            eof: false,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for FramedIo<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.pos < this.pending.len() {
                let n = buf.remaining().min(this.pending.len() - this.pos);
                buf.put_slice(&this.pending[this.pos..this.pos + n]);
                this.pos += n;
                return Poll::Ready(Ok(()));
            }
            this.pending.clear();
            this.pos = 0;
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                this.eof = true;
                this.framer.finish(&mut this.pending);
            } else {
                // Discarded input is read (so the client is not blocked)
                // and dropped; hyper sees nothing more.
                this.framer.feed(rb.filled(), &mut this.pending);
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FramedIo<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ward_base::Rng;

    /// Frame `input` fed in pieces cut at the given sizes (cycled).
    fn frame(input: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut f = Framer::default();
        let mut out = Vec::new();
        let mut rest = input;
        for cut in cuts.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let n = (*cut).clamp(1, rest.len());
            f.feed(&rest[..n], &mut out);
            rest = &rest[n..];
        }
        f.finish(&mut out);
        out
    }

    /// Every cut of the input gives the same output.
    fn frame_all_ways(input: &[u8]) -> Vec<u8> {
        let whole = frame(input, &[input.len().max(1)]);
        let mut rng = Rng::new(7);
        let mut ways = vec![vec![1], vec![2], vec![3, 7], vec![5000, 1]];
        ways.extend((0..20).map(|_| (0..8).map(|_| 1 + rng.up_to(300) as usize).collect()));
        for cuts in ways {
            // Compared without printing: the inputs run to megabytes.
            assert!(
                frame(input, &cuts) == whole,
                "cuts {cuts:?} framed differently"
            );
        }
        whole
    }

    #[test]
    fn ordinary_requests_pass_unchanged() {
        let stream: &[u8] = b"\r\nGET /api?x=1 HTTP/1.1\r\nHost: a\r\n\r\n\
            POST /api/v1/namespaces/d/configmaps HTTP/1.1\r\nContent-Length: 14\r\n\r\n{\"a\":\"\r\n\r\n\"}x\
            PATCH /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nab\r\n\n\r\n0\r\nT: v\r\n\r\n\
            GET /last HTTP/1.1\nHost: b\n\n";
        assert_eq!(frame_all_ways(stream), stream);
    }

    #[test]
    fn a_long_query_moves_into_a_header() {
        let selector = "a".repeat(100_000);
        let head = format!(
            "GET /api/v1/pods?labelSelector={selector}&limit=5 HTTP/1.1\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\n\r\n"
        );
        let out = String::from_utf8(frame_all_ways(head.as_bytes())).unwrap();
        let want = format!(
            "GET /api/v1/pods HTTP/1.1\r\n{LONG_QUERY}: labelSelector={selector}&limit=5\r\nHost: a\r\n\r\nGET /next HTTP/1.1\r\n\r\n"
        );
        assert!(out == want, "{}", &out[..out.len().min(300)]);
    }

    #[test]
    fn heads_hyper_would_refuse_get_a_stand_in() {
        let stand_in = |code: u16| {
            format!(
                "GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{HEAD_ERROR}: {code}\r\n\r\n"
            )
        };
        let long_path = format!("GET /{} HTTP/1.1\r\n\r\n", "p".repeat(70_000));
        let huge = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "v".repeat(MAX_HEAD_BYTES)
        );
        let many: String = (0..=MAX_HEADERS).map(|i| format!("h{i}: v\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\n{many}\r\n");
        let cases = [
            (long_path, 414),
            (huge, 431),
            (many, 431),
            ("GET / HTTP/1.1\r\nbad header\r\n\r\n".into(), 400),
            ("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n".into(), 400),
            (
                "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".into(),
                400,
            ),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n".into(),
                400,
            ),
        ];
        for (head, code) in cases {
            // What follows the refused head never reaches hyper.
            let input = format!("GET /first HTTP/1.1\r\n\r\n{head}GET /after HTTP/1.1\r\n\r\n");
            let out = String::from_utf8(frame_all_ways(input.as_bytes())).unwrap();
            let want = format!("GET /first HTTP/1.1\r\n\r\n{}", stand_in(code));
            assert!(out == want, "{code}: {}", &out[..out.len().min(300)]);
        }
    }

    #[test]
    fn malformed_chunks_are_left_to_hyper() {
        let input =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET / HTTP/1.1\r\n\r\n";
        assert_eq!(frame_all_ways(input), input);
    }

    #[test]
    fn an_unfinished_head_is_passed_on_at_eof() {
        assert_eq!(
            frame_all_ways(b"GET / HTTP/1.1\r\nHost"),
            b"GET / HTTP/1.1\r\nHost"
        );
    }
}
