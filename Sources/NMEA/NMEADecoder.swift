import GNSS

/// Decodes a byte stream of NMEA 0183 into fixes, headings and no-fix states.
///
/// Pure and synchronous: no I/O, no clock but the receiver's own time. Feed it chunks of
/// any size with ``decode(_:emit:)`` and call ``finish(emit:)`` at the end of the input;
/// the events are the same whatever the chunking. Pipeline: ``NMEAFramer`` (bytes →
/// lines) → ``NMEAChecksum`` → ``NMEAFields`` (tokens) → ``NMEASentence`` (one parser per
/// type) → the epoch assembler (cycles → `Fix`: see `EpochAssembler` for the rules).
///
/// Binary UBX and CASIC frames interleaved with the sentences are read as gpsd reads them
/// (`GPSDBinaryMessage`): their navigation solution is gpsd's last report of the second.
///
/// Corrupt input never stops it: a bad checksum, a truncated or over-long line, or a
/// sentence it does not know is counted in ``statistics`` and skipped.
public struct NMEADecoder: Sendable {
    /// Decoder options.
    public struct Options: Sendable {
        /// Accept sentences that carry no `*hh` checksum (receivers that never send one).
        /// Off by default: without a checksum, line noise would pass as data.
        public var acceptsMissingChecksum: Bool = false
        /// Creates options.
        public init(acceptsMissingChecksum: Bool = false) { self.acceptsMissingChecksum = acceptsMissingChecksum }
    }

    /// The options in force.
    public let options: Options
    private var framer = NMEAFramer(reportsDateComments: true, deliversBinaryFrames: true)
    private var assembler = EpochAssembler()
    private var counts = NMEAStatistics()
    private var sawDateComment = false, sawDelayCookie = false

    /// Creates a decoder.
    public init(options: Options = .init()) {
        self.options = options
    }

    /// What the decoder has seen so far.
    public var statistics: NMEAStatistics {
        var s = counts
        s.framingErrors = framer.framingErrors
        s.fixes = assembler.fixes
        s.headings = assembler.headings
        return s
    }

    /// Feeds a chunk of bytes (any split), emitting each completed event in order.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, emit: (GNSSEvent) -> Void) {
        // The framer is moved out so that the line closure may mutate the rest of `self`.
        var framer = self.framer
        framer.append(bytes) { line in self.handle(line: line, emit: emit) }
        self.framer = framer
    }

    /// Flushes the epoch being assembled at the end of input (and a last line without
    /// a line end).
    public mutating func finish(emit: (GNSSEvent) -> Void) {
        var framer = self.framer
        framer.finish { line in self.handle(line: line, emit: emit) }
        self.framer = framer
        assembler.finish(emit: emit)
    }

    /// Decodes one framed line (`$…*hh`, no CR/LF) or binary frame.
    private mutating func handle(line: UnsafeRawBufferPointer, emit: (GNSSEvent) -> Void) {
        if line[0] == 0xB5 || line[0] == 0xBA {
            // A UBX or CASIC frame: gpsd reads its navigation solution too.
            counts.binaryFrames += 1
            if let message = GPSDBinaryMessage(frame: line) { assembler.binary(message, emit: emit) }
            return
        }
        if line[0] == UInt8(ascii: "#") {
            // `# Date: …` puts gpsd in its regression-test mode (see `EpochAssembler.timestamp`),
            // but gpsfake does not pass it on from a recording with a `# Delay-Cookie:`
            // (it re-splits the text after the header comments, gps/fake.py).
            if line[3] == UInt8(ascii: "a") { sawDateComment = true } else { sawDelayCookie = true }
            assembler.regressionMode = sawDateComment && !sawDelayCookie
            return
        }
        let payloadLength: Int
        switch NMEAChecksum.verify(line) {
        case .valid(let n):
            payloadLength = n
        case .missing(let n):
            guard options.acceptsMissingChecksum else {
                counts.missingChecksums += 1
                return
            }
            payloadLength = n
        case .mismatch:
            counts.badChecksums += 1
            return
        }
        counts.sentences += 1
        guard line[0] == UInt8(ascii: "$") else {
            counts.ignored += 1  // `!` encapsulation: AIS and the like
            return
        }
        let payload = UnsafeRawBufferPointer(rebasing: line[1..<(1 + payloadLength)])
        NMEAFields.withFields(of: payload) { f in
            var packet = GPSDPacket()
            if let sentence = NMEASentence.parse(fields: f, packet: &packet) {
                assembler.ingest(sentence, packet, emit: emit)
            } else {
                assembler.ignored(packet, emit: emit)
                counts.ignored += 1
            }
        }
    }
}
