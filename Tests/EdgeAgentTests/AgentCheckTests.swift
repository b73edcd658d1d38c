import FleetcastTestSupport
import Foundation
import Testing

/// `fleetcast-agent check`, the built binary, as a person runs it on a new vehicle.
@Suite("fleetcast-agent check")
struct AgentCheckTests {
    @Test("all is well: one ok line per step, exit 0")
    func allPass() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-check")
        let check = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "check", "--source", "sim:?rate=10", "--vehicle", "v1", "--broker", "mqtt://127.0.0.1:\(broker.port)", "--timeout", "10",
            ], directory: work, name: "check")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 0, "\(check.standardOutput)")
        let lines = check.standardOutput.split(separator: "\n")
        #expect(lines.map { $0.prefix(4) } == ["ok  ", "ok  ", "ok  ", "ok  "], "\(lines)")
        #expect(lines.map { $0.split(separator: " ", omittingEmptySubsequences: true)[1] } == ["config", "source", "broker", "publish"])
        #expect(lines[1].contains("fix at"))
    }

    @Test("a missing device and a broker whose ACL refuses the vehicle: each step says what failed and what to do, exit 1")
    func failuresSayWhatToDo() async throws {
        let broker = try await TestBroker.start(.init(acl: "topic read fleet/#"))
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-check-fail")
        let check = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "check", "--source", "serial:\(work)/ttyUSB9?baud=9600", "--vehicle", "van-2",
                "--broker", "mqtt://127.0.0.1:\(broker.port)", "--timeout", "2",
            ], directory: work, name: "check")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 1)
        let out = check.standardOutput
        let source = try #require(out.split(separator: "\n").first { $0.contains(" source ") })
        #expect(
            source.hasPrefix("FAIL") && source.contains("No such file or directory") && source.contains("check the device path"),
            "\(source)")
        let publish = try #require(out.split(separator: "\n").first { $0.contains(" publish ") })
        #expect(publish.hasPrefix("FAIL") && publish.contains("0x87") && publish.contains("ACL"), "\(publish)")
        #expect(out.split(separator: "\n").contains { $0.hasPrefix("ok   broker") }, "the connection itself works: \(out)")
    }

    @Test("a configuration error is one line and exit 78")
    func configError() async throws {
        let work = try makeTemporaryDirectory(prefix: "agent-check-config")
        let check = try TestProcess(
            builtProduct("fleetcast-agent"), ["check", "--vehicle", "not a vehicle id!"], directory: work, name: "check")
        #expect(try await check.waitForExit(timeout: .seconds(30)) == 78)
        #expect(check.standardOutput.hasPrefix("FAIL config"), "\(check.standardOutput)")
    }
}
