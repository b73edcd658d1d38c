import ArgumentParser
import EdgeAgent
import EdgeConfiguration
import FleetcastCore
import Logging
import NIOCore
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials  // ProcessInfo; full Foundation (ICU) would cost a vehicle megabytes
#else
import Foundation
#endif

/// `fleetcast-agent run`: reads the receiver and publishes to MQTT until SIGTERM/SIGINT, or
/// until a `replay:` source ends (a batch upload).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Publish the receiver's fixes and headings to MQTT (the default).",
        discussion: """
            Configuration comes from the YAML file (--config), then FLEETCAST_… environment \
            variables (e.g. FLEETCAST_VEHICLE, FLEETCAST_BROKER_URL), then these flags, each \
            overriding the one before. The broker password comes from --password-file or \
            FLEETCAST_BROKER_PASSWORD, never from a flag's value.

            Sources: gpsd://HOST[:PORT][?device=PATH], serial:PATH?baud=N, \
            replay:PATH?speed=N|max&loop=true, sim:?rate=HZ
            """
    )

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        // SwiftNIO serves one receiver and one store: the gpsd or serial source's reads and the
        // store's futures on one event loop; on the blocking pool, the store's SQLite calls
        // (its writer's and its reader's, each statement a job of its own) and a replay's file
        // reads. One loop and two threads are enough, where NIO's default is one of each per
        // core (8 threads on a Raspberry Pi 4). Set before anything uses NIO's singletons; NIO's
        // own variables (NIO_SINGLETON_…) still take precedence.
        if environment["NIO_SINGLETON_GROUP_LOOP_COUNT"] == nil { NIOSingletons.groupLoopCountSuggestion = 1 }
        if environment["NIO_SINGLETON_BLOCKING_POOL_THREAD_COUNT"] == nil { NIOSingletons.blockingPoolThreadCountSuggestion = 2 }

        let configuration: AgentConfiguration
        do {
            configuration = try await options.load()
        } catch {
            let message = "fleetcast-agent: \(error)\n"
            _ = message.utf8CString.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
            throw ExitCode(78)  // EX_CONFIG
        }

        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "fleetcast.agent")

        let agent: AgentService
        do {
            agent = try AgentService(
                configuration: configuration, agentVersion: FleetcastAgent.version, logger: logger,
                notifier: SystemdNotifier(environment: environment))
        } catch {
            logger.error("cannot start", metadata: ["error": "\(error)"])
            throw ExitCode(78)
        }
        var groupConfiguration = ServiceGroupConfiguration(
            services: [.init(service: agent, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        // A graceful stop sends what is live, then `offline`, then disconnects, each bounded by
        // the drain timeout (5 s): past 18 s the agent is cancelled, before systemd's
        // TimeoutStopSec=20 would kill it.
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(18)
        let group = ServiceGroup(configuration: groupConfiguration)
        // Once started, the pages only the start used go back to the kernel (StartupPages).
        let trim = Task {
            try await Task.sleep(for: .seconds(20))
            let bytes = StartupPages.release()
            logger.debug("startup pages released", metadata: ["memory.advisedBytes": "\(bytes)"])
        }
        defer { trim.cancel() }
        do {
            try await group.run()
        } catch {
            logger.error("agent failed", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }
}
