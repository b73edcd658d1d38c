import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch serve`, the built executable, stopped with a real SIGTERM while real agents on
/// `sim:` publish and a browser (`curl`) reads its event stream, under a datagram socket
/// standing in for systemd's `$NOTIFY_SOCKET`.
@Suite(.serialized) struct FleetMapShutdownTests {
    @Test func serveEndsTheBrowsersStreamAndExitsZeroWithin5sOfSIGTERM() async throws {
        try await withBroker { broker in
            let directory = broker.directory
            let agents = try ["van-1", "van-2"].map { try startSimulatedAgent($0, broker: broker, directory: directory, rate: 5) }
            defer { for agent in agents { agent.send(SIGKILL) } }
            let systemd = try NotifySocket(abstract: true)
            let port = try FreePort.next()
            let url = "http://127.0.0.1:\(port)"
            let server = try TestProcess(
                builtProduct("fleet-watch"), ["serve", "--broker", broker.url, "--listen", "127.0.0.1:\(port)", "--tiles", "none"],
                directory: directory, name: "serve-\(UUID().uuidString.prefix(8))",
                environment: ["NOTIFY_SOCKET": systemd.address, "WATCHDOG_USEC": "2000000"])
            defer { server.send(SIGKILL) }
            // READY=1 only once it listens and is subscribed.
            try await systemd.wait(for: "READY=1 from fleet-watch serve") { $0.contains { $0.hasPrefix("READY=1") } }
            #expect(server.standardError.contains("Serving the live map") && server.standardError.contains("Subscribed to the fleet"))

            // A browser on the event stream, with no time limit of its own.
            let browser = try TestProcess(
                "/usr/bin/curl", ["-sS", "-N", "\(url)/events"], directory: directory, name: "browser-\(UUID().uuidString.prefix(8))")
            defer { browser.send(SIGKILL) }
            try await waitUntil("the snapshot and updates moving both vehicles", timeout: .seconds(30), interval: .milliseconds(100)) {
                let events = FleetMapServeTests.events(in: browser.standardOutput)
                let ids = Set(
                    events.dropFirst().flatMap { (try? FleetMapServeTests.vehicles(in: $0.data)) ?? [] }.compactMap { $0["id"] as? String })
                return events.first?.name == "snapshot" && ids == ["van-1", "van-2"]
            }
            try await systemd.wait(for: "a watchdog ping") { $0.contains("WATCHDOG=1") }

            let (status, elapsed) = try await server.terminate()
            #expect(status == 0, "\(server.standardError)")
            #expect(elapsed < .seconds(5), "exit \(elapsed) after SIGTERM")
            // The browser saw its response end (curl's status 0: the stream closed cleanly, not
            // cut), and every event it got is whole.
            #expect(try await browser.waitForExit(timeout: .seconds(5)) == 0, "\(browser.standardError)")
            #expect(browser.standardOutput.hasSuffix("\n\n"))
            let messages = systemd.messages
            let ready = try #require(messages.firstIndex { $0.contains("READY=1") })
            let stopping = try #require(messages.firstIndex { $0.contains("STOPPING=1") }, "\(messages)")
            #expect(ready < stopping && messages.contains("WATCHDOG=1"), "\(messages)")
            // Nothing listens any more.
            let (refused, answer) = try await FleetMapServeTests.curl(["-i", "\(url)/"], directory: directory)
            #expect(refused == 7, "curl: could not connect, but something answered: \(answer.prefix(300))")
        }
    }
}
