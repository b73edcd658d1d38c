import EdgeCore
import Logging
import MQTT

extension Logger {
    /// Writes what the edge's state decided to say, in the publisher's words: levels a user sees
    /// by default for what needs them (a failing source or store, a refused publish), debug for
    /// what the MQTT client says itself.
    func edge(_ entry: EdgeLog, settings: PublisherSettings, outboxPath: String) {
        func seconds(_ duration: Duration) -> String { "\(duration.components.seconds) s" }
        switch entry {
        case .source(.failing(let reason)):
            warning("GNSS source failing, retrying", metadata: ["error": "\(reason)"])
        case .source(.stillFailing(let reason, let attempts, let duration)):
            warning(
                "GNSS source still failing, retrying",
                metadata: ["error": "\(reason)", "gnss.attempts": "\(attempts)", "gnss.failingFor": "\(seconds(duration))"])
        case .source(.recovered(let attempts, let duration)):
            notice("GNSS source working again", metadata: ["gnss.attempts": "\(attempts)", "gnss.failedFor": "\(seconds(duration))"])
        case .fixTime(let action):
            FixTimeCheck.log(action, to: self, maximumOffset: settings.maximumFixClockOffset)
        case .gnssChanged(let state):
            debug("GNSS state changed", metadata: ["gnss.to": "\(state.rawValue)"])
        case .sendFailed(let level, let topic, let error):
            log(level: level, "send failed, keeping messages in the outbox", metadata: ["mqtt.topic": "\(topic)", "error": "\(error)"])
        case .sendingResumed(let level, let backlog):
            log(level: level, "sending resumed", metadata: ["outbox.backlog": "\(backlog)"])
        case .refused(let topic, let error, let backlogKept):
            // Names the topic, the user and what to check: a new connection may come with a
            // corrected ACL, and the refusal is said again then.
            var metadata: Logger.Metadata = ["mqtt.topic": "\(topic)", "error": "\(error)"]
            if let user = settings.brokerUser { metadata["mqtt.user"] = "\(user)" }
            let consequence =
                backlogKept
                ? "the backlog stays in the store until the broker takes it"
                : "refused messages are dropped and counted as rejected in the status"
            self.error(
                "the broker refused a publish: check that its ACL allows this vehicle's topics and that the vehicle id is right; \(consequence)",
                metadata: metadata)
        case .storeFailed(let error):
            self.error(
                "cannot write the outbox store; keeping messages in memory until it works again",
                metadata: ["outbox.path": "\(outboxPath)", "error": "\(error)"])
        case .storeWritable:
            notice("outbox store writable again", metadata: ["outbox.path": "\(outboxPath)"])
        case .outboxLimit(let full, let expired):
            warning(
                "outbox limit reached, oldest records dropped",
                metadata: [
                    "outbox.droppedFull": "\(full)", "outbox.droppedExpired": "\(expired)", "outbox.maxBytes": "\(settings.maxBytes)",
                ])
        case .batchTooLarge(let bytes):
            debug("backlog batch too large for the broker; sending smaller ones", metadata: ["outbox.batchBytes": "\(bytes)"])
        case .backlogUnreadable(let error):
            debug("cannot read the backlog", metadata: ["error": "\(error)"])
        }
    }
}
