import FleetcastTestSupport
import Foundation
import Testing

/// A password written into the broker URL, where it does not belong: every way of giving it to
/// the built agent is refused with a clear error, and the password is in no line it prints.
@Suite("secrets never printed")
struct SecretsInOutputTests {
    static let password = "s3cr3t-Pa55"
    static let url = "mqtts://van-7:\(password)@broker.example.net:8883"

    @Test(
        "a password in the broker URL from a flag, the environment or the file: refused, never echoed",
        arguments: ["flag", "environment", "file"])
    func passwordInBrokerURL(_ origin: String) async throws {
        let work = try makeTemporaryDirectory(prefix: "agent-secret")
        var environment: [String: String] = [:]
        var extra: [String] = []
        switch origin {
        case "flag": extra = ["--broker", Self.url]
        case "environment": environment["FLEETCAST_BROKER_URL"] = Self.url
        default:
            let file = "\(work)/agent.yaml"
            try "vehicle: van-7\nbroker:\n  url: \(Self.url)\n".write(toFile: file, atomically: true, encoding: .utf8)
            extra = ["--config", file]
        }
        for command in ["run", "check"] {
            let agent = try TestProcess(
                builtProduct("fleetcast-agent"),
                [command, "--vehicle", "van-7"] + (command == "run" ? ["--state-dir", "\(work)/state"] : []) + extra,
                directory: work, name: "agent-\(command)", environment: environment)
            #expect(try await agent.waitForExit(timeout: .seconds(30)) == 78, "\(command) from the \(origin): a configuration error")
            let output = agent.standardOutput + agent.standardError
            #expect(output.contains("broker.url"), "\(command) from the \(origin) names the key: \(output)")
            #expect(!output.contains(Self.password), "\(command) from the \(origin) printed the password: \(output)")
        }
    }

    @Test("a password file every user can read is named in a warning; the password itself is not")
    func readablePasswordFile() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.shutdown() } }
        let work = try makeTemporaryDirectory(prefix: "agent-password-file")
        let file = "\(work)/broker.password"
        try "\(Self.password)\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let agent = try TestProcess(
            builtProduct("fleetcast-agent"),
            [
                "run", "--source", "sim:?rate=10", "--vehicle", "van-7", "--broker", "mqtt://van-7@127.0.0.1:\(broker.port)",
                "--password-file", file, "--state-dir", "\(work)/state",
            ], directory: work, name: "agent", environment: agentEveryFixEnvironment)
        try await waitUntil("the warning", timeout: .seconds(20)) {
            agent.standardError.contains("password file can be read by every user")
        }
        agent.send(SIGTERM)
        _ = try await agent.waitForExit(timeout: .seconds(20))
        #expect(agent.standardError.contains(file))
        #expect(!agent.standardError.contains(Self.password))
    }
}
