import FleetcastTestSupport
import Foundation
import Testing

/// `fleet-watch` and `fleet-watch bridge`, the built executable, stopped with a real SIGTERM
/// while real agents on `sim:` publish to a real mosquitto, under a datagram socket standing in
/// for systemd's `$NOTIFY_SOCKET`: what a service manager's stop must find — exit status 0
/// within 5 s, nothing received thrown away, and the notify protocol spoken.
@Suite(.serialized) struct GracefulShutdownCLITests {
    /// Waits until `process` logged `text` on stderr (failing at once if it exited).
    func waitForLog(_ process: TestProcess, _ text: String, timeout: Duration = .seconds(30)) async throws {
        try await waitUntil("\(process.commandLine) to log \"\(text)\"", timeout: timeout) {
            guard process.isRunning || process.standardError.contains(text) else {
                throw TestSupportError.processFailed(
                    process.commandLine, status: process.termination?.status ?? -1, output: process.standardError)
            }
            return process.standardError.contains(text)
        }
    }

    /// The environment systemd gives a `Type=notify` service with `WatchdogSec=2s`.
    func systemdEnvironment(_ systemd: NotifySocket) -> [String: String] {
        ["NOTIFY_SOCKET": systemd.address, "WATCHDOG_USEC": "2000000"]
    }

    /// READY=1 first, WATCHDOG=1 pings, STOPPING=1 after them.
    func expectNotifyProtocol(_ messages: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let ready = messages.firstIndex { $0.contains("READY=1") }
        let stopping = messages.firstIndex { $0.contains("STOPPING=1") }
        #expect(ready != nil, "READY=1: \(messages)", sourceLocation: sourceLocation)
        #expect(messages.contains("WATCHDOG=1"), "WATCHDOG=1: \(messages)", sourceLocation: sourceLocation)
        #expect(
            stopping != nil && ready.map { $0 < stopping! } == true, "STOPPING=1 after READY=1: \(messages)", sourceLocation: sourceLocation
        )
    }

    @Test func watchExitsZeroWithin5sOfSIGTERMWithEveryLineComplete() async throws {
        try await withBroker { broker in
            let agents = try ["van-1", "van-2"].map { try startSimulatedAgent($0, broker: broker, directory: broker.directory) }
            defer { for agent in agents { agent.send(SIGKILL) } }
            let systemd = try NotifySocket(abstract: true)
            let watch = try TestProcess(
                builtProduct("fleet-watch"), ["--broker", broker.url, "--json"], directory: broker.directory,
                name: "watch-\(UUID().uuidString.prefix(8))", environment: systemdEnvironment(systemd))
            defer { watch.send(SIGKILL) }
            try await systemd.wait(for: "READY=1 from fleet-watch") { $0.contains { $0.hasPrefix("READY=1") } }
            try await waitUntil("fixes of both vehicles", timeout: .seconds(30), interval: .milliseconds(100)) {
                let output = watch.standardOutput
                return output.contains(#""vehicle":"van-1""#) && output.contains(#""vehicle":"van-2""#)
            }
            try await systemd.wait(for: "a watchdog ping") { $0.contains("WATCHDOG=1") }

            let (status, elapsed) = try await watch.terminate()
            #expect(status == 0, "\(watch.standardError)")
            #expect(elapsed < .seconds(5), "exit \(elapsed) after SIGTERM")
            expectNotifyProtocol(systemd.messages)
            // Every line written is a whole JSON object: nothing was cut off by the stop.
            let lines = watch.standardOutput.split(separator: "\n")
            #expect(lines.count >= 2, "both vehicles' lines: \(watch.standardOutput)")
            #expect(watch.standardOutput.hasSuffix("\n"))
            for line in lines {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "\(line)")
            }
        }
    }

    /// Two OwnTracks bridges in a share group; one is stopped with SIGTERM in the middle of a
    /// burst of fixes: it publishes what it holds and exits 0 within 5 s, and the other goes on.
    /// A bridge publishes a vehicle's newest position (a retained topic needs no other), so a
    /// burst comes out coalesced: what comes out are fixes of the burst, and the fix after it,
    /// which only the remaining bridge can take, is the one retained.
    @Test func aBridgeInAShareGroupPublishesWhatItReceivedAndExitsZeroWithin5sOfSIGTERM() async throws {
        // Room for one bridge taking the whole group's share of the burst (see the README on
        // max_queued_messages).
        try await withBroker(.init(extraConfiguration: ["max_queued_messages 100000"])) { broker in
            let agents = try ["van-1", "van-2"].map { try startSimulatedAgent($0, broker: broker, directory: broker.directory) }
            defer { for agent in agents { agent.send(SIGKILL) } }
            let burst = 5_000
            let burstTopic = "owntracks/acme/burst"
            let observer = try await MosquittoCLI.subscribe(broker: broker, filter: burstTopic, count: burst + 1, timeoutSeconds: 90)
            defer { observer.process.send(SIGKILL) }

            let systemd = try NotifySocket(abstract: true)
            func startBridge(_ name: String, environment: [String: String] = [:]) throws -> TestProcess {
                try TestProcess(
                    builtProduct("fleet-watch"),
                    [
                        "bridge", "--to", "owntracks", "--owntracks-user", "acme", "--broker", broker.url, "--share-group", "bridges",
                        "--client-id", name,
                    ], directory: broker.directory, name: name, environment: environment)
            }
            let stopped = try startBridge("bridge-1", environment: systemdEnvironment(systemd))
            defer { stopped.send(SIGKILL) }
            let staying = try startBridge("bridge-2")
            defer { staying.send(SIGKILL) }
            try await systemd.wait(for: "READY=1 from the bridge") { $0.contains { $0.hasPrefix("READY=1") } }
            try await waitForLog(staying, "Subscribed to the fleet")
            try await waitUntil("the agents' positions bridged", timeout: .seconds(30), interval: .milliseconds(100)) {
                guard stopped.standardError.contains("Bridging") else { return false }
                return try await MosquittoCLI.retained(broker: broker, topic: "owntracks/acme/van-1") != nil
            }

            // A burst of distinct fixes at QoS 1, as fast as mosquitto_pub sends them.
            let lines = (1...burst).map { seq in
                #"{"v":1,"vehicle":"burst","seq":\#(seq),"time":"2026-11-24T00:00:00.000Z","lat":\#(Double(seq) / 10_000),"lon":2,"mode":3}"#
            }
            let burstFile = "\(broker.directory)/burst.jsonl"
            try (lines.joined(separator: "\n") + "\n").write(toFile: burstFile, atomically: true, encoding: .utf8)
            let publisher = try TestProcess(
                "/bin/sh", ["-c", "exec /usr/bin/mosquitto_pub -h 127.0.0.1 -p \(broker.port) -q 1 -t fleet/burst/fix -l < \(burstFile)"],
                directory: broker.directory, name: "burst")
            try await waitUntil("the burst to be bridged", timeout: .seconds(30), interval: .milliseconds(5)) {
                observer.messagesSoFar.count >= 50
            }
            let (status, elapsed) = try await stopped.terminate()
            #expect(status == 0, "\(stopped.standardError)")
            #expect(elapsed < .seconds(5), "exit \(elapsed) after SIGTERM")
            #expect(stopped.standardError.contains("Bridge stopped; everything received is published"), "\(stopped.standardError)")
            expectNotifyProtocol(systemd.messages)

            #expect(try await publisher.waitForExit(timeout: .seconds(60)) == 0, "\(publisher.standardError)")
            // One fix more, after the burst: only the remaining bridge is there to take it.
            try await MosquittoCLI.publish(
                broker: broker, topic: "fleet/burst/fix",
                message: #"{"v":1,"vehicle":"burst","seq":\#(burst + 1),"time":"2026-11-24T00:00:01.000Z","lat":0.5001,"lon":2,"mode":3}"#)
            try await waitUntil("the fix after the burst bridged", timeout: .seconds(60), interval: .milliseconds(50)) {
                observer.messagesSoFar.contains { $0.contains(#""lat":0.5001"#) }
            }
            await observer.stop()
            let latitudes = observer.messagesSoFar.compactMap { line in
                line.range(of: #""lat":[0-9.]+"#, options: .regularExpression).flatMap { Double(line[$0].dropFirst(6)) }
            }
            let burstLatitudes = Set((1...burst + 1).map { Double($0) / 10_000 })
            #expect(latitudes.allSatisfy(burstLatitudes.contains), "only the burst's fixes come out")
            #expect(Set(latitudes).count == latitudes.count, "none twice")
            let retained = try await MosquittoCLI.retained(broker: broker, topic: burstTopic)
            #expect(retained?.contains(#""lat":0.5001"#) == true, "\(String(describing: retained))")
            #expect(staying.isRunning)
            let (stayingStatus, _) = try await staying.terminate()
            #expect(stayingStatus == 0, "\(staying.standardError)")
        }
    }
}
