import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch record`, the built executable, stopped with a real SIGTERM while real agents on
/// `sim:` publish, under a datagram socket standing in for systemd's `$NOTIFY_SOCKET`.
@Suite struct RecordShutdownTests {
    @Test func recordSaysReadyOnceMigratedAndExitsZeroWithin5sOfSIGTERM() async throws {
        let directory = try TemporaryDirectory(prefix: "fleetcast-record-stop")
        defer { directory.remove() }
        try await withBroker { broker in
            try await withPostgres { postgres in
                let database = try await postgres.createDatabase()
                let agents = try ["van-1", "van-2"].map { try startSimulatedAgent($0, broker: broker, directory: directory.path) }
                defer { for agent in agents { agent.send(SIGKILL) } }
                let systemd = try NotifySocket(abstract: true)
                let recorder = try TestProcess(
                    builtProduct("fleet-watch"),
                    [
                        "record", "--broker", broker.url, "--postgres",
                        "postgres://\(postgres.user)@127.0.0.1:\(postgres.port)/\(database)?sslmode=disable",
                    ], directory: directory.path, name: "recorder",
                    environment: ["PGPASSWORD": postgres.password ?? "", "NOTIFY_SOCKET": systemd.address, "WATCHDOG_USEC": "2000000"])
                defer { recorder.send(SIGKILL) }
                try await systemd.wait(for: "READY=1 from fleet-watch record") { $0.contains { $0.hasPrefix("READY=1") } }
                // Ready means migrated: the tables are there.
                let tables = try await postgres.psql("SELECT count(*) FROM fleetcast_fixes", database: database)
                #expect(!tables.isEmpty)
                try await waitUntil("rows of both vehicles", timeout: .seconds(30), interval: .milliseconds(200)) {
                    let text = try await postgres.psql("SELECT count(DISTINCT vehicle) FROM fleetcast_fixes", database: database)
                    return text.trimmingCharacters(in: .whitespacesAndNewlines) == "2"
                }
                try await systemd.wait(for: "a watchdog ping") { $0.contains("WATCHDOG=1") }

                let (status, elapsed) = try await recorder.terminate()
                #expect(status == 0, "\(recorder.standardError)")
                #expect(elapsed < .seconds(5), "exit \(elapsed) after SIGTERM")
                #expect(recorder.standardError.contains("everything received is written"), "\(recorder.standardError)")
                let messages = systemd.messages
                let ready = try #require(messages.firstIndex { $0.contains("READY=1") })
                let stopping = try #require(messages.firstIndex { $0.contains("STOPPING=1") }, "\(messages)")
                #expect(ready < stopping && messages.contains("WATCHDOG=1"), "\(messages)")
            }
        }
    }
}
