/// A UTC instant with millisecond resolution, as a GNSS receiver reports it.
///
/// Stored as whole milliseconds since 1970-01-01T00:00:00Z (no leap seconds, like POSIX
/// time), so that a receiver's `hhmmss.sss` survives exactly: no binary floating point
/// sits between the sentence and the ISO 8601 text of the contract.
public struct UTCTimestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since the Unix epoch, UTC.
    public let millisecondsSince1970: Int64

    /// Wraps a count of milliseconds since 1970-01-01T00:00:00Z.
    public init(millisecondsSince1970: Int64) {
        self.millisecondsSince1970 = millisecondsSince1970
    }

    /// A calendar date and time of day in UTC; `nil` when any field is out of range.
    ///
    /// - Parameters:
    ///   - year: full Gregorian year, 1970...9999.
    ///   - millisecond: 0...999.
    ///   - second: 0...60 (60 only for a leap second, folded into the next minute as POSIX does).
    public init?(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int = 0) {
        guard (1970...9999).contains(year), (1...12).contains(month),
            (1...Self.daysIn(month: month, year: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
            (0...999).contains(millisecond)
        else { return nil }
        let days = Int64(Self.daysFromCivil(year: year, month: month, day: day))
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        self.millisecondsSince1970 = seconds * 1000 + Int64(millisecond)
    }

    /// Seconds since the Unix epoch, as a `Double` (for arithmetic, not for display).
    public var secondsSince1970: Double { Double(millisecondsSince1970) / 1000 }

    /// The calendar fields of this instant in UTC.
    public var components: (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int) {
        let ms = millisecondsSince1970
        let days = Int(ms >= 0 ? ms / 86_400_000 : (ms - 86_399_999) / 86_400_000)
        let msOfDay = Int(ms - Int64(days) * 86_400_000)
        let (y, m, d) = Self.civilFromDays(days)
        return (y, m, d, msOfDay / 3_600_000, msOfDay / 60_000 % 60, msOfDay / 1000 % 60, msOfDay % 1000)
    }

    /// ISO 8601 in UTC with milliseconds, the form of the contract: `2020-03-18T13:28:19.600Z`.
    public var iso8601: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendISO8601(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``iso8601`` as ASCII bytes, without building an intermediate `String`.
    public func appendISO8601(to out: inout [UInt8]) {
        let c = components
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(ascii: "0") &+ UInt8(v / divisor))
                v %= divisor
                divisor /= 10
            }
        }
        digits(c.year, 4); out.append(UInt8(ascii: "-"))
        digits(c.month, 2); out.append(UInt8(ascii: "-"))
        digits(c.day, 2); out.append(UInt8(ascii: "T"))
        digits(c.hour, 2); out.append(UInt8(ascii: ":"))
        digits(c.minute, 2); out.append(UInt8(ascii: ":"))
        digits(c.second, 2); out.append(UInt8(ascii: "."))
        digits(c.millisecond, 3); out.append(UInt8(ascii: "Z"))
    }

    /// Parses the contract's ISO 8601 form (`YYYY-MM-DDTHH:MM:SS[.fff…]Z`); `nil` otherwise.
    /// Fractions beyond milliseconds are truncated.
    public init?(iso8601 text: some StringProtocol) {
        let u = Array(text.utf8)
        guard u.count >= 20, u.last == UInt8(ascii: "Z"),
            u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-"), u[10] == UInt8(ascii: "T"),
            u[13] == UInt8(ascii: ":"), u[16] == UInt8(ascii: ":")
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var v = 0
            for i in range {
                let d = u[i] &- UInt8(ascii: "0")
                guard d < 10 else { return nil }
                v = v * 10 + Int(d)
            }
            return v
        }
        var millisecond = 0
        if u.count > 20 {
            guard u[19] == UInt8(ascii: ".") else { return nil }
            let fraction = 20..<(u.count - 1)
            // Digits only; not accumulated into one number, which would overflow past 18 digits.
            guard !fraction.isEmpty, fraction.allSatisfy({ u[$0] &- UInt8(ascii: "0") < 10 }) else { return nil }
            var scale = 100
            for i in fraction where scale > 0 {
                millisecond += Int(u[i] - UInt8(ascii: "0")) * scale
                scale /= 10
            }
        } else if u.count != 20 {
            return nil
        }
        guard let y = number(0..<4), let mo = number(5..<7), let d = number(8..<10),
            let h = number(11..<13), let mi = number(14..<16), let s = number(17..<19)
        else { return nil }
        self.init(year: y, month: mo, day: d, hour: h, minute: mi, second: s, millisecond: millisecond)
    }

    public var description: String { iso8601 }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    /// Days in a month of the proleptic Gregorian calendar.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days (public domain algorithms).
    /// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (not checked: a 31
    /// February is 3 March).
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Year, month (1–12) and day (1–31) of the day `days` days after 1970-01-01.
    public static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }
}
