import FleetProtocol
import Foundation
import PostgresNIO

/// One message the recorder set aside (``TrackStore/setAside(vehicle:topic:payload:reason:rows:)``).
public struct QuarantinedMessage: Sendable, Equatable {
    /// The vehicle of its topic.
    public var vehicle: String
    /// Its MQTT topic.
    public var topic: String
    /// Why it was not stored (a PostgreSQL error, or a bound of ``HistoryAdmission``).
    public var reason: String
    /// When it was first set aside.
    public var setAsideAt: Date
    /// How many of its events were not stored.
    public var rows: Int
    /// The message's bytes, as received: publish them again to the same topic to replay them.
    public var payload: [UInt8]
}

extension TrackStore {
    /// Version 6: messages the recorder could not store for a reason other than PostgreSQL
    /// being unreachable, set aside whole (vehicle, topic, reason, time and the payload as
    /// received) so that one poison message never blocks the others, and the operator can read
    /// and replay them. A message set aside again (a redelivery, the retained `…/batch` after a
    /// restart) is one row: its topic and the payload's SHA-256 are unique.
    static let quarantineMigration = [
        """
        CREATE TABLE fleetcast_quarantine (
            id bigserial PRIMARY KEY,
            vehicle text NOT NULL,
            topic text NOT NULL,
            reason text NOT NULL,
            set_aside_at timestamptz NOT NULL DEFAULT now(),
            rows integer NOT NULL,
            payload bytea NOT NULL,
            digest bytea NOT NULL,
            UNIQUE (topic, digest)
        )
        """,
        "CREATE INDEX fleetcast_quarantine_vehicle ON fleetcast_quarantine (vehicle, set_aside_at)",
        // Which vehicle's message made each partition of the last two days: a restarted
        // recorder starts each vehicle with the budget it had left (HistoryAdmission).
        """
        CREATE TABLE fleetcast_partition_makers (
            day date PRIMARY KEY,
            vehicle text NOT NULL,
            made_at timestamptz NOT NULL DEFAULT now()
        )
        """,
    ]

    /// The most messages one vehicle may have set aside: past them its messages are counted
    /// and not kept (a vehicle sending poison without end cannot fill the database).
    public static let maximumQuarantinedPerVehicle = 1_000

    /// Sets a message aside; returns whether a row was added (false: it was there already, or
    /// its vehicle has ``maximumQuarantinedPerVehicle``).
    @discardableResult
    public func setAside(vehicle: String, topic: String, payload: [UInt8], reason: String, rows: Int) async throws -> Bool {
        let bytes = ByteBuffer(bytes: payload)
        var added = false
        let query: PostgresQuery = """
            INSERT INTO fleetcast_quarantine (vehicle, topic, reason, rows, payload, digest)
            SELECT \(vehicle), \(topic), \(String(reason.prefix(1_000))), \(Int32(clamping: rows)), \(bytes), sha256(\(bytes))
            WHERE (SELECT count(*) FROM fleetcast_quarantine WHERE vehicle = \(vehicle)) < \(Int64(Self.maximumQuarantinedPerVehicle))
            ON CONFLICT (topic, digest) DO NOTHING RETURNING 1
            """
        for try await _ in try await client.query(query, logger: logger).decode(Int32.self) { added = true }
        return added
    }

    /// How many messages are set aside, of `vehicle` or of all (``TrackReader/quarantinedCount(vehicle:)``).
    public func quarantinedCount(vehicle: VehicleID? = nil) async throws -> Int {
        try await reader.quarantinedCount(vehicle: vehicle)
    }

    /// The messages set aside, oldest first, at most `limit` (``TrackReader/quarantined(vehicle:limit:)``).
    public func quarantined(vehicle: VehicleID? = nil, limit: Int = 1_000) async throws -> [QuarantinedMessage] {
        try await reader.quarantined(vehicle: vehicle, limit: limit)
    }
}

extension TrackReader {
    /// How many messages are set aside: of `vehicle`, or of all (0 in a database a recorder of
    /// schema 6 has not migrated yet).
    package func quarantinedCount(vehicle: VehicleID? = nil) async throws -> Int {
        var count = 0
        var present = false
        for try await exists in try await client.query("SELECT to_regclass('fleetcast_quarantine') IS NOT NULL", logger: logger)
            .decode(Bool.self)
        {
            present = exists
        }
        guard present else { return 0 }
        let query: PostgresQuery =
            "SELECT count(*) FROM fleetcast_quarantine WHERE \(vehicle?.rawValue)::text IS NULL OR vehicle = \(vehicle?.rawValue)"
        for try await n in try await client.query(query, logger: logger).decode(Int64.self) { count = Int(n) }
        return count
    }

    /// The messages set aside, oldest first, at most `limit`: of `vehicle`, or of all.
    package func quarantined(vehicle: VehicleID? = nil, limit: Int = 1_000) async throws -> [QuarantinedMessage] {
        var messages: [QuarantinedMessage] = []
        let query: PostgresQuery = """
            SELECT vehicle, topic, reason, set_aside_at, rows, payload FROM fleetcast_quarantine
            WHERE \(vehicle?.rawValue)::text IS NULL OR vehicle = \(vehicle?.rawValue) ORDER BY id LIMIT \(Int64(max(0, limit)))
            """
        for try await (vehicle, topic, reason, at, rows, payload) in try await client.query(query, logger: logger).decode(
            (String, String, String, Date, Int32, ByteBuffer).self)
        {
            messages.append(
                QuarantinedMessage(
                    vehicle: vehicle, topic: topic, reason: reason, setAsideAt: at, rows: Int(rows),
                    payload: Array(payload.readableBytesView)))
        }
        return messages
    }
}
