/// Splits a byte stream from a receiver into NMEA 0183 sentences, whatever the chunking.
///
/// A sentence starts at `$` (or `!` for AIS-style encapsulation) and ends at CR or LF.
/// The framer keeps a partial sentence between calls, so a sentence split across reads is
/// delivered whole. It resynchronises on its own:
/// - bytes outside a sentence (leading garbage, interleaved binary frames) are skipped;
/// - a line whose first byte is `#` is a comment (gpsd's recording format) and is skipped;
/// - a `$`/`!` inside a sentence means the sentence was truncated: it is dropped, counted
///   in ``framingErrors``, and a new sentence starts at that byte;
/// - a control or non-ASCII byte inside a sentence drops it (counted);
/// - a sentence longer than ``maximumSentenceLength`` bytes is dropped (counted) and the
///   rest of its line skipped.
///
/// Delivered lines run from the start character through the checksum, without CR/LF.
///
/// With `deliversBinaryFrames`, the binary frames receivers interleave with NMEA are
/// delivered too, whole and only with a good checksum, as gpsd's packet lexer finds them
/// (`gpsd/packet.c`): u-blox UBX (`B5 62`, class, id, little-endian length, payload, 8-bit
/// Fletcher checksum) and CASIC (`BA CE`, length, class, id, payload, 32-bit sum). The
/// buffer then starts with `B5` or `BA`. A frame whose length or checksum is wrong is
/// counted, and its bytes after the first are framed again, so an NMEA sentence inside a
/// false start is not lost.
///
/// With `reportsDateComments`, a recording with a `# Delay-Cookie: C SECONDS` header (gpsd's
/// gpsfake) has the byte `C` removed everywhere after that line, outside comments: gpsfake
/// splits the text at `C` and sends the pieces, never `C` itself.
public struct NMEAFramer: Sendable {
    /// The longest sentence kept, in bytes from `$` through the checksum (CR/LF excluded).
    ///
    /// NMEA 0183 allows 82 bytes with CR/LF; real receivers exceed that (u-blox high
    /// precision, Quectel, Skytraq reach ~135). 164 is twice the standard: longer lines
    /// are two sentences run together or noise.
    public static let maximumSentenceLength = 164
    /// The longest binary frame payload kept, in bytes (gpsd's CASIC limit; UBX navigation
    /// messages are far shorter).
    public static let maximumBinaryPayload = 2047

    private enum State: Sendable {
        /// Between sentences, at the start of a line.
        case lineStart
        /// Between sentences, hunting for `$` or `!`.
        case hunting
        /// Inside a `#` comment line: skip to its end.
        case comment
        /// Inside a sentence being collected.
        case sentence
        /// Inside an over-long line: skip to its end (or the next `$`).
        case discarding
        /// Inside a binary frame being collected (in `pending`).
        case binary
    }

    private var state = State.lineStart
    /// Deliver the two comment lines of gpsd's recording format that change what gpsd
    /// reports: one starting `# Date: ` (delivered as `# Date: `) and one starting
    /// `# Delay-Cookie:` (delivered as `# Delay-Cookie:`).
    private let reportsDateComments: Bool
    /// Deliver UBX and CASIC binary frames (see the type's documentation).
    private let deliversBinaryFrames: Bool
    /// How far the current comment line matches each of the two (0: no longer).
    private var dateMatch = 0, cookieMatch = 0
    private static let datePrefix: [UInt8] = Array("# Date: ".utf8)
    private static let cookiePrefix: [UInt8] = Array("# Delay-Cookie:".utf8)
    /// After a `# Delay-Cookie:` prefix: 1 = skipping spaces before the delimiter, 2 = the
    /// delimiter read, waiting for the space that ends it.
    private var cookieParse = 0
    private var cookieCandidate: UInt8 = 0
    /// gpsfake's delimiter, removed from the data (0: none).
    private var cookie: UInt8 = 0
    /// The partial sentence or binary frame carried between calls.
    private var pending: [UInt8] = []
    /// The total length of the binary frame being collected, once its header says it.
    private var binaryLength = 0
    /// Framing errors seen so far: truncated, over-long or binary-corrupted sentences, and
    /// binary frames with a bad length or checksum.
    public private(set) var framingErrors = 0

    /// Creates a framer at the start of a line.
    public init(reportsDateComments: Bool = false, deliversBinaryFrames: Bool = false) {
        self.reportsDateComments = reportsDateComments
        self.deliversBinaryFrames = deliversBinaryFrames
        pending.reserveCapacity(Self.maximumSentenceLength + 1)
    }

    /// Feeds a chunk of bytes; calls `body` with each complete sentence, in order.
    ///
    /// The buffer passed to `body` is valid only during the call.
    public mutating func append(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        let count = bytes.count
        var i = 0
        // Start of the current sentence's bytes not yet copied to `pending`, within `bytes`.
        var start = 0
        while i < count {
            if state == .sentence {
                // The bulk of a sentence, printable and neither a start nor the cookie, up to the
                // length limit, in a tight loop; what ends it is looked at below.
                let limit = min(count, start + Self.maximumSentenceLength - pending.count)
                while i < limit, Self.isPlain(bytes[i], cookie: cookie) { i += 1 }
                if i == count { break }
            }
            let b = bytes[i]
            if cookie != 0, b == cookie, state != .comment {
                // gpsfake never sends its delimiter.
                if state == .sentence { pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i])) }
                i += 1
                start = i
                continue
            }
            switch state {
            case .lineStart, .hunting:
                if b == 0x24 || b == 0x21 {  // $ !
                    state = .sentence
                    start = i
                } else if b == 0x23 && state == .lineStart {  // #
                    state = .comment
                    dateMatch = reportsDateComments ? 1 : 0
                    cookieMatch = dateMatch
                } else if b == 0x0A || b == 0x0D {
                    state = .lineStart
                } else if deliversBinaryFrames, b == 0xB5 || b == 0xBA {
                    state = .binary
                    binaryLength = 0
                    pending.append(b)
                } else {
                    state = .hunting
                }
            case .comment:
                if b == 0x0A || b == 0x0D {
                    if cookieParse == 2 { cookie = cookieCandidate }
                    cookieParse = 0
                    state = .lineStart
                } else {
                    comment(b, body)
                }
            case .discarding:
                if b == 0x0A || b == 0x0D {
                    state = .lineStart
                } else if b == 0x24 || b == 0x21 {
                    state = .sentence
                    start = i
                }
            case .sentence:
                let length = pending.count + i - start
                if b == 0x0A || b == 0x0D {
                    if pending.isEmpty {
                        body(UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                    } else {
                        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                        pending.withUnsafeBytes { body($0) }
                    }
                    pending.removeAll(keepingCapacity: true)
                    state = .lineStart
                } else if b == 0x24 || b == 0x21 {
                    // A new start inside a sentence: the previous one was cut short.
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    start = i
                } else if b < 0x20 || b > 0x7E {
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    state = .hunting
                    // The byte may start a binary frame.
                    if deliversBinaryFrames, b == 0xB5 || b == 0xBA { continue }
                } else if length >= Self.maximumSentenceLength {
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    state = .discarding
                }
            case .binary:
                pending.append(b)
                if !binaryHeader() {
                    // Not a frame after all: frame its bytes after the first again.
                    framingErrors += pending.count > 2 ? 1 : 0
                    reframe(body)
                    start = i + 1
                } else if binaryLength > 0, pending.count == binaryLength {
                    if Self.binaryChecksumIsGood(pending) {
                        pending.withUnsafeBytes { body($0) }
                        pending.removeAll(keepingCapacity: true)
                        state = .hunting
                    } else {
                        framingErrors += 1
                        reframe(body)
                        start = i + 1
                    }
                }
            }
            i += 1
        }
        if state == .sentence {
            // Keep the open sentence's bytes of this chunk for the next call.
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<count]))
        }
    }

    /// Whether `b` continues a sentence with nothing to decide: printable ASCII, not `$` or `!`
    /// (a new start), not gpsfake's delimiter.
    @inline(__always)
    private static func isPlain(_ b: UInt8, cookie: UInt8) -> Bool {
        b >= 0x20 && b <= 0x7E && b != 0x24 && b != 0x21 && b != cookie
    }

    /// One byte of a comment line: matches the two prefixes that matter, and reads
    /// gpsfake's delimiter after `# Delay-Cookie:`.
    private mutating func comment(_ b: UInt8, _ body: (UnsafeRawBufferPointer) -> Void) {
        if cookieParse == 1, b != 0x20, b != 0x09 {
            cookieCandidate = b
            cookieParse = 2
            return
        } else if cookieParse == 2 {
            // The delimiter is one byte, then a space; a longer one is not supported.
            cookieParse = b == 0x20 || b == 0x09 ? 3 : 0
            if cookieParse == 3 { cookie = cookieCandidate }
            return
        }
        if dateMatch > 0 {
            dateMatch = b == Self.datePrefix[dateMatch] ? dateMatch + 1 : 0
            if dateMatch == Self.datePrefix.count {
                dateMatch = 0
                Self.datePrefix.withUnsafeBytes { body($0) }
            }
        }
        if cookieMatch > 0 {
            cookieMatch = b == Self.cookiePrefix[cookieMatch] ? cookieMatch + 1 : 0
            if cookieMatch == Self.cookiePrefix.count {
                cookieMatch = 0
                cookieParse = 1
                Self.cookiePrefix.withUnsafeBytes { body($0) }
            }
        }
    }

    /// Checks the binary frame's header as far as it has come; sets `binaryLength` once the
    /// length is known. `false`: these bytes are no frame.
    private mutating func binaryHeader() -> Bool {
        let n = pending.count
        let ubx = pending[0] == 0xB5
        if n == 2 { return pending[1] == (ubx ? 0x62 : 0xCE) }
        if ubx, n == 6 {
            let length = Int(pending[4]) | Int(pending[5]) << 8
            guard length <= Self.maximumBinaryPayload else { return false }
            binaryLength = 8 + length
        } else if !ubx, n == 4 {
            let length = Int(pending[2]) | Int(pending[3]) << 8
            guard length <= Self.maximumBinaryPayload, length % 4 == 0 else { return false }
            binaryLength = 10 + length
        }
        return true
    }

    /// Frames again the bytes of a false binary start, after its first byte.
    private mutating func reframe(_ body: (UnsafeRawBufferPointer) -> Void) {
        let rest = Array(pending.dropFirst())
        pending.removeAll(keepingCapacity: true)
        state = .hunting
        rest.withUnsafeBytes { append($0, body) }
    }

    /// Whether a whole UBX or CASIC frame (as delivered) carries a good checksum. UBX: 8-bit
    /// Fletcher over class, id, length and payload. CASIC: the 32-bit sum of the little-endian
    /// words from the length through the payload.
    public static func binaryChecksumIsGood(_ frame: [UInt8]) -> Bool {
        let n = frame.count
        guard n >= 8, frame[0] == 0xB5 || (frame[0] == 0xBA && n >= 10 && n % 4 == 2) else { return false }
        if frame[0] == 0xB5 {
            var a: UInt8 = 0, b: UInt8 = 0
            for k in 2..<(n - 2) {
                a &+= frame[k]
                b &+= a
            }
            return a == frame[n - 2] && b == frame[n - 1]
        }
        func word(_ k: Int) -> UInt32 {
            UInt32(frame[k]) | UInt32(frame[k + 1]) << 8 | UInt32(frame[k + 2]) << 16 | UInt32(frame[k + 3]) << 24
        }
        var sum: UInt32 = 0
        var k = 2
        while k < n - 4 {
            sum &+= word(k)
            k += 4
        }
        return sum == word(n - 4)
    }

    /// Ends the input: a sentence still open (the last line had no line end) is delivered
    /// to `body` as it is; its checksum decides whether it is whole.
    public mutating func finish(_ body: (UnsafeRawBufferPointer) -> Void) {
        if state == .sentence, !pending.isEmpty {
            pending.withUnsafeBytes { body($0) }
        }
        // A binary frame cut short by the end of input is dropped.
        pending.removeAll(keepingCapacity: true)
        state = .lineStart
    }
}
