import FleetProtocol
import FleetWatch
import GNSS

// fleetcast-bench watch: fleet-watch's ingest path without a broker. Pre-encoded contract
// payloads of N simulated vehicles on their topics are decoded into FleetEvents and folded into
// a FleetState; prints messages per second and the resident set before/after.
//
// Each round folds every message once into a fresh state, so that no message is a duplicate
// (duplicates take a shorter path). Options: --vehicles N (default 10000), --per-vehicle N
// messages per vehicle (default 20: 4 fixes then 1 heading, repeated), --rounds N (default 5).
#if canImport(Glibc)
import Glibc
#endif

func runFleetWatchBenchmark(arguments: [String]) async {
    func option(_ name: String, _ fallback: Int) -> Int {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]), v > 0 else {
            return fallback
        }
        return v
    }
    let vehicles = option("--vehicles", 10_000)
    let perVehicle = option("--per-vehicle", 20)
    let rounds = option("--rounds", 5)

    let rssStart = residentSetKiB()
    // Per vehicle: 1 Hz fixes and a heading after every 4th fix, seq shared per vehicle as the
    // agent numbers them, realistic values (cars around Paris), interleaved across vehicles.
    var corpus: [(topic: String, payload: [UInt8])] = []
    corpus.reserveCapacity(vehicles * perVehicle)
    let topics = FleetTopics.default
    let start = UTCTimestamp(year: 2026, month: 1, day: 2, hour: 8, minute: 0, second: 0)!.millisecondsSince1970
    var ids: [VehicleID] = []
    for v in 0..<vehicles {
        guard let id = VehicleID("veh-\(v)") else { continue }
        ids.append(id)
    }
    for step in 0..<perVehicle {
        for (v, id) in ids.enumerated() {
            let seq = UInt64(1000 + step)
            let t = UTCTimestamp(millisecondsSince1970: start + Int64(step) * 1000 + Int64(v % 1000))
            if step % 5 == 4 {
                let h = Heading(time: t, trueHeading: Double((v * 37 + step * 3) % 3600) / 10, source: .ths)
                corpus.append((topics.heading(id), FleetPayload.encode(h, vehicle: id.rawValue, seq: seq)))
            } else {
                let fix = Fix(
                    time: t, latitude: 48.8 + Double(v % 997) * 1e-4 + Double(step) * 1.3e-5,
                    longitude: 2.3 + Double(v % 991) * 1e-4 + Double(step) * 2.1e-5,
                    altitudeHAE: 81.234, altitudeMSL: 35.012, speed: 13.889, track: 123.4567,
                    climb: 0.012, mode: .threeD, quality: .dgps, satellitesUsed: 12, hdop: 0.78,
                    eph: 1.912, epv: 3.104)
                corpus.append((topics.fix(id), FleetPayload.encode(fix, vehicle: id.rawValue, seq: seq)))
            }
        }
    }
    let payloadBytes = corpus.reduce(0) { $0 + $1.payload.count }
    let rssCorpus = residentSetKiB()
    print("watch: \(ids.count) vehicles, \(corpus.count) distinct pre-encoded messages (mean \(payloadBytes / max(1, corpus.count)) bytes)")

    let decoder = FleetMessageDecoder(topics: topics)
    let clock = ContinuousClock()
    var best = 0.0
    var state = FleetState()
    var rssAfter = 0
    for round in 1...rounds {
        state = FleetState()
        var malformed = 0
        let now = UTCTimestamp(millisecondsSince1970: start + 60_000)
        let elapsed = clock.measure {
            for m in corpus {
                decoder.decode(topic: m.topic, payload: m.payload) { event in
                    if case .malformed = event { malformed += 1 }
                    state.apply(event, at: now)
                }
            }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let messages = corpus.count
        let rate = Double(messages) / seconds
        best = max(best, rate)
        rssAfter = residentSetKiB()
        print(
            "watch: round \(round): \(messages) messages in \(format(seconds, 3)) s = \(Int(rate)) msgs/s (\(format(seconds / Double(messages) * 1e9, 0)) ns/msg), \(state.count) vehicles, \(malformed) malformed"
        )
    }
    print("watch: best \(Int(best)) msgs/s decoded and folded")
    print(
        "watch: resident set: start \(rssStart) KiB, with corpus \(rssCorpus) KiB, after ingest \(rssAfter) KiB (state of \(state.count) vehicles ≈ \(rssAfter - rssCorpus) KiB, \((rssAfter - rssCorpus) * 1024 / max(1, state.count)) bytes/vehicle)"
    )
    measureWidePayloads(decoder)
}

/// A hostile vehicle's payloads: 200 of nearly 64 KiB made of thousands of distinct keys,
/// against 200 ordinary ones of the same size (a fix with one long unknown string); the CPU
/// each set costs fleet-watch's decoder, and the ratio.
private func measureWidePayloads(_ decoder: FleetMessageDecoder) {
    let size = FleetPayload.maximumPayloadBytes - 64
    var wide = Array(#"{"v":1,"time":"2026-01-02T08:00:00.000Z","lat":48.8,"lon":2.3,"mode":3"#.utf8)
    var key = 0
    while wide.count < size - 16 {
        wide += Array(",\"k\(key)\":1".utf8)
        key += 1
    }
    wide += Array("}".utf8)
    var ordinary = Array(#"{"v":1,"time":"2026-01-02T08:00:00.000Z","lat":48.8,"lon":2.3,"mode":3,"note":""#.utf8)
    ordinary += Array(repeating: UInt8(ascii: "x"), count: max(0, wide.count - ordinary.count - 2))
    ordinary += Array("\"}".utf8)
    func cpu(_ payload: [UInt8]) -> Double {
        var events = 0
        let before = processCPUSeconds()
        for _ in 0..<200 { decoder.decode(topic: "fleet/van-1/fix", payload: payload) { _ in events += 1 } }
        return processCPUSeconds() - before
    }
    _ = cpu(ordinary)
    let ordinarySeconds = cpu(ordinary)
    let wideSeconds = cpu(wide)
    print(
        "watch: 200 wide payloads (\(wide.count) bytes, \(key + 5) keys) cost \(format(wideSeconds * 1000, 2)) ms of CPU, 200 ordinary ones of \(ordinary.count) bytes \(format(ordinarySeconds * 1000, 2)) ms: \(format(wideSeconds / max(ordinarySeconds, 1e-9), 2))x"
    )
}

/// The CPU time this process has used (user and system), in seconds.
private func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
}

private func format(_ value: Double, _ decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let r = (value * scale).rounded() / scale
    return decimals == 0 ? String(Int(r)) : String(r)
}

/// VmRSS of this process from /proc/self/status, in KiB (0 where unavailable).
private func residentSetKiB() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") {
            return Int(text.dropFirst(6).filter { $0.isNumber }) ?? 0
        }
    }
    return 0
}
