// libFuzzer harness: NMEA 0183 bytes → NMEAFramer lines and NMEADecoder events.
import FleetProtocol
import GNSS
import NMEA

/// The framer's lines for `bytes` fed in chunks that end at `cuts`, with its error count.
func frame(_ bytes: UnsafeRawBufferPointer, cuts: [Int]) -> (lines: [[UInt8]], errors: Int) {
    // As the decoder frames: gpsd's comment markers, gpsfake's delay cookie, binary frames.
    var framer = NMEAFramer(reportsDateComments: true, deliversBinaryFrames: true)
    var lines: [[UInt8]] = []
    var from = 0
    for cut in cuts + [bytes.count] where cut >= from {
        framer.append(UnsafeRawBufferPointer(rebasing: bytes[from..<cut])) { lines.append(Array($0)) }
        from = cut
    }
    framer.finish { lines.append(Array($0)) }
    return (lines, framer.framingErrors)
}

/// The decoder's events and statistics for `bytes` fed in chunks that end at `cuts`.
func decode(_ bytes: UnsafeRawBufferPointer, cuts: [Int], options: NMEADecoder.Options) -> ([GNSSEvent], NMEAStatistics) {
    var decoder = NMEADecoder(options: options)
    var events: [GNSSEvent] = []
    var from = 0
    for cut in cuts + [bytes.count] where cut >= from {
        decoder.decode(UnsafeRawBufferPointer(rebasing: bytes[from..<cut])) { events.append($0) }
        from = cut
    }
    decoder.finish { events.append($0) }
    return (events, decoder.statistics)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNMEA(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    // Chunk boundaries that depend on the input (a cheap hash): for one input in four every
    // byte on its own, otherwise chunks of 1...64 bytes.
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01B3 }
    var cuts: [Int] = []
    if hash & 3 == 0 {
        cuts = size > 0 ? Array(1..<size) : []
    } else {
        var at = 0
        while size > 0 {
            hash = hash &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            at += Int(hash >> 58) + 1
            if at >= size { break }
            cuts.append(at)
        }
    }

    // Framer: the same lines whatever the chunking; each line a sentence-shaped run of ASCII,
    // a comment marker, or a whole binary frame with a good checksum.
    let whole = frame(bytes, cuts: [])
    for line in whole.lines {
        if line.first == 0xB5 || line.first == 0xBA {
            check(line.count <= NMEAFramer.maximumBinaryPayload + 10, "a binary frame longer than the maximum")
            check(NMEAFramer.binaryChecksumIsGood(line), "a binary frame with a bad checksum")
            continue
        }
        if line.first == UInt8(ascii: "#") {
            check(line == Array("# Date: ".utf8) || line == Array("# Delay-Cookie:".utf8), "an unexpected comment line")
            continue
        }
        check(line.first == UInt8(ascii: "$") || line.first == UInt8(ascii: "!"), "a line not starting with $ or !")
        check(line.count <= NMEAFramer.maximumSentenceLength, "a line longer than the maximum: \(line.count)")
        check(line.dropFirst().allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: "$") && $0 != UInt8(ascii: "!") },
              "a line with a control, non-ASCII or start byte inside")
    }
    let chunked = frame(bytes, cuts: cuts)
    check(chunked.lines == whole.lines && chunked.errors == whole.errors, "framer: chunked input gives other lines")

    // Decoder: the same events and counts whatever the chunking, with either option.
    for options in [NMEADecoder.Options(), NMEADecoder.Options(acceptsMissingChecksum: true)] {
        let (events, stats) = decode(bytes, cuts: [], options: options)
        let (chunkedEvents, chunkedStats) = decode(bytes, cuts: cuts, options: options)
        check(chunkedEvents == events && chunkedStats == stats, "decoder: chunked input gives other events")
        check(stats.framingErrors == whole.errors, "decoder and framer disagree on framing errors")

        checkEvents(events, fixSeq: 41, headingSeq: 42)
    }
    return 0
}
