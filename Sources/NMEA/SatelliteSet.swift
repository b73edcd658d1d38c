/// A small fixed-size set of satellites (no heap), keyed by constellation and number.
public struct SatelliteSet: Sendable, Equatable {
    private var words:
        (
            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
        ) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    /// An empty set.
    public init() {}

    /// Adds a satellite. `system` is the NMEA 4.10 system id (0 unknown/legacy numbering,
    /// 1 GPS … 6 NavIC); legacy numbers (1...600) are kept as they are.
    public mutating func insert(system: Int, number: Int) {
        let key = system >= 2 && number <= 63 ? 600 + (system - 2) * 64 + number : min(number, 599)
        withUnsafeMutableBytes(of: &words) { raw in
            let w = raw.bindMemory(to: UInt64.self)
            w[key >> 6] |= 1 << UInt64(key & 63)
        }
    }

    /// Adds every member of another set.
    public mutating func formUnion(_ other: SatelliteSet) {
        var o = other.words
        withUnsafeMutableBytes(of: &words) { raw in
            withUnsafeBytes(of: &o) { oraw in
                let w = raw.bindMemory(to: UInt64.self)
                for i in 0..<16 { w[i] |= oraw.load(fromByteOffset: i * 8, as: UInt64.self) }
            }
        }
    }

    /// How many satellites are in the set.
    public var count: Int {
        var o = words
        return withUnsafeBytes(of: &o) { raw in
            (0..<16).reduce(0) { $0 + raw.load(fromByteOffset: $1 * 8, as: UInt64.self).nonzeroBitCount }
        }
    }

    /// Whether two sets hold the same satellites.
    public static func == (a: Self, b: Self) -> Bool {
        var x = a.words, y = b.words
        return withUnsafeBytes(of: &x) { xr in withUnsafeBytes(of: &y) { yr in xr.elementsEqual(yr) } }
    }
}
