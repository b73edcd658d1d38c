/// How many not-yet-read values a subscriber's own buffer keeps, and which ones it keeps when full.
///
/// Every subscriber of a ``Hub`` has a private buffer, so a slow subscriber never stalls the
/// source or the other subscribers. A value handed straight to a subscriber that is already
/// waiting in `next()` never occupies the buffer.
public enum HubBufferingPolicy: Sendable, Hashable {
    /// Keep every value: lossless. Memory grows by one element per value the subscriber has not
    /// read yet, without limit; a subscriber that stops reading grows the process without bound.
    /// The buffer's storage is released again once it has been drained.
    case unbounded
    /// Keep at most the newest `n` values (count of elements): when full, the oldest buffered
    /// value is discarded for the new one and counted as dropped. `newest(1)` suits a UI that only
    /// wants the current state. `n <= 0` buffers nothing: values reach the subscriber only while it
    /// is waiting in `next()`, all others are dropped.
    case newest(Int)
    /// Keep at most the first `n` values (count of elements): when full, new values are discarded
    /// and counted as dropped until the subscriber reads. `n <= 0` buffers nothing, as for `newest`.
    case oldest(Int)
}
