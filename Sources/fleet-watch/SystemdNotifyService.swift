import FleetcastCore
import Logging
import ServiceLifecycle

/// What must be up before a long-running command tells systemd `READY=1`: named parts
/// (`subscribed`, `listening`), each reported once it is (a second report changes nothing).
final class Readiness: Sendable {
    /// The parts that must all be reported.
    let required: Set<String>
    private let reports: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation

    init(_ required: Set<String>) {
        self.required = required
        (reports, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .unbounded)
    }

    /// `part` is up. Never blocks.
    func report(_ part: String) {
        continuation.yield(part)
    }

    /// Waits until every required part has been reported; `false` when the task is cancelled
    /// first. Only one task may wait.
    func waitUntilReady() async -> Bool {
        var pending = required
        guard !pending.isEmpty else { return true }
        for await part in reports {
            pending.remove(part)
            if pending.isEmpty { return true }
        }
        return false
    }
}

/// fleet-watch's side of systemd's `Type=notify` and `WatchdogSec=` (``SystemdNotifier``, the
/// agent's too): `WATCHDOG=1` every half watchdog interval from the start until the shutdown
/// (the pings come from the same cooperative threads as the command's work, so a process whose
/// threads are all stuck falls silent and systemd restarts it; an unreachable broker or database
/// is not a wedge: each is retried and logged, and a restart would not mend it), `READY=1` once
/// every part of ``Readiness`` is up, and `STOPPING=1` when a graceful shutdown starts. Put it
/// last in the ServiceGroup: services stop in reverse order, so it hears of the shutdown first.
struct SystemdNotifyService: Service {
    let notifier: SystemdNotifier
    let readiness: Readiness
    /// What `systemctl status` shows once ready.
    let status: String
    let logger: Logger

    func run() async {
        notifier.notify("STATUS=starting: connecting")
        await withTaskGroup(of: Void.self) { group in
            if let interval = notifier.watchdogInterval {
                group.addTask {
                    try? await cancelWhenGracefulShutdown {
                        while true {
                            notifier.notify("WATCHDOG=1")
                            try await Task.sleep(for: interval / 2)
                        }
                    }
                }
            }
            group.addTask {
                let ready = await cancelWhenGracefulShutdown { await readiness.waitUntilReady() }
                guard ready else { return }
                notifier.notify("READY=1\nSTATUS=\(status)")
                logger.debug("Told systemd READY=1", metadata: ["systemd.status": "\(status)"])
            }
            // The pings go on until the shutdown; a shutdown before readiness ends the wait.
            try? await gracefulShutdown()
            notifier.notify("STOPPING=1\nSTATUS=stopping")
            await group.waitForAll()
        }
    }
}
