import FleetProtocol
import FleetcastTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built agent reading a receiver on a pseudo-terminal (`socat`) whose data jumps a day
/// ahead (spoofed, or a receiver's date gone wrong), against a system clock taken as
/// synchronized (`fixTime.systemClock: synchronized`; the test machine's own may not be): the
/// far fixes are not published, the log says so once, and the count is in the stop line.
@Suite("The agent refuses fixes far from a synchronized clock")
struct AgentFixTimeTests {
    /// `$…*hh`: a sentence with its checksum.
    static func sentence(_ body: String) -> String {
        let checksum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        return "$\(body)*\(String(format: "%02X", checksum))\r\n"
    }

    /// One receiver epoch (RMC and GGA) at `date`.
    static func epoch(_ date: Date, east: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .nanosecond], from: date)
        let time = String(format: "%02d%02d%02d.%02d", c.hour!, c.minute!, c.second!, c.nanosecond! / 10_000_000)
        let day = String(format: "%02d%02d%02d", c.day!, c.month!, c.year! % 100)
        let longitude = String(format: "00959.%04d", 6209 + east)
        return sentence("GPRMC,\(time),A,5333.0652,N,\(longitude),E,12.1,90.0,\(day),,,A")
            + sentence("GPGGA,\(time),5333.0652,N,\(longitude),E,1,11,0.9,8.9,M,39.4,M,,")
    }

    /// Every `"time":"…"` in `text`, parsed.
    static func times(in text: String) -> [Date] {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return text.components(separatedBy: "\"time\":\"").dropFirst().compactMap { rest in
            rest.split(separator: "\"", maxSplits: 1).first.flatMap { formatter.date(from: String($0)) }
        }
    }

    @Test("a day-ahead fix over a pseudo-terminal: not published, one warning naming it, counted as implausible at the stop")
    func farFixesRefused() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-fix-time")
        let device = "\(work)/gnss0", feed = "\(work)/feed"
        let socat = try TestProcess(
            "/usr/bin/socat", ["pty,raw,echo=0,link=\(device)", "pty,raw,echo=0,link=\(feed)"], directory: work, name: "socat")
        defer { socat.send(SIGTERM) }
        try await waitUntil("socat's links", timeout: .seconds(10)) {
            FileManager.default.fileExists(atPath: feed) && FileManager.default.fileExists(atPath: device)
        }
        let fixes = try await MosquittoCLI.subscribe(broker: broker, filter: "fleet/v1/#", count: 100_000, timeoutSeconds: 120)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "serial:\(device)?baud=9600", "--vehicle", "v1",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--state-dir", "\(work)/state",
            ], directory: work, name: "agent",
            environment: ["FLEETCAST_REPORT_EVERY_FIX": "1", "FLEETCAST_FIX_TIME_SYSTEM_CLOCK": "synchronized"])
        defer { agent.send(SIGKILL) }
        let writer = try #require(FileHandle(forWritingAtPath: feed))
        func longitudes() -> [Double] {
            fixes.messagesSoFar.filter { $0.hasPrefix("fleet/v1/fix ") }.compactMap { line -> Double? in
                guard let space = line.firstIndex(of: " ") else { return nil }
                return ((try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8))) as? [String: Any])?["lon"]
                    as? Double
            }
        }

        // The receiver talks (at the wall clock's time) until the agent publishes its fixes:
        // what was written before the agent opened the device is not read.
        var east = 0
        try await waitUntil("the agent publishing the receiver's fixes", timeout: .seconds(30), interval: .milliseconds(200)) {
            east += 1
            writer.write(Data(Self.epoch(Date(), east: east).utf8))
            return !longitudes().isEmpty
        }
        // Ten epochs a day ahead, then two at the wall clock's time (east 900 and 901, the
        // markers; the second also closes the first).
        let now = Date()
        var text = ""
        for second in 1...10 { text += Self.epoch(now.addingTimeInterval(86_400 + Double(second)), east: 500 + second) }
        text += Self.epoch(now.addingTimeInterval(0.5), east: 900) + Self.epoch(now.addingTimeInterval(1), east: 901)
        writer.write(Data(text.utf8))
        let marker = 9.993682 + 0.0001 * 900 / 60  // 00959.6209 + 0.0900 minutes east, in degrees
        // (The decoder may fold the first epoch after the jump back; one of the two arrives.)
        let markerArrived =
            (try? await waitUntil("a fix after the far ones published", timeout: .seconds(30)) {
                longitudes().contains { $0 > marker - 0.000_001 }
            }) != nil
        await fixes.stop()
        #expect(markerArrived, "\(fixes.messagesSoFar.suffix(5)); agent: \(agent.standardError.suffix(3000))")

        // Live on the fix topic, or later in a backlog batch: the far ones are in neither.
        let published = Self.times(in: fixes.messagesSoFar.joined(separator: "\n"))
        #expect(!published.isEmpty)
        #expect(published.allSatisfy { abs($0.timeIntervalSinceNow) < 120 }, "no day-ahead fix published: \(published)")
        #expect(!longitudes().contains { $0 > 9.993682 + 0.0001 * 500 / 60 && $0 < marker - 0.000_001 }, "none of the far epochs")

        agent.send(SIGTERM)
        #expect(try await withTimeout(.seconds(30), "the agent to stop") { await agent.waitForExit() } == 0)
        // The last status, retained, counts them.
        let status = try await MosquittoCLI.retained(broker: broker, topic: "fleet/v1/status")
        #expect(status?.contains(#""state":"offline""#) == true && status?.contains(#""implausible":10"#) == true, "\(status ?? "none")")
        // Nor kept in the outbox for later: refused, not stored.
        let sqlite = try TestProcess(
            "/usr/bin/sqlite3", ["\(work)/state/v1.outbox", "SELECT CAST(payload AS TEXT) FROM event"], directory: work, name: "sqlite3")
        #expect(try await sqlite.waitForExit(timeout: .seconds(10)) == 0, "\(sqlite.standardError)")
        let stored = Self.times(in: sqlite.standardOutput)
        #expect(stored.allSatisfy { abs($0.timeIntervalSinceNow) < 120 }, "no day-ahead fix stored: \(stored)")
        let log = agent.standardError
        let warnings = AgentProblemsTests.lines(log, level: "warning").filter { $0.contains("implausibly far") }
        #expect(warnings.count == 1, "said once: \(log.suffix(3000))")
        #expect(warnings.first?.contains("gnss.source=serial:\(device)") == true, "\(warnings)")
        let offset = warnings.first.flatMap { line in
            line.split(separator: " ").first { $0.hasPrefix("gnss.offsetSeconds=") }.flatMap { Int($0.dropFirst(19)) }
        }
        #expect(offset.map { (86_390...86_410).contains($0) } == true, "the offset, about a day: \(warnings)")
        #expect(AgentProblemsTests.lines(log, level: "notice").contains { $0.contains("Accepting fixes again") })
        let stopped = try #require(
            AgentProblemsTests.lines(log, level: "info").first { $0.contains("agent stopped") }, "\(log.suffix(3000))")
        #expect(stopped.contains("implausible=10"), "\(stopped)")
    }
}
