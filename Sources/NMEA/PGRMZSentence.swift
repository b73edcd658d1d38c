/// Garmin's `$PGRMZ`, altitude and fix dimension: `$PGRMZ,93,f,3*21`.
///
/// gpsd's NMEA driver reads it (`processPGRMZ`): the altitude, in whole feet (`atoi`), is
/// taken as MSL; field 3 is the fix dimension 1 (none), 2 or 3.
public struct PGRMZSentence: Sendable, Equatable {
    /// Altitude above mean sea level, metres (whole feet × 0.3048), when given in feet.
    public var altitudeMSL: Double?
    /// Fix dimension 1, 2 or 3, when given.
    public var mode: Int?

    init(_ f: NMEAFields) {
        if f.character(2) == UInt8(ascii: "f"), !f.isEmpty(1) {
            // atoi: leading sign and digits, the rest ignored.
            let field = f[1]
            var k = 0, v = 0, negative = false
            if k < field.count, field[k] == UInt8(ascii: "-") || field[k] == UInt8(ascii: "+") {
                negative = field[k] == UInt8(ascii: "-")
                k += 1
            }
            while k < field.count, field[k] &- 0x30 < 10, k < 18 {
                v = v * 10 + Int(field[k] &- 0x30)
                k += 1
            }
            altitudeMSL = Double(negative ? -v : v) * 0.3048
        } else {
            altitudeMSL = nil
        }
        switch f.character(3) {
        case UInt8(ascii: "1"): mode = 1
        case UInt8(ascii: "2"): mode = 2
        case UInt8(ascii: "3"): mode = 3
        default: mode = nil
        }
    }
}
