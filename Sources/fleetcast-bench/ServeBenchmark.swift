import FleetcastTestSupport
import Foundation
import GNSS
import Logging
import MQTT

#if canImport(Glibc)
import Glibc
#endif

// fleetcast-bench serve: `fleet-watch serve` (the binary built beside this one) under browsers
// that open /events and never read, while a fleet publishes at 1 Hz to a real mosquitto.
// Prints, every 10 s, the server's resident set, its established connections on its port, and
// how many it has closed whose close still waits behind the data the browser never read
// (FIN_WAIT1; the kernel gives up on those by itself). Issue 18 measured 55 MB growing to 195-579 MB
// with 80 such browsers and 2,000-3,000 vehicles, every connection kept.
// Options: --vehicles N (default 2500), --stalled N (default 80), --seconds N (default 60),
// --burst (every stalled browser at once instead of through the first half), --fleet-watch PATH.
func runServeBenchmark(arguments: [String]) async {
    let vehicles = intOption(arguments, "--vehicles", 2_500)
    let stalledCount = intOption(arguments, "--stalled", 80)
    let seconds = intOption(arguments, "--seconds", 60)
    let executable = stringOption(arguments, "--fleet-watch", builtProduct("fleet-watch"))
    let burst = arguments.contains("--burst")
    print("serve: \(vehicles) vehicles at 1 Hz, \(stalledCount) browsers that never read, \(seconds) s; load \(loadAverage())")
    do {
        let broker = try await BenchBroker.start(inflight: 100)
        defer { Task { await broker.shutdown() } }
        let port = try FreePort.next()
        let server = try TestProcess(
            executable, ["serve", "--broker", broker.url, "--listen", "127.0.0.1:\(port)", "--tiles", "none"],
            directory: broker.directory, name: "serve")
        try await waitUntil("fleet-watch serve to listen", timeout: .seconds(20)) { server.standardError.contains("Serving the live map") }
        let publisher = try MQTTClient(
            configuration: MQTTConfiguration(broker: BrokerURL(host: "127.0.0.1", port: broker.port), clientID: "bench-fleet"),
            logger: Logger(label: "bench"))
        try await publisher.connect()
        let publishing = Task {
            try await MovingFleet.publish(vehicles: vehicles, pausing: .seconds(1), time: { _ in .wallClockNow }) {
                try await publisher.publish(topic: $0, payload: $1, qos: .atMostOnce)
            }
        }
        try await Task.sleep(for: .seconds(5))
        print("  t(s)  RSS(MiB)  established  closed by the server  browsers opened")
        print("  \(pad(0, 4))  \(pad(residentMiB(server.pid), 8))  \(pad(connections(port: port, state: "01"), 11))")
        var stalled: [Int32] = []
        let start = ContinuousClock.now
        var peak = 0.0
        for second in 1...seconds {
            // Browsers arrive through the first half of the run (with --burst, all at once).
            let due = burst ? stalledCount : min(stalledCount, stalledCount * second * 2 / max(1, seconds))
            while stalled.count < due { stalled.append(try openStalledBrowser(port: port)) }
            try await Task.sleep(until: start + .seconds(second))
            let rss = residentMiB(server.pid)
            peak = max(peak, rss)
            if second % 10 == 0 || second == seconds {
                let established = connections(port: port, state: "01")
                let closing = connections(port: port, state: "04")
                print("  \(pad(second, 4))  \(pad(rss, 8))  \(pad(established, 11))  \(pad(closing, 20))  \(pad(stalled.count, 15))")
            }
        }
        print("  peak RSS \(fixed(peak, 1)) MiB")
        // A browser that reads is still served: the whole fleet, over HTTP, now.
        let reader = try TestProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "http://127.0.0.1:\(port)/api/vehicles"],
            directory: broker.directory, name: "reader")
        _ = await reader.waitForExit()
        print("  a reading client: HTTP \(reader.standardOutput) bytes of /api/vehicles")
        let log = server.standardError
        print(
            "  the server logged \(log.components(separatedBy: "Dropped a slow browser").count - 1) slow browsers dropped, "
                + "\(log.components(separatedBy: "Closed a connection whose client stopped reading").count - 1) stalled connections closed")
        publishing.cancel()
        _ = await publishing.result
        print("  server pid \(server.pid)")
        try await Task.sleep(for: .seconds(intOption(arguments, "--hold", 0)))
        for fd in stalled { close(fd) }
        await publisher.shutdown(flushTimeout: .zero)
        await server.stop()
    } catch {
        print("serve benchmark failed: \(error)")
    }
}

private func pad(_ value: Int, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - String(value).count)) + String(value)
}

private func pad(_ value: Double, _ width: Int) -> String {
    let text = fixed(value, 1)
    return String(repeating: " ", count: max(0, width - text.count)) + text
}

/// A browser that asks for /events with a 2 KiB receive buffer and never reads.
private func openStalledBrowser(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError.system("socket", errno) }
    var small: Int32 = 2048
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
    guard FreePort.connectLoopback(fd, port: port) == 0 else { throw TestSupportError.system("connect", errno) }
    let request = Array("GET /events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    return fd
}

/// TCP connections in `state` (`01` established, `04` FIN_WAIT1) whose local port is `port`
/// (the server's side), from /proc/net/tcp.
private func connections(port: Int, state: String) -> Int {
    // Read to the end by hand: a /proc file has no size, and a sized read gets its first page only.
    guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() else { return -1 }
    let table = String(decoding: data, as: UTF8.self)
    let local = String(format: ":%04X", port)
    return table.split(separator: "\n").dropFirst().filter { line in
        let fields = line.split(separator: " ")
        return fields.count > 3 && fields[1].hasSuffix(local) && fields[3] == state
    }.count
}

/// The resident set of process `pid` in MiB (VmRSS), 0 when unknown.
private func residentMiB(_ pid: Int32) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kib = Double(line.split(separator: " ").dropFirst().first ?? "")
    else { return 0 }
    return kib / 1024
}
