import ArgumentParser
import EdgeConfiguration
import FleetcastCommandLine

#if canImport(FoundationEssentials)
import FoundationEssentials  // ProcessInfo; full Foundation (ICU) would cost a vehicle megabytes
#else
import Foundation
#endif

/// The options `run` and `check` share: the configuration file, and the flags that override
/// what it and the FLEETCAST_… environment variables say. `check` takes every one of them, so
/// that the command line of a `run` checks what that `run` would do (its state directory's
/// lock included) and refuses what that `run` would refuse.
struct ConfigurationOptions: ParsableArguments {
    @Option(help: "GNSS source URI (default sim:, the built-in simulated receiver).")
    var source: String?

    @Option(help: "Vehicle id: 1 to 64 characters of A-Z a-z 0-9 . _ -")
    var vehicle: String?

    @Option(
        help:
            "Broker: mqtt[s]://[user@]host[:port] (default mqtt://localhost:1883). Repeat it for the nodes of a cluster: the agent connects to one and fails over to the others."
    )
    var broker: [String] = []

    @Option(name: .customLong("protocol"), help: "MQTT protocol: auto (5, or 3.1.1 with a broker that refuses 5; the default), 5 or 3.1.1.")
    var protocolVersion: String?

    @Option(help: "YAML configuration file (see config/agent.yaml).")
    var config: String?

    @OptionGroup var credentials: BrokerCredentialOptions

    @Option(help: "Directory for the persistent message sequence number.")
    var stateDir: String?

    @Option(help: "Gather fixes and headings for up to this many seconds and send them as one message (a metered link), or off.")
    var uplinkBatch: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String?

    /// Loads the configuration: the file, then the environment, then these flags, each
    /// overriding the one before.
    func load() async throws(ConfigurationError) -> AgentConfiguration {
        var flags: [String: String] = [:]
        flags[AgentConfigurationKeys.source.name] = source
        flags[AgentConfigurationKeys.vehicle.name] = vehicle
        flags[AgentConfigurationKeys.brokerURL.name] = broker.isEmpty ? nil : broker.joined(separator: ",")
        flags[AgentConfigurationKeys.brokerProtocol.name] = protocolVersion
        flags[AgentConfigurationKeys.brokerPasswordFile.name] = credentials.passwordFile
        flags[AgentConfigurationKeys.brokerCAFile.name] = credentials.caFile
        flags[AgentConfigurationKeys.brokerCertFile.name] = credentials.certFile
        flags[AgentConfigurationKeys.brokerKeyFile.name] = credentials.keyFile
        flags[AgentConfigurationKeys.stateDir.name] = stateDir
        flags[AgentConfigurationKeys.uplinkBatch.name] = uplinkBatch
        flags[AgentConfigurationKeys.logLevel.name] = logLevel
        return try await AgentConfiguration.load(filePath: config, environment: ProcessInfo.processInfo.environment, flags: flags)
    }
}
