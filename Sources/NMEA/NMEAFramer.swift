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
public struct NMEAFramer: Sendable {
    /// The longest sentence kept, in bytes from `$` through the checksum (CR/LF excluded).
    ///
    /// NMEA 0183 allows 82 bytes with CR/LF; real receivers exceed that (u-blox high
    /// precision, Quectel, Skytraq reach ~135). 164 is twice the standard: longer lines
    /// are two sentences run together or noise.
    public static let maximumSentenceLength = 164

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
    }

    private var state = State.lineStart
    /// Deliver the two comment lines of gpsd's recording format that change what gpsd
    /// reports: one starting `# Date: ` (delivered as `# Date: `) and one starting
    /// `# Delay-Cookie:` (delivered as `# Delay-Cookie:`).
    private let reportsDateComments: Bool
    /// How far the current comment line matches each of the two (0: no longer).
    private var dateMatch = 0, cookieMatch = 0
    private static let datePrefix: [UInt8] = Array("# Date: ".utf8)
    private static let cookiePrefix: [UInt8] = Array("# Delay-Cookie:".utf8)
    /// The partial sentence carried between calls (only when a sentence spans chunks).
    private var pending: [UInt8] = []
    /// Framing errors seen so far: truncated, over-long or binary-corrupted sentences.
    public private(set) var framingErrors = 0

    /// Creates a framer at the start of a line.
    public init(reportsDateComments: Bool = false) {
        self.reportsDateComments = reportsDateComments
        pending.reserveCapacity(Self.maximumSentenceLength + 1)
    }

    /// Feeds a chunk of bytes; calls `body` with each complete sentence, in order.
    ///
    /// The buffer passed to `body` is valid only during the call.
    public mutating func append(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        let count = bytes.count
        var i = 0
        // Start of the current sentence within `bytes`, when it began in this chunk.
        var start = -1
        while i < count {
            let b = bytes[i]
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
                } else {
                    state = .hunting
                }
            case .comment:
                if b == 0x0A || b == 0x0D {
                    state = .lineStart
                } else {
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
                            Self.cookiePrefix.withUnsafeBytes { body($0) }
                        }
                    }
                }
            case .discarding:
                if b == 0x0A || b == 0x0D {
                    state = .lineStart
                } else if b == 0x24 || b == 0x21 {
                    state = .sentence
                    start = i
                }
            case .sentence:
                let length = start >= 0 ? i - start : pending.count + i
                if b == 0x0A || b == 0x0D {
                    if start >= 0 {
                        body(UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
                    } else {
                        pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[0..<i]))
                        pending.withUnsafeBytes { body($0) }
                    }
                    pending.removeAll(keepingCapacity: true)
                    start = -1
                    state = .lineStart
                } else if b == 0x24 || b == 0x21 {
                    // A new start inside a sentence: the previous one was cut short.
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    start = i
                } else if b < 0x20 || b > 0x7E {
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    start = -1
                    state = .hunting
                } else if length >= Self.maximumSentenceLength {
                    framingErrors += 1
                    pending.removeAll(keepingCapacity: true)
                    start = -1
                    state = .discarding
                }
            }
            i += 1
        }
        if state == .sentence {
            // Keep the open sentence's bytes of this chunk for the next call.
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[max(0, start)..<count]))
        }
    }

    /// Ends the input: a sentence still open (the last line had no line end) is delivered
    /// to `body` as it is; its checksum decides whether it is whole.
    public mutating func finish(_ body: (UnsafeRawBufferPointer) -> Void) {
        if state == .sentence, !pending.isEmpty {
            pending.withUnsafeBytes { body($0) }
        }
        pending.removeAll(keepingCapacity: true)
        state = .lineStart
    }
}
