import FleetcastCore
import EdgeAgent
import Logging

/// Log records kept in memory, shared by the handler copies a `Logger` makes.
final class LogCapture: Sendable {
    struct Record: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: [String: String]
    }

    private let records = SanitizerVisibleMutex<[Record]>([])

    func append(_ record: Record) { records.withLock { $0.append(record) } }
    var all: [Record] { records.withLock { $0 } }

    /// A logger writing here (passed by value; nothing is bootstrapped).
    func logger(_ label: String = "test") -> Logger {
        Logger(label: label) { _ in CapturingLogHandler(capture: self) }
    }
}

/// A `LogHandler` that records into a ``LogCapture``.
struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        capture.append(.init(level: event.level, message: event.message.description, metadata: merged.mapValues { "\($0)" }))
    }
}
