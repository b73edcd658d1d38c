import FleetcastCore

/// What waits for a CONNACK, PUBACK (PUBCOMP) or SUBACK in the client (the `MQTT` module): a
/// task's continuation, or the callback of `MQTTClient.publish(topic:payload:qos:retain:properties:completion:)`,
/// which costs no task and no thread hop.
///
/// Here rather than beside the client so that the state's transitions of every message can be
/// specialized for it (``MQTTClientLiveState``).
package enum MQTTCompletion: Sendable {
    case continuation(CheckedContinuation<Void, any Error>)
    case callback(@Sendable (Result<Void, any Error>) -> Void)

    package func resume() {
        switch self {
        case .continuation(let continuation): continuation.resume()
        case .callback(let callback): callback(.success(()))
        }
    }

    package func resume(throwing error: any Error) {
        switch self {
        case .continuation(let continuation): continuation.resume(throwing: error)
        case .callback(let callback): callback(.failure(error))
        }
    }
}

/// The client's state with the types the client hands it: its waits are continuations or
/// callbacks, its subscription and observer streams are `AsyncStream` continuations.
///
/// The transitions every publish and every acknowledgement takes are specialized for it
/// (`@_specialize(exported: true, …)`), as `EdgeState`'s are: called from another module, the
/// generic ones looked up type metadata on each call (measured on a replay at full speed, runs
/// alternated: 55–60 us of CPU per fix without the specializations, 50–53 us with them).
package typealias MQTTClientLiveState = MQTTClientState<
    MQTTCompletion,
    AsyncThrowingStream<MQTTMessage, any Error>.Continuation,
    AsyncStream<MQTTConnectionState>.Continuation,
    FleetcastCore.Waiter<Void>
>
