/// VTG, track made good and ground speed.
public struct VTGSentence: Sendable, Equatable {
    /// Course over ground, degrees true.
    public var trackDegrees: Double?
    /// Course over ground, degrees magnetic.
    public var magneticTrackDegrees: Double?
    /// Speed over ground, knots.
    public var speedKnots: Double?
    /// FAA mode indicator (field 9), when present.
    public var faaMode: UInt8?

    init(_ f: NMEAFields) {
        trackDegrees = f.double(1)
        magneticTrackDegrees = f.double(3)
        speedKnots = f.double(5)
        faaMode = f.character(9)
    }

    /// Usable as gpsd uses it: true track and knots present, mode not `E`/`N`.
    var isUsable: Bool {
        trackDegrees != nil && speedKnots != nil
            && faaMode != UInt8(ascii: "E") && faaMode != UInt8(ascii: "N")
    }
}
