import FleetProtocol
import GNSS

/// A fleet driving on the spot, as the map's load tests and `fleetcast-bench serve` publish it:
/// vehicles `v0`, `v1`… each a few metres apart near 48° N 2° E, all moving a little north-east
/// every round at 10 m/s.
public enum MovingFleet {
    /// Vehicle `vehicle`'s fix of round `round` (1, 2…, its seq), timed `time`: the topic it is
    /// published to and its contract payload.
    public static func fix(vehicle: Int, round: UInt64, time: UTCTimestamp) -> (topic: String, payload: [UInt8]) {
        let fix = Fix(
            time: time, latitude: 48 + Double(vehicle) / 10_000 + Double(round) / 100_000,
            longitude: 2 + Double(vehicle) / 20_000, speed: 10, track: Double(round % 360), mode: .threeD, satellitesUsed: 9)
        return ("fleet/v\(vehicle)/fix", FleetPayload.encode(fix, vehicle: "v\(vehicle)", seq: round))
    }

    /// Publishes the fleet of `vehicles` round after round through `send` (topic, payload), a
    /// pause of `pause` after each round, until cancelled or `send` throws; round k's fixes are
    /// timed `time(k)`.
    public static func publish(
        vehicles: Int, pausing pause: Duration, time: (UInt64) -> UTCTimestamp,
        _ send: (_ topic: String, _ payload: [UInt8]) async throws -> Void
    ) async throws {
        var round: UInt64 = 0
        while !Task.isCancelled {
            round += 1
            let roundTime = time(round)
            for vehicle in 0..<vehicles {
                let (topic, payload) = fix(vehicle: vehicle, round: round, time: roundTime)
                try await send(topic, payload)
            }
            try await Task.sleep(for: pause)
        }
    }
}
