import ArgumentParser
import Logging

/// `--log-level`, shared by every fleet-watch subcommand: logs go to stderr at that level.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level on stderr: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level \(logLevel)")
        }
    }

    /// Bootstraps logging to stderr at `--log-level` and returns the executable's logger.
    func makeLogger() -> Logger {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return Logger(label: "fleet-watch")
    }
}
