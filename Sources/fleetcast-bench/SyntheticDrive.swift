import Foundation
import GNSS
import GNSSSources

/// A vehicle driving a circle of about 1 km radius around Paris at 15 m/s, as receiver epochs
/// for ``NMEASentenceGenerator``: epoch `k` is at `start + k / rateHz` seconds, so every epoch
/// has its own, strictly increasing time (to the 1/100 s NMEA gives).
enum SyntheticDrive {
    /// `count` epochs from `start`, `rateHz` per second (1...100).
    static func epochs(count: Int, start: UTCTimestamp, rateHz: Int) -> [NMEASentenceGenerator.Epoch] {
        let stepMilliseconds = Int64(1000 / max(1, min(rateHz, 100)))
        let radius = 1000.0  // metres
        let speed = 15.0  // m/s
        let metresPerDegreeLatitude = 111_320.0
        let centreLatitude = 48.8566, centreLongitude = 2.3522
        let metresPerDegreeLongitude = metresPerDegreeLatitude * cos(centreLatitude * .pi / 180)
        return (0..<max(0, count)).map { k in
            let seconds = Double(k) * Double(stepMilliseconds) / 1000
            let angle = speed * seconds / radius  // radians, counter-clockwise from east
            let north = radius * sin(angle), east = radius * cos(angle)
            var track = (90 - (angle * 180 / .pi + 90)).truncatingRemainder(dividingBy: 360)
            if track < 0 { track += 360 }
            return NMEASentenceGenerator.Epoch(
                time: UTCTimestamp(millisecondsSince1970: start.millisecondsSince1970 + Int64(k) * stepMilliseconds),
                latitude: centreLatitude + north / metresPerDegreeLatitude,
                longitude: centreLongitude + east / metresPerDegreeLongitude,
                altitudeMSL: 35 + Double(k % 50) / 10, speed: speed, track: track, heading: track,
                satellitesUsed: 10 + k % 3)
        }
    }

    /// The bytes of `epochs`, keeping only the sentences whose kind (`RMC`, `GGA`, `GSA`, `VTG`,
    /// `HDT`, `GST`) is in `kinds`.
    static func recording(_ epochs: [NMEASentenceGenerator.Epoch], kinds: Set<String>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(epochs.count * 80 * kinds.count)
        for epoch in epochs {
            for sentence in NMEASentenceGenerator.sentences(for: epoch) where kinds.contains(kind(of: sentence)) {
                out.append(contentsOf: sentence.utf8)
            }
        }
        return out
    }

    /// The bytes of one epoch, all six sentences in the generator's order (GST last).
    static func bytes(_ epoch: NMEASentenceGenerator.Epoch) -> [UInt8] {
        NMEASentenceGenerator.bytes(for: epoch)
    }

    /// `RMC` for `$GPRMC,…`.
    private static func kind(of sentence: String) -> String {
        String(sentence.dropFirst(3).prefix(3))
    }
}
