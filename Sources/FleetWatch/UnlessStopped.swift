import Logging
import ServiceLifecycle

/// Runs `reach` — connecting to a broker or a database, retrying while it is unreachable —
/// unless a graceful shutdown comes first: the value reached, or `nil` when the stop came
/// first (then `stopped` is logged at info: nothing was received, nothing is lost). Any other
/// error, and a cancellation that is not a graceful shutdown, is thrown.
package func reachedUnlessStopped<Value: Sendable>(
    logger: Logger, stopped: @autoclosure () -> Logger.Message,
    _ reach: @escaping @Sendable () async throws -> Value
) async throws -> Value? {
    do {
        return try await cancelWhenGracefulShutdown { try await reach() }
    } catch is CancellationError where Task.isShuttingDownGracefully {
        logger.info(stopped())
        return nil
    }
}
