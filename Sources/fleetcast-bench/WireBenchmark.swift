import FleetProtocol
import FleetcastTestSupport
import Foundation

/// `fleetcast-bench wire [--seconds S] [--agent PATH] [--runs every,interval30,moving,parked,batch60]`
///
/// What the agent's traffic costs on a vehicle's metered link, counted on the wire: the real
/// binary publishing over TLS to a real mosquitto, every IP packet of its broker connection
/// captured by `tcpdump` on the loopback interface (both directions; IP and TCP headers, the TLS
/// handshake and records, MQTT packets and acknowledgements, keep-alive pings). Four runs of S
/// seconds each (default 300), with the simulated receiver at 1 Hz and otherwise the agent's
/// defaults: `every` (moving, every fix published: `report.everyFix`), `interval30` (moving, one
/// fix per 30 s: `report.minInterval` and `maxInterval` 30, no other rule), `moving` and `parked`
/// (the default reporting policy, driving at 12 m/s and standing still), and `batch60` (every
/// fix, moving, gathered into one message a minute: `uplink.batch` 60). A plain
/// second listener of the same broker lets a subscriber count the fixes without being counted.
///
/// Prints per run: bytes on the wire (sent, received), of which the start (TCP and TLS
/// handshakes, CONNECT, the online status, the first fix: everything until 1 s after the
/// subscriber got that fix) and the stop (from SIGTERM: the offline status, DISCONNECT, TLS
/// close and TCP FIN), fixes published, bytes per fix (overall, and between start and stop per
/// fix that came in between), and a 30-day month at the pace in between, beside a Teltonika
/// Codec 8 record (30 B, plus 15 B of framing per packet) and an OwnTracks JSON location (about
/// 220 B). The month leaves the start out: a vehicle connects once, not once per run. Needs
/// root for the capture (tcpdump from Debian's package of that name).
func runWireBenchmark(arguments: [String]) async {
    let seconds = intOption(arguments, "--seconds", 300)
    let agent = agentExecutable(arguments)
    let runs = stringOption(arguments, "--runs", "every,interval30,moving,parked,batch60").split(separator: ",").map(String.init)
    guard FileManager.default.isExecutableFile(atPath: agent) else {
        print("wire: no fleetcast-agent at \(agent) (build it next to the bench, or pass --agent PATH)")
        return
    }
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tcpdump") else {
        print("wire: needs /usr/bin/tcpdump (apt-get install tcpdump) and root for the capture")
        return
    }
    print("wire: agent \(agent), \(seconds) s per run, TLS, 1 Hz receiver; load average \(loadAverage())")
    for run in runs {
        guard let scenario = WireScenario(rawValue: run) else {
            print("wire: unknown run \(run) (every, interval30, moving, parked, batch60)")
            continue
        }
        do {
            let result = try await measureWire(agent: agent, scenario: scenario, seconds: seconds)
            let total = result.sent + result.received
            let perFix = result.fixes > 0 ? Double(total) / Double(result.fixes) : 0
            let after = result.steady.bytes
            let steady = result.fixesAfterStart > 0 ? "\(fixed(Double(after) / Double(result.fixesAfterStart), 1)) B" : "-"
            // A month of the steady state: the connection is made once, not every run's length.
            let month = Double(after) / max(1, result.steady.seconds) * 30 * 86_400
            print(
                """
                wire: \(scenario.label): \(total) B on the wire in \(seconds) s (sent \(result.sent), received \(result.received); \
                start \(result.start.bytes) in its first \(fixed(result.start.seconds, 1)) s, stop \(result.stop.bytes)), \(result.packets) packets, \
                \(result.fixes) fixes: \(fixed(perFix, 1)) B per fix; between start and stop \(after) B in \(fixed(result.steady.seconds, 1)) s, \
                \(steady) per fix of the \(result.fixesAfterStart) after it, \(fixed(month / 1_000_000, 1)) MB per 30 days at this pace
                """)
        } catch {
            print("wire: \(scenario.label) failed: \(error)")
        }
    }
    print("wire: for comparison, a Teltonika Codec 8 record is 30 B (+15 B framing per packet), an OwnTracks location ~220 B")
}

private enum WireScenario: String {
    case every, interval30, moving, parked, batch60

    var label: String {
        switch self {
        case .every: "every fix at 1 Hz, moving (report.everyFix)"
        case .batch60: "every fix at 1 Hz, moving, batched every 60 s (uplink.batch 60)"
        case .interval30: "one fix per 30 s, moving"
        case .moving: "moving, default policy"
        case .parked: "parked, default policy"
        }
    }

    var source: String {
        switch self {
        case .every, .interval30, .moving, .batch60: "sim:?rate=1&speed=12"
        case .parked: "sim:?rate=1&speed=0"
        }
    }

    var environment: [String: String] {
        switch self {
        case .every: agentEveryFixEnvironment
        case .batch60: agentEveryFixEnvironment.merging(["FLEETCAST_UPLINK_BATCH": "60"]) { $1 }
        case .interval30:
            [
                "FLEETCAST_REPORT_MIN_INTERVAL": "30", "FLEETCAST_REPORT_MAX_INTERVAL": "30", "FLEETCAST_REPORT_MIN_DISTANCE": "off",
                "FLEETCAST_REPORT_MIN_HEADING_CHANGE": "off",
            ]
        case .moving, .parked: [:]
        }
    }
}

/// What one run cost on the wire: bytes of IP packets of the broker connection, both directions.
private struct WireCount {
    /// A part of the run: its bytes and how long it lasted (seconds).
    struct Part {
        var bytes = 0
        var seconds = 0.0
    }
    var sent = 0, received = 0, packets = 0
    /// Until 1 s after the first fix reached the subscriber.
    var start = Part()
    /// From the end of the start to SIGTERM: what a connected vehicle costs.
    var steady = Part()
    /// From SIGTERM on.
    var stop = Part()
    /// Fixes that reached the subscriber: all of them, and those after the start.
    var fixes = 0, fixesAfterStart = 0
}

private func measureWire(agent: String, scenario: WireScenario, seconds: Int) async throws -> WireCount {
    let directory = try makeTemporaryDirectory(prefix: "fleetcast-bench-wire")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let countingPort = try FreePort.next()
    let broker = try await TestBroker.start(.init(tls: true, extraConfiguration: ["listener \(countingPort) 127.0.0.1"]))
    defer { Task { await broker.shutdown() } }
    guard let certificates = broker.certificates else {
        throw TestSupportError.processFailed("mosquitto", status: -1, output: "started without its TLS certificates")
    }

    let subscriber = try TestProcess(
        "/usr/bin/mosquitto_sub",
        ["-h", "127.0.0.1", "-p", "\(countingPort)", "-t", "fleet/+/fix", "-t", "fleet/+/batch", "-q", "1", "-F", "%U %t %x"],
        directory: directory, name: "subscriber")
    let capture = "\(directory)/wire.pcap"
    let tcpdump = try TestProcess(
        "/usr/bin/tcpdump", ["-i", "lo", "-s", "128", "-U", "-n", "-w", capture, "tcp port \(broker.port)"],
        directory: directory, name: "tcpdump")
    try await waitUntil("tcpdump to listen", timeout: .seconds(10)) {
        guard tcpdump.isRunning else {
            throw TestSupportError.processFailed(tcpdump.commandLine, status: -1, output: tcpdump.standardError)
        }
        return tcpdump.standardError.contains("listening on")
    }
    let process = try TestProcess(
        agent,
        [
            "run", "--source", scenario.source, "--vehicle", "wire-1", "--broker", "mqtts://\(broker.host):\(broker.port)",
            "--ca-file", certificates.caFile, "--state-dir", "\(directory)/state", "--log-level", "warning",
        ], directory: directory, name: "agent", environment: scenario.environment)
    try await Task.sleep(for: .seconds(seconds))
    let stopAt = Date().timeIntervalSince1970
    _ = await process.stop()
    try await Task.sleep(for: .seconds(1))
    _ = await tcpdump.stop()
    _ = await subscriber.stop()

    // Each line: when it arrived (Unix time, ns), topic, payload in hex. A fix message is one
    // fix; a batch (compact or JSON) holds several.
    let arrivals = subscriber.standardOutput.split(separator: "\n").compactMap { line -> (time: Double, fixes: Int)? in
        guard let space = line.firstIndex(of: " "), let time = Double(line[..<space]),
            let message = MosquittoCLI.hexMessage(line[line.index(after: space)...])
        else { return nil }
        guard message.topic.hasSuffix("/batch") else { return (time, 1) }
        let events = (try? FleetPayload.decodeBatch(message.payload, vehicle: nil))?.events ?? []
        return (time, events.filter { if case .fix = $0 { true } else { false } }.count)
    }
    let setupEnd = arrivals.first.map { $0.time + 1 }
    var count = try countCapture(capture, port: broker.port, setupEnd: setupEnd, stopAt: stopAt)
    count.fixes = arrivals.reduce(0) { $0 + $1.fixes }
    count.fixesAfterStart = arrivals.filter { $0.time >= setupEnd ?? 0 }.reduce(0) { $0 + $1.fixes }
    return count
}

/// Bytes of IP packets in a pcap file (tcpdump's classic format, microsecond or nanosecond
/// stamps, either byte order) on the broker's `port`: sent (to the port) and received (from it),
/// those before `setupEnd` (Unix time; without one, the first 2 s), and those from `stopAt` on.
private func countCapture(_ path: String, port: Int, setupEnd: Double?, stopAt: Double) throws -> WireCount {
    let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    guard data.count >= 24 else { return WireCount() }
    func word(_ offset: Int, swapped: Bool) -> UInt32 {
        let value = data[offset..<offset + 4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return swapped ? value.byteSwapped : value
    }
    let magic = word(0, swapped: false)
    let swapped = magic == 0xd4c3_b2a1 || magic == 0x4d3c_b2a1
    let nanoseconds = magic == 0xa1b2_3c4d || magic == 0x4d3c_b2a1
    let linkHeader: Int
    switch word(20, swapped: swapped) {
    case 1: linkHeader = 14  // Ethernet, as Linux presents the loopback interface
    case 113: linkHeader = 16  // Linux cooked capture
    case 276: linkHeader = 20  // Linux cooked capture v2
    default: linkHeader = 0  // raw IP
    }
    var count = WireCount()
    var offset = 24
    var firstStamp: Double?
    var lastStamp = 0.0
    while offset + 16 <= data.count {
        let stamp = Double(word(offset, swapped: swapped)) + Double(word(offset + 4, swapped: swapped)) / (nanoseconds ? 1e9 : 1e6)
        let captured = Int(word(offset + 8, swapped: swapped))
        let length = Int(word(offset + 12, swapped: swapped)) - linkHeader
        let packet = offset + 16 + linkHeader
        offset += 16 + captured
        guard offset <= data.count, packet + 24 <= data.count else { break }
        let ipHeader = Int(data[packet] & 0x0f) * 4
        let destinationPort = Int(data[packet + ipHeader + 2]) << 8 | Int(data[packet + ipHeader + 3])
        if destinationPort == port { count.sent += length } else { count.received += length }
        count.packets += 1
        if firstStamp == nil { firstStamp = stamp }
        lastStamp = stamp
        if stamp < setupEnd ?? (firstStamp ?? stamp) + 2 {
            count.start.bytes += length
        } else if stamp >= stopAt {
            count.stop.bytes += length
        } else {
            count.steady.bytes += length
        }
    }
    let end = setupEnd ?? (firstStamp ?? 0) + 2
    count.start.seconds = max(0, end - (firstStamp ?? end))
    count.steady.seconds = max(0, min(lastStamp, stopAt) - end)
    return count
}
