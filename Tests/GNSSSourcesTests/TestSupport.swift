#if canImport(Glibc)
import FleetcastCore
import Glibc
#endif
import Foundation
import GNSS
import GNSSSources
import Logging
import Synchronization
import Testing

/// A wait that did not end in time: the test fails with what it was waiting for.
struct TimeoutError: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `operation`, failing with ``TimeoutError`` after `limit`.
///
/// The wait is bounded even when `operation` ignores cancellation (a task stuck in a
/// blocking system call): on timeout the operation is cancelled and left behind instead of
/// awaited, so the test fails with a message rather than hanging the whole run.
func withTimeout<T: Sendable>(
    _ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = TimeoutRace<T>()
    return try await withTaskCancellationHandler {
        let work = Task {
            do { race.finish(.success(try await operation())) } catch { race.finish(.failure(error)) }
        }
        let timer = Task {
            // Cancelled when the operation finishes first.
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            race.finish(.failure(TimeoutError(what: what)))
        }
        race.track(work, timer)
        return try await race.outcome()
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The state of one ``withTimeout(_:_:_:)``: the first of operation, timer and cancellation
/// to finish decides the outcome; the others are cancelled.
private final class TimeoutRace<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>?
        var continuation: CheckedContinuation<T, any Error>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Records the outcome unless one is already recorded; resumes the waiter and cancels
    /// the tasks that lost.
    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock { s -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard s.result == nil else { return (nil, []) }
            s.result = result
            defer {
                s.continuation = nil
                s.tasks = []
            }
            return (s.continuation, s.tasks)
        }
        tasks.forEach { $0.cancel() }
        continuation?.resume(with: result)
    }

    /// Keeps the tasks to cancel when the race is decided (at once if it already is).
    func track(_ tasks: Task<Void, Never>...) {
        let decided = state.withLock { s in
            if s.result == nil { s.tasks += tasks }
            return s.result != nil
        }
        if decided { tasks.forEach { $0.cancel() } }
    }

    /// Waits for the outcome.
    func outcome() async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, any Error>) in
            let decided = state.withLock { s -> Result<T, any Error>? in
                if let result = s.result { return result }
                s.continuation = c
                return nil
            }
            if let decided { c.resume(with: decided) }
        }
    }
}

/// Awaits the end of a helper task (a sender loop) that was just cancelled, bounded: a task
/// stuck in a system call fails the test instead of hanging it.
func awaitEnd(of task: Task<Void, Never>, _ what: String, timeout: Duration = .seconds(10)) async throws {
    try await withTimeout(timeout, what) { await task.value }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held. Only for
/// state that offers no event to await (a descriptor closed by the event loop after the
/// source's task ended, a process gone).
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while !condition() {
        guard clock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return true
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
        } catch let error as TimeoutError {
            // Say what did arrive, so that a failure can be understood from the log.
            let summary = self.events.suffix(8).map { e -> String in
                switch e {
                case .fix(let f): return "fix(\(f.time), \(f.latitude), \(f.longitude))"
                case .heading: return "heading"
                case .state(let s): return "state(\(s))"
                }
            }
            throw TimeoutError(what: "\(error.what); \(self.events.count) events, last: \(summary)")
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

/// A free TCP port on 127.0.0.1, chosen by the kernel.
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
            bind(fd, p, len) == 0 && getsockname(fd, p, &len) == 0
        }
    }
    try #require(bound)
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Whether something listens on 127.0.0.1:`port`.
func loopbackPortAccepts(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// A temporary directory removed by ``remove()``.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "gnss-sources-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension Date {
    /// Now, seconds since 1970.
    static var nowSeconds: Double { Date().timeIntervalSince1970 }
}
