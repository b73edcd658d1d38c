import ArgumentParser
import EdgeAgent
import EdgeConfiguration
import Logging

/// `fleetcast-agent check`: validates the configuration, then tries the source and the broker
/// as the service would, one line per step. Exits 0 when every step passes.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the configuration, the receiver and the broker before enabling the service.",
        discussion: """
            Loads the configuration as `run` does (file, FLEETCAST_… environment, and the same \
            flags: a `run` command line with `check` in its place checks that run; --log-level is \
            checked, but check prints its own lines instead of logging), opens the \
            source until a first position fix, connects to the broker (TLS and credentials \
            included) and publishes a non-retained test message on <prefix>/<vehicle>/check to \
            prove the broker's ACL lets the vehicle publish. Not while the agent runs for the \
            vehicle: a broker that makes the client id the user name (the shipped configurations) \
            would close the agent's connection, so the broker step fails saying so; stop the \
            agent first. Prints one line per step: ok, or what failed and what to do. Exit status \
            0 when all pass, 1 when a step fails, 78 for a configuration error.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Option(help: "Seconds to wait for the receiver's first position fix.")
    var timeout: Int = 60

    func run() async throws {
        @Sendable func line(_ passed: Bool, _ name: String, _ detail: String) {
            print("\(passed ? "ok  " : "FAIL") \(name + String(repeating: " ", count: max(0, 8 - name.count))) \(detail)")
        }
        let configuration: AgentConfiguration
        do {
            configuration = try await options.load()
        } catch {
            line(false, "config", "\(error)")
            throw ExitCode(78)  // EX_CONFIG
        }
        line(true, "config", "\(options.config ?? "defaults, environment and flags"): vehicle \(configuration.vehicle)")
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .critical  // the steps speak for themselves
            return handler
        }
        let passed = await AgentCheck.run(
            configuration: configuration, sourceTimeout: .seconds(max(1, timeout)), logger: Logger(label: "fleetcast.check")
        ) { step in
            line(step.passed, step.name, step.detail)
        }
        if !passed { throw ExitCode.failure }
    }
}
