/// The comma-separated fields of one sentence payload, as byte ranges into the line:
/// no copies, no `String`s. Field 0 is the address (`GPRMC`); a field past the end reads
/// as empty, as gpsd treats it.
///
/// The storage for the field offsets is lent by the caller (see ``withFields(of:_:)``),
/// so tokenizing a sentence allocates nothing on the heap.
public struct NMEAFields {
    /// The payload: the bytes between the start character and `*`.
    public let payload: UnsafeRawBufferPointer
    /// `starts[i]` is the offset of field `i`; `starts[count]` is one past the end + 1.
    private let starts: UnsafeMutableBufferPointer<Int32>
    /// Number of fields (at least 1).
    public let count: Int

    /// The most fields kept; later ones are dropped (gpsd keeps 100 as well).
    public static let maximumFields = 100

    /// Tokenizes `payload` into fields, with offset storage on the stack, and calls `body`.
    /// The fields (and the payload they point into) are valid only inside `body`.
    public static func withFields<R>(of payload: UnsafeRawBufferPointer, _ body: (NMEAFields) -> R) -> R {
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: maximumFields + 1) { starts in
            body(NMEAFields(payload: payload, starts: starts))
        }
    }

    private init(payload: UnsafeRawBufferPointer, starts: UnsafeMutableBufferPointer<Int32>) {
        self.payload = payload
        self.starts = starts
        var n = 0
        starts[0] = 0
        let end = payload.count
        var i = 0
        while i < end {
            if payload[i] == 0x2C {  // ,
                n += 1
                if n == Self.maximumFields { break }
                starts[n] = Int32(i + 1)
            }
            i += 1
        }
        if n < Self.maximumFields {
            n += 1
            starts[n] = Int32(end + 1)
        } else {
            starts[n] = Int32(i + 1)
        }
        self.count = n
    }

    /// The byte range of field `i` within ``payload`` (empty past the end).
    @inline(__always)
    public func range(_ i: Int) -> Range<Int> {
        guard i >= 0, i < count else { return payload.count..<payload.count }
        return Int(starts[i])..<(Int(starts[i + 1]) - 1)
    }

    /// The bytes of field `i`.
    @inline(__always)
    public subscript(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: payload[range(i)])
    }

    /// Whether field `i` is empty or absent.
    @inline(__always)
    public func isEmpty(_ i: Int) -> Bool { range(i).isEmpty }

    /// The first byte of field `i`, or `nil` when empty.
    @inline(__always)
    public func character(_ i: Int) -> UInt8? {
        let r = range(i)
        return r.isEmpty ? nil : payload[r.lowerBound]
    }

    /// Whether field `i` is exactly the ASCII text `text`.
    public func field(_ i: Int, equals text: StaticString) -> Bool {
        let f = self[i]
        guard f.count == text.utf8CodeUnitCount else { return false }
        return text.withUTF8Buffer { t in
            for k in 0..<f.count where f[k] != t[k] { return false }
            return true
        }
    }
}
