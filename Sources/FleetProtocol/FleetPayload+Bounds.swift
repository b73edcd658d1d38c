/// The ranges of the contract's numbers, one table for both directions: the decoders refuse a
/// value outside, and the encoders leave such a value out, as they leave out an unknown one,
/// so that every payload an agent writes is one a subscriber reads (a receiver's VTG track
/// of 3239°, say, costs the track, not the whole fix).
extension FleetPayload {
    enum Bounds {
        static let latitude: ClosedRange<Double> = -90...90
        static let longitude: ClosedRange<Double> = -180...180
        static let geoidSeparation: ClosedRange<Double> = -1000...1000
        static let speed: ClosedRange<Double> = 0...100_000
        /// Track, heading, magnetic heading: degrees.
        static let degrees: ClosedRange<Double> = 0...360
        /// Magnetic variation and deviation: degrees, positive east.
        static let signedDegrees: ClosedRange<Double> = -180...180
        static let dilution: ClosedRange<Double> = 0...100_000
        static let errorEstimate: ClosedRange<Double> = 0...100_000_000
        static let satellites: ClosedRange<Int> = 0...1024
    }
}

extension Optional where Wrapped: Comparable {
    /// The value when it lies in `range`, otherwise `nil`.
    func within(_ range: ClosedRange<Wrapped>) -> Wrapped? {
        flatMap { range.contains($0) ? $0 : nil }
    }
}
