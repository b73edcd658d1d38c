import Logging
import Synchronization

/// Keeps the messages a source logs, so that a test can see what its producer task did
/// (started, stopped) where no event reaches the consumer. No bootstrap: the logger is
/// handed to the source.
final class LogRecorder: Sendable {
    private let messages = Mutex<[String]>([])

    /// A logger at `.trace` writing into this recorder.
    func logger() -> Logger {
        var logger = Logger(label: "GNSSSourcesTests") { _ in Handler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    /// How many times `message` was logged.
    func count(_ message: String) -> Int {
        messages.withLock { $0.count { $0 == message } }
    }

    private func append(_ message: String) {
        messages.withLock { $0.append(message) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.append("\(event.message)")
        }
    }
}
