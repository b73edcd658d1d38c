import ArgumentParser
import EdgeConfiguration
import FleetcastCommandLine

#if canImport(FoundationEssentials)
import FoundationEssentials  // ProcessInfo; full Foundation (ICU) would cost a vehicle megabytes
#else
import Foundation
#endif

/// The options `run` and `check` share: the configuration file, and the flags that override
/// what it and the FLEETCAST_… environment variables say (`check` reaches the broker as `run`
/// does, so it takes the same source, identity and TLS flags).
struct ConfigurationOptions: ParsableArguments {
    @Option(help: "GNSS source URI (default sim:, the built-in simulated receiver).")
    var source: String?

    @Option(help: "Vehicle id: 1 to 64 characters of A-Z a-z 0-9 . _ -")
    var vehicle: String?

    @Option(help: "Broker: mqtt[s]://[user@]host[:port] (default mqtt://localhost:1883).")
    var broker: String?

    @Option(help: "YAML configuration file (see config/agent.yaml).")
    var config: String?

    @OptionGroup var credentials: BrokerCredentialOptions

    /// Loads the configuration: the file, then the environment, then these flags and `flags`
    /// (more flags of the command, by configuration key), each overriding the one before.
    func load(adding flags: [String: String] = [:]) async throws(ConfigurationError) -> AgentConfiguration {
        var flags = flags
        flags["source"] = source
        flags["vehicle"] = vehicle
        flags["broker.url"] = broker
        flags["broker.passwordFile"] = credentials.passwordFile
        flags["broker.caFile"] = credentials.caFile
        flags["broker.certFile"] = credentials.certFile
        flags["broker.keyFile"] = credentials.keyFile
        return try await AgentConfiguration.load(filePath: config, environment: ProcessInfo.processInfo.environment, flags: flags)
    }
}
