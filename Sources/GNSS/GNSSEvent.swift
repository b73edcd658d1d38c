/// The state of a GNSS source, reported as a value in its stream (the way CoreLocation
/// reports authorization), so that a lost receiver is visible without ending the stream.
public enum SourceState: Sendable, Equatable {
    /// Opening the device or connecting to the service.
    case connecting
    /// Data is flowing and positions are arriving.
    case streaming
    /// Data is flowing, but the receiver has no usable position.
    case noFix
    /// The device or connection was lost; retrying after `delay`. `reason` names the
    /// device or address and the error (errno text, refused, closed…).
    case reconnecting(reason: String, delay: Duration)
    /// A finite source (a replay without looping) reached its end.
    case ended
}

/// One thing a GNSS source reports: a fix, a heading, or a change of its own state.
public enum GNSSEvent: Sendable, Equatable {
    /// A position solution (mode 2D or 3D, with time).
    case fix(Fix)
    /// A heading reading.
    case heading(Heading)
    /// The source's state changed.
    case state(SourceState)
}
