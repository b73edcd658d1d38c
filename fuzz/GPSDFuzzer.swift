// libFuzzer harness: gpsd JSON lines → GPSDMessageDecoder events. Compiled together with
// Sources/GNSSSources/GPSDMessageDecoder.swift and JSONValue.swift (pure; the rest of
// GNSSSources is NIO I/O), so internal `JSONValue` is reachable here.
import FleetProtocol
import GNSS

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGPSD(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)

    var decoder = GPSDMessageDecoder()
    var events: [GNSSEvent] = []
    for line in lines {
        let before = decoder.statistics
        decoder.decode(line: line) { events.append($0) }
        let after = decoder.statistics
        let counted = (after.objects - before.objects) + (after.malformed - before.malformed) + (after.ignored - before.ignored)
        check(counted == 1 && after.objects >= 0, "a line not counted exactly once: \(before) → \(after)")
    }

    checkEvents(events, fixSeq: 7, headingSeq: 8)
    return 0
}
