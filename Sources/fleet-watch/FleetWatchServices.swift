import FleetcastCore
import Foundation
import Logging
import ServiceLifecycle

/// How every long-running fleet-watch command runs (`watch`, `serve`, `bridge`, `record`): its
/// services in one ServiceGroup that SIGTERM and SIGINT shut down gracefully, with systemd told
/// how it is doing (``SystemdNotifyService``) when `$NOTIFY_SOCKET` says it runs under
/// `Type=notify`. A graceful stop returns (exit status 0); a service that fails throws its error.
enum FleetWatchServices {
    /// Runs `services` (each shut down in reverse order: list what others depend on first) until
    /// the last of them returns after a graceful shutdown, or one throws. `readiness` is what
    /// must be up before systemd hears `READY=1`; `status` is what `systemctl status` then
    /// shows. Past `gracePeriod` of shutting down, what still runs is cancelled.
    static func run(
        _ services: [ServiceGroupConfiguration.ServiceConfiguration], readiness: Readiness, status: String,
        gracePeriod: Duration = .seconds(10), logger: Logger
    ) async throws {
        var services = services
        if let notifier = SystemdNotifier(environment: ProcessInfo.processInfo.environment) {
            services.append(
                .init(
                    service: SystemdNotifyService(notifier: notifier, readiness: readiness, status: status, logger: logger),
                    successTerminationBehavior: .ignore))
        }
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = gracePeriod
        try await ServiceGroup(configuration: configuration).run()
    }
}
