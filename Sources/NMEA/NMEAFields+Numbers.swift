/// Number, angle, time and date parsing straight from a field's bytes.
extension NMEAFields {
    /// Exact powers of ten for the mantissa/exponent conversion (all exact in `Double`).
    @usableFromInline
    static let powersOfTen: [Double] = [
        1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    /// A decimal number `[+-]digits[.digits]`; `nil` when empty or malformed.
    ///
    /// With up to 15 significant digits the result is the correctly rounded value
    /// (an exact integer divided by an exact power of ten), the same as `strtod`.
    public func double(_ i: Int) -> Double? {
        Self.parseDouble(self[i])
    }

    /// A decimal integer `[+-]digits`; `nil` when empty, malformed or too long.
    public func int(_ i: Int) -> Int? {
        let f = self[i]
        guard !f.isEmpty, f.count <= 18 else { return nil }
        var k = 0
        var negative = false
        if f[0] == 0x2D || f[0] == 0x2B { negative = f[0] == 0x2D; k = 1 }
        guard k < f.count else { return nil }
        var v = 0
        while k < f.count {
            let d = f[k] &- 0x30
            guard d < 10 else { return nil }
            v = v &* 10 &+ Int(d)
            k += 1
        }
        return negative ? -v : v
    }

    static func parseDouble(_ f: UnsafeRawBufferPointer) -> Double? {
        let n = f.count
        guard n > 0 else { return nil }
        var k = 0
        var negative = false
        if f[0] == 0x2D || f[0] == 0x2B { negative = f[0] == 0x2D; k = 1 }
        var mantissa: UInt64 = 0
        var digits = 0
        var fractionDigits = 0
        var seenPoint = false
        var significant = 0
        var droppedIntegerDigits = 0
        while k < n {
            let b = f[k]
            if b == 0x2E {
                guard !seenPoint else { return nil }
                seenPoint = true
            } else {
                let d = b &- 0x30
                guard d < 10 else { return nil }
                digits += 1
                if significant < 19 {
                    mantissa = mantissa &* 10 &+ UInt64(d)
                    if mantissa != 0 { significant += 1 }
                    if seenPoint { fractionDigits += 1 }
                } else if !seenPoint {
                    droppedIntegerDigits += 1
                }
            }
            k += 1
        }
        guard digits > 0 else { return nil }
        var value = Double(mantissa)
        if fractionDigits > 0 {
            value =
                fractionDigits < powersOfTen.count
                ? value / powersOfTen[fractionDigits]
                : value / pow10(fractionDigits)
        }
        if droppedIntegerDigits > 0 { value *= pow10(droppedIntegerDigits) }
        return negative ? -value : value
    }

    private static func pow10(_ e: Int) -> Double {
        var v = 1.0
        for _ in 0..<e { v *= 10 }
        return v
    }

    /// A latitude or longitude `dddmm.mmmm` with its hemisphere field (`N`/`S`, `E`/`W`),
    /// in degrees, signed; `nil` when either is empty or malformed or out of range.
    ///
    /// Computed as gpsd does: whole minutes in integer arithmetic, then the fractional
    /// minutes added, then scaled by 1/60, so results agree with gpsd bit for bit.
    public func angle(_ i: Int, hemisphere h: Int, isLatitude: Bool) -> Double? {
        let f = self[i]
        guard let hemi = character(h), !f.isEmpty else { return nil }
        var k = 0
        var whole = 0
        while k < f.count, f[k] != 0x2E {
            let d = f[k] &- 0x30
            guard d < 10, k < 6 else { return nil }
            whole = whole * 10 + Int(d)
            k += 1
        }
        guard k < f.count, k > 0 else { return nil }  // gpsd requires the decimal point
        guard let fraction = Self.parseDouble(UnsafeRawBufferPointer(rebasing: f[k...])) else { return nil }
        let degrees = whole / 100
        let minutes = Double(whole - degrees * 40) + fraction
        var value = minutes * (1.0 / 60.0)
        switch hemi {
        case UInt8(ascii: "N") where isLatitude, UInt8(ascii: "E") where !isLatitude: break
        case UInt8(ascii: "S") where isLatitude, UInt8(ascii: "W") where !isLatitude: value = -value
        default: return nil
        }
        guard value.isFinite, abs(value) <= (isLatitude ? 90 : 180) else { return nil }
        return value
    }

    /// A UTC time of day `hhmmss[.s…]` as milliseconds since midnight (fractions beyond
    /// the millisecond truncated); `nil` when empty or malformed.
    public func timeOfDay(_ i: Int) -> Int? {
        let f = self[i]
        guard f.count >= 6, let hh = Self.twoDigits(f, 0), let mm = Self.twoDigits(f, 2),
            let ss = Self.twoDigits(f, 4), hh < 24, mm < 60, ss <= 60
        else { return nil }
        var ms = 0
        if f.count > 6 {
            guard f[6] == 0x2E else { return nil }
            var scale = 100
            var k = 7
            while k < f.count {
                let d = f[k] &- 0x30
                guard d < 10 else { return nil }
                ms += Int(d) * scale
                scale /= 10
                k += 1
            }
        }
        return ((hh * 60 + mm) * 60 + ss) * 1000 + ms
    }

    /// An RMC date `ddmmyy`; the century as gpsd supplies it (years 69–99 are 1900s,
    /// 00–68 are 2000s), as the receiver gave it (gpsd's week-rollover rule for dates before
    /// 2017 is applied to the instant, by the decoder). `nil` when malformed.
    public func ddmmyy(_ i: Int) -> NMEADate? {
        let f = self[i]
        guard f.count == 6, let dd = Self.twoDigits(f, 0), let mo = Self.twoDigits(f, 2),
            let yy = Self.twoDigits(f, 4), (1...12).contains(mo), (1...31).contains(dd)
        else { return nil }
        return NMEADate(year: yy < 69 ? 2000 + yy : 1900 + yy, month: mo, day: dd)
    }

    @inline(__always)
    static func twoDigits(_ f: UnsafeRawBufferPointer, _ at: Int) -> Int? {
        let a = f[at] &- 0x30, b = f[at + 1] &- 0x30
        guard a < 10, b < 10 else { return nil }
        return Int(a) * 10 + Int(b)
    }
}
