/// Suspends until the current task is cancelled, then throws `CancellationError`: for a test
/// double that must hang (a wedged disk, a receiver without a fix) without a timer standing
/// for "forever".
public func suspendUntilCancelled() async throws -> Never {
    let (never, continuation) = AsyncStream<Void>.makeStream()
    var iterator = never.makeAsyncIterator()
    _ = await iterator.next()  // nothing is ever yielded: returns nil once the task is cancelled
    withExtendedLifetime(continuation) {}
    throw CancellationError()
}
