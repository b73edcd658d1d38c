import EdgePublisher
import FleetProtocol

extension Publisher.Settings {
    /// The defaults with a test's timings: retries after 1 ms (at most 20 ms apart), commits
    /// every 50 ms, statuses at most every 100 ms, and a backlog drained at 10,000 events/s, so
    /// that what a vehicle does in minutes happens in a test's second.
    package static func quick(vehicle: VehicleID) -> Self {
        var settings = Self(vehicle: vehicle)
        settings.initialRetryDelay = .milliseconds(1)
        settings.maxRetryDelay = .milliseconds(20)
        settings.syncInterval = .milliseconds(50)
        settings.statusInterval = .milliseconds(100)
        settings.drainRate = 10_000
        return settings
    }
}
