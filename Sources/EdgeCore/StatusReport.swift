import FleetProtocol
import GNSS
import MQTTCore
import OutboxCore

/// The vehicle's retained status messages (`{prefix}/{vehicle}/status`, QoS 1, retained): the
/// `online` status with what the publisher reports, the `offline` one of a clean stop, and the
/// last will. A plain value: the publisher passes the figures of the moment, this writes them.
package struct StatusReport: Sendable {
    /// The QoS of status and backlog messages (the contract fixes it at 1).
    package static let qos = MQTTQoS.atLeastOnce

    /// The publisher's settings (vehicle, topics, source, version, whether fix times are checked).
    package let settings: PublisherSettings
    /// When this run started: the `since` of an `online` status written before the first
    /// connection (``Figures/since`` names the connection's once there is one).
    package let onlineSince: UTCTimestamp

    /// A report for a run that went online at `onlineSince`.
    package init(settings: PublisherSettings, onlineSince: UTCTimestamp) {
        (self.settings, self.onlineSince) = (settings, onlineSince)
    }

    /// What a status reports besides its state.
    package struct Figures: Sendable {
        /// The GNSS state.
        package var gnss: VehicleStatus.GNSSState
        /// Fixes and headings not yet acknowledged.
        package var backlog: Int
        /// Losses, by cause.
        package var drops: VehicleStatus.Drops
        /// Why the store is degraded, `nil` when it works.
        package var storage: String?
        /// Fixes refused for their time (reported only where fix times are checked).
        package var implausible: UInt64
        /// The broker link's bytes on the wire so far, when known.
        package var traffic: MQTTTraffic?
        /// When the broker connection the status goes out on was made (the `online` status's
        /// `since`); `nil` before the first: the run's start.
        package var since: UTCTimestamp?

        /// The figures of one moment.
        package init(
            gnss: VehicleStatus.GNSSState, backlog: Int, drops: VehicleStatus.Drops, storage: String?, implausible: UInt64,
            traffic: MQTTTraffic?, since: UTCTimestamp? = nil
        ) {
            (self.gnss, self.backlog, self.drops, self.storage) = (gnss, backlog, drops, storage)
            (self.implausible, self.traffic, self.since) = (implausible, traffic, since)
        }

        /// What the publisher's decisions said a status should carry, with the link's `traffic`.
        package init(_ content: PublisherState.StatusContent, traffic: MQTTTraffic?) {
            self.init(
                gnss: content.gnss, backlog: content.backlog, drops: content.drops, storage: content.storage,
                implausible: content.implausible, traffic: traffic, since: content.since)
        }
    }

    /// The `online` status with `figures`, `since` their connection (else the run's start).
    package func online(_ figures: Figures) -> OutboundMessage {
        message(state: .online, since: figures.since ?? onlineSince, reason: nil, figures)
    }

    /// The `offline` status of a clean stop at `time`, with `figures` and reason `shutdown`.
    package func offline(at time: UTCTimestamp, _ figures: Figures) -> OutboundMessage {
        message(state: .offline, since: time, reason: "shutdown", figures)
    }

    /// The retained `offline` status to register as the MQTT last will (no reason: the
    /// connection was lost).
    package var lastWill: OutboundMessage {
        let status = VehicleStatus(vehicle: settings.vehicle, state: .offline, source: settings.sourceURI)
        return OutboundMessage(
            kind: .status, topic: settings.topics.status(settings.vehicle), payload: FleetPayload.encode(status),
            qos: Self.qos, retain: true)
    }

    private func message(
        state: VehicleStatus.State, since: UTCTimestamp, reason: String?, _ figures: Figures
    ) -> OutboundMessage {
        let status = VehicleStatus(
            vehicle: settings.vehicle, state: state, since: since, agentVersion: settings.agentVersion,
            source: settings.sourceURI, gnss: figures.gnss, droppedFixes: figures.drops.total, reason: reason,
            drops: figures.drops, backlog: UInt64(figures.backlog), storage: figures.storage == nil ? .ok : .degraded,
            storageReason: figures.storage.map(Self.clipped),
            implausibleFixes: settings.maximumFixClockOffset == nil ? nil : figures.implausible,
            bytesSent: figures.traffic?.sent, bytesReceived: figures.traffic?.received)
        return OutboundMessage(
            kind: .status, topic: settings.topics.status(settings.vehicle), payload: FleetPayload.encode(status),
            qos: Self.qos, retain: true)
    }

    /// A storage reason cut to what subscribers accept (512 bytes), at a character boundary.
    package static func clipped(_ reason: String) -> String {
        guard reason.utf8.count > 500 else { return reason }
        var out = ""
        for character in reason {
            if out.utf8.count + character.utf8.count > 497 { break }
            out.append(character)
        }
        return out + "…"
    }
}
