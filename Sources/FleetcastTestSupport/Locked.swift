import Foundation

/// A value behind an `NSLock` (a pthread mutex, visible to ThreadSanitizer — unlike
/// `Synchronization.Mutex` on Linux, whose futex TSan cannot see).
///
/// `@unchecked Sendable` is safe because `value` is only read or written inside `withLock`,
/// which holds `lock` for the whole access.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
