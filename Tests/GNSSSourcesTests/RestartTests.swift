import FleetcastCore
import FleetcastTestSupport
import Foundation
import GNSS
import GNSSSources
import InMemoryLogging
import Logging
import Testing

extension LiveSourceTests {
    /// Iterate, cancel, iterate again: every run starts afresh and gives back what it holds.
    ///
    /// The leak check looks only at what the source owns (its tty, its recording, its gpsd
    /// connection, its producer task), never at process-wide counts: the other suites of the
    /// package open and close descriptors at the same time.
    @Suite struct RestartTests {
        /// Runs the source `runs` times, each until `fixes` fixes arrived, then cancels it.
        /// `held()` describes what the source holds right now (empty when nothing): it must
        /// see the resource while the source runs — so that the check means something — and
        /// find nothing once the run was cancelled.
        private func restart<S: GNSSSource>(
            _ source: S, runs: Int = 3, fixes: Int = 2, held: @escaping @Sendable () -> [String]
        ) async throws {
            #expect(held().isEmpty, "held before the first run: \(held())")
            for run in 1...runs {
                let recorder = EventRecorder(source)
                let events = try await recorder.waitFor("fixes in run \(run)") { $0.fixes.count >= fixes }
                #expect(events.first == .state(.connecting), "run \(run) starts afresh")
                #expect(!held().isEmpty, "run \(run): the probe does not see what the running source holds")
                await recorder.stop()
                // The descriptor is closed by the event loop (or the thread pool) after the
                // source's task ended; there is no event to await for that, so poll (bounded).
                do {
                    try await waitUntil("run \(run)'s resources to be released", timeout: .seconds(5), interval: .milliseconds(20)) {
                        held().isEmpty
                    }
                } catch {
                    Issue.record("run \(run): still held after cancel: \(held())")
                }
            }
        }

        @Test func replayRestarts() async throws {
            // A copy under a unique path, so that no other test's descriptor can match.
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let path = dir.path + "/firefly-II.log"
            try FileManager.default.copyItem(atPath: try fixturePath("firefly-II.log"), toPath: path)
            // At 10× the 20 s recording plays for about 2 s: still open when the check looks.
            try await restart(ReplaySource(path: path, speed: .factor(10), logger: quietLogger)) {
                OwnedResources.descriptors(on: path)
            }
        }

        @Test func simulatorRestarts() async throws {
            // The simulator owns no descriptor; what it must give back is its producer task.
            let log = InMemoryLogHandler()
            var logger = Logger(label: "test") { _ in log }
            logger.logLevel = .trace
            @Sendable func count(_ message: String) -> Int { log.entries.count { $0.message.description == message } }
            try await restart(SimulatorSource(options: SimulatorOptions(rateHz: 10), logger: logger)) {
                let running = count("Simulator started") - count("Simulator stopped")
                return running > 0 ? ["\(running) producer task(s) still running"] : []
            }
        }

        @Test func serialRestarts() async throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let pty = PseudoTerminalPair(directory: dir.path)
            try await pty.plug()
            // The receiver talks all the time, whether or not anyone listens (what nobody
            // reads is dropped, as on a real line; a send never waits long).
            let receiver = startReceiver(feed: pty.feed, latitude: 45, from: 1_700_000_000_000, interval: .milliseconds(30))
            // The `/dev/pts/N` the link names: the source's descriptor points there.
            let tty = OwnedResources.resolvedPath(pty.gps)
            #expect(tty.hasPrefix("/dev/pts/"), "\(pty.gps) resolves to \(tty)")
            do {
                try await restart(SerialSource(path: pty.gps, baud: 38400, logger: quietLogger, backoff: testBackoff)) {
                    OwnedResources.descriptors(on: tty)
                }
            } catch {
                receiver.cancel()
                await pty.unplug()
                throw error
            }
            receiver.cancel()
            try await awaitEnd(of: receiver, "the receiver task to stop")
            await pty.unplug()
        }

        @Test func gpsdRestarts() async throws {
            let port = try FreePort.next()
            let directory = try TemporaryDirectory(prefix: "fake-gpsd")
            defer { directory.remove() }
            let gpsd = GPSFake(
                port: port, recording: try fixturePath("firefly-II.log"), secondsBetweenSentences: 0.02, directory: directory.path)
            try await gpsd.startServing()
            do {
                try await restart(GPSDSource(host: "127.0.0.1", port: port, logger: quietLogger, backoff: testBackoff)) {
                    OwnedResources.establishedConnections(toPort: port)
                }
            } catch {
                await gpsd.stop()
                throw error
            }
            await gpsd.stop()
        }
    }
}
