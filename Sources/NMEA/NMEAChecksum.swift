/// The `*hh` checksum of an NMEA 0183 sentence: XOR of the bytes between the start
/// character and `*`, as two hexadecimal digits (either case).
public enum NMEAChecksum {
    /// What a line's checksum says.
    public enum Verdict: Sendable, Equatable {
        /// The checksum matches; the payload (between the start character and `*`) has this length.
        case valid(payloadLength: Int)
        /// The line carries no `*hh`; the payload is everything after the start character.
        case missing(payloadLength: Int)
        /// The checksum is present but wrong or malformed.
        case mismatch
    }

    /// Checks a framed line (`$…*hh`, no CR/LF).
    public static func verify(_ line: UnsafeRawBufferPointer) -> Verdict {
        let n = line.count
        guard n >= 1 else { return .mismatch }
        var sum: UInt8 = 0
        var i = 1
        while i < n {
            let b = line[i]
            if b == 0x2A {  // *
                // Exactly two hex digits must follow.
                guard n - i == 3, let hi = hexValue(line[i + 1]), let lo = hexValue(line[i + 2]) else {
                    return .mismatch
                }
                return (hi << 4 | lo) == sum ? .valid(payloadLength: i - 1) : .mismatch
            }
            sum ^= b
            i += 1
        }
        return .missing(payloadLength: n - 1)
    }

    /// The checksum of a payload (the bytes between the start character and `*`).
    public static func compute(_ payload: some Sequence<UInt8>) -> UInt8 {
        payload.reduce(0, ^)
    }

    @inline(__always)
    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b &- 0x30
        case 0x41...0x46: return b &- 0x41 &+ 10
        case 0x61...0x66: return b &- 0x61 &+ 10
        default: return nil
        }
    }
}
