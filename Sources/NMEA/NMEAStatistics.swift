/// Counters of what an ``NMEADecoder`` saw.
public struct NMEAStatistics: Sendable, Equatable {
    /// Sentences framed with a valid checksum (or none, when that is accepted),
    /// including the ignored ones.
    public var sentences = 0
    /// Fixes emitted (a corrected fix for the same cycle counts again).
    public var fixes = 0
    /// Headings emitted.
    public var headings = 0
    /// Sentences dropped for a wrong or malformed checksum.
    public var badChecksums = 0
    /// Sentences dropped because they carry no checksum and the options require one.
    public var missingChecksums = 0
    /// Valid sentences not used: proprietary (`$P…`), unknown types, `!` AIS, heading
    /// sentences without a usable value.
    public var ignored = 0
    /// UBX and CASIC binary frames with a good checksum (the receiver's binary output that
    /// gpsd reads besides NMEA; see `NMEAFramer`).
    public var binaryFrames = 0
    /// Lines dropped by the framer: truncated, over-long, or broken by binary bytes.
    public var framingErrors = 0

    /// All counters zero.
    public init() {}
}
