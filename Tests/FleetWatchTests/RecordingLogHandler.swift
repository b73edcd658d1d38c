import Logging
import Synchronization

/// Keeps log records in memory so tests can assert what a library logged (no bootstrap).
final class LogRecorder: Sendable {
    struct Record: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let records = Mutex<[Record]>([])

    /// A logger writing into this recorder.
    func logger(_ label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    var all: [Record] { records.withLock { $0 } }

    func append(_ record: Record) { records.withLock { $0.append(record) } }

    struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            recorder.append(Record(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}
