import FleetcastTestSupport
import Foundation
import GNSS
import GNSSSources
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
import FleetcastCore
import Glibc
#endif

/// Awaits the end of a helper task (a sender loop) that was just cancelled, bounded: a task
/// stuck in a system call fails the test instead of hanging it.
func awaitEnd(of task: Task<Void, Never>, _ what: String, timeout: Duration = .seconds(10)) async throws {
    try await withTimeout(timeout, what) { await task.value }
}

/// Iterates a source in its own task and records every event, so that a test can wait for
/// a condition on what arrived while it acts on the world (unplug, restart gpsd…).
final class EventRecorder: Sendable {
    private struct Waiter {
        let predicate: @Sendable ([GNSSEvent]) -> Bool
        let continuation: CheckedContinuation<[GNSSEvent], Never>
    }

    private struct State {
        var events: [GNSSEvent] = []
        var finished = false
        var waiters: [Int: Waiter] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
    }

    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)

    init<S: GNSSSource>(_ source: S) {
        let t = Task { [self] in
            for await event in source {
                record(event)
            }
            finish()
        }
        task.withLock { $0 = t }
    }

    /// Everything recorded so far.
    var events: [GNSSEvent] { state.withLock { $0.events } }

    /// Whether the source's stream ended.
    var finished: Bool { state.withLock { $0.finished } }

    private func record(_ event: GNSSEvent) {
        let ready = state.withLock { s -> [(CheckedContinuation<[GNSSEvent], Never>, [GNSSEvent])] in
            s.events.append(event)
            var ready: [(CheckedContinuation<[GNSSEvent], Never>, [GNSSEvent])] = []
            for (id, w) in s.waiters where w.predicate(s.events) {
                ready.append((w.continuation, s.events))
                s.waiters[id] = nil
            }
            return ready
        }
        for (c, events) in ready { c.resume(returning: events) }
    }

    private func finish() {
        let waiters = state.withLock { s -> ([Waiter], [GNSSEvent]) in
            s.finished = true
            defer { s.waiters.removeAll() }
            return (Array(s.waiters.values), s.events)
        }
        for w in waiters.0 { w.continuation.resume(returning: waiters.1) }
    }

    /// Waits until `predicate` holds for the events recorded so far (or the stream ended),
    /// failing after `timeout`; returns the events.
    @discardableResult
    func waitFor(
        _ what: String, timeout: Duration = .seconds(15),
        _ predicate: @escaping @Sendable ([GNSSEvent]) -> Bool
    ) async throws -> [GNSSEvent] {
        let id = state.withLock { s in
            defer { s.nextID += 1 }
            return s.nextID
        }
        let events: [GNSSEvent]
        do {
            events = try await waitForEvents(what, timeout: timeout, id: id, predicate)
        } catch TestSupportError.timedOut(let waitedFor, let limit) {
            // Say what did arrive, so that a failure can be understood from the log.
            let summary = self.events.suffix(8).map { e -> String in
                switch e {
                case .fix(let f): return "fix(\(f.time), \(f.latitude), \(f.longitude))"
                case .heading: return "heading"
                case .state(let s): return "state(\(s))"
                }
            }
            throw TestSupportError.timedOut("\(waitedFor); \(self.events.count) events, last: \(summary)", limit)
        }
        try #require(predicate(events), "stream ended before \(what)")
        return events
    }

    private func waitForEvents(
        _ what: String, timeout: Duration, id: Int, _ predicate: @escaping @Sendable ([GNSSEvent]) -> Bool
    ) async throws -> [GNSSEvent] {
        try await withTimeout(timeout, what) { [self] in
            await withTaskCancellationHandler {
                await withCheckedContinuation { (c: CheckedContinuation<[GNSSEvent], Never>) in
                    let immediate = state.withLock { s -> [GNSSEvent]? in
                        if predicate(s.events) || s.finished || s.cancelled.contains(id) { return s.events }
                        s.waiters[id] = Waiter(predicate: predicate, continuation: c)
                        return nil
                    }
                    if let immediate { c.resume(returning: immediate) }
                }
            } onCancel: { [self] in
                let w = state.withLock { s -> Waiter? in
                    guard let w = s.waiters.removeValue(forKey: id) else {
                        s.cancelled.insert(id)
                        return nil
                    }
                    return w
                }
                w?.continuation.resume(returning: [])
            }
        }
    }

    /// Cancels the iteration and waits (bounded) for it to stop; records an issue if the
    /// stream does not end.
    func stop(timeout: Duration = .seconds(10)) async {
        let t = task.withLock { $0 }
        t?.cancel()
        do {
            try await withTimeout(timeout, "the event stream to end after cancel") { await t?.value }
        } catch {
            Issue.record(error)
        }
    }
}

extension GNSSEvent {
    var fix: Fix? {
        if case .fix(let f) = self { return f }
        return nil
    }

    var heading: Heading? {
        if case .heading(let h) = self { return h }
        return nil
    }

    var state: SourceState? {
        if case .state(let s) = self { return s }
        return nil
    }

    var isReconnecting: Bool {
        if case .state(.reconnecting) = self { return true }
        return false
    }
}

extension Array where Element == GNSSEvent {
    var fixes: [Fix] { compactMap(\.fix) }
    var states: [SourceState] { compactMap(\.state) }
    var reconnectReasons: [String] {
        compactMap {
            if case .state(.reconnecting(let reason, _)) = $0 { return reason }
            return nil
        }
    }
}

/// A logger that drops everything (tests check events, not log lines).
let quietLogger = Logger(label: "GNSSSourcesTests", factory: { _ in SwiftLogNoOpLogHandler() })

/// A backoff fast enough for tests.
let testBackoff = Backoff(initial: .milliseconds(100), maximum: .milliseconds(400))

/// The path of a fixture recording.
func fixturePath(_ name: String) throws -> String {
    try #require(Bundle.module.path(forResource: name, ofType: nil, inDirectory: "Fixtures"))
}

extension Date {
    /// Now, seconds since 1970.
    static var nowSeconds: Double { Date().timeIntervalSince1970 }
}
