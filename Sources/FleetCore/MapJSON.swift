import FleetProtocol
import FleetcastCore
import GNSS

/// The JSON the map page receives, written with the package's own ``JSONWriter`` (one escaper,
/// one number formatter), with short keys to keep a snapshot of thousands of vehicles small.
///
/// A vehicle: `id` (the vehicle id, untrusted text: the page only ever sets it with
/// `textContent`), and where known `lat`, `lon` (degrees, 7 decimals), `hdg` (degrees true: the
/// heading, else the fix's track), `spd` (m/s), `sats` (satellites used), `mode` (1 no fix,
/// 2 2D, 3 3D), `t` (the fix's time, ms since 1970 UTC), `state` (`online` / `offline`, absent
/// before any status), `seen` (when fleet-watch last heard something new from it, ms since 1970
/// UTC, its own clock), `gaps` (messages still missing by `seq`), and in a snapshot `trail`
/// (`[lat, lon, s, lat, lon, s, …]`, oldest first: degrees with 5 decimals, and the point's
/// fix time in whole seconds relative to the batch's `now`, ≤ 0 unless the clocks disagree).
///
/// A batch (the data of a `snapshot` or `update` event, and `/api/vehicles`):
/// `{"now": ms, "vehicles": [vehicle, …]}`, `now` being the server's clock, so the page
/// computes ages against the server's time, not its own.
package enum MapJSON {
    /// One vehicle, as an object.
    package static func vehicle(_ s: VehicleSnapshot, trail: [VehicleTrails.Point]? = nil, now: UTCTimestamp) -> [UInt8] {
        var w = JSONWriter(capacity: 200 + (trail?.count ?? 0) * 24)
        w.string("id", s.vehicle.rawValue)
        if let fix = s.fix {
            w.number("lat", fix.latitude, decimals: 7)
            w.number("lon", fix.longitude, decimals: 7)
            w.number("spd", fix.speed, decimals: 2)
            w.int("sats", fix.satellitesUsed)
            w.int("mode", fix.mode.rawValue)
            w.int("t", fix.time.millisecondsSince1970)
        }
        w.number("hdg", s.heading?.trueHeading ?? s.fix?.track, decimals: 1)
        switch s.status?.state {
        case .online?: w.raw("state", "online")
        case .offline?: w.raw("state", "offline")
        case nil: break
        }
        w.int("seen", s.lastSeen.millisecondsSince1970)
        w.int("gaps", s.gaps)
        var bytes = w.finish()
        if let trail, !trail.isEmpty {
            // `"trail":[…]` before the closing brace: JSONWriter writes objects, not arrays.
            bytes.removeLast()
            bytes.append(contentsOf: #","trail":["#.utf8)
            for (i, point) in trail.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                appendTriplet(
                    point.latitude, point.longitude, (point.millisecondsSince1970 - now.millisecondsSince1970) / 1000, decimals: 5,
                    to: &bytes)
            }
            bytes.append(contentsOf: "]}".utf8)
        }
        return bytes
    }

    /// `{"now":…,"vehicles":[…]}` of `vehicles`, with their trails when `trails` is given.
    package static func batch(_ vehicles: [VehicleSnapshot], trails: VehicleTrails? = nil, now: UTCTimestamp) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + vehicles.count * (trails == nil ? 160 : 600))
        bytes.append(contentsOf: #"{"now":"#.utf8)
        bytes.append(contentsOf: String(now.millisecondsSince1970).utf8)
        bytes.append(contentsOf: #","vehicles":["#.utf8)
        for (i, snapshot) in vehicles.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: vehicle(snapshot, trail: trails?[snapshot.vehicle], now: now))
        }
        bytes.append(contentsOf: "]}".utf8)
        return bytes
    }

    /// A Server-Sent Events frame: `event: NAME`, one `data:` line, a blank line. The JSON has
    /// no raw line break (the escaper writes `\n` and `\r` as escapes), so one line is enough.
    package static func event(_ name: String, data: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.count + name.utf8.count + 16)
        bytes.append(contentsOf: "event: \(name)\ndata: ".utf8)
        bytes.append(contentsOf: data)
        bytes.append(contentsOf: "\n\n".utf8)
        return bytes
    }

    /// The page's settings as a JSON object, safe to put inside a `<script>` element: every `<`
    /// is written `\u003c`, so no `</script>` can end the element early.
    package static func pageConfiguration(
        tiles: String?, attribution: String?, staleAfter: Duration, trailWindow: Duration, flushInterval: Duration,
        history: Bool = false, zones: Bool = false
    ) -> String {
        var w = JSONWriter(capacity: 256)
        w.string("tiles", tiles)
        w.string("attribution", attribution)
        w.int("staleAfterMs", milliseconds(staleAfter))
        w.int("parkedStaleAfterMs", milliseconds(VehicleSnapshot.parkedStaleAfter))
        w.int("trailMs", milliseconds(trailWindow))
        w.int("flushMs", milliseconds(flushInterval))
        w.bool("history", history)
        w.bool("zones", zones)
        let bytes = w.finish().flatMap { $0 == UInt8(ascii: "<") ? Array(#"\u003c"#.utf8) : [$0] }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `lat,lon,t` — a point of a trail or a track as the page reads them, flat.
    package static func appendTriplet(_ latitude: Double, _ longitude: Double, _ time: Int64, decimals: Int, to bytes: inout [UInt8]) {
        JSONWriter.appendNumber(latitude, decimals: decimals, to: &bytes)
        bytes.append(UInt8(ascii: ","))
        JSONWriter.appendNumber(longitude, decimals: decimals, to: &bytes)
        bytes.append(UInt8(ascii: ","))
        bytes.append(contentsOf: String(time).utf8)
    }

    package static func milliseconds(_ d: Duration) -> Int64 {
        d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }
}
