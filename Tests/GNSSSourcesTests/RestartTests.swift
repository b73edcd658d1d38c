import Foundation
import GNSS
import GNSSSources
import Testing

extension LiveSourceTests {
    /// Iterate, cancel, iterate again: every run starts afresh and gives back its
    /// descriptors (the count of `/proc/self/fd` returns to where it was).
    @Suite struct RestartTests {
        /// Runs the source `runs` times, each until `fixes` fixes arrived, then cancels it;
        /// checks that each run delivered and that no descriptor stayed open.
        private func restart<S: GNSSSource>(_ source: S, runs: Int = 3, fixes: Int = 2) async throws {
            // A first run warms up what lives for the whole process (the event loop's epoll
            // and eventfd, the thread pool), so it is not counted as a leak.
            let warmUp = EventRecorder(source)
            try await warmUp.waitFor("fixes in the warm-up run") { $0.fixes.count >= fixes }
            await warmUp.stop()
            let baseline = await settledDescriptorCount(baseline: 0, timeout: .milliseconds(200))
            for run in 1...runs {
                let recorder = EventRecorder(source)
                let events = try await recorder.waitFor("fixes in run \(run)") { $0.fixes.count >= fixes }
                #expect(events.first == .state(.connecting), "run \(run) starts afresh")
                await recorder.stop()
                let count = await settledDescriptorCount(baseline: baseline)
                #expect(count <= baseline, "run \(run): \(count) descriptors open, \(baseline) before")
            }
        }

        @Test func replayRestarts() async throws {
            try await restart(ReplaySource(path: try fixturePath("firefly-II.log"), speed: .factor(50), logger: quietLogger))
        }

        @Test func simulatorRestarts() async throws {
            try await restart(SimulatorSource(options: SimulatorOptions(rateHz: 10), logger: quietLogger))
        }

        @Test func serialRestarts() async throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let pty = PseudoTerminalPair(directory: dir.path)
            try await pty.plug()
            let feed = pty.feed
            // The receiver talks all the time, whether or not anyone listens.
            let receiver = Task {
                var t: Int64 = 1_700_000_000_000
                while !Task.isCancelled {
                    try? PseudoTerminalPair.send(nmeaEpochs(count: 1, from: t, latitude: 45), to: feed)
                    t += 1000
                    try? await Task.sleep(for: .milliseconds(30))
                }
            }
            do {
                try await restart(SerialSource(path: pty.gps, baud: 38400, logger: quietLogger, backoff: testBackoff))
            } catch {
                receiver.cancel()
                await pty.unplug()
                throw error
            }
            receiver.cancel()
            await receiver.value
            await pty.unplug()
        }

        @Test func gpsdRestarts() async throws {
            let port = try freeLoopbackPort()
            let gpsd = FakeGPSD(port: port, recording: try fixturePath("firefly-II.log"))
            try gpsd.start()
            do {
                try await restart(GPSDSource(host: "127.0.0.1", port: port, logger: quietLogger, backoff: testBackoff))
            } catch {
                await gpsd.stop()
                throw error
            }
            await gpsd.stop()
        }
    }
}
