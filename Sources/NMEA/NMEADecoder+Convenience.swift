import GNSS

extension NMEADecoder {
    /// Decodes a whole buffer, including the end-of-input flush, and returns the events.
    public mutating func decode(_ bytes: [UInt8]) -> [GNSSEvent] {
        var events: [GNSSEvent] = []
        bytes.withUnsafeBytes { raw in decode(raw) { events.append($0) } }
        finish { events.append($0) }
        return events
    }

    /// Decodes a byte stream pulled through `read` in chunks of `chunkSize` bytes into one
    /// reused buffer, until `read` returns 0, then flushes; the loop of a `decode` command.
    ///
    /// - Parameters:
    ///   - read: fills the buffer it is given and returns the number of bytes, 0 at the end;
    ///     errors it throws end the loop and are rethrown (the events before are emitted).
    ///   - chunkSize: bytes per read, 64 KiB by default.
    public mutating func decodeStream(
        chunkSize: Int = 65_536,
        read: (UnsafeMutableRawBufferPointer) throws -> Int,
        emit: (GNSSEvent) -> Void
    ) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, chunkSize), alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = try read(buffer)
            if n <= 0 { break }
            decode(UnsafeRawBufferPointer(rebasing: buffer[0..<min(n, buffer.count)]), emit: emit)
        }
        finish(emit: emit)
    }
}
