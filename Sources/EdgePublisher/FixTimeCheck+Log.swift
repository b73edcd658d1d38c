import EdgeCore
import Logging

extension FixTimeCheck {
    /// Logs `action`: a refusal run's start as a warning (a user sees it at the default level),
    /// its end as a notice.
    static func log(_ action: LogAction, to logger: Logger, maximumOffset: Duration?) {
        switch action {
        case .refusing(let fixTime, let clock, let offset):
            logger.warning(
                "Refusing fixes stamped implausibly far from the synchronized system clock (GPS week rollover, or spoofed data?); they are counted, not published",
                metadata: [
                    "gnss.fixTime": "\(fixTime)", "gnss.systemTime": "\(clock)", "gnss.offsetSeconds": "\(offset / 1000)",
                    "gnss.maxOffsetSeconds": "\(maximumOffset?.components.seconds ?? 0)",
                ])
        case .accepting(let refused):
            logger.notice("Accepting fixes again", metadata: ["gnss.refusedFixes": "\(refused)"])
        }
    }
}
