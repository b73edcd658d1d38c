import GNSS
import Logging

/// A GNSS receiver seen as a restartable stream of ``GNSS/GNSSEvent`` values.
///
/// Every iteration (`makeAsyncIterator()`) is a fresh start: it opens the device or
/// connection, reports its state as `.state(...)` events (connecting, streaming, noFix,
/// reconnecting, ended) and yields fixes and headings. Cancelling the iterating task, or
/// dropping the iterator, stops the source and releases its file descriptor or socket.
/// Errors that are retried never end the stream; only a finite source (a replay without
/// looping) finishes, after `.state(.ended)`.
public protocol GNSSSource: AsyncSequence, Sendable
where Element == GNSSEvent, Failure == Never, AsyncIterator == GNSSEventIterator {
    /// The source URI this source was made from (`serial:/dev/ttyUSB0?baud=9600`, …), for logs.
    var uri: String { get }

    /// Starts the source and returns the stream of its events (one fresh run per call).
    func makeEventStream() -> AsyncStream<GNSSEvent>
}

extension GNSSSource {
    /// Starts a fresh run of the source; see ``GNSSSource``.
    public func makeAsyncIterator() -> GNSSEventIterator {
        GNSSEventIterator(makeEventStream())
    }
}

/// The iterator of every ``GNSSSource``: one run of the source, stopped when the iterator is
/// dropped or its task is cancelled.
public struct GNSSEventIterator: AsyncIteratorProtocol {
    /// Iteration never throws: failures are reported as `.state(.reconnecting…)` events.
    public typealias Failure = Never

    private var base: AsyncStream<GNSSEvent>.Iterator

    init(_ stream: AsyncStream<GNSSEvent>) {
        self.base = stream.makeAsyncIterator()
    }

    /// The next event, or `nil` when the source ended or the iterating task was cancelled.
    public mutating func next() async -> GNSSEvent? {
        await base.next()
    }

    /// The next event (isolation-preserving form used by `for await`).
    public mutating func next(isolation actor: isolated (any Actor)?) async -> GNSSEvent? {
        await base.next(isolation: actor)
    }
}

/// A type-erased ``GNSSSource``, as returned by ``GNSSSourceDescriptor/makeSource(logger:backoff:)``.
public struct AnyGNSSSource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// The URI of the wrapped source.
    public let uri: String
    private let make: @Sendable () -> AsyncStream<GNSSEvent>

    /// Wraps a concrete source.
    public init<Source: GNSSSource>(_ source: Source) {
        self.uri = source.uri
        self.make = { source.makeEventStream() }
    }

    /// Starts the wrapped source.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        make()
    }
}

extension Logger {
    /// This logger with a source's URI as `gnss.source` metadata, for the source's own lines.
    func forSource(_ uri: String) -> Logger {
        var logger = self
        logger[metadataKey: "gnss.source"] = "\(uri)"
        return logger
    }
}
