/// GLL, geographic position: position, time, status, FAA mode.
public struct GLLSentence: Sendable, Equatable {
    /// Position, when given and well-formed.
    public var position: NMEAPosition?
    /// UTC time of day, milliseconds since midnight.
    public var timeOfDay: Int?
    /// Status `A` valid, `V` void.
    public var status: UInt8?
    /// FAA mode indicator, when the sentence has the field.
    public var faaMode: UInt8?

    init(_ f: NMEAFields) {
        position = NMEAPosition(f, at: 1)
        timeOfDay = f.timeOfDay(5)
        status = f.character(6)
        faaMode = f.count >= 8 ? f.character(7) : nil
    }
}
