import FleetcastTestSupport
import Synchronization

/// What an instrumented source has seen: iterations started and stopped, and how many ran at once.
struct SourceCounts: Sendable {
    var starts = 0
    var stops = 0
    var running = 0
    var maxRunning = 0
    var produced = 0
}

struct SourceTestFailure: Error, Equatable {
    let code: Int
}

/// A restartable source standing for a GNSS receiver: each `makeAsyncIterator()` is a fresh
/// start (counted), it produces 0, 1, 2, … paced by `interval` (the receiver's rate), and it
/// records a stop when its task is cancelled or it ends. It can wait for a gate before its
/// first value, end after `count` values, or fail after `failAfter` values.
struct ProbedSource: AsyncSequence, Sendable {
    let counts: Watched<SourceCounts>
    var interval: Duration = .milliseconds(1)
    var count: Int?
    var failAfter: Int?
    /// If set, the first value waits until this becomes true.
    var gate: Watched<Bool>?
    /// If true, the source never produces a value (a receiver without fix) until cancelled.
    var silent = false

    struct AsyncIterator: AsyncIteratorProtocol {
        let source: ProbedSource
        var produced = 0
        var started = false
        var ended = false

        mutating func next() async throws -> Int? {
            guard !ended else { return nil }
            if !started {
                started = true
                source.counts.update {
                    $0.starts += 1
                    $0.running += 1
                    $0.maxRunning = Swift.max($0.maxRunning, $0.running)
                }
                if let gate = source.gate {
                    _ = await gate.wait { $0 }
                }
            }
            do {
                if source.silent {
                    try await suspendUntilCancelled()
                }
                if produced > 0 && source.interval > .zero {
                    try await Task.sleep(for: source.interval)
                }
                try Task.checkCancellation()
            } catch {
                end()
                throw error
            }
            if let failAfter = source.failAfter, produced == failAfter {
                end()
                throw SourceTestFailure(code: 7)
            }
            if let count = source.count, produced == count {
                end()
                return nil
            }
            defer { produced += 1 }
            source.counts.update { $0.produced += 1 }
            return produced
        }

        private mutating func end() {
            ended = true
            source.counts.update {
                $0.stops += 1
                $0.running -= 1
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(source: self)
    }
}
