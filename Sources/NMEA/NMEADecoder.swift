import GNSS

/// API placeholder; the real decoder replaces this file.
public struct NMEADecoder: Sendable {
    /// Decoder options.
    public struct Options: Sendable {
        /// Accept sentences that carry no `*hh` checksum (receivers that never send one).
        public var acceptsMissingChecksum: Bool = false
        public init(acceptsMissingChecksum: Bool = false) { self.acceptsMissingChecksum = acceptsMissingChecksum }
    }
    public private(set) var statistics = NMEAStatistics()
    public init(options: Options = .init()) {}
    /// Feeds a chunk of bytes (any split), emitting each completed event in order.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer, emit: (GNSSEvent) -> Void) {}
    /// Flushes the epoch being assembled at the end of input.
    public mutating func finish(emit: (GNSSEvent) -> Void) {}
}

/// Counters of what the decoder saw.
public struct NMEAStatistics: Sendable, Equatable {
    public var sentences = 0, fixes = 0, headings = 0, badChecksums = 0, ignored = 0, framingErrors = 0
    public init() {}
}
