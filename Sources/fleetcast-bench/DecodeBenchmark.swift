import FleetProtocol
import Foundation
import GNSS
import NMEA

/// `fleetcast-bench decode [--fixtures DIR] [--megabytes N] [--runs N]`
///
/// Builds a stream of at least N MB (default 32) by repeating the recordings of DIR
/// (default `Tests/NMEATests/Fixtures/gpsd`) into a temporary file, then times, best of
/// `--runs` (default 3): our decoder reading it in 64 KiB chunks and encoding every
/// event as contract JSON into a reused buffer; and `gpsdecode -j < file > /dev/null`
/// (gpsd's own decoder, JSON out) when installed. Prints sentences/s for both and the ratio.
func runDecodeBenchmark(arguments: [String]) async {
    let folder = stringOption(arguments, "--fixtures", "Tests/NMEATests/Fixtures/gpsd")
    let megabytes = intOption(arguments, "--megabytes", 32)
    let runs = intOption(arguments, "--runs", 3)

    let fm = FileManager.default
    let names = ((try? fm.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    var corpus = Data()
    for name in names {
        if let data = fm.contents(atPath: folder + "/" + name) {
            corpus.append(data)
            if corpus.last != 0x0A { corpus.append(0x0A) }
        }
    }
    guard !corpus.isEmpty else {
        print("decode: no *.log recordings in \(folder) (use --fixtures DIR)")
        return
    }
    let path = fm.temporaryDirectory.appendingPathComponent("fleetcast-decode-bench-\(getpid()).nmea").path
    guard fm.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
        print("decode: cannot create \(path)")
        return
    }
    defer { try? fm.removeItem(atPath: path) }
    var written = 0
    while written < megabytes << 20 {
        handle.write(corpus)
        written += corpus.count
    }
    try? handle.close()

    var sentences = 0
    var events = 0
    var ours = Duration.seconds(1_000_000)
    for _ in 0..<runs {
        guard let result = decodeFile(path) else {
            print("decode: cannot read \(path)")
            return
        }
        ours = min(ours, result.elapsed)
        sentences = result.sentences
        events = result.events
    }
    let oursSeconds = seconds(ours)
    print("decode: \(names.count) recordings repeated to \(written >> 20) MiB, \(sentences) sentences, \(events) events")
    print("decode: fleetcast  \(rate(sentences, oursSeconds)) sentences/s  (best of \(runs): \(format(oursSeconds)) s)")

    let gpsdecode = ["/usr/bin/gpsdecode", "/usr/local/bin/gpsdecode"].first { fm.isExecutableFile(atPath: $0) }
    guard let gpsdecode else {
        print("decode: gpsdecode not installed; comparison skipped")
        return
    }
    var theirs = Duration.seconds(1_000_000)
    for _ in 0..<runs {
        guard let elapsed = timeGPSDecode(gpsdecode, input: path) else {
            print("decode: gpsdecode failed to run; comparison skipped")
            return
        }
        theirs = min(theirs, elapsed)
    }
    let theirSeconds = seconds(theirs)
    print("decode: gpsdecode  \(rate(sentences, theirSeconds)) sentences/s  (best of \(runs): \(format(theirSeconds)) s)")
    print("decode: ratio \(format(theirSeconds / oursSeconds))x gpsdecode (goal >= 10x)")
}

private func decodeFile(_ path: String) -> (elapsed: Duration, sentences: Int, events: Int)? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var decoder = NMEADecoder()
    var out: [UInt8] = []
    out.reserveCapacity(1 << 17)
    var events = 0
    let clock = ContinuousClock()
    let start = clock.now
    let emit: (GNSSEvent) -> Void = { event in
        switch event {
        case .fix(let fix): out.append(contentsOf: FleetPayload.encode(fix, includeKind: true))
        case .heading(let heading): out.append(contentsOf: FleetPayload.encode(heading, includeKind: true))
        case .state: return
        }
        out.append(0x0A)
        events += 1
        if out.count >= 1 << 16 { out.removeAll(keepingCapacity: true) }
    }
    do {
        try decoder.decodeStream(
            read: { buffer in
                let n = read(fd, buffer.baseAddress, buffer.count)
                if n < 0 { throw POSIXError(.EIO) }
                return n
            }, emit: emit)
    } catch {
        return nil
    }
    return (clock.now - start, decoder.statistics.sentences, events)
}

private func timeGPSDecode(_ executable: String, input: String) -> Duration? {
    guard let stdin = FileHandle(forReadingAtPath: input) else { return nil }
    defer { try? stdin.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = ["-j"]
    process.standardInput = stdin
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    let clock = ContinuousClock()
    let start = clock.now
    do { try process.run() } catch { return nil }
    process.waitUntilExit()
    return clock.now - start
}

private func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18
}

private func rate(_ count: Int, _ seconds: Double) -> String {
    seconds > 0 ? format(Double(count) / seconds, decimals: 0) : "∞"
}

private func format(_ value: Double, decimals: Int = 3) -> String {
    String(format: "%.\(decimals)f", value)
}
