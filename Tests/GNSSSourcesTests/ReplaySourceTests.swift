import FleetcastCore
import FleetcastTestSupport
import Foundation
import GNSS
import GNSSSources
import NMEA
import Testing

extension LiveSourceTests {
    @Suite struct ReplaySourceTests {
        /// The fixes the decoder finds in a recording read whole: what a replay must deliver.
        private func expectedFixes(_ path: String) throws -> [Fix] {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            var decoder = NMEADecoder()
            return decoder.decode(bytes).fixes
        }

        /// `copies` copies of firefly-II.log end to end, in a new temporary directory (the
        /// caller removes it).
        private func repeatedRecording(_ copies: Int) throws -> (path: String, directory: URL) {
            let one = try Data(contentsOf: URL(fileURLWithPath: try fixturePath("firefly-II.log")))
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("replay-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent("long.log").path
            let long = (0..<copies).reduce(into: Data()) { data, _ in data.append(one) }
            try long.write(to: URL(fileURLWithPath: path))
            return (path, directory)
        }

        @Test func maxSpeedDeliversEveryFixAndEnds() async throws {
            let path = try fixturePath("firefly-II.log")
            let expected = try expectedFixes(path)
            #expect(expected.count >= 20)
            let source = try GNSSSourceDescriptor(parsing: "replay:\(path)?speed=max").makeSource(logger: quietLogger)
            let events = try await withTimeout(.seconds(10), "the replay to end") {
                var events: [GNSSEvent] = []
                for await e in source { events.append(e) }
                return events
            }
            #expect(events.fixes == expected)
            #expect(events.first == .state(.connecting))
            #expect(events.last == .state(.ended))
            #expect(events.states == [.connecting, .streaming, .ended])
            // The recording is in Los Gatos, CA (37.2610° N, 121.9612° W).
            #expect(abs((events.fixes.first?.latitude ?? 0) - 37.261026667) < 1e-6)
            #expect(abs((events.fixes.first?.longitude ?? 0) + 121.961181667) < 1e-6)
        }

        @Test func batchesAtMaxSpeedHoldTheEventsTheStreamGivesOneByOne() async throws {
            // Twenty copies of a recording: more than one 64 KiB chunk, so more than one batch.
            let (path, directory) = try repeatedRecording(20)
            defer { try? FileManager.default.removeItem(at: directory) }
            let source = ReplaySource(path: path, speed: .max, logger: quietLogger)
            let (oneByOne, batches) = try await withTimeout(.seconds(30), "both replays to end") {
                var oneByOne: [GNSSEvent] = []
                for await event in source.makeEventStream() { oneByOne.append(event) }
                var batches: [[GNSSEvent]] = []
                for await batch in try #require(source.makeBatchStream()) { batches.append(batch) }
                return (oneByOne, batches)
            }
            #expect(try oneByOne.fixes.count == expectedFixes(path).count)
            #expect(batches.joined().elementsEqual(oneByOne))
            // Connecting alone, then one batch per 64 KiB chunk (two here), then the end.
            #expect(batches.count == 4, "\(batches.count) batches")
            #expect(!batches.contains { $0.isEmpty })
            // Iterating the source, type-erased as the agent holds it, goes by batches, and a
            // cancelled consumer gets nothing more of the batch it is in.
            let erased = AnyGNSSSource(source)
            #expect(erased.makeBatchStream() != nil)
            #expect(ReplaySource(path: path, speed: .factor(1), logger: quietLogger).makeBatchStream() == nil)
            let (firstTwo, afterCancel) = await Task {
                var iterator = erased.makeAsyncIterator()
                let firstTwo = [await iterator.next(), await iterator.next()]  // the second opens a chunk's batch
                withUnsafeCurrentTask { $0?.cancel() }
                return (firstTwo, await iterator.next())
            }.value
            #expect(firstTwo == [.state(.connecting), .state(.streaming)])
            #expect(afterCancel == nil)
        }

        @Test func maxSpeedLosesNothingWhenTheConsumerIsLate() async throws {
            // Sixty copies of a recording: thousands of events, decoded far faster than a
            // consumer that starts late and reads slowly takes them.
            let (path, directory) = try repeatedRecording(60)
            defer { try? FileManager.default.removeItem(at: directory) }
            let expected = try expectedFixes(path)
            #expect(expected.count > 1200)
            let source = try GNSSSourceDescriptor(parsing: "replay:\(path)?speed=max").makeSource(logger: quietLogger)
            let fixes = try await withTimeout(.seconds(30), "the replay to end") {
                var iterator = source.makeAsyncIterator()
                var fixes: [Fix] = []
                _ = await iterator.next()  // the producer starts with the first request…
                try await Task.sleep(for: .milliseconds(500))  // …and runs ahead meanwhile
                while let event = await iterator.next() {
                    if case .fix(let fix) = event {
                        fixes.append(fix)
                        if fixes.count % 100 == 0 { await Task.yield() }
                    }
                }
                return fixes
            }
            #expect(fixes.count == expected.count, "got \(fixes.count) of \(expected.count)")
            #expect(fixes == expected)
        }

        @Test func pacedReplayTakesTheRecordingsDurationOverSpeed() async throws {
            let path = try fixturePath("firefly-II.log")
            let fixes = try expectedFixes(path)
            let first = try #require(fixes.first?.time), last = try #require(fixes.last?.time)
            let recorded = Double(last.millisecondsSince1970 - first.millisecondsSince1970) / 1000
            #expect(recorded >= 20)
            let speed = 20.0
            let source = ReplaySource(path: path, speed: .factor(speed), logger: quietLogger)
            let clock = ContinuousClock()
            let start = clock.now
            let count = try await withTimeout(.seconds(20), "the paced replay to end") {
                var n = 0
                for await e in source where e.fix != nil { n += 1 }
                return n
            }
            let elapsed = start.duration(to: clock.now)
            #expect(count == fixes.count)
            // Loose lower bound: pacing must not be skipped (it is not a timing benchmark).
            #expect(elapsed >= .seconds(recorded / speed * 0.8), "took \(elapsed)")
        }

        @Test func loopStartsOverInsteadOfEnding() async throws {
            let path = try fixturePath("saab-r4.log")
            let perPass = try expectedFixes(path)
            #expect(!perPass.isEmpty)
            let recorder = EventRecorder(ReplaySource(path: path, speed: .max, loop: true, logger: quietLogger))
            let events = try await recorder.waitFor("three passes") { $0.fixes.count >= 3 * perPass.count }
            await recorder.stop()
            #expect(!events.contains(.state(.ended)))
            #expect(Array(events.fixes.prefix(2 * perPass.count)) == perPass + perPass)
            // saab-r4 also has HDT headings: they come through too.
            #expect(events.contains { $0.heading?.source == .hdt })
        }

        @Test func missingFileIsReportedAndRetried() async throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let path = dir.path + "/later.nmea"
            let recorder = EventRecorder(ReplaySource(path: path, speed: .max, logger: quietLogger, backoff: testBackoff))
            let events = try await recorder.waitFor("a reconnect naming the file") { !$0.reconnectReasons.isEmpty }
            #expect(events.reconnectReasons.first?.contains(path) == true)
            #expect(events.reconnectReasons.first?.contains("No such file or directory") == true)
            // The recording appears: the same iteration plays it.
            try FileManager.default.copyItem(atPath: try fixturePath("firefly-II.log"), toPath: path)
            let after = try await recorder.waitFor("the end of the replay") { $0.last == .state(.ended) }
            #expect(after.fixes.count >= 20)
            await recorder.stop()
        }
    }
}
