#if canImport(Glibc)
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
func withTimeout<T: Sendable>(
    _ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw TimeoutError(what: what)
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TimeoutError(what: what) }
        return first
    }
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

    /// Cancels the iteration and waits for it to stop.
    func stop() async {
        let t = task.withLock { $0 }
        t?.cancel()
        await t?.value
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

/// Number of open file descriptors of this process.
func openDescriptorCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// Waits (bounded) until the descriptor count is back at `baseline` or below; returns the last count.
func settledDescriptorCount(baseline: Int, timeout: Duration = .seconds(5)) async -> Int {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    var count = openDescriptorCount()
    // Descriptors are closed by the event loop after the task ends; there is no event to
    // await for that, so poll briefly (bounded).
    while count > baseline, clock.now < deadline {
        try? await Task.sleep(for: .milliseconds(20))
        count = openDescriptorCount()
    }
    return count
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
